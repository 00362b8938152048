package scheduler

import (
	"fmt"
	"testing"

	"github.com/drover-sched/drover/placement"
)

// twoRegions: clusters a (east) and b (west), two 8-core workers each.
func twoRegions() *Input {
	in := NewInput().
		Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).Build()
	in.Instances[2].Cluster, in.Instances[3].Cluster = 1, 1
	in.Clusters = []placement.Cluster{{Name: "a", Region: "east"}, {Name: "b", Region: "west"}}
	for i, inst := range in.Instances {
		c := &in.Clusters[inst.Cluster]
		c.CapacityMilli += inst.CPUMilli
		c.FreeMilli += in.Instances[i].FreeMilli
	}
	return in
}

func placedOn(out *Output, in *Input) map[string]int {
	byID := map[uint32]int32{}
	for _, inst := range in.Instances {
		byID[inst.ID] = inst.Cluster
	}
	m := map[string]int{}
	for _, p := range out.Placements {
		m[in.Clusters[byID[p.Instance]].Name] += int(p.Count)
	}
	return m
}

func TestScheduleKeepsOutOfDisabledClustersAndSaysWhy(t *testing.T) {
	in := twoRegions()
	in.Clusters[1].Disabled = true
	in.Users = []User{{Name: "u", ReadyMilli: Cores(64), Runs: []Run{NewRun(1, 1, 64, Cores(1), GiB)}}}
	out := Schedule(in)
	if got := placedOn(out, in); got["b"] != 0 || got["a"] != 16 {
		t.Fatalf("placed %v; want 16 in a and none in disabled b", got)
	}
	// A job that may only run in the disabled cluster's region is told so.
	in = twoRegions()
	in.Clusters[1].Disabled = true
	in.Constraints = []placement.Constraint{{Regions: []string{"west"}}}
	run := NewRun(1, 1, 4, Cores(1), GiB)
	run.Constraint = 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(4), Runs: []Run{run}}}
	out = Schedule(in)
	if len(out.Placements) != 0 || len(out.Unplaced) != 1 {
		t.Fatalf("placements %v unplaced %v", out.Placements, out.Unplaced)
	}
	why := out.Unplaced[0].Why
	if why.Count(ReasonRegion) != 2 || why.Count(ReasonClusterDisabled) != 2 {
		t.Fatalf("explanation %+v; want 2 instances outside the region, 2 in a disabled cluster", why)
	}
}

func TestScheduleHonoursRegionsAndPools(t *testing.T) {
	in := twoRegions()
	in.Instances[3].Pool = "highmem"
	in.Constraints = []placement.Constraint{{Regions: []string{"east"}}, {Pool: "highmem"}}
	east, high := NewRun(1, 1, 32, Cores(1), GiB), NewRun(2, 1, 32, Cores(1), GiB)
	east.Constraint, high.Constraint = 1, 2
	in.Users = []User{{Name: "u", ReadyMilli: Cores(64), Runs: []Run{east, high}}}
	out := Schedule(in)
	for _, p := range out.Placements {
		if p.Batch == 1 && p.Instance > 2 {
			t.Fatalf("an east-only job went to instance %d (west)", p.Instance)
		}
		if p.Batch == 2 && p.Instance != 4 {
			t.Fatalf("a highmem job went to instance %d, not the highmem worker", p.Instance)
		}
	}
	if out.Jobs != 24 {
		t.Fatalf("placed %d jobs, want 16 east + 8 highmem", out.Jobs)
	}
}

// TestScheduleHonoursWorkerLabels: a job that asks for labels goes only to
// the workers that carry them all, with their values; when none has room,
// the explanation counts the others as labels_mismatch.
func TestScheduleHonoursWorkerLabels(t *testing.T) {
	in := twoRegions()
	in.Instances[1].Labels = map[string]string{"rack": "r1", "ssd": "true"}
	in.Instances[2].Labels = map[string]string{"rack": "r1"}
	in.Instances[3].Labels = map[string]string{"rack": "r2", "ssd": "true"}
	in.Constraints = []placement.Constraint{{Labels: []string{"rack=r1", "ssd=true"}}}
	run := NewRun(1, 1, 32, Cores(1), GiB)
	run.Constraint = 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(32), Runs: []Run{run}}}
	out := Schedule(in)
	for _, p := range out.Placements {
		if p.Instance != in.Instances[1].ID {
			t.Fatalf("a job that asks for rack=r1, ssd=true went to instance %d (labels %v)", p.Instance, in.Instances[p.Instance-1].Labels)
		}
	}
	if out.Jobs != int(Cores(8)/Cores(1)) {
		t.Fatalf("placed %d jobs, want the labelled worker's 8", out.Jobs)
	}
	if len(out.Unplaced) != 1 {
		t.Fatalf("unplaced %+v", out.Unplaced)
	}
	if why := out.Unplaced[0].Why; why.Count(ReasonLabels) != 3 {
		t.Fatalf("explanation %+v; want the 3 other workers counted as labels_mismatch", why)
	}
}

