// Package nomadfake is an in-process fake of the parts of Nomad's HTTP API
// the nomad provider uses, following its wire format (the official API
// package's types): job register, list (with meta), deregister with
// purge, and evaluations that fail to place a job when the fake's nodes
// have no room for it.
package nomadfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"

	nomadapi "github.com/hashicorp/nomad/api"
)

// Server is the fake Nomad.
type Server struct {
	*httptest.Server
	mu        sync.Mutex
	nodes     int
	cpuMHz    int // per node
	memoryMB  int // per node
	jobs      map[string]*job
	evals     map[string]*nomadapi.Evaluation
	seq       int
	registers int
	// drivers are the task drivers the nodes have (nil: any); polls
	// counts each evaluation's reads (the first says "pending").
	drivers []string
	polls   map[string]int
}

// SetDrivers gives the nodes these task drivers only: a job whose task
// needs another is placed on none, its evaluation's failed allocation
// filtered on every node for "missing drivers", as Nomad reports it.
func (s *Server) SetDrivers(drivers ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drivers = drivers
}

type job struct {
	spec   *nomadapi.Job
	placed bool
	cpu    int
	mem    int
	node   int // where it is placed
}

// New starts a fake cluster of nodes with these resources each.
func New(nodes, cpuMHz, memoryMB int) *Server {
	s := &Server{nodes: nodes, cpuMHz: cpuMHz, memoryMB: memoryMB, jobs: map[string]*job{}, evals: map[string]*nomadapi.Evaluation{}, polls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Registers counts register calls; Jobs lists the jobs there are.
func (s *Server) Registers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registers
}

// Jobs lists the job IDs there are.
func (s *Server) Jobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id := range s.jobs {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Job returns a registered job's spec.
func (s *Server) Job(id string) *nomadapi.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j, ok := s.jobs[id]; ok {
		return j.spec
	}
	return nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := r.URL.Path
	switch {
	case (r.Method == http.MethodPut || r.Method == http.MethodPost) && p == "/v1/jobs":
		var req nomadapi.JobRegisterRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Job == nil || req.Job.ID == nil {
			http.Error(w, "1 error occurred:\n\t* Job ID is missing", 400)
			return
		}
		s.register(w, req.Job)
	case r.Method == http.MethodGet && p == "/v1/jobs":
		s.list(w, r)
	case r.Method == http.MethodDelete && strings.HasPrefix(p, "/v1/job/"):
		// Deregistering a job that does not exist answers 200 with an
		// evaluation, as Nomad's Job.Deregister does.
		id := strings.TrimPrefix(p, "/v1/job/")
		delete(s.jobs, id)
		writeJSON(w, nomadapi.JobDeregisterResponse{EvalID: s.newEval(id, nil).ID})
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/evaluation/"):
		id := strings.TrimPrefix(p, "/v1/evaluation/")
		ev, ok := s.evals[id]
		if !ok {
			http.Error(w, "eval not found", 404)
			return
		}
		// An evaluation is pending when first read, as Nomad's are until
		// a scheduler worker dequeues them; complete afterwards.
		if s.polls[id]++; s.polls[id] == 1 {
			pending := *ev
			pending.Status, pending.FailedTGAllocs, pending.BlockedEval = "pending", nil, ""
			writeJSON(w, &pending)
			return
		}
		writeJSON(w, ev)
	default:
		http.Error(w, "Invalid method or path (fake): "+r.Method+" "+p, 404)
	}
}

func (s *Server) newEval(jobID string, failed map[string]*nomadapi.AllocationMetric) *nomadapi.Evaluation {
	s.seq++
	ev := &nomadapi.Evaluation{ID: fmt.Sprintf("eval-%06d", s.seq), JobID: jobID, Status: "complete", Type: "service", TriggeredBy: "job-register",
		FailedTGAllocs: failed}
	if failed != nil {
		ev.BlockedEval = fmt.Sprintf("eval-blocked-%06d", s.seq)
	}
	s.evals[ev.ID] = ev
	return ev
}

// register places a job if some node has room for it, first fit;
// registering a job that exists changes nothing.
func (s *Server) register(w http.ResponseWriter, spec *nomadapi.Job) {
	s.registers++
	id := *spec.ID
	if j, ok := s.jobs[id]; ok {
		j.spec = spec
		writeJSON(w, nomadapi.JobRegisterResponse{EvalID: s.newEval(id, nil).ID, JobModifyIndex: uint64(s.seq)})
		return
	}
	var cpu, mem int
	for _, g := range spec.TaskGroups {
		for _, t := range g.Tasks {
			if t.Resources != nil && t.Resources.CPU != nil {
				cpu += *t.Resources.CPU
			}
			if t.Resources != nil && t.Resources.MemoryMB != nil {
				mem += *t.Resources.MemoryMB
			}
		}
	}
	// First fit over the nodes.
	used := make([][2]int, s.nodes)
	for _, j := range s.jobs {
		if j.placed {
			used[j.node][0] += j.cpu
			used[j.node][1] += j.mem
		}
	}
	fits := -1
	for n := range used {
		if used[n][0]+cpu <= s.cpuMHz && used[n][1]+mem <= s.memoryMB {
			fits = n
			break
		}
	}
	j := &job{spec: spec, cpu: cpu, mem: mem}
	var failed map[string]*nomadapi.AllocationMetric
	missing := false
	for _, g := range spec.TaskGroups {
		for _, t := range g.Tasks {
			missing = missing || (s.drivers != nil && !slices.Contains(s.drivers, t.Driver))
		}
	}
	switch {
	case missing:
		failed = map[string]*nomadapi.AllocationMetric{"worker": {NodesEvaluated: s.nodes, NodesFiltered: s.nodes, NodesAvailable: map[string]int{"dc1": s.nodes},
			ConstraintFiltered: map[string]int{"missing drivers": s.nodes}}}
	case fits < 0:
		failed = map[string]*nomadapi.AllocationMetric{"worker": {NodesEvaluated: s.nodes, NodesExhausted: s.nodes, NodesAvailable: map[string]int{"dc1": s.nodes},
			DimensionExhausted: map[string]int{"cpu": s.nodes}}}
	default:
		j.placed, j.node = true, fits
	}
	s.jobs[id] = j
	ev := s.newEval(id, failed)
	writeJSON(w, nomadapi.JobRegisterResponse{EvalID: ev.ID, JobModifyIndex: uint64(s.seq)})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	meta := r.URL.Query().Get("meta") == "true"
	out := []*nomadapi.JobListStub{}
	ids := make([]string, 0, len(s.jobs))
	for id := range s.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !strings.HasPrefix(id, prefix) {
			continue
		}
		j := s.jobs[id]
		stub := &nomadapi.JobListStub{ID: id, Name: id, Type: "service", Status: "pending",
			JobSummary: &nomadapi.JobSummary{JobID: id, Summary: map[string]nomadapi.TaskGroupSummary{"worker": {Queued: 1}}}}
		if j.placed {
			stub.Status = "running"
			stub.JobSummary.Summary["worker"] = nomadapi.TaskGroupSummary{Running: 1}
		}
		if meta {
			stub.Meta = j.spec.Meta
		}
		out = append(out, stub)
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Nomad-Index", "1")
	_ = json.NewEncoder(w).Encode(v)
}
