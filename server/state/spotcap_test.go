package state

import (
	"strings"
	"testing"
)

// TestSpotCapKeepsAJobOffSpot: a job with max_spot_attempts 2 whose spot
// workers (a preemptible pool's) were reclaimed twice (the worker's
// notice: Retire Preempted) runs on on-demand workers only:
// the scheduler (FirstFit, through placement's rule) leaves it off a spot
// worker, apply refuses a plan that puts it on one, and an on-demand
// worker takes it. Its spot losses count against no max_lost_attempts
// (1 here), a plain worker's loss still does, and the job's count and its
// spec survive a snapshot and a replay. Its batch-mates stay where they
// were.
func TestSpotCapKeepsAJobOffSpot(t *testing.T) {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "c", Region: "r", Pools: []Pool{
		{Name: "spot", CPUMilli: 4000, Preemptible: true}, {Name: "std", CPUMilli: 4000}}}}})
	activate := func(name, pool string) uint32 {
		t.Helper()
		res := h.Must(&Activate{Now: h.Tick(), Name: name, CPUMilli: 1000, Memory: 4 << 30, TokenHash: "tok-" + name, Region: "r", Cluster: "c", Pool: pool})
		return res.(*ActivateResult).Instance
	}
	capped := spec("capped", 1)
	capped.Run = &Run{Policy: &Policy{MaxSpot: 2, MaxLost: 1}}
	capped.Array = true
	b := h.CreateBatch(entry(1, 2, capped))
	noSpot := func(s *State, id uint32) bool {
		jr, _ := s.Job(b, id)
		return jr.Spec.Where != nil && jr.Spec.Where.NoSpot
	}
	// Loss 1: both jobs run on spot workers; job 2 succeeds, job 1's
	// worker is reclaimed. Loss 2: job 1 again, on the worker left.
	ids := map[string]uint32{}
	for loss := 1; loss <= 2; loss++ {
		name := []string{"", "spot-a", "spot-b"}[loss]
		ids[name] = activate(name, "spot")
		if loss == 1 {
			ids["spot-x"] = activate("spot-x", "spot")
		}
		if r := h.Schedule(); r.Placed != 3-loss {
			t.Fatalf("loss %d: placed %d, want %d", loss, r.Placed, 3-loss)
		}
		jr, _ := h.S.Job(b, 1)
		lost := ids[jr.Attempts[len(jr.Attempts)-1].Instance]
		if loss == 1 {
			jr2, _ := h.S.Job(b, 2)
			h.Complete(ids[jr2.Attempts[0].Instance], func(uint64, uint32) Outcome { return OutcomeSuccess })
		}
		h.Must(&Retire{Now: h.Tick(), Instance: lost, Reason: "reclaimed", MaxLost: 3, Preempted: true})
		if st := h.JobState(b, 1); st != Ready {
			t.Fatalf("after spot loss %d the job is %s, want ready (spot losses do not count against max_lost_attempts 1)", loss, st)
		}
		if got := noSpot(h.S, 1); got != (loss == 2) {
			t.Fatalf("after spot loss %d kept off spot: %v", loss, got)
		}
	}
	if jr, _ := h.S.Job(b, 1); !strings.Contains(jr.Message, "on-demand machines from now on") {
		t.Fatalf("message %q does not say why", jr.Message)
	}
	if noSpot(h.S, 2) || h.JobState(b, 2) != Success {
		t.Fatal("the job's array mate was kept off spot too, or did not end")
	}
	// A spot worker: nothing for job 1.
	spotW := activate("spot-c", "spot")
	if r := h.Schedule(); r.Placed != 0 {
		t.Fatalf("placed %d with only a spot worker up, want 0", r.Placed)
	}
	if st := h.JobState(b, 1); st != Ready {
		t.Fatalf("the capped job is %s with only a spot worker up, want ready", st)
	}
	// Apply's re-check refuses a plan that puts it on spot anyway.
	res := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{{Batch: b, First: 1, Count: 1, Attempt: 3, Instance: spotW}}}).(*PlanResult)
	if res.Placed != 0 || h.JobState(b, 1) != Ready {
		t.Fatalf("apply placed the capped job on a spot worker: %+v", res)
	}
	for _, s := range []*State{h.Replay(), h.Restored()} {
		if !noSpot(s, 1) || noSpot(s, 2) {
			t.Fatal("after a restart the job is no longer kept off spot, or its mate is")
		}
	}
	// An on-demand worker takes it.
	od := activate("od", "std")
	if r := h.Schedule(); r.Placed != 1 {
		t.Fatalf("placed %d on the on-demand worker, want 1", r.Placed)
	}
	if jr, _ := h.S.Job(b, 1); jr.State != Running || jr.Attempts[len(jr.Attempts)-1].Instance != "od" {
		t.Fatalf("the capped job is %s on %+v, want running on od", jr.State, jr.Attempts)
	}
	// Lost there, it counts against max_lost_attempts (1): error.
	h.Must(&Retire{Now: h.Tick(), Instance: od, Reason: "died", MaxLost: 3})
	if st := h.JobState(b, 1); st != Error {
		t.Fatalf("lost with an on-demand worker, the job is %s, want error (max_lost_attempts 1)", st)
	}
}