// TestScheduleKeepsJobsOffSpot: a job kept off spot machines goes only to
// the workers that are not spot; others take spot workers too; when no
// on-demand worker has room, the explanation counts the spot ones as
// spot_excluded.
func TestScheduleKeepsJobsOffSpot(t *testing.T) {
	in := twoRegions()
	for i := range in.Instances {
		in.Instances[i].Spot = i != 2
	}
	in.Constraints = []placement.Constraint{{NoSpot: true}}
	off, any := NewRun(1, 1, 32, Cores(1), GiB), NewRun(2, 1, 32, Cores(1), GiB)
	off.Constraint = 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(64), Runs: []Run{off, any}}}
	out := Schedule(in)
	placed := map[uint64]int{}
	for _, p := range out.Placements {
		if p.Batch == 1 && p.Instance != in.Instances[2].ID {
			t.Fatalf("a job kept off spot went to instance %d (spot)", p.Instance)
		}
		placed[p.Batch] += int(p.Count)
	}
	if placed[1] != 8 || placed[2] == 0 {
		t.Fatalf("placed %v; want the on-demand worker's 8 of the job kept off spot, and the other job on spot", placed)
	}
	var why *Explanation
	for i := range out.Unplaced {
		if out.Unplaced[i].Batch == 1 {
			why = &out.Unplaced[i].Why
		}
	}
	if why == nil || why.Count(ReasonSpot) != 3 {
		t.Fatalf("explanation %+v; want the 3 spot workers counted as spot_excluded", why)
	}
}

// TestScheduleHonoursJobClusters: a job that names clusters runs only in
// them.
func TestScheduleHonoursJobClusters(t *testing.T) {
	in := twoRegions()
	in.Constraints = []placement.Constraint{{JobClusters: []string{"b"}}}
	run := NewRun(1, 1, 32, Cores(1), GiB)
	run.Constraint = 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(32), Runs: []Run{run}}}
	out := Schedule(in)
	if got := placedOn(out, in); got["a"] != 0 || got["b"] != 16 {
		t.Fatalf("placed %v; want 16 in b, none in a", got)
	}
	if len(out.Unplaced) != 1 || out.Unplaced[0].Why.Count(ReasonCluster) != 2 {
		t.Fatalf("unplaced %+v; want cluster a's 2 workers counted as cluster_not_allowed", out.Unplaced)
	}
}

func TestScheduleNeverPassesAQuota(t *testing.T) {
	in := twoRegions()
	in.Queues = []Queue{{Parent: -1, Name: "genomics", Quota: placement.Quota{CPUMilli: Cores(10), UsedMilli: Cores(4), UsedByCluster: []int64{Cores(4), 0}}}}
	r := NewRun(1, 1, 20, Cores(1), GiB)
	r.Queue = 1
	other := NewRun(2, 1, 20, Cores(1), GiB)
	in.Users = []User{{Name: "g", ReadyMilli: Cores(20), Runs: []Run{r}}, {Name: "o", ReadyMilli: Cores(20), Runs: []Run{other}}}
	out := Schedule(in)
	var team, rest int
	for _, p := range out.Placements {
		if p.Batch == 1 {
			team += int(p.Count)
		} else {
			rest += int(p.Count)
		}
	}
	if team != 6 {
		t.Fatalf("the team was given %d cores; its quota leaves 6", team)
	}
	if rest != 20 {
		t.Fatalf("the user in no team got %d jobs, want all 20 (the cores the quota leaves idle are theirs)", rest)
	}
	var quota *Unplaced
	for i := range out.Unplaced {
		if out.Unplaced[i].Batch == 1 {
			quota = &out.Unplaced[i]
		}
	}
	if quota == nil || quota.Why.Quota != ReasonQuotaCPU || quota.Why.Queue != "genomics" {
		t.Fatalf("the team's waiting jobs are not explained by its quota: %+v", out.Unplaced)
	}
}

