package placement

import (
	"iter"
	"slices"
	"testing"
)

// TestConstraintRules: the parts of the one constraint rule, as the
// scheduler's chain, apply's re-check, the state's reach of a constraint
// and the autoscaler call them, including a nil constraint (a run with
// none) and a job that needs no GPUs.
func TestConstraintRules(t *testing.T) {
	west := &Constraint{Regions: []string{"west", "north"}, Pool: "highmem"}
	gpu := &Constraint{GPUType: "a100"}
	var none *Constraint
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"nil allows any region", none.AllowsRegion("east"), true},
		{"nil allows any pool", none.AllowsPool("x"), true},
		{"nil allows any GPU type", none.AllowsGPUType("t4"), true},
		{"empty regions allow any", (&Constraint{}).AllowsRegion("east"), true},
		{"listed region", west.AllowsRegion("north"), true},
		{"unlisted region", west.AllowsRegion("east"), false},
		{"empty region name is not listed", west.AllowsRegion(""), false},
		{"its pool", west.AllowsPool("highmem"), true},
		{"another pool", west.AllowsPool("standard"), false},
		{"no GPUs needed: any type", west.AllowsGPUType("t4"), true},
		{"its GPU type", gpu.AllowsGPUType("a100"), true},
		{"another GPU type", gpu.AllowsGPUType("t4"), false},
		{"a worker without GPUs for a GPU job", gpu.AllowsGPUType(""), false},
		{"needs none: holds on any worker", gpu.HoldsGPUs(0, "", 0), true},
		{"enough of its type", gpu.HoldsGPUs(2, "a100", 4), true},
		{"exactly enough", gpu.HoldsGPUs(4, "a100", 4), true},
		{"too few", gpu.HoldsGPUs(5, "a100", 4), false},
		{"enough of another type", gpu.HoldsGPUs(1, "t4", 8), false},
		// A nil constraint names no type: only untyped GPUs serve it, as
		// the scheduler's chain always checked.
		{"nil constraint, GPUs needed, typed worker", none.HoldsGPUs(1, "a100", 8), false},
		{"nil constraint, GPUs needed, untyped worker", none.HoldsGPUs(1, "", 8), true},
		{"serves: region, pool and GPUs", (&Constraint{Regions: []string{"west"}, Pool: "g", GPUType: "a100"}).Serves("c", "west", "g", "a100", 8, 2, false), true},
		{"serves: wrong region", (&Constraint{Regions: []string{"west"}}).Serves("c", "east", "g", "", 0, 0, false), false},
		{"serves: wrong pool", west.Serves("c", "west", "standard", "", 0, 0, false), false},
		{"serves: too few GPUs", gpu.Serves("c", "east", "g", "a100", 1, 2, false), false},
		{"serves: nil constraint", none.Serves("c", "east", "any", "", 0, 0, false), true},
		{"serves: a home cluster", (&Constraint{Clusters: []string{"c", "d"}}).Serves("d", "east", "any", "", 0, 0, false), true},
		{"serves: not a home cluster", (&Constraint{Clusters: []string{"c"}}).Serves("d", "east", "any", "", 0, 0, false), false},
		{"no home clusters: any", (&Constraint{}).AllowsCluster("x"), true},
		{"serves: on-demand for a job kept off spot", (&Constraint{NoSpot: true}).Serves("c", "east", "any", "", 0, 0, false), true},
		{"serves: not spot for a job kept off spot", (&Constraint{NoSpot: true}).Serves("c", "east", "any", "", 0, 0, true), false},
		{"serves: spot for any other job", none.Serves("c", "east", "any", "", 0, 0, true), true},
		{"admits: not spot for a job kept off spot", (&Constraint{NoSpot: true}).Admits(&Cluster{Name: "c", Region: "east"}, "any", nil, true) == ReasonSpot, true},
		{"admits: on-demand for a job kept off spot", (&Constraint{NoSpot: true}).Admits(&Cluster{Name: "c", Region: "east"}, "any", nil, false) == 0, true},
		{"keys: kept off spot is another constraint", (&Constraint{NoSpot: true}).Key() != (&Constraint{}).Key() && !(&Constraint{NoSpot: true}).Empty(), true},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestAdmitsOrder: Admits names the constraint's refusals before the
