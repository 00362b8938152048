package apiview

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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
		if !u.Whole() {
			continue // of one cluster: the reports by cluster read those
		}
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
// (placement.Bounded), as settings, with the settings now (before); and a
// note of the checks and of the queues without samples, cut to what a
// version keeps. The tree's top queue keeps its weight (its siblings are
// other trees, which the recommendation of one tree does not see) and,
// without a guarantee, stays without one.
func Regenerated(r Recommended, step int64) (after, before []state.QueueSetting, note string) {
	bounded := placement.Bounded(r.Tree, r.Recs, step)
	after = make([]state.QueueSetting, len(bounded))
	before = make([]state.QueueSetting, len(bounded))
	var kept []string
	for i, b := range bounded {
		q := &r.Tree.Queues[i]
		before[i] = state.QueueSetting{Path: q.Path, Weight: q.EffectiveWeight(), GuaranteeMilli: q.Guarantee.CPUMilli, MaxRunningJobs: q.Limits.MaxRunningJobs,
			HomeClusters: slices.Clone(q.HomeClusters)}
		after[i] = state.QueueSetting{Path: b.Path, Weight: b.Weight, GuaranteeMilli: b.GuaranteeMilli, MaxRunningJobs: b.MaxRunningJobs,
			HomeClusters: slices.Clone(q.HomeClusters)}
		if r.Tree.Parent[i] < 0 {
			after[i].Weight = before[i].Weight
			if before[i].GuaranteeMilli == 0 {
				after[i].GuaranteeMilli = 0
			}
		}
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
		notes = append(notes, fmt.Sprintf("%d queues without samples kept their settings: %s", len(kept), strings.Join(kept, ", ")))
	}
	return after, before, cutNote(strings.Join(notes, "; "))
}

// ErrNoTree: Regenerate was asked for a tree that does not exist.
var ErrNoTree = errors.New("no such queue tree")

// DefaultRecommendPermille is the percentile of a queue that neither it
// nor a queue above it sets (drover queue recommend's -percentile
// default).
const DefaultRecommendPermille = 950

// Regenerate makes the AutoApplyQueues entry of a tree's regeneration at
// now: the recommendation from the tree's window of recorded use, each
// setting moved at most its max_change (placement.Bounded), a note of
// Monarch's checks and of the queues kept for want of samples. The
// leader's schedule, the endpoint and the simulator share it.
func Regenerate(ctx context.Context, queues []state.QueueInfo, clusters []state.ClusterInfo, st history.Store, tree string, now time.Time, by string) (*state.AutoApplyQueues, error) {
	infos := TreeOf(queues, tree)
	if len(infos) == 0 || infos[0].Path != tree {
		return nil, fmt.Errorf("queue tree %q: %w", tree, ErrNoTree)
	}
	auto := infos[0].AutoApply
	days := auto.Window()
	usage, err := st.QueueUsage(ctx, now.Add(-time.Duration(days)*24*time.Hour).Unix(), now.Unix()+1)
	if err != nil {
		return nil, fmt.Errorf("queue usage: %w", err)
	}
	rec, err := Recommend(infos, usage, days, DefaultRecommendPermille)
	if err != nil {
		return nil, err
	}
	after, before, note := Regenerated(rec, auto.Step())
	if auto.Rebalance {
		note = JoinNote(rebalanceStep(infos, clusters, usage, &auto, after, days), note)
	}
	return &state.AutoApplyQueues{Now: now.UnixNano(), Tree: tree, By: by, DryRun: auto.DryRun, After: after, Before: before, Note: note}, nil
}

// rebalanceStep moves the tree's leaves between clusters in a
// regeneration (auto_apply's rebalance): placement.Rebalance over the
// window's usage by cluster, at most MovesPerStep of them, each moved
// leaf's home clusters set in after. A move waits until the samples
// span a quarter of the window at least, so that minutes of a burst do
// not move a queue. It returns the moves' reasons.
func rebalanceStep(infos []state.QueueInfo, clusters []state.ClusterInfo, usage []history.QueueSample, auto *placement.AutoApply, after []state.QueueSetting, days int64) string {
	var first, last int64
	for _, u := range usage {
		if !u.Whole() && u.Queue == "" {
			if first == 0 || u.At < first {
				first = u.At
			}
			last = max(last, u.At+u.Seconds)
		}
	}
	if span, need := last-first, days*24*3600/4; span < need {
		return fmt.Sprintf("rebalance: %.1f hours of use by cluster recorded; moves wait for %.0f (a quarter of the window)", float64(span)/3600, float64(need)/3600)
	}
	home := LeafHomes(infos)
	high, low := auto.Marks()
	moves := placement.Rebalance(placement.ReportByCluster(ClusterSamples(usage)), home, Targets(clusters), high, low, auto.MovesPerStep(len(home)))
	var reasons []string
	for _, m := range moves {
		for i := range after {
			if after[i].Path == m.Queue {
				after[i].HomeClusters = m.HomeClusters
			}
		}
		reasons = append(reasons, fmt.Sprintf("moved %s from %s to %s: %s", m.Queue, m.From, m.To, m.Reason))
	}
	return strings.Join(reasons, "; ")
}

