// Package fakeconsul is a Consul HTTP API that keeps a service catalog in
// memory: enough of the documented wire format (agent service registration
// and deregistration, catalog service listing) for drover's Consul
// discovery to be tested with the official consul/api client where no
// Consul binary can run.
package fakeconsul

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
)

// registration is the body of PUT /v1/agent/service/register.
type registration struct {
	ID      string
	Name    string
	Tags    []string
	Address string
	Port    int
	Meta    map[string]string
	Check   json.RawMessage
}

// catalogService is one element of GET /v1/catalog/service/:name.
type catalogService struct {
	ID                       string
	Node                     string
	Address                  string
	Datacenter               string
	TaggedAddresses          map[string]string
	NodeMeta                 map[string]string
	ServiceID                string
	ServiceName              string
	ServiceTags              []string
	ServiceAddress           string
	ServiceMeta              map[string]string
	ServicePort              int
	ServiceEnableTagOverride bool
	CreateIndex              uint64
	ModifyIndex              uint64
}

// Server is a fake Consul agent and catalog.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	index    uint64
	services map[string]catalogService // by service ID
	checks   map[string]json.RawMessage
}

// New starts a fake Consul on a free loopback port.
func New() *Server {
	s := &Server{services: map[string]catalogService{}, checks: map[string]json.RawMessage{}, index: 1}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/agent/service/register", s.register)
	mux.HandleFunc("PUT /v1/agent/service/deregister/{id}", s.deregister)
	mux.HandleFunc("GET /v1/catalog/service/{name}", s.catalog)
	s.Server = httptest.NewServer(mux)
	return s
}

// Addr is the host:port to give as the Consul address.
func (s *Server) Addr() string { return strings.TrimPrefix(s.URL, "http://") }

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var reg registration
	if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
		http.Error(w, "Request decode failed: "+err.Error(), http.StatusBadRequest)
		return
	}
	if reg.Name == "" {
		http.Error(w, "Missing service name", http.StatusBadRequest)
		return
	}
	if reg.ID == "" {
		reg.ID = reg.Name
	}
	s.mu.Lock()
	s.index++
	prev, ok := s.services[reg.ID]
	created := s.index
	if ok {
		created = prev.CreateIndex
	}
	s.services[reg.ID] = catalogService{
		ID: "00000000-0000-0000-0000-000000000001", Node: "fake-consul-node", Address: "127.0.0.1", Datacenter: "dc1",
		TaggedAddresses: map[string]string{}, NodeMeta: map[string]string{},
		ServiceID: reg.ID, ServiceName: reg.Name, ServiceTags: reg.Tags, ServiceAddress: reg.Address,
		ServiceMeta: reg.Meta, ServicePort: reg.Port, CreateIndex: created, ModifyIndex: s.index,
	}
	s.checks[reg.ID] = reg.Check
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) deregister(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.services[id]; !ok {
		http.Error(w, fmt.Sprintf("Unknown service ID %q. Ensure that the service ID is passed, not the service name.", id), http.StatusNotFound)
		return
	}
	delete(s.services, id)
	delete(s.checks, id)
	s.index++
	w.WriteHeader(http.StatusOK)
}

func (s *Server) catalog(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.mu.Lock()
	out := []catalogService{}
	for _, svc := range s.services {
		if svc.ServiceName == name {
			out = append(out, svc)
		}
	}
	index := s.index
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ServiceID < out[j].ServiceID })
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Consul-Index", fmt.Sprint(index))
	w.Header().Set("X-Consul-KnownLeader", "true")
	w.Header().Set("X-Consul-LastContact", "0")
	_ = json.NewEncoder(w).Encode(out)
}

// Services returns the registered service IDs.
func (s *Server) Services() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.services {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Check returns the health check registered with a service, as JSON.
func (s *Server) Check(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.checks[id])
}
