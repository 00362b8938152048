package state

import (
	"strings"
	"testing"
)

// gangHarness: clusters c1 and c2, two 2-core workers in each (pools p
// and q in c1), and a batch of a gang of 4 one-core members (retries:
// one), then a plain job.
func gangHarness(t *testing.T, uniform string) (*Harness, uint64, [4]uint32) {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{
		{Name: "c1", Region: "r", Pools: []Pool{{Name: "p", CPUMilli: 2000}, {Name: "q", CPUMilli: 2000}}},
		{Name: "c2", Region: "r", Pools: []Pool{{Name: "p", CPUMilli: 2000}}}}})
	var insts [4]uint32
	for i, w := range []struct{ name, cluster, pool string }{{"a1", "c1", "p"}, {"a2", "c1", "q"}, {"b1", "c2", "p"}, {"b2", "c2", "p"}} {
		res := h.Must(&Activate{Now: h.Tick(), Name: w.name, CPUMilli: 2000, Memory: 8 << 30, TokenHash: "tok-" + w.name, Region: "r", Cluster: w.cluster, Pool: w.pool})
		insts[i] = res.(*ActivateResult).Instance
	}
	sp := spec("ranks", 1)
	sp.Array, sp.Retries = true, 1
	sp.Run = &Run{Gang: &Gang{Size: 4, Uniform: uniform}}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Jobs: []JobEntry{entry(1, 4, sp), entry(5, 1, spec("plain", 1))}}).(*UpdateResult).Batch
	return h, b, insts
}

func gangPlan(h *Harness, b uint64, attempt uint16, ps ...[3]uint32) *Plan {
	p := &Plan{Now: h.Tick(), Reserve: true}
	for _, x := range ps {
		p.Placements = append(p.Placements, Placement{Batch: b, First: x[0], Count: x[1], Attempt: attempt, Instance: x[2]})
	}
	return p
}

// TestGangAllOrNothingAtApply: apply takes a gang's placements together
// or refuses them all: part of the gang, members in two clusters (or two
// pools, for a gang of one pool), more than an instance holds, a member
// twice; the whole gang in one cluster starts.
func TestGangAllOrNothingAtApply(t *testing.T) {
	h, b, in := gangHarness(t, "")
	for name, p := range map[string]*Plan{
		"three of four":     gangPlan(h, b, 1, [3]uint32{1, 2, in[0]}, [3]uint32{3, 1, in[1]}),
		"two clusters":      gangPlan(h, b, 1, [3]uint32{1, 2, in[0]}, [3]uint32{3, 2, in[2]}),
		"too many on one":   gangPlan(h, b, 1, [3]uint32{1, 3, in[0]}, [3]uint32{4, 1, in[1]}),
		"a member twice":    gangPlan(h, b, 1, [3]uint32{1, 2, in[0]}, [3]uint32{2, 2, in[1]}),
		"the wrong attempt": gangPlan(h, b, 2, [3]uint32{1, 2, in[0]}, [3]uint32{3, 2, in[1]}),
	} {
		res := h.Must(p).(*PlanResult)
		if res.Placed != 0 || h.JobState(b, 1) != Ready {
			t.Fatalf("%s: placed %d (job 1 %s), want the gang refused whole", name, res.Placed, h.JobState(b, 1))
		}
	}
	// A gang's placements split by another's are two tries, each of part
	// of the gang: both refused, the plain job between them placed.
	p0 := gangPlan(h, b, 1, [3]uint32{1, 2, in[0]}, [3]uint32{5, 1, in[2]}, [3]uint32{3, 2, in[1]})
	if res := h.Must(p0).(*PlanResult); res.Placed != 1 || res.Rejected != 4 || h.JobState(b, 1) != Ready {
		t.Fatalf("a gang's placements split by another's: %+v", res)
	}
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 2, in[0]}, [3]uint32{3, 2, in[1]})).(*PlanResult); res.Placed != 4 {
		t.Fatalf("the whole gang in c1: %+v", res)
	}
	h.Restored()

	// One pool: the same placement in c1's two pools is refused.
	h, b, in = gangHarness(t, "pool")
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 2, in[0]}, [3]uint32{3, 2, in[1]})).(*PlanResult); res.Placed != 0 {
		t.Fatalf("a gang of one pool over two: %+v", res)
	}
	if res := h.Must(gangPlan(h, b, 1, [3]uint32{1, 2, in[2]}, [3]uint32{3, 2, in[3]})).(*PlanResult); res.Placed != 4 {
		t.Fatalf("a gang of one pool in c2's pool p: %+v", res)
	}
}