// LeafHomes are the home clusters each leaf's new attempts go to: its
// own, or its nearest parent's (nil: any), as the state routes them.
func LeafHomes(queues []state.QueueInfo) map[string][]string {
	byPath := map[string]*state.QueueInfo{}
	for i := range queues {
		byPath[queues[i].Path] = &queues[i]
	}
	out := map[string][]string{}
	for _, q := range queues {
		if !q.Leaf {
			continue
		}
		var h []string
		for p := q.Path; p != "" && h == nil; p = placement.ParentQueue(p) {
			if a := byPath[p]; a != nil && len(a.HomeClusters) > 0 {
				h = slices.Clone(a.HomeClusters)
			}
		}
		out[q.Path] = h
	}
	return out
}

// Targets are the clusters a rebalance may send work to: declared and not
// disabled (placement.Rebalance also wants capacity recorded in the
// window).
func Targets(clusters []state.ClusterInfo) map[string]bool {
	out := map[string]bool{}
	for _, c := range clusters {
		if !c.Disabled {
			out[c.Name] = true
		}
	}
	return out
}

// JoinNote joins two notes of a version, cut to what it keeps.
func JoinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return cutNote(a + "; " + b)
}

// cutNote cuts a note to what a version keeps, on a rune boundary.
func cutNote(note string) string {
	if len(note) <= state.MaxVersionNote {
		return note
	}
	note = note[:state.MaxVersionNote-len(" ...")]
	for !utf8.ValidString(note) {
		note = note[:len(note)-1]
	}
	return note + " ..."
}

// QueueSamples are what each queue in use holds at now, over a stretch of
// seconds: the leader's sample each QueueSampleInterval (and the
// simulator's), the time units of the percentile algorithm; and, for the
// reports by cluster, what each leaf holds in each cluster and each
// cluster's capacity (its active workers).
func QueueSamples(queues []state.QueueInfo, clusters []state.ClusterInfo, now time.Time, seconds int64) []history.QueueSample {
	var out []history.QueueSample
	at, secs := now.Unix(), max(seconds, 1)
	for _, q := range queues {
		if q.UsedJobs == 0 {
			continue
		}
		out = append(out, history.QueueSample{Queue: q.Path, At: at, Seconds: secs, CPUMilli: q.UsedMilli, Memory: q.UsedMemory, Jobs: q.UsedJobs})
		if !q.Leaf {
			continue
		}
		for _, c := range slices.Sorted(maps.Keys(q.UsedByCluster)) {
			out = append(out, history.QueueSample{Queue: q.Path, Cluster: c, At: at, Seconds: secs, CPUMilli: q.UsedByCluster[c], Memory: q.UsedMemoryByCluster[c]})
		}
	}
	for _, c := range clusters {
		if c.Workers > 0 {
			out = append(out, history.QueueSample{Cluster: c.Name, At: at, Seconds: secs, CPUMilli: c.CapacityMilli, Memory: c.Memory, Jobs: int64(c.Workers)})
		}
	}
	return out
}

// DueTrees are the top queues whose auto_apply is due at now: never run,
// or last run (state, so a new leader keeps the schedule) at least its
// every ago.
func DueTrees(src interface{ Read(func(state.Reader)) }, queues []state.QueueInfo, now time.Time) []string {
	var due []string
	src.Read(func(r state.Reader) {
		for _, q := range queues {
			if strings.Contains(q.Path, placement.QueueSep) || !q.AutoApply.On() {
				continue
			}
			if last := r.LastAutoApply(q.Path); last == 0 || now.UnixNano()-last >= q.AutoApply.EveryNs {
				due = append(due, q.Path)
			}
		}
	})
	return due
}