func TestScheduleSpreadsATeamOverClusters(t *testing.T) {
	in := twoRegions()
	in.Queues = []Queue{{Parent: -1, Name: "t", Strategy: placement.Spread, Quota: placement.Quota{UsedByCluster: []int64{0, 0}}}}
	r := NewRun(1, 1, 16, Cores(1), GiB)
	r.Queue = 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(16), Runs: []Run{r}}}
	out := Schedule(in)
	if got := placedOn(out, in); got["a"] != 8 || got["b"] != 8 {
		t.Fatalf("spread placed %v; want 8 and 8", got)
	}
	// pack fills one cluster before the other.
	in = twoRegions()
	in.Queues = []Queue{{Parent: -1, Name: "t", Strategy: placement.Pack, Quota: placement.Quota{UsedByCluster: []int64{0, 0}}}}
	in.Instances[2].FreeMilli = Cores(4)
	in.Clusters[1].FreeMilli -= Cores(4)
	in.Users = []User{{Name: "u", ReadyMilli: Cores(16), Runs: []Run{r}}}
	out = Schedule(in)
	if got := placedOn(out, in); got["b"] != 12 || got["a"] != 4 {
		t.Fatalf("pack placed %v; want b (the busier) filled first: 12 there, 4 in a", got)
	}
}

func TestScheduleGPUJobsOnlyWhereTheirGPUsAre(t *testing.T) {
	in := twoRegions()
	in.Instances[1].GPUType, in.Instances[1].GPUs, in.Instances[1].FreeGPUs = "a100", 4, 4
	in.Instances[3].GPUType, in.Instances[3].GPUs, in.Instances[3].FreeGPUs = "t4", 8, 8
	in.Constraints = []placement.Constraint{{GPUType: "a100"}, {GPUType: "h100"}}
	a100 := NewRun(1, 1, 5, Cores(1), GiB)
	a100.Constraint, a100.GPUs = 1, 1
	h100 := NewRun(2, 1, 1, Cores(1), GiB)
	h100.Constraint, h100.GPUs = 2, 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(6), Runs: []Run{a100, h100}}}
	out := Schedule(in)
	placed := 0
	for _, p := range out.Placements {
		if p.Batch == 1 {
			if p.Instance != 2 {
				t.Fatalf("an a100 job went to instance %d", p.Instance)
			}
			placed += int(p.Count)
		}
		if p.Batch == 2 {
			t.Fatal("an h100 job was placed; no worker has h100s")
		}
	}
	if placed != 4 {
		t.Fatalf("placed %d a100 jobs on a 4-GPU worker, want 4", placed)
	}
	var why map[uint64]Explanation = map[uint64]Explanation{}
	for _, u := range out.Unplaced {
		why[u.Batch] = u.Why
	}
	if e := why[2]; e.Count(ReasonGPUCapacity) != 4 {
		t.Fatalf("h100 explanation %+v, want every worker ruled out for GPUs", e)
	}
	if e := why[1]; e.Count(ReasonGPUFree) != 1 {
		t.Fatalf("fifth a100 job explanation %+v, want its worker's GPUs taken", e)
	}
	// A team's GPU quota bounds it too.
	in = twoRegions()
	in.Instances[1].GPUType, in.Instances[1].GPUs, in.Instances[1].FreeGPUs = "a100", 4, 4
	in.Constraints = []placement.Constraint{{GPUType: "a100"}}
	in.Queues = []Queue{{Parent: -1, Name: "ml", Quota: placement.Quota{GPUs: map[string]int64{"a100": 3}, UsedGPUs: map[string]int64{"a100": 1}}}}
	a100.Queue = 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(5), Runs: []Run{a100}}}
	out = Schedule(in)
	if out.Jobs != 2 || len(out.Unplaced) != 1 || out.Unplaced[0].Why.Quota != ReasonQuotaGPU {
		t.Fatalf("placed %d with quota room for 2; unplaced %+v", out.Jobs, out.Unplaced)
	}
}

// TestScheduleSpreadsATeamAtItsQuota: an array larger than the team's
// quota is spread evenly over the clusters, not placed where it was first
// tried until the quota ran out.
func TestScheduleSpreadsATeamAtItsQuota(t *testing.T) {
	in := twoRegions()
	in.Queues = []Queue{{Parent: -1, Name: "t", Strategy: placement.Spread, Quota: placement.Quota{CPUMilli: Cores(8), UsedByCluster: []int64{0, 0}}}}
	r := NewRun(1, 1, 500, Cores(0.5), GiB/4)
	r.Queue = 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(250), Runs: []Run{r}}}
	out := Schedule(in)
	if got := placedOn(out, in); got["a"] != 8 || got["b"] != 8 {
		t.Fatalf("spread at quota placed %v; want 8 jobs (4 cores) in each cluster", got)
	}
}

