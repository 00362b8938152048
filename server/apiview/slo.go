package apiview

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// SLOSource is the state's part in the SLO report: the complete batches
// with an SLO it holds, and whether it holds a batch.
type SLOSource interface {
	CompletedWithSLO(since int64, max int) []state.BatchRecord
	HasBatch(id uint64) bool
}

var _ SLOSource = (*state.State)(nil)

// SLORuns are the runs (history.SLORunOf) that completed in [from, to):
// those of the batches in memory, then those the history store holds of
// batches memory does not (nil store: memory alone), up to limit in all;
// more says some were left out. A batch still in memory is read from
// there even once exported, so a run is counted once, as it stands now.
func SLORuns(ctx context.Context, src SLOSource, store history.Store, from, to time.Time, limit int) (runs []history.SLORun, more bool, err error) {
	seen := map[uint64]bool{}
	now := time.Now()
	for _, rec := range src.CompletedWithSLO(from.UnixNano(), limit+1) {
		seen[rec.ID] = true
		b := Batch(&rec, now)
		if r, ok := history.SLORunOf(&b); ok && r.Completed >= from.Unix() && r.Completed < to.Unix() {
			runs = append(runs, r)
		}
	}
	if len(runs) > limit {
		return runs[:limit], true, nil
	}
	if store == nil {
		return runs, false, nil
	}
	old, more, err := store.SLORuns(ctx, history.SLOQuery{From: from.Unix(), To: to.Unix(),
		Hide: func(id uint64) bool { return seen[id] || src.HasBatch(id) }}, limit-len(runs))
	if err != nil {
		return runs, false, err
	}
	return append(runs, old...), more, nil
}

// SLOReport puts the SLO report together: each queue's and tier's runs
// with the core-hours its queues used (usage, over days) against their
// guarantees, each tier's SLO-successful workflows, and the workflows of
// the billing projects named in visible (nil: all).
func SLOReport(days int, threshold float64, tally placement.SLOTally, truncated bool, usage []history.QueueSample, queues []state.QueueInfo, visible []string) api.QueueSLOReport {
	byQueue := map[string]*api.QueueSLO{}
	at := func(q string) *api.QueueSLO {
		if byQueue[q] == nil {
			byQueue[q] = &api.QueueSLO{Queue: q}
		}
		return byQueue[q]
	}
	for _, q := range tally.Queues {
		if q.Queue == "" {
			continue // batches in no queue: in their workflows' rows only
		}
		row := at(q.Queue)
		row.Runs, row.Met, row.Cancelled = q.Runs, q.Met, q.Cancelled
	}
	for _, u := range usage {
		if !u.Whole() {
			continue
		}
		at(u.Queue).CoreHours += float64(u.CPUMilli) / 1000 * float64(u.Seconds) / 3600
	}
	guarantee := map[string]int64{}
	leaf := map[string]bool{}
	for _, q := range queues {
		guarantee[q.Path], leaf[q.Path] = q.Guarantee.CPUMilli, q.Leaf
		at(q.Path)
	}
	hours := float64(days) * 24
	out := api.QueueSLOReport{Days: days, Threshold: threshold, Queues: []api.QueueSLO{}, Tiers: []api.QueueSLO{}, Workflows: []api.WorkflowSLO{}, Truncated: truncated}
	tiers := map[string]*api.QueueSLO{}
	capacity := map[string]float64{}
	tier := func(name string) *api.QueueSLO {
		if tiers[name] == nil {
			tiers[name] = &api.QueueSLO{Queue: name}
		}
		return tiers[name]
	}
	for _, path := range slices.Sorted(maps.Keys(byQueue)) {
		q := byQueue[path]
		if q.Runs > 0 {
			q.SuccessRatio = float64(q.Met) / float64(q.Runs)
		}
		if g := guarantee[path]; g > 0 {
			q.UsageCapacity = q.CoreHours / (float64(g) / 1000 * hours)
		}
		out.Queues = append(out.Queues, *q)
		if !leaf[path] {
			continue // tiers are leaves
		}
		t := tier(placement.TierOf(path))
		t.CoreHours += q.CoreHours
		capacity[t.Queue] += float64(guarantee[path]) / 1000 * hours
	}
	for _, ts := range tally.Tiers {
		if ts.Tier == "" {
			continue
		}
		t := tier(ts.Tier)
		t.Runs, t.Met, t.Cancelled = ts.Runs, ts.Met, ts.Cancelled
		t.Workflows, t.SuccessfulWorkflows, t.WorkflowSuccessRatio = ts.Workflows, ts.Successful, ts.Ratio
	}
	for _, name := range slices.Sorted(maps.Keys(tiers)) {
		t := tiers[name]
		if t.Runs > 0 {
			t.SuccessRatio = float64(t.Met) / float64(t.Runs)
		}
		if c := capacity[name]; c > 0 {
			t.UsageCapacity = t.CoreHours / c
		}
		out.Tiers = append(out.Tiers, *t)
	}
	shown := map[string]bool{}
	for _, p := range visible {
		shown[p] = true
	}
	for _, w := range tally.Workflows {
		if visible != nil && !shown[w.Project] {
			continue
		}
		out.Workflows = append(out.Workflows, api.WorkflowSLO{BillingProject: w.Project, Workflow: w.Workflow, Queue: w.Queue, Tier: w.Tier,
			Runs: w.Runs, Met: w.Met, Cancelled: w.Cancelled, SuccessRatio: w.Ratio, SLOSuccessful: w.Successful})
	}
	return out
}
