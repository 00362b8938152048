package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestAttemptUsageOverTime: the usage samples a worker reports become the
// attempt's series (GET .../usage): its start at nothing used, each
// sample kept (memory charged then included), its end; another tenant
// may not read it.
func TestAttemptUsageOverTime(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "physics")
	w := newSimWorker(t, tc, "sim-s", 2)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 512 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 1 {
		t.Fatalf("assigned %d", len(res.Assign))
	}
	a := res.Assign[0].AttemptRef
	w.known = []api.AttemptRef{a}
	started := time.Now() // no earlier than the worker activated
	w.events = []api.AttemptEvent{
		{AttemptRef: a, Kind: api.EventStarted, StartTime: started},
		{AttemptRef: a, Kind: api.EventUsage, StartTime: started, Usage: &api.Usage{CPUSeconds: 8, Memory: 200 << 20, PeakMemory: 250 << 20}},
	}
	w.sync(0)
	// Another worker's events for the attempt (a completion with a
	// forged peak), and for attempts that do not exist, are ignored by
	// apply and draw nothing.
	evil := newSimWorker(t, tc, "sim-evil", 2)
	evil.events = []api.AttemptEvent{
		{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: started, EndTime: time.Now(),
			Usage: &api.Usage{CPUSeconds: 1, Memory: 1 << 30, PeakMemory: 1 << 30}},
		{AttemptRef: api.AttemptRef{BatchID: b.ID + 1000, JobID: 1, Attempt: 1}, Kind: api.EventStarted, StartTime: time.Now()},
	}
	evil.sync(0)
	if u, err := alice.AttemptUsage(ctx, b.ID, 1, 0); err != nil || len(u.Samples) != 2 || u.Samples[1].PeakMemory != 250<<20 {
		t.Fatalf("after another worker's forged events: %+v %v, want the owner's 2 points only", u, err)
	}
	w.events = []api.AttemptEvent{{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: started, EndTime: time.Now(),
		Usage: &api.Usage{CPUSeconds: 15, Memory: 100 << 20, PeakMemory: 300 << 20}}}
	w.sync(0)
	u, err := alice.AttemptUsage(ctx, b.ID, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if u.Attempt != 1 || len(u.Samples) != 3 {
		t.Fatalf("attempt 1's series: %+v, want its start, its sample and its end", u)
	}
	s := u.Samples
	if s[0].CPUSeconds != 0 || s[0].Time.Sub(started).Abs() > time.Millisecond {
		t.Errorf("the series starts %+v, want nothing used at %v", s[0], started)
	}
	if s[1].CPUSeconds != 8 || s[1].Memory != 200<<20 || s[1].PeakMemory != 250<<20 || s[2].CPUSeconds != 15 || s[2].PeakMemory != 300<<20 {
		t.Errorf("the series: %+v", s)
	}
	if !s[0].Time.Before(s[1].Time) || s[2].Time.Before(s[1].Time) {
		t.Errorf("the series is not in time order: %+v", s)
	}
	if _, err := bob.AttemptUsage(ctx, b.ID, 1, 0); !api.IsStatus(err, http.StatusForbidden) && !api.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("another project's member reads the series: %v", err)
	}
	if _, err := alice.AttemptUsage(ctx, b.ID, 1, 70000); !api.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("attempt 70000: %v, want 400", err)
	}
}