// TestScheduleGroupStrategyInsideTeamSpread: clusters a and b form a
// group that packs; c is in none. A spreading team balances its use per
// cluster between the group and c, and inside the group fills a before
// it touches b.
func TestScheduleGroupStrategyInsideTeamSpread(t *testing.T) {
	in := NewInput().
		Instance(1, Cores(8), 32*GiB).Instance(2, Cores(8), 32*GiB).
		Instance(3, Cores(8), 32*GiB).Instance(4, Cores(8), 32*GiB).
		Instance(5, Cores(8), 32*GiB).Instance(6, Cores(8), 32*GiB).Build()
	in.Clusters = []placement.Cluster{{Name: "a", Group: 1}, {Name: "b", Group: 1}, {Name: "c"}}
	in.Groups = []placement.Group{{Name: "g", Strategy: placement.Pack}}
	for i := range in.Instances {
		in.Instances[i].Cluster = int32(i / 2)
		c := &in.Clusters[i/2]
		c.CapacityMilli += in.Instances[i].CPUMilli
		c.FreeMilli += in.Instances[i].FreeMilli
	}
	in.Queues = []Queue{{Parent: -1, Name: "t", Strategy: placement.Spread, Quota: placement.Quota{UsedByCluster: []int64{0, 0, 0}}}}
	r := NewRun(1, 1, 24, Cores(1), GiB)
	r.Queue = 1
	in.Users = []User{{Name: "u", ReadyMilli: Cores(24), Runs: []Run{r}}}
	out := Schedule(in)
	if got := placedOn(out, in); got["a"] != 16 || got["b"] != 0 || got["c"] != 8 {
		t.Fatalf("placed %v; want 8 in c (the team's use per cluster even between c and the group) and the group's 16 packed into a", got)
	}
	// Without the group, the team spreads over the three clusters.
	in.Groups = nil
	for i := range in.Clusters {
		in.Clusters[i].Group = 0
	}
	out = Schedule(in)
	if got := placedOn(out, in); got["a"] != 8 || got["b"] != 8 || got["c"] != 8 {
		t.Fatalf("placed %v without groups; want 8 in each", got)
	}
}

// queueInput is a fleet of 8 workers of 10 cores and a user per leaf of
// tree, each with more 1-core jobs Ready than the fleet holds.
func queueInput(tree []Queue, leaves ...int32) *Input {
	in := &Input{Queues: tree}
	for i := range 8 {
		in.Instances = append(in.Instances, Instance{ID: uint32(i + 1), FreeMilli: Cores(10), FreeMem: 100 * GiB})
	}
	for k, leaf := range leaves {
		r := NewRun(uint64(k+1), 1, 200, Cores(1), GiB)
		r.Queue = leaf
		in.Users = append(in.Users, User{Name: fmt.Sprintf("u%d", k), ReadyMilli: Cores(200), Runs: []Run{r}, Queue: leaf})
	}
	return in
}

func placedPerBatch(out *Output) map[uint64]int64 {
	got := map[uint64]int64{}
	for _, p := range out.Placements {
		got[p.Batch] += int64(p.Count)
	}
	return got
}

// TestScheduleSharesDownTheTree: a saturated round gives each queue its
// weighted share, level by level, and a queue's guarantee first.
func TestScheduleSharesDownTheTree(t *testing.T) {
	tree := []Queue{
		{Name: "org", Parent: -1, Weight: 1},
		{Name: "org/tier1", Parent: 0, Weight: 3},
		{Name: "org/tier3", Parent: 0, Weight: 1},
		{Name: "other", Parent: -1, Weight: 1},
	}
	got := placedPerBatch(Schedule(queueInput(tree, 2, 3, 4)))
	// 80 cores: org 40 (tier1 30, tier3 10), other 40.
	if got[1] != 30 || got[2] != 10 || got[3] != 40 {
		t.Fatalf("placed %v, want tier1 30, tier3 10, other 40", got)
	}
	// A guarantee of 60 cores to other comes before the weights.
	tree[3].Guarantee = placement.Resources{CPUMilli: Cores(60)}
	got = placedPerBatch(Schedule(queueInput(tree, 2, 3, 4)))
	if got[3] != 60 || got[1] != 15 || got[2] != 5 {
		t.Fatalf("placed %v, want other's guarantee of 60, then tier1 15 and tier3 5", got)
	}
	// max_running caps a queue; what it leaves goes to the others.
	tree[3].Guarantee = placement.Resources{}
	tree[1].Quota.MaxJobs = 4
	got = placedPerBatch(Schedule(queueInput(tree, 2, 3, 4)))
	if got[1] != 4 || got[1]+got[2]+got[3] != 80 {
		t.Fatalf("placed %v, want tier1 at its max_running of 4 and the fleet full", got)
	}
}