// TestSpotLossesCountedThroughSnapshots: a job lost once on spot (cap 2)
// keeps that count through a snapshot, so its second loss after a restart
// still keeps it off spot.
func TestSpotLossesCountedThroughSnapshots(t *testing.T) {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "c", Region: "r", Pools: []Pool{{Name: "spot", CPUMilli: 4000, Preemptible: true}}}}})
	sp := spec("capped", 1)
	sp.Run = &Run{Policy: &Policy{MaxSpot: 2}}
	b := h.CreateBatch(entry(1, 1, sp))
	for i := range 2 {
		if i == 1 {
			h.S = h.Restored()
		}
		res := h.Must(&Activate{Now: h.Tick(), Name: "spot", CPUMilli: 1000, Memory: 4 << 30, TokenHash: "tok" + string(rune('a'+i)), Region: "r", Cluster: "c", Pool: "spot"})
		h.Schedule()
		h.Must(&Retire{Now: h.Tick(), Instance: res.(*ActivateResult).Instance, Reason: "reclaimed", MaxLost: 3, Preempted: true})
	}
	jr, _ := h.S.Job(b, 1)
	if jr.Spec.Where == nil || !jr.Spec.Where.NoSpot {
		t.Fatal("two spot losses either side of a snapshot did not keep the job off spot")
	}
}

// TestSpotWorkerGoneSilentIsALoss: a spot worker that goes silent (not a
// reclaim the worker or the autoscaler saw) is a lost attempt as before:
// a job that takes its worker down does not get max_spot_attempts more
// workers to take down.
func TestSpotWorkerGoneSilentIsALoss(t *testing.T) {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "c", Region: "r", Pools: []Pool{{Name: "spot", CPUMilli: 4000, Preemptible: true}}}}})
	sp := spec("crasher", 1)
	sp.Run = &Run{Policy: &Policy{MaxSpot: 100, MaxLost: 1}}
	b := h.CreateBatch(entry(1, 1, sp))
	res := h.Must(&Activate{Now: h.Tick(), Name: "spot", CPUMilli: 1000, Memory: 4 << 30, TokenHash: "tok", Region: "r", Cluster: "c", Pool: "spot"})
	h.Schedule()
	h.Must(&Retire{Now: h.Tick(), Instance: res.(*ActivateResult).Instance, Reason: "no heartbeat", MaxLost: 3})
	if st := h.JobState(b, 1); st != Error {
		t.Fatalf("the job whose spot worker went silent is %s, want error (max_lost_attempts 1)", st)
	}
}

// TestSpotNoticeEventsCount: a worker told its spot machine is being
// reclaimed preempts what it runs and reports it (preempted events that
// say the worker is leaving) before it deactivates: those count against
// max_spot_attempts (1: the job is kept off spot). A preempted event of a
// worker that stays (another queue's preemption) counts against nothing.
func TestSpotNoticeEventsCount(t *testing.T) {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "c", Region: "r", Pools: []Pool{{Name: "spot", CPUMilli: 4000, Preemptible: true}}}}})
	sp := spec("capped", 1)
	sp.Run = &Run{Policy: &Policy{MaxSpot: 1}}
	b := h.CreateBatch(entry(1, 1, sp))
	res := h.Must(&Activate{Now: h.Tick(), Name: "spot", CPUMilli: 1000, Memory: 4 << 30, TokenHash: "tok", Region: "r", Cluster: "c", Pool: "spot"})
	inst := res.(*ActivateResult).Instance
	noSpot := func() bool {
		jr, _ := h.S.Job(b, 1)
		return jr.Spec.Where != nil && jr.Spec.Where.NoSpot
	}
	h.Schedule()
	start := h.Now
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomePreempted, Start: start, End: h.Now, Message: "preempted for another queue"}}})
	if noSpot() {
		t.Fatal("a preemption for another queue kept the job off spot")
	}
	h.Schedule()
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 2, Outcome: OutcomePreempted, Start: start, End: h.Now, Message: "preempted: worker spot is going away", Leaving: true}}})
	h.Must(&Retire{Now: h.Tick(), Instance: inst, Reason: "worker deactivated", MaxLost: 3, Preempted: true})
	if !noSpot() || h.JobState(b, 1) != Ready {
		t.Fatalf("the worker's spot notice (a leaving worker's preempted event, then its goodbye) did not keep the job off spot (max_spot_attempts 1)")
	}
	for _, s := range []*State{h.Replay(), h.Restored()} {
		if jr, _ := s.Job(b, 1); jr.Spec.Where == nil || !jr.Spec.Where.NoSpot {
			t.Fatal("after a restart the job is no longer kept off spot")
		}
	}
}
