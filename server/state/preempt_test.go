package state

import (
	"strings"
	"testing"
)

// TestPreemptStopsAttemptsThroughTheirWorkers: a preempted attempt keeps
// what it holds and its job stays Running until its worker reports it
// ended; the worker is told (with the job's grace) on every sync until
// then, across a snapshot and a replay; it ends preempted (Ready again,
// no failure counted) or, if it ended first, as it ended: never both.
func TestPreemptStopsAttemptsThroughTheirWorkers(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 8, 16)
	graceful := spec("ckpt", 1)
	graceful.Run = &Run{PreemptGraceMs: 5000}
	graceful.Retries = 0
	b := h.CreateBatch(entry(1, 3, spec("j", 1)), entry(4, 1, graceful))
	if r := h.Schedule(); r.Placed != 4 {
		t.Fatalf("placed %d", r.Placed)
	}
	start := h.Tick()
	var started []Event
	for j := uint32(1); j <= 4; j++ {
		started = append(started, Event{Instance: w, Batch: b, Job: j, Attempt: 1, Started: true, Start: start})
	}
	h.Must(&Events{Now: start, Events: started})
	free := h.S.Instances()[0].FreeMilli
	res := h.Must(&Preempt{Now: h.Tick(), Attempts: []PreemptAttempt{
		{AttemptID{b, 1, 1}, "for queue tier1"}, {AttemptID{b, 4, 1}, "for queue tier1"},
		{AttemptID{b, 1, 1}, "twice"}, {AttemptID{b, 2, 7}, "a stale attempt"}, {AttemptID{99, 1, 1}, "no such batch"},
		{AttemptID{b, 3, 1}, strings.Repeat("x", 5000)},
	}}).(*PreemptResult)
	if res.Stopping != 3 {
		t.Fatalf("%d attempts told to stop, want 3", res.Stopping)
	}
	if h.JobState(b, 1) != Running || h.S.Instances()[0].FreeMilli != free {
		t.Fatal("a preempted attempt gave back its cores before its worker stopped it")
	}
	known := []AttemptID{{b, 1, 1}, {b, 2, 1}, {b, 3, 1}, {b, 4, 1}}
	for _, s := range []*State{h.S, h.Replay(), h.Restored()} {
		v := s.WorkerView(w, known)
		if len(v.Preempt) != 3 || v.Preempt[0].Job != 1 || v.Preempt[0].GraceMs != DefaultPreemptGraceMs || v.Preempt[2].Job != 4 ||
			v.Preempt[2].GraceMs != 5000 || len(v.Preempt[1].Reason) != maxStopReason || len(v.Kill) != 0 {
			t.Fatalf("worker view %+v", v)
		}
	}
	// Job 1 checkpoints and ends preempted; job 3 succeeds in its grace.
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomePreempted, Start: start, End: h.Now},
		{Instance: w, Batch: b, Job: 3, Attempt: 1, Outcome: OutcomeSuccess, Start: start, End: h.Now},
	}})
	if h.JobState(b, 1) != Ready || h.JobState(b, 3) != Success {
		t.Fatalf("job 1 is %s (want ready), job 3 %s (want success)", h.JobState(b, 1), h.JobState(b, 3))
	}
	jb, _ := h.S.Job(b, 1)
	if len(jb.Attempts) != 1 || jb.Attempts[0].Outcome != OutcomePreempted {
		t.Fatalf("job 1: %+v", jb)
	}
	if v := h.S.WorkerView(w, []AttemptID{{b, 4, 1}}); len(v.Preempt) != 1 || v.Preempt[0].Job != 4 {
		t.Fatalf("after two ended, the worker is told %+v", v.Preempt)
	}
	// It runs again and succeeds: no failure counted (job 4 has no retries).
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w, Batch: b, Job: 4, Attempt: 1, Outcome: OutcomePreempted, Start: start, End: h.Now}}})
	h.RunAll([]uint32{w}, nil)
	for j := uint32(1); j <= 4; j++ {
		if st := h.JobState(b, j); st != Success {
			t.Fatalf("job %d is %s, want success", j, st)
		}
	}
	if v := h.S.WorkerView(w, nil); len(v.Preempt) != 0 {
		t.Fatalf("orders outlived their attempts: %+v", v.Preempt)
	}
	h.MustFail(&Preempt{Now: h.Tick(), Attempts: make([]PreemptAttempt, MaxPreemptPerEntry+1)}, ErrInvalid)
}
