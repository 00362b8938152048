package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestGangThroughTheAPI: a gang of 4 one-core members on two 2-core
// workers starts whole, 2 on each; a gang no cluster could ever hold
// (5 members) is refused at submit; a member that fails stops the
// others, job why says the gang waits for them, and the gang starts
// again whole on its next attempt.
func TestGangThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w1 := newSimWorker(t, tc, "sim-g1", 2)
	w2 := newSimWorker(t, tc, "sim-g2", 2)
	gang := func(n int64) api.JobSpec {
		return api.JobSpec{JobID: 1, Name: "ranks", Count: n, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, Gang: true, Retries: 1}
	}
	for _, bad := range []struct {
		js   api.JobSpec
		want string
	}{
		{gang(5), "a gang of 5 members must start together in one cluster, and none it may use could ever hold it: the most is 4"},
		{func() api.JobSpec { j := gang(4); j.OOMRetry = &api.OOMRetry{Factor: 2, MaxMemory: 1 << 30}; return j }(), "a gang takes no oom_retry"},
		{func() api.JobSpec { j := gang(1); return j }(), "a gang is an array of 2 to 4096 jobs"},
		{func() api.JobSpec { j := gang(4); j.GangUniformity = "rack"; return j }(), `write "pool" (one pool) or "label:KEY"`},
	} {
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{bad.js}})
		if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want a 400 saying %q", bad.js, err, bad.want)
		}
	}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{gang(4)}})
	if err != nil {
		t.Fatal(err)
	}
	take := func(w *simWorker) []api.Assignment {
		t.Helper()
		var got []api.Assignment
		for end := time.Now().Add(30 * time.Second); len(got) < 2 && time.Now().Before(end); {
			res := w.sync(time.Second)
			got = append(got, res.Assign...)
			for _, a := range res.Assign {
				w.known = append(w.known, a.AttemptRef)
			}
		}
		return got
	}
	a1, a2 := take(w1), take(w2)
	if len(a1) != 2 || len(a2) != 2 {
		t.Fatalf("assigned %d and %d members, want 2 and 2", len(a1), len(a2))
	}
	j, err := alice.GetJob(ctx, b.ID, 1)
	if err != nil || j.Gang != 4 {
		t.Fatalf("job 1: gang %d, %v", j.Gang, err)
	}
	// Member on w1 fails: the other three are told to stop.
	now := time.Now()
	w1.events = []api.AttemptEvent{
		{AttemptRef: a1[0].AttemptRef, Kind: api.EventStarted, StartTime: now},
		{AttemptRef: a1[0].AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeFailed, ExitCode: 1, StartTime: now, EndTime: time.Now()},
	}
	w1.known = []api.AttemptRef{a1[1].AttemptRef}
	res1 := w1.sync(0)
	w1.events = nil
	res2 := w2.sync(0)
	if len(res1.Preempt) != 1 || len(res2.Preempt) != 2 {
		t.Fatalf("stop orders: %+v and %+v; want the 3 other members stopped", res1.Preempt, res2.Preempt)
	}
	why, err := alice.JobWhy(ctx, b.ID, int64(a1[0].JobID))
	if err != nil || !strings.Contains(whyText(why), "waiting for its gang: 3 of its 4 members still run") {
		t.Fatalf("job why while the others stop: %+v, %v", why, err)
	}
	// They stop; the gang starts again whole, attempt 2.
	stopped := func(w *simWorker, as []api.Assignment) {
		w.events = nil
		for _, a := range as {
			w.events = append(w.events, api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomePreempted, StartTime: now, EndTime: time.Now()})
		}
		w.known = nil
		w.sync(0)
		w.events = nil
	}
	stopped(w1, a1[1:])
	stopped(w2, a2)
	b1, b2 := take(w1), take(w2)
	if len(b1)+len(b2) != 4 {
		t.Fatalf("the gang again: %d and %d members", len(b1), len(b2))
	}
	for _, a := range append(b1, b2...) {
		if a.Attempt != 2 {
			t.Fatalf("member %d restarted as attempt %d, want 2", a.JobID, a.Attempt)
		}
	}
}

func whyText(w *api.JobWhy) string {
	var parts []string
	for _, r := range w.Reasons {
		parts = append(parts, r.Reason+": "+r.Message)
	}
	return strings.Join(parts, "\n")
}
