package apiview

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// The API's queues turned into the state's: the API checks a queue with
// QueueFromAPI before any command is made of it; the simulator reads its
// scenarios' queues with it too.

// QueueFromAPI validates a queue as a request sends it: every amount,
// count and duration bounded, named by field.
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
	if q.MaxRunning.CPU < 0 || q.MaxRunning.CPU > 1e9 || math.IsNaN(q.MaxRunning.CPU) || q.MaxRunning.Jobs < 0 {
		return out, fmt.Errorf("%s: max_running: cpu must be between 0 (no cap) and 1e9 cores, jobs 0 or more", at)
	}
	out.Limits = placement.QueueLimits{MaxRunningJobs: q.MaxRunning.Jobs, MaxRunningMilli: int64(math.Round(q.MaxRunning.CPU * 1000))}
	for _, d := range []struct {
		name string
		in   string
		out  *int64
	}{{"reclaim_grace", q.ReclaimGrace, &out.ReclaimGraceNs}, {"min_runtime", q.MinRuntime, &out.MinRuntimeNs}, {"preempt_after", q.PreemptAfter, &out.Preemption.AfterNs}} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(d.in)
		if err != nil || v < 0 || int64(v) > placement.MaxQueueDuration {
			return out, fmt.Errorf("%s: %s %.40q must be a duration between 0s and 720h, e.g. \"10m\"", at, d.name, d.in)
		}
		*d.out = int64(v)
	}
	if t := q.PreemptThreshold; t < 0 || t > 1 || math.IsNaN(t) {
		return out, fmt.Errorf("%s: preempt_threshold must be between 0 and 1 (a fraction of the queue's fair share)", at)
	}
	out.Preemption.Preemptible = q.Preemptible
	out.Preemption.ThresholdPermille = int64(math.Round(q.PreemptThreshold * 1000))
	out.Preemption.AllowFrom = slices.Clone(q.AllowPreemptionFrom)
	out.HomeClusters = slices.Clone(q.HomeClusters)
	out.MaxPriority = q.MaxPriority
	if err := state.ValidateQueue(&out); err != nil {
		return out, err
	}
	return out, nil
}

// ResourcesFromAPI converts and bounds an amount of resources.
func ResourcesFromAPI(what string, q api.Quota) (placement.Resources, error) {
	if q.CPU < 0 || q.CPU > placement.MaxQueueMilli/1000 || math.IsNaN(q.CPU) || q.Memory < 0 {
		return placement.Resources{}, fmt.Errorf("%s: cpu must be between 0 and %d cores and memory 0 or more", what, placement.MaxQueueMilli/1000)
	}
	out := placement.Resources{CPUMilli: int64(math.Round(q.CPU * 1000)), Memory: q.Memory}
	if len(q.GPUs) > placement.MaxGPUTypes {
		return out, fmt.Errorf("%s: at most %d GPU types", what, placement.MaxGPUTypes)
	}
	for typ, n := range q.GPUs {
		if err := api.ValidatePlaceName("gpu type", typ); err != nil {
			return out, fmt.Errorf("%s: %w", what, err)
		}
		if n < 0 || n > placement.MaxQueueGPUs {
			return out, fmt.Errorf("%s: %s GPUs must be between 0 and %d", what, typ, placement.MaxQueueGPUs)
		}
		if out.GPUs == nil {
			out.GPUs = map[string]int64{}
		}
		out.GPUs[typ] = int64(n)
	}
	return out, nil
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
