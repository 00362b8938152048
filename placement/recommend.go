package placement

import (
	"cmp"
	"math"
	"slices"
)

// Recommended allocations, after Pinterest Monarch's percentile
// algorithm: a queue's use over a window is cut into time units, each a
// stretch during which it held the same amount; the units in which it
// held nothing are left out, the rest sorted by the amount held, and the
// queue is allocated the smallest amount that covers a percentile of the
// time it was in use (95% of 240 hours in use: 228 hours). A tier-1 queue
// gets a high percentile, a tier-3 one a lower: the rest of the time it
// borrows, and preemption takes capacity back when it needs it.

// UsageSample is what a queue held over a stretch of time.
type UsageSample struct {
	Seconds  int64
	CPUMilli int64
	Jobs     int64
}

// Allocation is the percentile algorithm's answer for one queue, with
// the data behind it.
type Allocation struct {
	// CPUMilli is the smallest amount held for Percentile of the time in
	// use; SecondsInUse that time, SecondsCovered the time the amount
	// covers.
	CPUMilli       int64
	SecondsInUse   int64
	SecondsCovered int64
	// PeakMilli and PeakJobs are the most it held; Jobs the percentile of
	// its running jobs, as CPUMilli is of its cores.
	PeakMilli, PeakJobs int64
	Jobs                int64
}

// PercentileAllocation runs the algorithm over a queue's samples with a
// percentile in thousandths (950: 95%).
func PercentileAllocation(samples []UsageSample, permille int64) Allocation {
	var a Allocation
	units := make([]UsageSample, 0, len(samples))
	for _, s := range samples {
		if s.Seconds <= 0 || (s.CPUMilli <= 0 && s.Jobs <= 0) {
			continue // vacant
		}
		units = append(units, s)
		a.SecondsInUse += s.Seconds
		a.PeakMilli = max(a.PeakMilli, s.CPUMilli)
		a.PeakJobs = max(a.PeakJobs, s.Jobs)
	}
	if a.SecondsInUse == 0 {
		return a
	}
	// The time to cover, rounded up to the second: 95% of 240 hours is
	// 228 hours.
	need := (a.SecondsInUse*permille + 999) / 1000
	pick := func(key func(UsageSample) int64) (int64, int64) {
		slices.SortStableFunc(units, func(x, y UsageSample) int { return cmp.Compare(key(x), key(y)) })
		var covered int64
		for _, u := range units {
			covered += u.Seconds
			if covered >= need {
				return key(u), covered
			}
		}
		return key(units[len(units)-1]), covered
	}
	a.Jobs, _ = pick(func(u UsageSample) int64 { return u.Jobs })
	a.CPUMilli, a.SecondsCovered = pick(func(u UsageSample) int64 { return u.CPUMilli })
	return a
}

// Recommendation is a suggested setting of one queue: its guarantee (the
// percentile allocation; a parent's, at least its children's together),
// its weight among its siblings (their guarantees' proportions, the
// smallest 1), and its max_running jobs (the jobs it ran at the peak,
// with a fifth more as headroom).
type Recommendation struct {
	Path           string
	Allocation     Allocation
	GuaranteeMilli int64
	Weight         int64
	MaxRunningJobs int64
}

// MaxRunningHeadroomPermille is the headroom a recommended max_running
// leaves above the peak, in thousandths.
const MaxRunningHeadroomPermille = 1200

// Recommend runs the percentile algorithm for every queue of a tree with
// the samples of each (by path).
func Recommend(tree *QueueTree, samples map[string][]UsageSample, permille int64) []Recommendation {
	out := make([]Recommendation, len(tree.Queues))
	for i := range tree.Queues {
		q := &tree.Queues[i]
		a := PercentileAllocation(samples[q.Path], permille)
		out[i] = Recommendation{Path: q.Path, Allocation: a, GuaranteeMilli: a.CPUMilli,
			MaxRunningJobs: (a.PeakJobs*MaxRunningHeadroomPermille + 999) / 1000}
		if a.SecondsInUse == 0 {
			// No recorded use: nothing to go by, so it keeps what it
			// has (a queue set up for work to come is not cut to 0).
			out[i].GuaranteeMilli, out[i].MaxRunningJobs = q.Guarantee.CPUMilli, q.Limits.MaxRunningJobs
		}
	}
	// A parent guarantees at least what its children are guaranteed.
	for i := len(tree.Queues) - 1; i >= 0; i-- {
		var sum int64
		for _, c := range tree.Children[i] {
			sum += out[c].GuaranteeMilli
		}
		out[i].GuaranteeMilli = min(max(out[i].GuaranteeMilli, sum), MaxQueueMilli)
	}
	// data: the queue or one below it has recorded use.
	data := make([]bool, len(tree.Queues))
	for i := len(tree.Queues) - 1; i >= 0; i-- {
		data[i] = data[i] || out[i].Allocation.SecondsInUse > 0
		if p := tree.Parent[i]; p >= 0 && data[i] {
			data[p] = true
		}
	}
	// Weights: siblings in the proportions of their guarantees, where
	// one of them has recorded use (otherwise they keep theirs).
	weigh := func(kids []int32) {
		used := false
		for _, c := range kids {
			used = used || data[c]
		}
		if !used {
			for _, c := range kids {
				out[c].Weight = tree.Queues[c].EffectiveWeight()
			}
			return
		}
		least := int64(0)
		for _, c := range kids {
			if g := out[c].GuaranteeMilli; g > 0 && (least == 0 || g < least) {
				least = g
			}
		}
		for _, c := range kids {
			w := int64(1)
			if least > 0 {
				w = max(int64(math.Round(float64(out[c].GuaranteeMilli)/float64(least))), 1)
			}
			out[c].Weight = min(w, MaxQueueWeight)
		}
	}
	weigh(tree.Top)
	for i := range tree.Queues {
		weigh(tree.Children[i])
	}
	return out
}
