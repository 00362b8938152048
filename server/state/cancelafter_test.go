package state

import (
	"strings"
	"testing"
)

// TestCancelAfterNFailures: a batch with cancel_after_n_failures = 2 is
// cancelled by the failure that makes two (a retried attempt is no
// failure, an Error is one): its jobs that had not started are Cancelled
// at once, its running ones are to be killed, and the reason says so.
func TestCancelAfterNFailures(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w1", 4, 16)
	retried := spec("retried", 1)
	retried.Retries = 1
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", CancelAfterFailures: 2, Jobs: []JobEntry{
		entry(1, 1, retried), entry(2, 1, spec("errs", 1)), entry(3, 1, spec("fails", 1)), entry(4, 7, spec("rest", 1)),
	}}).(*UpdateResult).Batch
	if got := h.Batch(b).record().CancelAfterFailures; got != 2 {
		t.Fatalf("record says cancel after %d", got)
	}
	h.Schedule() // jobs 1-4 run
	// Job 1 fails once (retried), job 2 ends in Error: one failure.
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now},
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: OutcomeError, Start: h.Now, End: h.Now},
	}})
	if bt := h.Batch(b); bt.Cancelled || bt.counts[Error] != 1 || h.JobState(b, 1) != Ready {
		t.Fatalf("after one failure: cancelled %v, errors %d, job 1 %s", bt.Cancelled, bt.counts[Error], h.JobState(b, 1))
	}
	// Job 3 fails: two.
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 3, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now},
	}})
	bt := h.Batch(b)
	if !bt.Cancelled || !strings.Contains(bt.CancelReason, "2 of its jobs failed (cancel_after_n_failures = 2)") {
		t.Fatalf("after two failures: cancelled %v (%q)", bt.Cancelled, bt.CancelReason)
	}
	// Job 1 (Ready for its retry) and jobs 5-10 are cancelled; job 4
	// still runs and its worker is told to kill it.
	for _, id := range []uint32{1, 5, 10} {
		if st := h.JobState(b, id); st != Cancelled {
			t.Errorf("job %d is %s, want cancelled", id, st)
		}
	}
	if st := h.JobState(b, 4); st != Running {
		t.Fatalf("job 4 is %s, want still running", st)
	}
	v := h.S.WorkerView(w, []AttemptID{{b, 4, 1}})
	if len(v.Kill) != 1 || v.Kill[0].Job != 4 {
		t.Fatalf("worker view %+v, want job 4 killed", v)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 4, Attempt: 1, Outcome: OutcomeCancelled, Start: h.Now, End: h.Now},
	}})
	if bt := h.Batch(b).record(); bt.Completed == 0 || bt.Count(Failed) != 1 || bt.Count(Error) != 1 || bt.Count(Cancelled) != 8 {
		t.Fatalf("at the end: %+v", bt)
	}
	h.Restored()

	// A batch whose last job is the one that reaches the count is
	// complete, not cancelled: nothing was left to cancel.
	b2 := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", CancelAfterFailures: 1, Jobs: []JobEntry{entry(1, 1, spec("only", 1))}}).(*UpdateResult).Batch
	h.RunAll([]uint32{w}, func(uint64, uint32) Outcome { return OutcomeFailed })
	if bt := h.Batch(b2); bt.Cancelled || bt.Completed == 0 {
		t.Fatalf("a batch failed to the end: cancelled %v, completed %d", bt.Cancelled, bt.Completed)
	}
	h.Restored()
}