// TestSchedulePriorityKeepsFairShareBetweenUsers: in a shared leaf a
// higher priority orders a user's own work and never takes another
// user's fair share (issue 41: a member's priority 1,000,000 took every
// slot of the leaf); what a user leaves goes to the other; a user's
// entries of several priorities weigh as one user; another leaf's share
// is untouched; and so without queues.
func TestSchedulePriorityKeepsFairShareBetweenUsers(t *testing.T) {
	type entry struct {
		user  string
		prio  int32
		batch uint64
		jobs  uint32
	}
	two := []Queue{{Name: "a", Parent: -1}, {Name: "b", Parent: -1}}
	for _, c := range []struct {
		name    string
		tree    []Queue // nil: no queues
		entries []entry // in leaf a (queue 1); with a tree, b's user asks 200 cores as batch 9
		want    map[uint64]int64
	}{
		{"a higher priority takes no more than its fair share", two,
			[]entry{{"u0", 0, 1, 200}, {"u1", 10, 2, 200}}, map[uint64]int64{1: 20, 2: 20, 9: 40}},
		{"the issue's priority", two,
			[]entry{{"u0", 0, 1, 200}, {"u1", 1_000_000, 2, 200}}, map[uint64]int64{1: 20, 2: 20, 9: 40}},
		{"what one user leaves goes to the other", two,
			[]entry{{"u0", 0, 1, 200}, {"u1", 10, 2, 5}}, map[uint64]int64{1: 35, 2: 5, 9: 40}},
		{"a user's higher priority goes first within its share", two,
			[]entry{{"u0", 0, 1, 200}, {"u1", 0, 2, 200}, {"u1", 10, 3, 30}}, map[uint64]int64{1: 20, 3: 20, 9: 40}},
		{"a user's priorities weigh as one user", two,
			[]entry{{"u0", 0, 1, 200}, {"u1", 0, 2, 200}, {"u1", -1, 3, 200}, {"u1", -2, 4, 200}}, map[uint64]int64{1: 20, 2: 20, 9: 40}},
		{"without queues", nil,
			[]entry{{"u0", 0, 1, 200}, {"u1", 1_000_000, 2, 200}, {"u1", -1, 3, 200}}, map[uint64]int64{1: 40, 2: 40}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := &Input{Queues: c.tree}
			for i := range 8 {
				in.Instances = append(in.Instances, Instance{ID: uint32(i + 1), FreeMilli: Cores(10), FreeMem: 100 * GiB})
			}
			var leaf int32
			if c.tree != nil {
				leaf = 1
				r := NewRun(9, 1, 200, Cores(1), GiB)
				r.Queue = 2
				in.Users = append(in.Users, User{Name: "other", ReadyMilli: Cores(200), Runs: []Run{r}, Queue: 2})
			}
			for _, e := range c.entries {
				r := NewRun(e.batch, 1, e.jobs, Cores(1), GiB)
				r.Queue = leaf
				in.Users = append(in.Users, User{Name: e.user, ReadyMilli: Cores(float64(e.jobs)), Runs: []Run{r}, Queue: leaf, Priority: e.prio})
			}
			got := placedPerBatch(Schedule(in))
			for b, want := range c.want {
				if got[b] != want {
					t.Fatalf("placed %v, want %v", got, c.want)
				}
			}
			var sum int64
			for _, n := range got {
				sum += n
			}
			if sum != 80 {
				t.Fatalf("placed %v: %d jobs, want the fleet's 80", got, sum)
			}
		})
	}
}

// TestScheduleKeepsWhatAQueueDoesNotLend: a queue with no work keeps the
// idle guarantee beyond its lend limit free: its sibling, flooding, gets
// the fleet less that, in every pass; with work of its own, the queue
// takes it.
func TestScheduleKeepsWhatAQueueDoesNotLend(t *testing.T) {
	lend := Cores(10)
	tree := []Queue{
		{Name: "owner", Parent: -1, Guarantee: placement.Resources{CPUMilli: Cores(40)}, Lend: placement.Limit{CPUMilli: &lend}},
		{Name: "other", Parent: -1},
	}
	got := placedPerBatch(Schedule(queueInput(tree, 2)))
	if got[1] != 80-30 {
		t.Fatalf("the borrower placed %d jobs, want 50: 30 of the owner's idle guarantee are not lent", got[1])
	}
	got = placedPerBatch(Schedule(queueInput(tree, 2, 1)))
	if got[1]+got[2] != 80 || got[2] < 40 {
		t.Fatalf("placed %v, want the fleet full and the owner's guarantee its own", got)
	}
}
