package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"

	consul "github.com/hashicorp/consul/api"
)

// ConsulService is the service name drover servers register in Consul.
const ConsulService = "drover-server"

// consulDiscovery registers this server in Consul and finds the others there,
// for deployments that run Consul instead of listing -join addresses.
type consulDiscovery struct {
	client    *consul.Client
	serviceID string
}

func newConsulDiscovery(addr string) (*consulDiscovery, error) {
	cfg := consul.DefaultConfig()
	cfg.Address = addr
	client, err := consul.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("consul client for %s: %w", addr, err)
	}
	return &consulDiscovery{client: client}, nil
}

// register announces the server's gossip address, with its Raft and HTTP
// addresses as service metadata and an HTTP health check on /api/v1/health.
func (d *consulDiscovery) register(id, gossip, raftAddr, httpAddr string, https bool) error {
	host, portStr, err := net.SplitHostPort(gossip)
	if err != nil {
		return err
	}
	port, _ := strconv.Atoi(portStr)
	d.serviceID = ConsulService + "-" + id
	reg := &consul.AgentServiceRegistration{
		ID:      d.serviceID,
		Name:    ConsulService,
		Address: host,
		Port:    port,
		Tags:    []string{"gossip"},
		Meta:    map[string]string{"id": id, "raft": raftAddr, "http": httpAddr},
		Check: &consul.AgentServiceCheck{
			HTTP:                           "http://" + httpAddr + "/api/v1/health",
			Interval:                       "10s",
			Timeout:                        "2s",
			DeregisterCriticalServiceAfter: "10m",
		},
	}
	if https {
		// The health check carries no token and reads nothing secret;
		// Consul does not hold the cluster's CA, so it does not verify.
		reg.Check.HTTP = "https://" + httpAddr + "/api/v1/health"
		reg.Check.TLSServerName, reg.Check.TLSSkipVerify = "server.drover", true
	}
	if err := d.client.Agent().ServiceRegister(reg); err != nil {
		return fmt.Errorf("register %s in consul: %w", d.serviceID, err)
	}
	return nil
}

// discover returns the gossip addresses of every registered drover server.
func (d *consulDiscovery) discover(ctx context.Context) ([]string, error) {
	services, _, err := d.client.Catalog().Service(ConsulService, "", (&consul.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("list %s in consul: %w", ConsulService, err)
	}
	var out []string
	for _, svc := range services {
		host := svc.ServiceAddress
		if host == "" {
			host = svc.Address
		}
		out = append(out, net.JoinHostPort(host, strconv.Itoa(svc.ServicePort)))
	}
	return out, nil
}

func (d *consulDiscovery) deregister() error {
	if d.serviceID == "" {
		return nil
	}
	return d.client.Agent().ServiceDeregister(d.serviceID)
}
