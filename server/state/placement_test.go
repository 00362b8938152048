package state

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/drover-sched/drover/placement"
)

func (h *Harness) activateIn(name, region, cluster string, cores int64) uint32 {
	h.T.Helper()
	res := h.Must(&Activate{Now: h.Tick(), Name: name, CPUMilli: cores * 1000, Memory: cores << 30, TokenHash: "tok-" + name,
		NodeID: "node-" + name, Region: region, Cluster: cluster})
	return res.(*ActivateResult).Instance
}

func place(b uint64, first, count uint32, inst uint32) Placement {
	return Placement{Batch: b, First: first, Count: count, Attempt: 1, Instance: inst}
}

func TestQuotaIsCheckedAtApply(t *testing.T) {
	h := newHarness(t)
	w := h.activateIn("w", "east", "a", 16)
	h.Must(&SetTeam{Now: h.Tick(), Team: Team{Name: "genomics", Projects: []string{"default"}, QuotaMilli: 3000}})
	b := h.CreateBatch(entry(1, 8, spec("j", 1)))
	res := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 8, w)}}).(*PlanResult)
	if res.Placed != 3 || res.Rejected != 5 {
		t.Fatalf("placed %d rejected %d; the quota admits 3", res.Placed, res.Rejected)
	}
	ti, _ := h.S.QueueByPath("genomics")
	if ti.UsedMilli != 3000 || ti.UsedByCluster["a"] != 3000 {
		t.Fatalf("team uses %d (%v), want 3000 in a", ti.UsedMilli, ti.UsedByCluster)
	}
	// A finished job gives its quota back; the next placement takes it.
	h.Complete(w, nil)
	if ti, _ = h.S.QueueByPath("genomics"); ti.UsedMilli != 0 {
		t.Fatalf("team still uses %d after its jobs ended", ti.UsedMilli)
	}
	// Raising the quota lets more in; the projects stay with the team.
	h.Must(&SetTeam{Now: h.Tick(), Team: Team{Name: "genomics", QuotaMilli: 10_000}, QuotaOnly: true})
	res = h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 4, 5, w)}}).(*PlanResult)
	if res.Placed != 5 {
		t.Fatalf("placed %d after the quota was raised, want 5", res.Placed)
	}
	h.MustFail(&SetTeam{Now: h.Tick(), Team: Team{Name: "t2", Projects: []string{"nope"}}}, ErrNotFound)
	h.MustFail(&SetTeam{Now: h.Tick(), Team: Team{Name: "t2", Strategy: "random"}}, ErrInvalid)
}

func TestDisabledClusterTakesNoNewAttempt(t *testing.T) {
	h := newHarness(t)
	a := h.activateIn("wa", "east", "a", 8)
	bw := h.activateIn("wb", "west", "b", 8)
	h.MustFail(&Activate{Now: h.Tick(), Name: "x", CPUMilli: 1000, Memory: 1 << 30, TokenHash: "tx", Region: "west", Cluster: "a"}, ErrConflict)
	h.Must(&SetCluster{Now: h.Tick(), Name: "a", Disabled: true, Reason: "maintenance", By: "ops"})
	b := h.CreateBatch(entry(1, 4, spec("j", 1)))
	res := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 2, a), place(b, 3, 2, bw)}}).(*PlanResult)
	if res.Placed != 2 || res.Rejected != 2 {
		t.Fatalf("placed %d rejected %d; the disabled cluster must take none", res.Placed, res.Rejected)
	}
	h.S.Read(func(r Reader) {
		for c := range r.Clusters() {
			if c.Name == "a" && (!c.Disabled || c.Reason != "maintenance" || c.By != "ops") {
				t.Fatalf("cluster a as read: %+v", c)
			}
		}
	})
	h.Must(&SetCluster{Now: h.Tick(), Name: "a", Disabled: false})
	res = h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 2, a)}}).(*PlanResult)
	if res.Placed != 2 {
		t.Fatalf("placed %d after enable, want 2", res.Placed)
	}
	h.MustFail(&SetCluster{Now: h.Tick(), Name: "nope", Disabled: true}, ErrNotFound)
}