// cluster's state, region before pool, disabled before down; a nil
// constraint is judged by the cluster alone.
func TestAdmitsOrder(t *testing.T) {
	k := &Constraint{Regions: []string{"west"}, Pool: "p"}
	var none *Constraint
	for _, c := range []struct {
		name    string
		k       *Constraint
		cluster Cluster
		pool    string
		want    Reason
	}{
		{"region first", k, Cluster{Region: "east", Disabled: true, Down: true}, "q", ReasonRegion},
		{"home clusters after the region", &Constraint{Regions: []string{"west"}, Pool: "p", Clusters: []string{"h"}}, Cluster{Name: "x", Region: "west", Disabled: true}, "q", ReasonNotHome},
		{"a home cluster", &Constraint{Clusters: []string{"h"}}, Cluster{Name: "h", Region: "west"}, "p", 0},
		{"pool before the cluster", k, Cluster{Region: "west", Disabled: true}, "q", ReasonPool},
		{"disabled before down", k, Cluster{Region: "west", Disabled: true, Down: true}, "p", ReasonDisabled},
		{"down", k, Cluster{Region: "west", Down: true}, "p", ReasonDown},
		{"admitted", k, Cluster{Region: "west"}, "p", 0},
		{"nil constraint, enabled", none, Cluster{Region: "east"}, "any", 0},
		{"nil constraint, disabled", none, Cluster{Region: "east", Disabled: true}, "any", ReasonDisabled},
		{"the job's clusters after the region", &Constraint{Regions: []string{"west"}, JobClusters: []string{"j"}, Clusters: []string{"x"}}, Cluster{Name: "x", Region: "west", Disabled: true}, "q", ReasonCluster},
		{"a cluster the job names", &Constraint{JobClusters: []string{"j"}}, Cluster{Name: "j", Region: "west"}, "p", 0},
		{"labels after the pool, before the cluster", &Constraint{Pool: "p", Labels: []string{"rack=r1"}}, Cluster{Region: "west", Disabled: true}, "p", ReasonLabels},
	} {
		if got := c.k.Admits(&c.cluster, c.pool, nil, false); got != c.want {
			t.Errorf("%s: Admits %v, want %v", c.name, got, c.want)
		}
		if c.want != ReasonPool && c.want != ReasonLabels {
			if got := c.k.AdmitsCluster(&c.cluster); got != c.want {
				t.Errorf("%s: AdmitsCluster %v, want %v", c.name, got, c.want)
			}
		}
	}
}

// TestQuotaAdmitAndExplain: the one quota rule and its words. The cases
// at the end are where the copies disagreed: apply's own check refused a
// job of size zero for a team over its quota (a quota lowered below its
// use) while the scheduler admitted it; job why never named a GPU quota
// and checked cores before GPUs, while the round checks GPUs first.
func TestQuotaAdmitAndExplain(t *testing.T) {
	q := Quota{CPUMilli: 4000, Memory: 8 << 30, UsedMilli: 3000, UsedMemory: 6 << 30,
		GPUs: map[string]int64{"a100": 4}, UsedGPUs: map[string]int64{"a100": 3}}
	over := Quota{CPUMilli: 1000, Memory: 1 << 30, UsedMilli: 2000, UsedMemory: 2 << 30}
	for _, c := range []struct {
		name     string
		q        Quota
		cpu, mem int64
		gpuType  string
		gpus     int64
		want     Reason
		words    string
	}{
		{"fits exactly", q, 1000, 2 << 30, "", 0, 0, ""},
		{"one millicore too many", q, 1001, 1 << 30, "", 0, ReasonQuotaCPU, "queue t at its cpu quota (3 of 4 cores)"},
		{"memory", q, 500, 3 << 30, "", 0, ReasonQuotaMemory, "queue t at its memory quota (6GiB of 8GiB)"},
		{"cpu before memory", q, 2000, 3 << 30, "", 0, ReasonQuotaCPU, "queue t at its cpu quota (3 of 4 cores)"},
		{"last GPU", q, 100, 1 << 20, "a100", 1, 0, ""},
		{"GPUs before cpu", q, 2000, 1 << 20, "a100", 2, ReasonQuotaGPU, "queue t at its a100 GPU quota (3 of 4)"},
		{"a GPU type the quota does not name", q, 100, 1 << 20, "t4", 8, 0, ""},
		{"no quota at all", Quota{UsedMilli: 1 << 40}, 1 << 30, 1 << 40, "a100", 64, 0, ""},
		{"over quota, a real job", over, 1, 1, "", 0, ReasonQuotaCPU, "queue t at its cpu quota (2 of 1 cores)"},
		{"over quota, zero size: nothing to add", over, 0, 0, "", 0, 0, ""},
		{"max_running jobs before the quota", Quota{MaxJobs: 2, UsedJobs: 2, CPUMilli: 1}, 5, 0, "", 0, ReasonMaxRunning, "queue t at max_running (2 of 2 jobs)"},
		{"max_running cores", Quota{MaxJobs: 5, UsedJobs: 2, MaxMilli: 4000, UsedMilli: 3500}, 1000, 0, "", 0, ReasonMaxRunning, "queue t at max_running (3.5 of 4 cores)"},
		{"under max_running", Quota{MaxJobs: 5, UsedJobs: 4, MaxMilli: 4000, UsedMilli: 3000}, 1000, 0, "", 0, 0, ""},
	} {
		n, got := c.q.RoomGPU(c.cpu, c.mem, c.gpuType, c.gpus, 1)
		if got != c.want || (n == 0) != (got != 0) {
			t.Errorf("%s: RoomGPU %d %v, want %v", c.name, n, got, c.want)
			continue
		}
		if got != 0 {
			if w := c.q.Explain("t", got, c.gpuType); w != c.words {
				t.Errorf("%s: Explain %q, want %q", c.name, w, c.words)
			}
		}
		// A path of one queue is the queue's own rule.
		q := c.q
		if n, why, depth := PathRoom(one(&q), Size{c.cpu, c.mem, c.gpuType, c.gpus}, 1); why != got || (n == 0) != (got != 0) || (got != 0) != (depth == 0) {
			t.Errorf("%s: PathRoom %d %v at %d disagrees with RoomGPU %v", c.name, n, why, depth, got)
		}
	}
	if w := q.Explain("t", ReasonRegion, ""); w != "queue t at its quota" {
		t.Errorf("a reason that is not a quota's: %q", w)
	}
}

