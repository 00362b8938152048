package state

import (
	"slices"
	"testing"
)

// readyOrder lists a batch's Ready job IDs in the order the scheduler reads
// them.
func readyOrder(s *State, b uint64) []uint32 {
	var ids []uint32
	s.Read(func(r Reader) {
		for rg := range r.Ready(r.Batch(b)) {
			for id := rg.Lo; id <= rg.Hi; id++ {
				ids = append(ids, id)
			}
		}
	})
	return ids
}

// TestComeBackJobsKeepTheirPlace: a job preempted or lost with its worker
// goes back ahead of the jobs that never started, behind those that came
// back before it; a job retried after its own failure goes to the back.
// The order survives a snapshot and a replay, and the scheduler places
// the returned jobs first.
func TestComeBackJobsKeepTheirPlace(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 4, 16)
	sp := spec("j", 1)
	sp.Retries = 1
	b := h.CreateBatch(entry(1, 9, sp))
	if r := h.Schedule(); r.Placed != 4 {
		t.Fatalf("placed %d, want 4", r.Placed)
	}
	start := h.Tick()
	// Job 3 is preempted, job 2 fails (retried), job 1 is preempted.
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 3, Attempt: 1, Outcome: OutcomePreempted, Start: start, End: h.Now},
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: start, End: h.Now},
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomePreempted, Start: start, End: h.Now},
	}})
	want := []uint32{3, 1, 5, 6, 7, 8, 9, 2}
	if got := readyOrder(h.S, b); !slices.Equal(got, want) {
		t.Fatalf("ready order %v, want %v", got, want)
	}
	for _, s := range []*State{h.Replay(), h.Restored()} {
		if got := readyOrder(s, b); !slices.Equal(got, want) {
			t.Fatalf("ready order after a restart %v, want %v", got, want)
		}
	}
	// The worker goes: job 4 is lost and comes back behind 3 and 1.
	h.Must(&Retire{Now: h.Tick(), Instance: w, Reason: "gone", MaxLost: 3})
	want = []uint32{3, 1, 4, 5, 6, 7, 8, 9, 2}
	if got := readyOrder(h.S, b); !slices.Equal(got, want) {
		t.Fatalf("after the worker went, ready order %v, want %v", got, want)
	}
	// Room for two: the two preempted jobs run, not jobs that never started.
	w2 := h.Activate("w2", 2, 16)
	if r := h.Schedule(); r.Placed != 2 {
		t.Fatalf("placed %d, want 2", r.Placed)
	}
	for _, id := range []uint32{3, 1} {
		if st := h.JobState(b, id); st != Running {
			t.Fatalf("job %d is %s; the jobs that came back should run first", id, st)
		}
	}
	want = []uint32{4, 5, 6, 7, 8, 9, 2}
	if got := readyOrder(h.Restored(), b); !slices.Equal(got, want) {
		t.Fatalf("ready order %v, want %v", got, want)
	}
	h.RunAll([]uint32{w2}, nil)
}

// TestReadyQueueAgainCount: removing and splitting runs keeps the count of
// runs that came back exact.
func TestReadyQueueAgainCount(t *testing.T) {
	var q readyQueue
	q.push(Range{10, 20})
	q.pushAgain(Range{3, 3})
	q.pushAgain(Range{5, 7})
	if got := q.items(); !slices.Equal(got, []Range{{3, 3}, {5, 7}, {10, 20}}) || q.again != 2 {
		t.Fatalf("%v again %d", got, q.again)
	}
	q.remove(Range{6, 6}) // splits a run that came back
	if q.again != 3 {
		t.Fatalf("again %d after a split, want 3: %v", q.again, q.items())
	}
	q.remove(Range{3, 3})
	q.remove(Range{5, 5})
	q.remove(Range{12, 12})
	if q.again != 1 || !slices.Equal(q.items(), []Range{{7, 7}, {10, 11}, {13, 20}}) {
		t.Fatalf("%v again %d", q.items(), q.again)
	}
	q.pushAgain(Range{1, 1})
	if !slices.Equal(q.items(), []Range{{7, 7}, {1, 1}, {10, 11}, {13, 20}}) {
		t.Fatalf("%v", q.items())
	}
	q.clear()
	if q.again != 0 {
		t.Fatal("clear kept the count")
	}
}

// TestMaxLostPerJob: a job's Policy.MaxLost overrides the server's limit
// on lost attempts: 1 ends it at its first loss, -1 never does (Hail's
// behaviour), 0 keeps the server's (3 here).
func TestMaxLostPerJob(t *testing.T) {
	h := newHarness(t)
	once, never, dflt := spec("once", 1), spec("never", 1), spec("default", 1)
	once.Run = &Run{Policy: &Policy{MaxLost: 1}}
	never.Run = &Run{Policy: &Policy{MaxLost: -1}}
	b := h.CreateBatch(entry(1, 1, once), entry(2, 1, never), entry(3, 1, dflt))
	for round := 1; round <= 5; round++ {
		w := h.Activate("w", 4, 16)
		h.Schedule()
		h.Must(&Retire{Now: h.Tick(), Instance: w, Reason: "machine died", MaxLost: 3})
		want := map[uint32]JobState{1: Error, 2: Ready, 3: Ready}
		if round >= 3 {
			want[3] = Error
		}
		for id, st := range want {
			if got := h.JobState(b, id); got != st {
				t.Fatalf("after %d losses job %d is %s, want %s", round, id, got, st)
			}
		}
	}
	for _, s := range []*State{h.Replay(), h.Restored()} {
		jb, _ := s.Job(b, 2)
		if len(jb.Attempts) != 5 || jb.State != Ready {
			t.Fatalf("after a restart the job that is never given up is %s with %d attempts", jb.State, len(jb.Attempts))
		}
	}
}

// TestMaxLostIsNotForMachinesDeletedUnderTheJob: a loss whose limit is
// none (a machine the autoscaler saw deleted, MaxLost 0) never ends a job,
// whatever its own max_lost_attempts.
func TestMaxLostIsNotForMachinesDeletedUnderTheJob(t *testing.T) {
	h := newHarness(t)
	once := spec("once", 1)
	once.Run = &Run{Policy: &Policy{MaxLost: 1}}
	b := h.CreateBatch(entry(1, 1, once))
	for range 3 {
		w := h.Activate("w", 4, 16)
		h.Schedule()
		h.Must(&Retire{Now: h.Tick(), Instance: w, Reason: "machine deleted", MaxLost: 0})
		if st := h.JobState(b, 1); st != Ready {
			t.Fatalf("the job is %s after a loss that was not its doing, want ready", st)
		}
	}
}