func TestEvacuatePreemptsWithoutCountingFailures(t *testing.T) {
	h := newHarness(t)
	a := h.activateIn("wa", "east", "a", 8)
	h.activateIn("wb", "west", "b", 8)
	sp := spec("j", 1)
	sp.Retries = 0
	b := h.CreateBatch(entry(1, 4, sp))
	h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 4, a)}})
	res := h.Must(&SetCluster{Now: h.Tick(), Name: "a", Disabled: true, Reason: "drain", Evacuate: true}).(*SetClusterResult)
	if res.Preempted != 4 {
		t.Fatalf("preempted %d, want 4", res.Preempted)
	}
	for j := uint32(1); j <= 4; j++ {
		if st := h.JobState(b, j); st != Ready {
			t.Fatalf("job %d is %s after evacuation, want ready", j, st)
		}
	}
	// The worker is told to stop them.
	if v := h.S.WorkerView(a, []AttemptID{{b, 1, 1}}); len(v.Kill) != 1 {
		t.Fatalf("the evacuated worker is not told to kill: %+v", v)
	}
	// They run elsewhere and succeed: preemption is not a failure.
	h.RunAll(h.S.ActiveInstances(), nil)
	jb, _ := h.S.Job(b, 1)
	if jb.State != Success || len(jb.Attempts) != 2 || jb.Attempts[0].Outcome != OutcomePreempted || jb.Attempts[1].Cluster != "b" {
		t.Fatalf("job 1: %+v", jb)
	}
	if !strings.Contains(jb.Attempts[0].Message, "cluster a disabled") {
		t.Fatalf("preempted attempt message %q", jb.Attempts[0].Message)
	}
}

func TestPlacementSurvivesSnapshotAndReplay(t *testing.T) {
	h := newHarness(t)
	w := h.activateIn("wa", "east", "a", 8)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "a", Region: "east", Group: "cpu", Pools: []Pool{{Name: "default", CPUMilli: 8000, PricePerHour: 400_000_000}}},
		{Name: "c", Region: "west"}}, Teams: []Team{{Name: "g", Projects: []string{"default"}, QuotaMilli: 5000, Strategy: "pack"}},
		Groups: []ClusterGroup{{Name: "cpu", Strategy: "least-loaded"}}})
	h.Must(&SetCluster{Now: h.Tick(), Name: "c", Disabled: true, Reason: "not yet", By: "ops"})
	b := h.CreateBatch(entry(1, 3, spec("j", 1)))
	h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 3, w)}})
	for _, s := range []*State{h.Replay(), func() *State {
		s := New()
		if err := s.Restore(strings.NewReader(string(SnapshotBytes(t, h.S)))); err != nil {
			t.Fatal(err)
		}
		return s
	}()} {
		checkInvariants(t, s)
		ti, ok := s.QueueByPath("g")
		if !ok || ti.UsedMilli != 3000 || ti.Strategy != "pack" || ti.Guarantee.CPUMilli != 5000 || ti.Quota().CPUMilli != 5000 {
			t.Fatalf("a team's queue after restore: %+v", ti)
		}
		cs := s.Clusters()
		if len(cs) != 2 || cs[0].Workers != 1 || cs[0].Pools[0].PricePerHour != 400_000_000 || !cs[1].Disabled || cs[1].By != "ops" || cs[0].Group != "cpu" {
			t.Fatalf("clusters after restore: %+v", cs)
		}
		if gs := s.ClusterGroups(); len(gs) != 1 || gs[0].Strategy != "least-loaded" || len(gs[0].Clusters) != 1 || gs[0].Clusters[0] != "a" {
			t.Fatalf("cluster groups after restore: %+v", gs)
		}
	}
}

