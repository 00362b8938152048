package why

import (
	"fmt"
	"strings"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/view"
)

// Round turns a round's unplaced runs into the reasons per batch that
// batch and job status show.
func Round(out *scheduler.Output, in *scheduler.Input, clusters []view.ClusterRecord) map[uint64][]api.Waiting {
	if len(out.Unplaced) == 0 {
		return nil
	}
	ahead := make(map[string]int, len(out.Users))
	for _, u := range out.Users {
		ahead[u.Name] = u.Ahead
	}
	w := waiter{in: in, queues: out.Queues, clusters: clusters, bigs: map[int32][2]int64{}}
	m := map[uint64][]api.Waiting{}
	for _, u := range out.Unplaced {
		if len(m[u.Batch]) >= maxWaitingPerBatch {
			continue
		}
		reason, msg := w.reason(u, ahead[u.User])
		m[u.Batch] = append(m[u.Batch], api.Waiting{FirstJob: int64(u.First), Count: int64(u.Count), Reason: reason, Message: msg})
	}
	return m
}

// waiter words the reasons of one round.
type waiter struct {
	in *scheduler.Input
	// queues with their use as the round left it (nil: the input's).
	queues   []scheduler.Queue
	clusters []view.ClusterRecord
	bigs     map[int32][2]int64 // per constraint, the largest cores and memory of a worker it allows
}

func (w *waiter) constraint(u *scheduler.Unplaced) *placement.Constraint {
	if u.Constraint <= 0 || int(u.Constraint) > len(w.in.Constraints) {
		return nil
	}
	return &w.in.Constraints[u.Constraint-1]
}

// largest returns the cores and memory of the largest workers the run's
// constraint allows, in enabled clusters or not.
func (w *waiter) largest(u *scheduler.Unplaced) (int64, int64) {
	if b, ok := w.bigs[u.Constraint]; ok {
		return b[0], b[1]
	}
	k := w.constraint(u)
	var cpu, mem int64
	for _, in := range w.in.Instances {
		if int(in.Cluster) < len(w.in.Clusters) {
			c := w.in.Clusters[in.Cluster]
			c.Disabled, c.Down = false, false
			if k.Admits(&c, in.Pool, in.Labels, in.Spot) != 0 {
				continue
			}
		}
		cpu, mem = max(cpu, in.CPUMilli), max(mem, in.Memory)
	}
	w.bigs[u.Constraint] = [2]int64{cpu, mem}
	return cpu, mem
}

// where says which regions, pool and labels a constraint allows, for a
// message.
func where(k *placement.Constraint) string {
	if k == nil {
		return ""
	}
	var parts []string
	if k.Pool != "" {
		parts = append(parts, "pool "+k.Pool)
	}
	if len(k.Regions) > 0 {
		parts = append(parts, "regions "+strings.Join(k.Regions, ", "))
	}
	if len(k.JobClusters) > 0 {
		parts = append(parts, "clusters "+strings.Join(k.JobClusters, ", "))
	}
	if len(k.Clusters) > 0 {
		parts = append(parts, "queue's home clusters "+strings.Join(k.Clusters, ", "))
	}
	out := ""
	if len(parts) > 0 {
		out = " in its " + strings.Join(parts, " and ")
	}
	if len(k.Labels) > 0 {
		out += " labelled " + strings.Join(k.Labels, ", ")
	}
	return out
}

// unavailable lists the clusters the run could use but that are disabled
// or down, with who disabled them, when and why.
func (w *waiter) unavailable(u *scheduler.Unplaced, r placement.Reason) []string {
	k := w.constraint(u)
	var names []string
	for _, c := range w.in.Clusters {
		if r2 := k.AdmitsCluster(&c); (k != nil && (r2 == placement.ReasonRegion || r2 == placement.ReasonCluster || r2 == placement.ReasonNotHome)) || c.Available() != r {
			continue
		}
		names = append(names, c.Name)
	}
	return names
}

