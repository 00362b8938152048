package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestWorkerTimesAreBoundedByTheServer: a hostile worker reporting that an
// attempt started ten years ago and ends ten years from now would bill its
// project for twenty years of a machine. The server records the start no
// earlier than the worker's activation and the end no later than when it
// heard of it.
func TestWorkerTimesAreBoundedByTheServer(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	activated := time.Now()
	w := newSimWorker(t, tc, "sim-liar", 4)
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 1 {
		t.Fatalf("assigned %+v", res.Assign)
	}
	a := res.Assign[0].AttemptRef
	w.known = append(w.known, a)
	decade := 10 * 365 * 24 * time.Hour
	w.events = append(w.events, api.AttemptEvent{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess,
		StartTime: time.Now().Add(-decade), EndTime: time.Now().Add(decade)})
	w.sync(0)
	heard := time.Now()
	j, err := tc.admin.GetJob(ctx, b.Batch.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Attempts) != 1 || j.Attempts[0].StartTime == nil || j.Attempts[0].EndTime == nil {
		t.Fatalf("attempts %+v", j.Attempts)
	}
	at := j.Attempts[0]
	if at.StartTime.Before(activated) || at.EndTime.After(heard) {
		t.Fatalf("the attempt ran from %s to %s as the worker said; it activated at %s and the server heard of the end by %s",
			at.StartTime, at.EndTime, activated, heard)
	}
}