func TestGPUsAreCountedAtApply(t *testing.T) {
	h := newHarness(t)
	plain := h.activateIn("cpu", "east", "a", 16)
	res := h.Must(&Activate{Now: h.Tick(), Name: "gpu", CPUMilli: 16000, Memory: 64 << 30, TokenHash: "tok-gpu", NodeID: "gpu",
		Region: "east", Cluster: "a", GPUType: "a100", GPUs: 4}).(*ActivateResult)
	gpu := res.Instance
	h.MustFail(&Activate{Now: h.Tick(), Name: "bad", CPUMilli: 1000, Memory: 1 << 30, TokenHash: "tb", GPUs: 2}, ErrInvalid)
	sp := spec("train", 1)
	sp.Where = &Where{GPUType: "a100", GPUs: 2}
	b := h.CreateBatch(entry(1, 3, sp))
	// Not on a worker without GPUs; two of three on the 4-GPU worker.
	r := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 1, plain), place(b, 1, 3, gpu)}}).(*PlanResult)
	if r.Placed != 2 || r.Rejected != 2 {
		t.Fatalf("placed %d rejected %d; want 2 placed on the GPU worker", r.Placed, r.Rejected)
	}
	if in := h.S.Instances(); in[1].FreeGPUs != 0 || in[1].GPUType != "a100" {
		t.Fatalf("GPU worker after placement: %+v", in[1])
	}
	// A team's GPU quota.
	h.Complete(gpu, nil)
	h.Must(&SetTeam{Now: h.Tick(), Team: Team{Name: "ml", Projects: []string{"default"}, QuotaGPUs: map[string]int64{"a100": 2}}})
	r = h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 3, 1, gpu)}}).(*PlanResult)
	ti, _ := h.S.QueueByPath("ml")
	if r.Placed != 1 || ti.UsedGPUs["a100"] != 2 {
		t.Fatalf("placed %d, team uses %v", r.Placed, ti.UsedGPUs)
	}
	b2 := h.CreateBatch(entry(1, 1, sp))
	if r := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b2, 1, 1, gpu)}}).(*PlanResult); r.Placed != 0 {
		t.Fatal("a placement past the team's GPU quota was applied")
	}
	// Snapshots keep the GPUs.
	s := New()
	if err := s.Restore(strings.NewReader(string(SnapshotBytes(t, h.S)))); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s)
	if in := s.Instances(); in[1].GPUs != 4 || in[1].FreeGPUs != 2 {
		t.Fatalf("GPU worker after restore: %+v", in[1])
	}
}

// TestClusterGroupsAreDeclared: a cluster joins a group the config (or
// an earlier one) declares; an unknown group or strategy is refused, and
// pruning cannot leave a cluster in a group that no longer exists.
func TestClusterGroupsAreDeclared(t *testing.T) {
	h := newHarness(t)
	h.MustFail(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "a", Region: "east", Group: "gpu"}}}, ErrInvalid)
	h.MustFail(&ApplyPlacement{Now: h.Tick(), Groups: []ClusterGroup{{Name: "gpu", Strategy: "random"}}}, ErrInvalid)
	h.MustFail(&ApplyPlacement{Now: h.Tick(), Groups: []ClusterGroup{{Name: "gpu"}, {Name: "gpu"}}}, ErrInvalid)
	h.Must(&ApplyPlacement{Now: h.Tick(), Groups: []ClusterGroup{{Name: "gpu", Strategy: "pack"}}})
	// A later config may put a cluster in a group that exists.
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "a", Region: "east", Group: "gpu"}}})
	if gs, cs := h.S.ClusterGroups(), h.S.Clusters(); len(gs) != 1 || gs[0].Strategy != "pack" || cs[0].Group != "gpu" {
		t.Fatalf("groups %+v clusters %+v", gs, cs)
	}
	// Pruning the group while a cluster not in the config is in it.
	h.MustFail(&ApplyPlacement{Now: h.Tick(), Prune: true}, ErrConflict)
	// Declaring the cluster without it, the group goes.
	h.Must(&ApplyPlacement{Now: h.Tick(), Prune: true, Clusters: []Cluster{{Name: "a", Region: "east"}}})
	if gs := h.S.ClusterGroups(); len(gs) != 0 {
		t.Fatalf("groups after prune: %+v", gs)
	}
	if cs := h.S.Clusters(); cs[0].Group != "" {
		t.Fatalf("cluster a still in %q", cs[0].Group)
	}
}

