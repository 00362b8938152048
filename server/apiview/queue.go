package apiview

import (
	"fmt"
	"math"
	"slices"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// The API's queues turned into the state's: the API checks a queue with
// QueueFromAPI before any command is made of it; the simulator reads its
// scenarios' queues with it too.

// QueueFromAPI validates a queue as a request sends it: every amount,
// count and duration bounded, named by field. It refuses here only what
// does not convert (a number that is no number of cores, a duration that
// does not parse); the bounds are placement.Queue.Validate's, which apply
// checks again.
func QueueFromAPI(q api.Queue) (state.Queue, error) {
	out := state.Queue{Projects: slices.Clone(q.BillingProjects), AllowProjects: slices.Clone(q.AllowProjects)}
	out.Path, out.Weight, out.Strategy = q.Path, q.Weight, placement.Strategy(q.Strategy)
	if err := placement.ValidateQueuePath(q.Path); err != nil {
		return out, err
	}
	at := "queue " + q.Path
	var err error
	if out.Guarantee, err = ResourcesFromAPI(at+": guarantee", q.Guarantee); err != nil {
		return out, err
	}
	if out.BorrowLimit, err = limitFromAPI(at+": borrow_limit", q.BorrowLimit); err != nil {
		return out, err
	}
	if out.LendLimit, err = limitFromAPI(at+": lend_limit", q.LendLimit); err != nil {
		return out, err
	}
	maxMilli, err := milli(at+": max_running: cpu", q.MaxRunning.CPU)
	if err != nil {
		return out, err
	}
	out.Limits = placement.QueueLimits{MaxRunningJobs: q.MaxRunning.Jobs, MaxRunningMilli: maxMilli}
	for _, d := range []struct {
		name string
		in   string
		out  *int64
	}{{"reclaim_grace", q.ReclaimGrace, &out.ReclaimGraceNs}, {"min_runtime", q.MinRuntime, &out.MinRuntimeNs}, {"preempt_after", q.PreemptAfter, &out.Preemption.AfterNs},
		{"usage_half_life", q.UsageHalfLife, &out.UsageHalfLifeNs}} {
		if d.in == "" {
			continue
		}
		v, err := api.ParseDuration(d.in)
		if err != nil {
			return out, fmt.Errorf("%s: %s %.40q is not a duration, e.g. \"10m\"", at, d.name, d.in)
		}
		*d.out = int64(v)
	}
	if out.Preemption.ThresholdPermille, err = milli(at+": preempt_threshold", q.PreemptThreshold); err != nil {
		return out, err
	}
	out.Preemption.Preemptible = q.Preemptible
	out.Preemption.AllowFrom = slices.Clone(q.AllowPreemptionFrom)
	out.HomeClusters = slices.Clone(q.HomeClusters)
	out.MaxPriority = q.MaxPriority
	if r := q.Recommend; r != nil {
		if !(r.Percentile > 0 && r.Percentile <= 1) {
			return out, fmt.Errorf("%s: recommend percentile %g must be more than 0 and at most 1 (e.g. 0.95: the guarantee covers 95%% of the time the queue is in use)", at, r.Percentile)
		}
		out.RecommendPermille = max(int64(math.Round(r.Percentile*1000)), 1)
	}
	if a := q.AutoApply; a != nil {
		every, err := api.ParseDuration(a.Every)
		if err != nil || every <= 0 {
			return out, fmt.Errorf("%s: auto_apply every %.40q is not a duration, e.g. \"24h\"", at, a.Every)
		}
		if !(a.MaxChange >= 0 && a.MaxChange <= 1) {
			return out, fmt.Errorf("%s: auto_apply max_change %g must be between 0 and 1 (e.g. 0.25: a step moves a setting at most a quarter; 0 or absent: 0.25)", at, a.MaxChange)
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"high", a.High}, {"low", a.Low}} {
			if !(f.v >= 0 && f.v <= 1) {
				return out, fmt.Errorf("%s: auto_apply %s %g must be a usage/capacity ratio between 0 and 1 (0 or absent: the default)", at, f.name, f.v)
			}
		}
		out.AutoApply = placement.AutoApply{EveryNs: int64(every), MaxChangePermille: int64(math.Round(a.MaxChange * 1000)), DryRun: a.DryRun, Days: a.Days, Keep: a.Keep,
			Rebalance: a.Rebalance, HighPermille: int64(math.Round(a.High * 1000)), LowPermille: int64(math.Round(a.Low * 1000))}
		if a.MaxChange > 0 && out.AutoApply.MaxChangePermille == 0 {
			out.AutoApply.MaxChangePermille = 1
		}
	}
	if err := state.ValidateQueue(&out); err != nil {
		return out, err
	}
	return out, nil
}

// ResourcesFromAPI converts and bounds an amount of resources.
// Its bounds are placement's (Queue.Validate, which QueueFromAPI calls).
func ResourcesFromAPI(what string, q api.Quota) (placement.Resources, error) {
	cpu, err := milli(what+": cpu", q.CPU)
	if err != nil {
		return placement.Resources{}, err
	}
	out := placement.Resources{CPUMilli: cpu, Memory: q.Memory}
	for typ, n := range q.GPUs {
		if out.GPUs == nil {
			out.GPUs = map[string]int64{}
		}
		out.GPUs[typ] = int64(n)
	}
	return out, nil
}

// milli is a number of units in thousandths, refused when it is not a
// finite number an int64 holds (its bounds are the rule's that reads it).
func milli(what string, v float64) (int64, error) {
	if math.IsNaN(v) || math.Abs(v) > 1e15 {
		return 0, fmt.Errorf("%s: %g is not a number it can hold", what, v)
	}
	return int64(math.Round(v * 1000)), nil
}

// limitFromAPI converts and bounds a limit (nil: no bound).
func limitFromAPI(what string, l *api.Limit) (placement.Limit, error) {
	if l == nil {
		return placement.Limit{}, nil
	}
	var q api.Quota
	if l.CPU != nil {
		q.CPU = *l.CPU
	}
	if l.Memory != nil {
		q.Memory = *l.Memory
	}
	q.GPUs = l.GPUs
	r, err := ResourcesFromAPI(what, q)
	if err != nil {
		return placement.Limit{}, err
	}
	out := placement.Limit{GPUs: r.GPUs}
	if l.CPU != nil {
		out.CPUMilli = &r.CPUMilli
	}
	if l.Memory != nil {
		out.Memory = &r.Memory
	}
	return out, nil
}
