package apiview_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/testkit/golden"
)

// TestReadsShowTheAPIsJSON: every read the API answers from the state
// (batches, their jobs and attempts with costs, usage and files, a
// cancelled batch with a running attempt, users, tokens, billing projects
// with storage prefixes, the audit log, rates, cost by day), as JSON,
// against testdata/reads.json. The file was checked against the JSON the
// state's own conversions wrote before they moved here: the same bytes,
// but for what grows with the wall clock, which those read at time.Now.
func TestReadsShowTheAPIsJSON(t *testing.T) {
	h := state.NewHarness(t, nil)
	h.Must(&state.SetRates{Now: h.Tick(), Rates: []state.RateEntry{{Resource: "compute", Price: 5 * money.DollarPerHour}, {Resource: "memory", Price: money.DollarPerHour / 100}}})
	h.Must(&state.CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "alice-tok", Expires: h.Now + int64(time.Hour)})
	h.Must(&state.CreateToken{Now: h.Tick(), User: "alice", Name: "laptop", TokenHash: "alice-laptop"})
	h.Must(&state.CreateBillingProject{Now: h.Tick(), Name: "lab", Members: []string{"alice"}})
	h.Must(&state.SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: state.StoragePrefix{URL: "gs://b/x", AddedBy: "root"}})
	h.Must(&state.SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: state.StoragePrefix{URL: "s3://b/y", AddedBy: "root", S3Endpoint: "https://s3.example", S3Region: "us-east-1", S3PathStyle: true}})
	zero, four := int64(0), int64(4000)
	h.Must(&state.ApplyPlacement{Now: h.Now, Queues: []state.Queue{
		{Queue: placement.Queue{Path: "org", Weight: 2, Guarantee: placement.Resources{CPUMilli: 8000, Memory: 1 << 30, GPUs: map[string]int64{"a100": 2}},
			BorrowLimit: placement.Limit{CPUMilli: &zero}, LendLimit: placement.Limit{CPUMilli: &four},
			Limits:     placement.QueueLimits{MaxRunningJobs: 100, MaxRunningMilli: 6000},
			Preemption: placement.Preemption{Preemptible: true, AfterNs: int64(5 * time.Minute), ThresholdPermille: 500}, Strategy: placement.Pack}},
		{Queue: placement.Queue{Path: "org/t1", ReclaimGraceNs: int64(time.Minute), MinRuntimeNs: int64(10 * time.Minute),
			Preemption: placement.Preemption{AllowFrom: []string{"org"}}, HomeClusters: []string{"default"}},
			Projects: []string{"default"}, AllowProjects: []string{"lab"}},
	}})
	w := h.Activate("w", 8, 16)
	run := &state.Spec{Name: "io", Command: []string{"cat"}, CPUMilli: 500, Memory: 1 << 20, Attributes: map[string]string{"k": "v"},
		Run: &state.Run{Image: "reg/tool:1", Inputs: []state.File{{Name: "in", URL: "gs://b/x/in", Path: "in.txt"}}, Outputs: []state.File{{Name: "out", URL: "gs://b/x/out", Path: "out.txt"}}}}
	b1 := h.CreateBatch(
		state.JobEntry{First: 1, Count: 3, Spec: &state.Spec{Name: "arr", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1 << 20, Retries: 1, TimeoutMs: 5000}},
		state.JobEntry{First: 4, Count: 1, Spec: run, Parents: []state.Range{{Lo: 1, Hi: 3}}},
		state.JobEntry{First: 5, Count: 1, Spec: &state.Spec{Name: "after", Command: []string{"y"}, CPUMilli: 1000, Memory: 1}, Parents: []state.Range{{Lo: 4, Hi: 4}}})
	h.RunAll([]uint32{w}, func(_ uint64, j uint32) state.Outcome {
		if j == 4 {
			return state.OutcomeFailed
		}
		return state.OutcomeSuccess
	})
	b2 := h.CreateBatch(state.JobEntry{First: 1, Count: 2, Spec: &state.Spec{Name: "long", Command: []string{"z"}, CPUMilli: 1000, Memory: 1}})
	h.Schedule()
	start := h.Tick()
	h.Must(&state.Events{Now: start, Events: []state.Event{{Instance: w, Batch: b2, Job: 1, Attempt: 1, Started: true, Start: start}, {Instance: w, Batch: b2, Job: 2, Attempt: 1, Started: true, Start: start}}})
	h.Now += int64(90 * time.Minute)
	h.Must(&state.Events{Now: h.Now, Events: []state.Event{{Instance: w, Batch: b2, Job: 2, Attempt: 1, Outcome: state.OutcomeSuccess, Start: start, End: h.Now,
		Usage: &state.Usage{CPUMillis: 1234, PeakMemory: 5 << 20, BytesIn: 7, InputMillis: 12}}}})
	h.Must(&state.CancelBatch{Now: h.Tick(), Batch: b2, Reason: "user asked"})
	h.Must(&state.Audit{Entries: []state.AuditEntry{{Time: h.Tick(), User: "root", Accessor: "abc", Method: "POST", Route: "POST /x", Path: "/x", Remote: "1.2.3.4", Status: 200}, {Time: h.Tick(), Route: "GET /y", Status: 401, Count: 3}}})
	out := map[string]any{}
	now := time.Unix(0, h.Now).Add(time.Hour) // after all of it: running costs and expiries read at a fixed time
	rd := apiview.Reads{State: h.S, Now: func() time.Time { return now }}
	for _, id := range []uint64{b1, b2} {
		bt, _ := rd.Batch(id)
		out[fmt.Sprint("batch ", id)] = bt
		jl, _ := rd.ListJobs(id, nil, 0)
		out[fmt.Sprint("jobs ", id)] = jl
		for j := uint32(1); j <= 5; j++ {
			jb, ok := rd.Job(id, j)
			out[fmt.Sprint("job ", id, " ", j)] = map[string]any{"ok": ok, "job": jb}
		}
	}
	out["list"] = rd.ListBatches(state.Viewer{Name: "root", Admin: true}, nil, 0)
	out["users"] = rd.Users()
	u, ok := rd.User("alice")
	out["user"] = map[string]any{"ok": ok, "u": u}
	out["tokens"] = rd.Tokens("", now)
	out["projects"] = rd.BillingProjects(state.User{Name: "root", Admin: true})
	p, ok := rd.BillingProject("default")
	out["project"] = map[string]any{"ok": ok, "p": p}
	sp, ok := rd.StoragePrefixes("default")
	out["prefixes"] = map[string]any{"ok": ok, "p": sp}
	out["audit"] = rd.AuditLog(time.Unix(0, 0), "", 100)
	out["rates"] = rd.Rates(now, true)
	out["days"] = rd.CostByDay("default", 0, 100000)
	out["instances"] = apiview.Instances(h.S.Instances())
	var clusters []any
	for _, c := range h.S.Clusters() {
		clusters = append(clusters, apiview.Cluster(&c))
	}
	out["clusters"] = clusters
	var queues []any
	for _, q := range h.S.Queues() {
		queues = append(queues, apiview.Queue(&q))
	}
	out["queues"] = queues
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/reads.json", append(b, '\n'))
}