func i64(v int64) *int64 { return &v }

// TestQueueTreeBoundsWhatItsSubtreeHolds: a queue's cap (guarantee and
// borrow_limit) and max_running bound what its leaves hold together; a
// batch names a leaf its project may use, or runs in its default; the
// tree and its use survive a snapshot and a replay.
func TestQueueTreeBoundsWhatItsSubtreeHolds(t *testing.T) {
	h := newHarness(t)
	w := h.activateIn("w", "east", "a", 32)
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "other", Members: []string{"root"}})
	org := Queue{Queue: placement.Queue{Path: "org", Guarantee: placement.Resources{CPUMilli: 6000}, BorrowLimit: placement.Limit{CPUMilli: i64(0)}}}
	proj := Queue{Queue: placement.Queue{Path: "org/proj"}}
	t1 := Queue{Queue: placement.Queue{Path: "org/proj/tier1", Limits: placement.QueueLimits{MaxRunningJobs: 2}}, AllowProjects: []string{"default"}}
	t3 := Queue{Queue: placement.Queue{Path: "org/proj/tier3"}, Projects: []string{"default"}}
	h.Must(&ApplyPlacement{Now: h.Tick(), Queues: []Queue{org, proj, t1, t3}, Prune: true})
	// A project may name only a leaf that lists it.
	h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "other", Queue: "org/proj/tier1", NJobs: 1}, ErrForbidden)
	h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Queue: "org/proj", NJobs: 1}, ErrInvalid)
	h.MustFail(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Queue: "nope", NJobs: 1}, ErrNotFound)
	urgent := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Queue: "org/proj/tier1", Priority: 5,
		Jobs: []JobEntry{entry(1, 4, spec("u", 1))}}).(*UpdateResult).Batch
	bulk := h.CreateBatch(entry(1, 8, spec("b", 1)))
	// tier1 holds at most 2 jobs (max_running); org 6 cores (its cap).
	res := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(urgent, 1, 4, w), place(bulk, 1, 8, w)}}).(*PlanResult)
	if res.Placed != 6 || res.Rejected != 6 {
		t.Fatalf("placed %d rejected %d; want tier1's 2 and tier3's 4 under org's 6 cores", res.Placed, res.Rejected)
	}
	for path, want := range map[string]int64{"org": 6000, "org/proj": 6000, "org/proj/tier1": 2000, "org/proj/tier3": 4000} {
		if qi, _ := h.S.QueueByPath(path); qi.UsedMilli != want || qi.UsedByCluster["a"] != want || qi.UsedJobs != want/1000 {
			t.Errorf("queue %s uses %d (%v, %d jobs), want %d", path, qi.UsedMilli, qi.UsedByCluster, qi.UsedJobs, want)
		}
	}
	if r, _ := h.S.Batch(urgent); r.Queue != "org/proj/tier1" || r.Priority != 5 {
		t.Fatalf("the urgent batch reads %+v", r)
	}
	if r, _ := h.S.Batch(bulk); r.Queue != "org/proj/tier3" || r.NamedQueue != "" {
		t.Fatalf("the bulk batch reads queue %q named %q, want its project's default", r.Queue, r.NamedQueue)
	}
	// A queue with children holds no projects; one with children cannot go.
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/proj"}, Projects: []string{"default"}}}, ErrInvalid)
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}}, Delete: true}, ErrConflict)
	// A child guaranteed more than its parent is refused.
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/big", Guarantee: placement.Resources{CPUMilli: 7000}}}}, ErrInvalid)
	for _, s := range []*State{h.Replay(), func() *State {
		s := New()
		if err := s.Restore(strings.NewReader(string(SnapshotBytes(t, h.S)))); err != nil {
			t.Fatal(err)
		}
		return s
	}()} {
		checkInvariants(t, s)
		qs := s.Queues()
		if len(qs) != 4 || qs[0].Path != "org" || qs[0].UsedMilli != 6000 || qs[0].Leaf || !qs[3].Leaf || qs[2].Limits.MaxRunningJobs != 2 {
			t.Fatalf("queues after restore: %+v", qs)
		}
		if r, _ := s.Batch(urgent); r.Queue != "org/proj/tier1" || r.Priority != 5 {
			t.Fatalf("the urgent batch after restore: %+v", r)
		}
	}
	// Pruning to one queue at the top leaves the batches in it.
	h.Must(&ApplyPlacement{Now: h.Tick(), Queues: []Queue{{Queue: placement.Queue{Path: "flat"}, Projects: []string{"default"}}}, Prune: true})
	if r, _ := h.S.Batch(urgent); r.Queue != "flat" {
		t.Fatalf("a batch whose queue went runs in %q, want its project's default", r.Queue)
	}
	checkInvariants(t, h.S)
}

