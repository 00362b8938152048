package why

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/view"
)

// TestWaitReasonMessages: a round's unplaced runs are worded, each by the
// filter that rejected most of the workers it might use.
func TestWaitReasonMessages(t *testing.T) {
	since := time.Date(2026, 11, 23, 10, 2, 0, 0, time.UTC).UnixNano()
	in := &scheduler.Input{
		Clusters: []placement.Cluster{{Name: "a", Region: "r1"}, {Name: "b", Region: "r2", Disabled: true}},
		Instances: []scheduler.Instance{
			{ID: 1, CPUMilli: 64000, Memory: 64 << 30, Cluster: 0, Pool: "default"},
			{ID: 2, CPUMilli: 32000, Memory: 256 << 30, Cluster: 1, Pool: "highmem"},
		},
		Constraints: []placement.Constraint{{Regions: []string{"r1"}}, {Regions: []string{"r2"}}, {GPUType: "h100"}, {Labels: []string{"rack=r9"}}, {JobClusters: []string{"c9"}}},
		Queues:      []scheduler.Queue{{Name: "genomics", Parent: -1, Quota: placement.Quota{CPUMilli: 1_000_000, UsedMilli: 1_000_000}}},
		Now:         since,
		Projects:    []scheduler.Project{{Name: "lab", Budget: billing.Budget{Limit: 16 * money.Dollar, Accrued: 16_500_000_000}}},
		Launchable:  []scheduler.PoolSize{{Cluster: "a", Pool: "default", CPUMilli: 2000, Memory: 8 << 30}, {Cluster: "a", Pool: "default", CPUMilli: 8000, Memory: 32 << 30}},
	}
	clusters := []view.ClusterRecord{{Name: "a"}, {Name: "b", Reason: "maintenance", By: "ops", Since: since}}
	rc := func(pairs ...any) []scheduler.ReasonCount {
		var out []scheduler.ReasonCount
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, scheduler.ReasonCount{Reason: pairs[i].(scheduler.Reason), Instances: pairs[i+1].(int)})
		}
		return out
	}
	for _, c := range []struct {
		u          scheduler.Unplaced
		ahead      int
		code, want string
	}{
		{scheduler.Unplaced{CPUMilli: 96000, Memory: 1 << 30, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonCPUCapacity, 2)}}, 0,
			"cpu_capacity", "fits no worker: needs 96 cores; the largest has 64 cores"},
		{scheduler.Unplaced{CPUMilli: 96000, Memory: 1 << 40, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonCPUCapacity, 1, scheduler.ReasonMemoryCapacity, 1)}}, 0,
			"memory_capacity", "fits no worker: needs 96 cores and 1TiB memory; no worker has both (the largest have 64 cores and 256GiB)"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 40, Constraint: 1, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonMemoryCapacity, 1, scheduler.ReasonRegion, 1)}}, 0,
			"memory_capacity", "fits no worker in its regions r1: needs 1TiB memory; the largest offers 64GiB"},
		{scheduler.Unplaced{CPUMilli: 4000, Memory: 1 << 30, Why: scheduler.Explanation{Instances: 3, Filtered: rc(scheduler.ReasonCPUCapacity, 1, scheduler.ReasonCPUFree, 2)}}, 3,
			"fair_share", "waiting for fair share behind 3 users: none of the 2 workers large enough has 4 cores free"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 8 << 30, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonMemoryFree, 2)}}, 0,
			"memory_exhausted", "waiting for memory: none of the 2 workers large enough has 8GiB free"},
		{scheduler.Unplaced{CPUMilli: 4000, Memory: 1 << 30, Why: scheduler.Explanation{Instances: 3, Filtered: rc(scheduler.ReasonCPUFree, 1, scheduler.ReasonGangHeld, 2)}}, 2,
			"held_for_gang", "waiting for room: 2 of the 3 workers large enough have room for it only in what is held for a gang first in line, which starts once its workers have room for all its members"},
		{scheduler.Unplaced{CPUMilli: 8000, Memory: 1 << 30, Why: scheduler.Explanation{Instances: 4, Quota: scheduler.ReasonGang, Gang: 2, GangRoom: 1, Held: 2, HeldRoom: 1}}, 0,
			"gang_room", "its gang of 2 members starts together in one cluster it may use, or not at all: room is held for it on 2 workers, which other jobs may not take, and grows there as their jobs end (room for 1 of them now) (8 cores each)"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Constraint: 2, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonRegion, 1, scheduler.ReasonClusterDisabled, 1)}}, 0,
			"cluster_disabled", "cluster b disabled (maintenance, since 2026-11-23 10:02 UTC, by ops); no other cluster in its regions r2 has workers"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Queue: 1, Why: scheduler.Explanation{Instances: 2, Quota: scheduler.ReasonQuotaCPU, Queue: "genomics"}}, 0,
			"quota_cpu", "queue genomics at its cpu quota (1000 of 1000 cores)"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Queue: 1, Project: 1, Why: scheduler.Explanation{Instances: 2, Quota: scheduler.ReasonSpendLimit, Project: "lab"}}, 0,
			"spend_limit", "billing project lab reached its spend limit of $16.00 (spent $16.50)"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Constraint: 3, GPUs: 2, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonGPUCapacity, 2)}}, 0,
			"gpu_capacity", "fits no worker: needs 2 h100 GPUs; none of the 2 workers it may use has them"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Constraint: 3, GPUs: 1, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonGPUCapacity, 1, scheduler.ReasonGPUFree, 1)}}, 2,
			"fair_share", "waiting for fair share behind 2 users: none of the 1 workers large enough has 1 h100 GPUs free"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Constraint: 1, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonRegion, 2)}}, 0,
			"region_not_allowed", "no worker in its regions r1: the 2 active workers are elsewhere"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Constraint: 4, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonLabels, 2)}}, 0,
			"labels_mismatch", "no worker labelled rack=r9: of the 2 active workers, 2 lack a label it asks for or carry another value"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Constraint: 5, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonCluster, 2)}}, 0,
			"cluster_not_allowed", "no worker in its clusters c9: the 2 active workers are elsewhere (2 in clusters it does not name)"},
		{scheduler.Unplaced{CPUMilli: 1000, Memory: 1 << 30, Why: scheduler.Explanation{Instances: 2, Filtered: rc(scheduler.ReasonCPUFree, 1, scheduler.ReasonLeftForLarger, 1)}}, 2,
			"left_for_larger", "waiting for a machine its size: 1 worker at least twice its size is idle, left to larger jobs, while the autoscaler can launch a 2-core machine for it (a small job on a large machine keeps all of it paid for until the job ends)"},
	} {
		w := waiter{in: in, clusters: clusters, bigs: map[int32][2]int64{}}
		code, msg := w.reason(c.u, c.ahead)
		if code != c.code || msg != c.want {
			t.Errorf("reason(%+v) = %s %q, want %s %q", c.u.Why, code, msg, c.code, c.want)
		}
	}
}