// TestGangRestartsWhole: a member that fails stops the others; the gang
// starts again whole, on its next attempt; a member that succeeded is
// not run again; once a member fails for good the others are cancelled.
func TestGangRestartsWhole(t *testing.T) {
	h, b, in := gangHarness(t, "")
	h.Must(gangPlan(h, b, 1, [3]uint32{1, 2, in[0]}, [3]uint32{3, 2, in[1]}))
	ev := func(job uint32, inst uint32, attempt uint16, o Outcome) Event {
		return Event{Instance: inst, Batch: b, Job: job, Attempt: attempt, Outcome: o, Start: h.Now, End: h.Now}
	}
	// Member 1 succeeds; member 2 fails (it has a retry).
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(1, in[0], 1, OutcomeSuccess), ev(2, in[0], 1, OutcomeFailed)}})
	if h.JobState(b, 1) != Success || h.JobState(b, 2) != Ready {
		t.Fatalf("members 1 and 2: %s %s", h.JobState(b, 1), h.JobState(b, 2))
	}
	v := h.S.WorkerView(in[1], []AttemptID{{b, 3, 1}, {b, 4, 1}})
	if len(v.Preempt) != 2 || !strings.Contains(v.Preempt[0].Reason, "member 2 of its gang ended (failed)") {
		t.Fatalf("the others' worker is told %+v, want members 3 and 4 stopped", v.Preempt)
	}
	// Until they stop, the gang may not start again.
	if res := h.Must(gangPlan(h, b, 2, [3]uint32{2, 1, in[2]})).(*PlanResult); res.Placed != 0 {
		t.Fatalf("a member placed while the others run: %+v", res)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(3, in[1], 1, OutcomePreempted), ev(4, in[1], 1, OutcomePreempted)}})
	for _, id := range []uint32{2, 3, 4} {
		if st := h.JobState(b, id); st != Ready {
			t.Fatalf("member %d is %s, want ready", id, st)
		}
	}
	// The gang again: members 2-4 (1 succeeded), in c2 this time.
	if res := h.Must(gangPlan(h, b, 2, [3]uint32{2, 2, in[2]}, [3]uint32{4, 1, in[3]})).(*PlanResult); res.Placed != 3 {
		t.Fatalf("the gang's second start: %+v", res)
	}
	h.Restored()
	// Member 2 fails again: out of retries, it fails for good, and the
	// gang cannot run whole: the others are stopped, then cancelled.
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(2, in[2], 2, OutcomeFailed)}})
	if h.JobState(b, 2) != Failed {
		t.Fatalf("member 2 is %s", h.JobState(b, 2))
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{ev(3, in[2], 2, OutcomePreempted), ev(4, in[3], 2, OutcomePreempted)}})
	for id, want := range map[uint32]JobState{1: Success, 2: Failed, 3: Cancelled, 4: Cancelled} {
		if st := h.JobState(b, id); st != want {
			t.Errorf("member %d is %s, want %s", id, st, want)
		}
	}
	rec, _ := h.S.Job(b, 3)
	if !strings.Contains(rec.Message, "its gang cannot run whole") {
		t.Fatalf("member 3 says %q", rec.Message)
	}
	h.Restored()
}

// TestGangEntriesAreWhole: apply refuses a gang that is not a whole
// array of its size.
func TestGangEntriesAreWhole(t *testing.T) {
	h := newHarness(t)
	sp := spec("g", 1)
	sp.Array = true
	sp.Run = &Run{Gang: &Gang{Size: 4}}
	err := h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Jobs: []JobEntry{entry(1, 3, sp)}}, ErrInvalid)
	if !strings.Contains(err.Msg, "an array's gang is the whole array") {
		t.Fatalf("%v", err)
	}
}
