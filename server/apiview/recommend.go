package apiview

import (
	"fmt"
	"strings"

	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// Recommended is the percentile algorithm's answer for the queues as they
// are: the tree, each queue's recommendation (in the tree's order), and
// Monarch's checks across tiers.
type Recommended struct {
	Tree   *placement.QueueTree
	Recs   []placement.Recommendation
	Checks []placement.TierCheck
	ByPath map[string]*state.QueueInfo
}

// Recommend runs placement.Recommend over the queues with the usage the
// history store recorded over days, each queue at its recommend
// percentile (its own, its nearest ancestor's, else def, in thousandths):
// what drover queue recommend shows and auto_apply applies.
func Recommend(infos []state.QueueInfo, usage []history.QueueSample, days int64, def int64) (Recommended, error) {
	samples := map[string][]placement.UsageSample{}
	for _, u := range usage {
		samples[u.Queue] = append(samples[u.Queue], placement.UsageSample{Seconds: u.Seconds, CPUMilli: u.CPUMilli, Jobs: u.Jobs})
	}
	list := make([]placement.Queue, len(infos))
	out := Recommended{ByPath: map[string]*state.QueueInfo{}}
	for i := range infos {
		list[i] = infos[i].Queue.Queue
		out.ByPath[infos[i].Path] = &infos[i]
	}
	tree, err := placement.NewQueueTree(list)
	if err != nil {
		return out, fmt.Errorf("the queue tree: %w", err)
	}
	own := make([]int64, len(tree.Queues))
	for i := range tree.Queues {
		own[i] = out.ByPath[tree.Queues[i].Path].RecommendPermille
	}
	out.Tree = tree
	out.Recs = placement.Recommend(tree, samples, placement.Percentiles(tree, own, def))
	out.Checks = placement.CheckTiers(tree, out.Recs, days*24*3600)
	return out, nil
}

// TreeOf keeps the queues of one tree: the top queue named and those
// below it.
func TreeOf(infos []state.QueueInfo, top string) []state.QueueInfo {
	var out []state.QueueInfo
	for _, q := range infos {
		if q.Path == top || strings.HasPrefix(q.Path, top+placement.QueueSep) {
			out = append(out, q)
		}
	}
	return out
}

// Regenerated is what auto_apply sets a tree's queues to: each
// recommendation moved at most step thousandths from the setting now
// (placement.Bounded), as settings, and a note of the checks and of the
// queues without samples.
func Regenerated(r Recommended, step int64) ([]state.QueueSetting, string) {
	bounded := placement.Bounded(r.Tree, r.Recs, step)
	out := make([]state.QueueSetting, len(bounded))
	var kept []string
	for i, b := range bounded {
		out[i] = state.QueueSetting{Path: b.Path, Weight: b.Weight, GuaranteeMilli: b.GuaranteeMilli, MaxRunningJobs: b.MaxRunningJobs}
		if b.NoSamples {
			kept = append(kept, b.Path)
		}
	}
	var notes []string
	for _, c := range r.Checks {
		ok := "ok"
		if !c.OK {
			ok = "FAILED"
		}
		notes = append(notes, fmt.Sprintf("%s: %s (%s)", c.Check, ok, c.Detail))
	}
	if len(kept) > 0 {
		notes = append(notes, "no samples, settings kept: "+strings.Join(kept, ", "))
	}
	return out, strings.Join(notes, "; ")
}
