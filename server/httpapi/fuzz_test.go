package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/state"
)

// quietWorkers lets worker endpoints run without a leader's machinery:
// every worker is alive, changes are announced at once, events are
// applied directly.
type quietWorkers struct{ node *fakeNode }

func (quietWorkers) Touch(uint32)                   {}
func (quietWorkers) HoldSync(uint32) func()         { return func() {} }
func (quietWorkers) Heard(uint32) (time.Time, bool) { return time.Time{}, false }
func (quietWorkers) Wait(uint32) <-chan struct{}    { c := make(chan struct{}); close(c); return c }
func (q quietWorkers) Submit(_ context.Context, evs []state.Event) error {
	_, err := q.node.Apply(&state.Events{Now: time.Now().UnixNano(), Events: evs})
	return err
}

const fuzzWorkerToken = "fuzz-worker-token"

// msgpackRoute marks a fuzzed route number whose body goes as MessagePack.
const msgpackRoute = 0x80

// fuzzRoutes are the endpoints whose JSON bodies are fuzzed, as
// (method, path, token) with the worker's token where the worker speaks.
var fuzzRoutes = []struct{ method, path, token string }{
	{"POST", "/api/v1/batches", rootToken},
	{"POST", "/api/v1/batches/1/updates", rootToken},
	{"POST", "/api/v1/batches/1/updates/2/jobs", rootToken},
	{"POST", "/api/v1/users", rootToken},
	{"POST", "/api/v1/users/root/token", rootToken},
	{"POST", "/api/v1/billing-projects", rootToken},
	{"POST", "/api/v1/billing-projects/default/members", rootToken},
	{"POST", "/api/v1/workers/activate", ""},
	{"POST", "/api/v1/workers/sync", fuzzWorkerToken},
	{"PUT", "/api/v1/workers/logs/1/1/1/0", fuzzWorkerToken},
	{"POST", "/api/v1/tokens", rootToken},
	{"PUT", "/api/v1/billing-projects/default/spend-limit", rootToken},
	{"PUT", "/api/v1/billing-projects/default/max-priority", rootToken},
}

// FuzzRequestBodies sends arbitrary bodies to every endpoint that decodes
// one: no body may panic a server or get a 5xx (bad input is the client's
// fault, and says so with a 4xx), and the state's invariants hold after
// whatever was accepted. A route number with its high bit set sends the
// body as MessagePack.
func FuzzRequestBodies(f *testing.F) {
	// Each route is seeded with a body it accepts and the shapes every
	// decoder must refuse cleanly, not with every other route's bodies:
	// gathering baseline coverage costs the fuzzer tens of milliseconds an
	// input, and it counts against -fuzztime.
	bodies := map[int]string{
		0:  `{"jobs": [{"job_id": 1, "command": ["true"], "count": 3, "cpu": 0.5, "memory": 1048576, "image": "r/i:1", "inputs": [{"source": "file:///a", "path": "in/a"}], "outputs": [{"path": "out", "destination": "file:///b"}]}]}`,
		1:  `{"n_jobs": 5, "idempotency_key": "k", "attributes": {"a": "b"}}`,
		2:  `{"jobs": [{"job_id": 1, "command": ["true"], "parent_ranges": [[1, 1]]}]}`,
		3:  `{"name": "bob", "token": "` + strings.Repeat("ab", 32) + `"}`,
		4:  `{"token": "` + strings.Repeat("cd", 32) + `"}`,
		5:  `{"name": "lab", "members": ["root"]}`,
		6:  `{"user": "root", "role": "manager"}`,
		7:  `{"name": "w", "node_id": "n", "cpu": 2, "memory": 1073741824, "secret": "x"}`,
		8:  `{"events": [{"batch_id": 1, "job_id": 1, "attempt": 1, "kind": "started", "usage": {"cpu_seconds": 1, "peak_memory": 1048576}}], "known": [], "wait_millis": 0}`,
		9:  `line one`,
		10: `{"name": "laptop", "ttl": "2h", "token": "` + strings.Repeat("ef", 32) + `"}`,
		11: `{"limit": 12.5}`,
		12: `{"max_priority": 10}`,
	}
	edges := []string{`{}`, `null`, `{"jobs": null}`, `{"n_jobs": 1e300}`}
	for i := range fuzzRoutes {
		for _, s := range append([]string{bodies[i]}, edges...) {
			f.Add(uint8(i), []byte(s))
		}
		// The route's own body in MessagePack (numbers as floats).
		var v any
		if json.Unmarshal([]byte(bodies[i]), &v) == nil {
			data, err := api.MarshalMsgpack(v)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i)|msgpackRoute, data)
		}
	}
	// Typed MessagePack seeds, as the Go client sends them.
	for route, v := range map[int]any{
		0: &api.CreateBatchRequest{Name: "b", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, Count: 3, CPU: 0.5, Memory: 1 << 20}}},
		1: &api.CreateUpdateRequest{NJobs: 5, IdempotencyKey: "k"},
		2: &api.AddJobsRequest{Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, ParentRanges: []api.IDRange{{1, 1}}}}},
		8: &api.SyncRequest{Events: []api.AttemptEvent{{AttemptRef: api.AttemptRef{BatchID: 1, JobID: 1, Attempt: 1}, Kind: api.EventCompleted,
			Outcome: api.OutcomeSuccess, StartTime: time.Unix(1, 0), EndTime: time.Unix(2, 0)}},
			Known: []api.AttemptRef{{BatchID: 1, JobID: 1, Attempt: 1}}},
	} {
		data, err := api.MarshalMsgpack(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(route)|msgpackRoute, data)
	}
	node := &fakeNode{leader: true, ready: true}
	srv := newAPIWith(f, node, nil, func(d *Deps) {
		q := quietWorkers{node}
		d.Liveness, d.Notifier, d.Events = q, q, q
		d.Config.Limits = Limits{MaxJobsPerBatch: 100_000, StateMemoryBudget: 64 << 20, MaxLogBytesPerAttempt: 1 << 20}
	})
	// Batch 1 with update 2 open, a worker, and job 1 running on it.
	for _, c := range []state.Command{
		&state.CreateBatch{Now: 2, User: "root", BillingProject: "default", Jobs: []state.JobEntry{{First: 1, Count: 2,
			Spec: &state.Spec{Name: "j", Command: []string{"true"}, Array: true, CPUMilli: 1000, Memory: 1 << 30}}}},
		&state.CreateUpdate{Now: 3, Batch: 1, NJobs: 100},
		&state.Activate{Now: 4, Name: "w", NodeID: "w", CPUMilli: 4000, Memory: 8 << 30, TokenHash: token.Hash(fuzzWorkerToken)},
	} {
		if _, err := node.Apply(c); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := node.Apply(&state.Plan{Now: 5, Placements: []state.Placement{{Batch: 1, First: 1, Count: 1, Attempt: 1, Instance: node.st.ActiveInstances()[0]}}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := fuzzRoutes[int(route&^msgpackRoute)%len(fuzzRoutes)]
		req, err := http.NewRequest(rt.method, srv.URL+rt.path, strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		if route&msgpackRoute != 0 {
			req.Header.Set("Content-Type", api.MsgpackContentType)
			req.Header.Set("Accept", api.MsgpackContentType)
		}
		if rt.token != "" {
			req.Header.Set("Authorization", "Bearer "+rt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", rt.method, rt.path, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.method, rt.path, body, resp.StatusCode, msg)
		}
		if err := node.st.CheckInvariants(); err != nil {
			t.Fatalf("%s %s %q left the state broken: %v", rt.method, rt.path, body, err)
		}
	})
}