// reason says why a run fits nowhere, from the instances each filter
// rejected, for a person: the billing project's spend limit when it is
// reached; the queue's quota or max_running when it is used up; the
// clusters and regions involved when none it may use is available; the
// sizes when no worker it may use is large enough; how many large-enough
// workers are busy, and how many users fair share served first,
// otherwise.
func (w *waiter) reason(u scheduler.Unplaced, ahead int) (string, string) {
	e := u.Why
	cores := func(milli int64) string { return fmt.Sprintf("%g cores", float64(milli)/1000) }
	if e.Quota == scheduler.ReasonGang {
		room := fmt.Sprintf("the most room one has now is for %d of them", e.GangRoom)
		if e.GangRoom < 0 {
			room = "none has room for all of them now"
		}
		if e.Held > 0 {
			// First in line: room held for it (scheduler.holdForGangs).
			room = fmt.Sprintf("room is held for it on %s, which other jobs may not take, and grows there as their jobs end (room for %d of them now)",
				plural(e.Held, "worker"), e.HeldRoom)
		}
		return e.Quota.String(), fmt.Sprintf("its gang of %d members starts together in one cluster it may use, or not at all: %s (%s each)",
			e.Gang, room, cores(u.CPUMilli))
	}
	if e.Quota == scheduler.ReasonSpendLimit {
		for _, p := range w.in.Projects {
			if p.Name == e.Project {
				return e.Quota.String(), billing.LimitReason(p.Name, p.Budget.Limit, p.Budget.Cost(w.in.Now))
			}
		}
		return e.Quota.String(), fmt.Sprintf("billing project %s reached its spend limit", e.Project)
	}
	if e.Quota != 0 {
		var t *scheduler.Queue
		queues := w.queues
		if queues == nil {
			queues = w.in.Queues
		}
		for i := range queues {
			if queues[i].Name == e.Queue {
				t = &queues[i]
			}
		}
		if t == nil {
			return e.Quota.String(), fmt.Sprintf("queue %s at its quota", e.Queue)
		}
		typ := ""
		if k := w.constraint(&u); k != nil {
			typ = k.GPUType
		}
		return e.Quota.String(), t.Quota.Explain(e.Queue, e.Quota.Placement(), typ)
	}
	if e.Instances == 0 {
		return "no_workers", "no worker is active"
	}
	k := w.constraint(&u)
	labels, spot := e.Count(scheduler.ReasonLabels), e.Count(scheduler.ReasonSpot)
	region, pool := e.Count(scheduler.ReasonRegion)+e.Count(scheduler.ReasonCluster)+e.Count(scheduler.ReasonNotHome), e.Count(scheduler.ReasonPool)+labels+spot
	disabled, down := e.Count(scheduler.ReasonClusterDisabled), e.Count(scheduler.ReasonClusterDown)
	if region+pool == e.Instances {
		if spot > 0 && spot >= labels {
			return scheduler.ReasonSpot.String(), fmt.Sprintf("no on-demand worker%s: %d of %d active workers are spot machines, which it is kept off (max_spot_attempts); it waits for an on-demand one", where(k), spot, e.Instances)
		}
		if labels > 0 {
			return scheduler.ReasonLabels.String(), fmt.Sprintf("no worker%s: of the %d active workers, %d lack a label it asks for or carry another value", where(k), e.Instances, labels)
		}
		if n := e.Count(scheduler.ReasonCluster); n > 0 {
			return scheduler.ReasonCluster.String(), fmt.Sprintf("no worker%s: the %d active workers are elsewhere (%d in clusters it does not name)", where(k), e.Instances, n)
		}
		return scheduler.ReasonRegion.String(), fmt.Sprintf("no worker%s: the %d active workers are elsewhere", where(k), e.Instances)
	}
	if region+pool+disabled+down == e.Instances {
		if disabled >= down {
			return scheduler.ReasonClusterDisabled.String(), w.disabledMessage(w.unavailable(&u, placement.ReasonDisabled)) + "; no other cluster" + where(k) + " has workers"
		}
		return scheduler.ReasonClusterDown.String(), fmt.Sprintf("cluster %s down (no worker heard from); no other cluster%s has workers", strings.Join(w.unavailable(&u, placement.ReasonDown), ", "), where(k))
	}
	elsewhere := region + pool + disabled + down
	if gpuCap := e.Count(scheduler.ReasonGPUCapacity); u.GPUs > 0 && gpuCap+elsewhere == e.Instances {
		return scheduler.ReasonGPUCapacity.String(), fmt.Sprintf("fits no worker%s: needs %d %s GPUs; none of the %d workers it may use has them", where(k), u.GPUs, k.GPUType, gpuCap)
	}
	elsewhere += e.Count(scheduler.ReasonGPUCapacity)
	cpuCap, memCap := e.Count(scheduler.ReasonCPUCapacity), e.Count(scheduler.ReasonMemoryCapacity)
	bigCPU, bigMem := w.largest(&u)
	switch {
	case cpuCap+elsewhere == e.Instances:
		return scheduler.ReasonCPUCapacity.String(), fmt.Sprintf("fits no worker%s: needs %s; the largest has %s", where(k), cores(u.CPUMilli), cores(bigCPU))
	case memCap+elsewhere == e.Instances:
		return scheduler.ReasonMemoryCapacity.String(), fmt.Sprintf("fits no worker%s: needs %s memory; the largest offers %s", where(k), units.FormatBytes(u.Memory), units.FormatBytes(bigMem))
	case cpuCap+memCap+elsewhere == e.Instances:
		return scheduler.ReasonMemoryCapacity.String(), fmt.Sprintf("fits no worker%s: needs %s and %s memory; no worker has both (the largest have %s and %s)",
			where(k), cores(u.CPUMilli), units.FormatBytes(u.Memory), cores(bigCPU), units.FormatBytes(bigMem))
	}
	if left := e.Count(scheduler.ReasonLeftForLarger); left > 0 {
		// The right-sizing rule (scheduler.LeftForLarger): name the
		// machine the autoscaler launches for it instead.
		small := scheduler.SizeFor(u.CPUMilli, u.Memory, w.in.Launchable, k.OffSpot())
		workers := "1 worker"
		if left != 1 {
			workers = fmt.Sprintf("%d workers", left)
		}
		msg := fmt.Sprintf("waiting for a machine its size: %s%s at least twice its size %s idle, left to larger jobs", workers, where(k), isAre(left))
		if small != nil {
			msg += fmt.Sprintf(", while the autoscaler can launch a %g-core machine for it (a small job on a large machine keeps all of it paid for until the job ends)", float64(small.CPUMilli)/1000)
		}
		return scheduler.ReasonLeftForLarger.String(), msg
	}
	fit := e.Instances - cpuCap - memCap - elsewhere
	if held := e.Count(scheduler.ReasonGangHeld); held > 0 && held >= e.Count(scheduler.ReasonCPUFree) && held >= e.Count(scheduler.ReasonMemoryFree) {
		have := "have"
		if held == 1 {
			have = "has"
		}
		return scheduler.ReasonGangHeld.String(), fmt.Sprintf("waiting for room: %d of the %d workers large enough%s %s room for it only in what is held for a gang first in line, which starts once its workers have room for all its members",
			held, fit, where(k), have)
	}
	code, what, size := scheduler.ReasonCPUFree.String(), "cores", cores(u.CPUMilli)
	if busy := e.Count(scheduler.ReasonMemoryFree); busy > e.Count(scheduler.ReasonCPUFree) {
		code, what, size = scheduler.ReasonMemoryFree.String(), "memory", units.FormatBytes(u.Memory)
	}
	if busy := e.Count(scheduler.ReasonGPUFree); busy > e.Count(scheduler.ReasonCPUFree) && busy > e.Count(scheduler.ReasonMemoryFree) {
		code, what, size = scheduler.ReasonGPUFree.String(), "GPUs", fmt.Sprintf("%d %s GPUs", u.GPUs, k.GPUType)
	}
	busy := fmt.Sprintf("none of the %d workers large enough%s has %s free", fit, where(k), size)
	if ahead > 0 {
		return "fair_share", fmt.Sprintf("waiting for fair share behind %s: %s", plural(ahead, "user"), busy)
	}
	return code, fmt.Sprintf("waiting for %s: %s", what, busy)
}

// isAre is the verb for n things.
func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// disabledMessage words disabled clusters with the round's records of
// them.
func (w *waiter) disabledMessage(names []string) string {
	return DisabledClusters(names, func(name string) (string, string, int64, bool) {
		for _, c := range w.clusters {
			if c.Name == name {
				return c.Reason, c.By, c.Since, true
			}
		}
		return "", "", 0, false
	})
}

// Unplaced counts the jobs a round could place nowhere by the
// reason that rejected the most instances (the leader's
// drover_scheduler_unplaced_jobs{reason}) (the first such reason in code
// order on a tie; no instances at all counts as cores busy).
func Unplaced(out *scheduler.Output) map[scheduler.Reason]int {
	counts := map[scheduler.Reason]int{}
	for _, u := range out.Unplaced {
		if u.Why.Quota != 0 {
			counts[u.Why.Quota] += int(u.Count)
			continue
		}
		why, most := scheduler.ReasonCPUFree, 0
		for _, rc := range u.Why.Filtered {
			if rc.Instances > most {
				why, most = rc.Reason, rc.Instances
			}
		}
		counts[why] += int(u.Count)
	}
	return counts
}
