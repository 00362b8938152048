package worker

import (
	"net"
	"net/netip"
	"testing"

	"github.com/drover-sched/drover/testkit/testlog"
)

// A worker's pulls refuse the host's own addresses, the servers' and
// -bridge-deny, besides images' own rule, but for what -registry-allow
// lists (by address or CIDR; a host by name).
func TestPullEgress(t *testing.T) {
	var host netip.Addr
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			host, _ = netip.AddrFromSlice(n.IP.To4())
			break
		}
	}
	if !host.IsValid() {
		t.Skip("the host has no address but loopback")
	}
	cfg := DefaultConfig()
	cfg.Servers = []string{"https://10.9.8.7:4646"}
	cfg.BridgeDeny = append(cfg.BridgeDeny, netip.MustParsePrefix("10.200.0.0/16"))
	cfg.RegistryAllow = []string{"10.200.1.0/24", "192.0.2.5", "registry.internal:5000"}
	e := pullEgress(cfg, testlog.New(t))
	for addr, refused := range map[string]bool{
		host.String():     true,  // the host's own
		"10.9.8.7":        true,  // a server
		"10.200.9.9":      true,  // -bridge-deny
		"10.200.1.9":      false, // -registry-allow, though under -bridge-deny
		"127.0.0.1":       true,  // images' own rule
		"169.254.169.254": true,
		"192.0.2.5":       false,
		"203.0.113.9":     false, // the world
	} {
		if why := e.Check(netip.MustParseAddr(addr)); (why != "") != refused {
			t.Errorf("Check(%s) = %q, want refused %v", addr, why, refused)
		}
	}
	if len(e.AllowHosts) != 1 || e.AllowHosts[0] != "registry.internal:5000" {
		t.Errorf("allowed hosts %v", e.AllowHosts)
	}
}
