package state

import (
	"strings"
	"testing"
)

// oomEvent ends job j's current attempt on inst out of memory.
func oomEvent(h *Harness, inst uint32, b uint64, j uint32, attempt uint16) Event {
	return Event{Instance: inst, Batch: b, Job: j, Attempt: attempt, Outcome: OutcomeError, Start: h.Now, End: h.Tick(),
		Message: "out of memory (limit 1 GiB)", OOM: true}
}

// TestOOMRetryGivesMoreMemory: a job of an array that runs out of memory
// runs again with its memory times the factor (rounded up to a MiB, at
// most the bound), counted against no retry, ahead of the jobs that never
// started; at the bound it ends in error as before. Its index and name
// stay, the array's other jobs keep their memory, each attempt says what
// it had and is priced with it, and all of it survives a snapshot and a
// replay. An OOM without a policy, or an event that says no OOM, is the
// job's error.
func TestOOMRetryGivesMoreMemory(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 3, 64)
	sp := spec("assemble", 1)
	sp.Array = true
	sp.Memory = 1 << 30
	sp.Run = &Run{Policy: &Policy{OOMFactorMilli: 1500, OOMMaxMemory: 2 << 30}}
	plain := spec("plain", 1)
	plain.Memory = 1 << 30
	b := h.CreateBatch(entry(1, 3, sp), entry(4, 1, plain), entry(5, 2, sp))
	if r := h.Schedule(); r.Placed != 3 {
		t.Fatalf("placed %d", r.Placed)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{oomEvent(h, w, b, 2, 1)}})
	if st := h.JobState(b, 2); st != Ready {
		t.Fatalf("job 2 is %s after running out of memory, want ready", st)
	}
	if got := readyOrder(h.S, b); got[0] != 2 {
		t.Fatalf("ready order %v: the job that ran out of memory should lead", got)
	}
	jb, _ := h.S.Job(b, 2)
	if jb.Spec.Memory != 1536<<20 || jb.Name != "assemble[1]" || jb.ArrayIndex != 1 || !strings.Contains(jb.Message, "retrying with 1536 MiB") {
		t.Fatalf("after the first OOM: memory %d, name %s, index %d, message %q", jb.Spec.Memory, jb.Name, jb.ArrayIndex, jb.Message)
	}
	for _, id := range []uint32{1, 3, 5} {
		if o, _ := h.S.Job(b, id); o.Spec.Memory != 1<<30 {
			t.Fatalf("job %d was given %d bytes; only the job that ran out should grow", id, o.Spec.Memory)
		}
	}
	// Jobs 1 and 3 end; job 2 runs again (ahead of 4, 5, 6) and runs
	// out again: 1.5 GiB × 1.5 is past the bound, so it gets the bound.
	h.Complete(w, nil)
	h.Schedule()
	if h.JobState(b, 2) != Running {
		t.Fatalf("job 2 is %s, want running first", h.JobState(b, 2))
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{oomEvent(h, w, b, 2, 2)}})
	if jb, _ = h.S.Job(b, 2); jb.Spec.Memory != 2<<30 || jb.State != Ready {
		t.Fatalf("after the second OOM: %s with %d bytes, want ready with 2 GiB", jb.State, jb.Spec.Memory)
	}
	// At the bound, running out ends it in error, as without a policy.
	h.Schedule()
	h.Must(&Events{Now: h.Tick(), Events: []Event{oomEvent(h, w, b, 2, 3)}})
	if st := h.JobState(b, 2); st != Error {
		t.Fatalf("at the bound job 2 is %s, want error", st)
	}
	for _, s := range []*State{h.S, h.Replay(), h.Restored()} {
		jb, _ := s.Job(b, 2)
		if len(jb.Attempts) != 3 {
			t.Fatalf("%d attempts, want 3", len(jb.Attempts))
		}
		want := []int64{1 << 30, 1536 << 20, 2 << 30}
		for i, a := range jb.Attempts {
			if a.Memory != want[i] {
				t.Fatalf("attempt %d had %d bytes, want %d", a.Attempt, a.Memory, want[i])
			}
		}
		memUnits := func(a AttemptRecord) float64 {
			for _, l := range a.Lines {
				if strings.HasPrefix(l.Resource, "memory") {
					return l.Units
				}
			}
			return -1
		}
		if u0, u2 := memUnits(jb.Attempts[0]), memUnits(jb.Attempts[2]); u0 <= 0 || u2 != 2*u0 {
			t.Fatalf("attempts priced for %g and %g units of memory, want the second twice the first", u0, u2)
		}
		if jb.Name != "assemble[1]" || jb.ArrayIndex != 1 {
			t.Fatalf("after a restart: %s index %d", jb.Name, jb.ArrayIndex)
		}
	}
	// No policy, or no OOM said: the job's error.
	h.Schedule()
	var evs []Event
	v := h.S.WorkerView(w, nil)
	for _, a := range v.Assign {
		e := oomEvent(h, w, a.Batch, a.Job, a.Attempt)
		if a.Job == 5 {
			e.OOM = false
		}
		evs = append(evs, e)
	}
	h.Must(&Events{Now: h.Tick(), Events: evs})
	for _, id := range []uint32{4, 5} {
		if st := h.JobState(b, id); st != Error {
			t.Fatalf("job %d is %s, want error", id, st)
		}
	}
	if st := h.JobState(b, 6); st != Ready {
		t.Fatalf("job 6 is %s, want ready for more memory", st)
	}
}

// TestOOMRetryMemoryIsBounded: the next memory never overflows nor passes
// the bound, and grows by at least a MiB.
func TestOOMRetryMemoryIsBounded(t *testing.T) {
	for _, c := range []struct {
		mem, max int64
		factor   int32
		want     int64
	}{
		{1 << 20, 1 << 30, 1100, 2 << 20},
		{100 << 20, 1 << 30, 2000, 200 << 20},
		{600 << 20, 1 << 30, 2000, 1 << 30},
		{1 << 45, 1<<46 - 1, 16000, 1<<46 - 1},
		{1 << 30, 1 << 30, 2000, 0},
	} {
		sp := &Spec{Memory: c.mem, Run: &Run{Policy: &Policy{OOMFactorMilli: c.factor, OOMMaxMemory: c.max}}}
		next := sp.oomRetry()
		got := int64(0)
		if next != nil {
			got = next.Memory
		}
		if got != c.want {
			t.Errorf("%d bytes × %d/1000 up to %d: %d, want %d", c.mem, c.factor, c.max, got, c.want)
		}
	}
}