func one(q *Quota) iter.Seq[*Quota] { return slices.Values([]*Quota{q}) }

// TestPathRoom: the queue rule along a path is the tightest of its
// queues', names the first queue (leaf first) that refuses, and a charge
// along the path is seen by every queue on it and taken back exactly.
func TestPathRoom(t *testing.T) {
	leaf := Quota{CPUMilli: 8000}
	mid := Quota{Memory: 4 << 30, GPUs: map[string]int64{"a100": 2}}
	top := Quota{MaxJobs: 5, UsedJobs: 1}
	path := slices.Values([]*Quota{&leaf, &mid, &top})
	sz := Size{CPUMilli: 1000, Memory: 1 << 30}
	if n, why, at := PathRoom(path, sz, 100); n != 4 || why != 0 || at != -1 {
		t.Fatalf("room %d %v at %d, want 4 (the top's max_running, then mid's memory)", n, why, at)
	}
	PathCharge(path, sz, 3)
	if leaf.UsedMilli != 3000 || mid.UsedMemory != 3<<30 || top.UsedJobs != 4 {
		t.Fatalf("charge: leaf %d mid %d top %d", leaf.UsedMilli, mid.UsedMemory, top.UsedJobs)
	}
	if n, _, _ := PathRoom(path, sz, 100); n != 1 {
		t.Fatalf("room after the charge %d, want 1", n)
	}
	PathCharge(path, sz, 1)
	if n, why, at := PathRoom(path, sz, 100); n != 0 || why != ReasonQuotaMemory || at != 1 {
		t.Fatalf("full: %d %v at %d, want 0 memory at 1 (mid)", n, why, at)
	}
	gpu := Size{CPUMilli: 100, GPUType: "a100", GPUs: 2}
	if n, why, at := PathRoom(path, gpu, 1); n != 0 || why != ReasonMaxRunning || at != 2 {
		t.Fatalf("a job of no memory, past mid: %d %v at %d, want 0 max_running at 2 (top)", n, why, at)
	}
	PathCharge(path, sz, -4)
	if leaf.UsedMilli != 0 || mid.UsedMemory != 0 || top.UsedJobs != 1 {
		t.Fatalf("taken back: leaf %d mid %d top %d", leaf.UsedMilli, mid.UsedMemory, top.UsedJobs)
	}
	if n, why, at := PathRoom(path, Size{CPUMilli: 100, Memory: 1, GPUType: "a100", GPUs: 1}, 100); n != 2 || why != 0 || at != -1 {
		t.Fatalf("gpu room %d %v at %d, want 2", n, why, at)
	}
	PathCharge(path, gpu, 1)
	if n, why, at := PathRoom(path, gpu, 1); n != 0 || why != ReasonQuotaGPU || at != 1 {
		t.Fatalf("gpus used: %d %v at %d, want 0 quota_gpu at 1", n, why, at)
	}
	if n, _, _ := PathRoom(slices.Values([]*Quota(nil)), sz, 7); n != 7 {
		t.Fatalf("an empty path bounds nothing: %d", n)
	}
}