// TestTeamsOfOldSnapshotsAreQueues: a snapshot written before queues holds
// teams; restored, each is a queue at the top whose guarantee is its quota
// with a borrow_limit of 0 for what the quota bounded, its projects and
// strategy, and what its running jobs hold counted again.
func TestTeamsOfOldSnapshotsAreQueues(t *testing.T) {
	h := newHarness(t)
	w := h.activateIn("w", "east", "a", 8)
	b := h.CreateBatch(entry(1, 3, spec("j", 1)))
	h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 3, w)}})
	var d snapState
	if err := codec.NewDecoderBytes(SnapshotBytes(t, h.S), msgpackHandle).Decode(&d); err != nil {
		t.Fatal(err)
	}
	d.Queues = nil
	d.Teams = []Team{{Name: "genomics", Projects: []string{"default"}, QuotaMilli: 4000, QuotaGPUs: map[string]int64{"a100": 2}, Strategy: "pack", Created: 7}}
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(&d); err != nil {
		t.Fatal(err)
	}
	s := New()
	if err := s.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s)
	q, ok := s.QueueByPath("genomics")
	quota := q.Quota()
	if !ok || q.Guarantee.CPUMilli != 4000 || quota.CPUMilli != 4000 || quota.Memory != 0 || quota.GPUs["a100"] != 2 ||
		q.Strategy != "pack" || q.Created != 7 || len(q.Projects) != 1 || q.UsedMilli != 3000 || q.UsedJobs != 3 || !q.Leaf {
		t.Fatalf("the team restored as %+v (quota %+v)", q, quota)
	}
}

// TestQueueRoutingTakesEffectAtOnce: a queue routed to home clusters has
// its new attempts refused elsewhere at apply (the scheduler's own rule),
// an inner queue's routing holds for its leaves, and a route changed by
// an operator holds from the next placement; running attempts stay.
func TestQueueRoutingTakesEffectAtOnce(t *testing.T) {
	h := newHarness(t)
	a := h.activateIn("wa", "east", "a", 8)
	bw := h.activateIn("wb", "west", "b", 8)
	h.Must(&ApplyPlacement{Now: h.Tick(), Queues: []Queue{
		{Queue: placement.Queue{Path: "org", HomeClusters: []string{"b"}}},
		{Queue: placement.Queue{Path: "org/leaf"}, Projects: []string{"default"}},
	}})
	b := h.CreateBatch(entry(1, 4, spec("j", 1)))
	res := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 2, a), place(b, 3, 1, bw)}}).(*PlanResult)
	if res.Placed != 1 || res.Rejected != 2 {
		t.Fatalf("placed %d rejected %d; only cluster b is the queue's home", res.Placed, res.Rejected)
	}
	// Routed to a: what runs in b stays; new attempts go to a only.
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org", HomeClusters: []string{"a"}}}})
	res = h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 1, bw), place(b, 2, 1, a)}}).(*PlanResult)
	if res.Placed != 1 || h.JobState(b, 3) != Running {
		t.Fatalf("after the route changed: placed %d, job 3 %s", res.Placed, h.JobState(b, 3))
	}
	if q, _ := h.S.QueueByPath("org/leaf"); len(q.HomeClusters) != 0 {
		t.Fatalf("the leaf names home clusters of its own: %v", q.HomeClusters)
	}
}
