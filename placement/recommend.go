package placement

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
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
	// MilliSeconds is the use over the window: millicores × seconds.
	MilliSeconds int64
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
		a.MilliSeconds += s.CPUMilli * s.Seconds
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
	// Permille is the percentile it was given (its own setting, its
	// parent's, or the default); NoSamples, that neither it nor a queue
	// below it has recorded use, so it keeps its settings.
	Permille  int64
	NoSamples bool
}

// Percentiles resolves each queue's percentile: its own (own[i], in
// thousandths; 0: none), else its nearest ancestor's, else def.
func Percentiles(tree *QueueTree, own []int64, def int64) []int64 {
	out := make([]int64, len(tree.Queues))
	for i := range tree.Queues { // a parent before its children
		switch {
		case own[i] > 0:
			out[i] = own[i]
		case tree.Parent[i] >= 0:
			out[i] = out[tree.Parent[i]]
		default:
			out[i] = def
		}
	}
	return out
}

// MaxRunningHeadroomPermille is the headroom a recommended max_running
// leaves above the peak, in thousandths.
const MaxRunningHeadroomPermille = 1200

// Recommend runs the percentile algorithm for every queue of a tree with
// the samples of each (by path) and each queue's percentile (Percentiles;
// Monarch's thresholds by tier: higher for tier 1 than for tier 3).
func Recommend(tree *QueueTree, samples map[string][]UsageSample, permille []int64) []Recommendation {
	out := make([]Recommendation, len(tree.Queues))
	for i := range tree.Queues {
		q := &tree.Queues[i]
		a := PercentileAllocation(samples[q.Path], permille[i])
		out[i] = Recommendation{Path: q.Path, Allocation: a, GuaranteeMilli: a.CPUMilli, Permille: permille[i],
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
	for i := range out {
		out[i].NoSamples = !data[i]
	}
	// Weights: siblings with recorded use in the proportions of their
	// guarantees; a sibling without keeps its weight (nothing says it
	// needs less), and then those with use share what they weigh
	// together now, so its part among them does not change.
	weigh := func(kids []int32) {
		var used, kept []int32
		var weighs int64
		for _, c := range kids {
			if data[c] {
				used = append(used, c)
				weighs += tree.Queues[c].EffectiveWeight()
			} else {
				kept = append(kept, c)
			}
		}
		for _, c := range kept {
			out[c].Weight = tree.Queues[c].EffectiveWeight()
		}
		if len(used) == 0 {
			return
		}
		least, sum := int64(0), int64(0)
		for _, c := range used {
			g := out[c].GuaranteeMilli
			sum += g
			if g > 0 && (least == 0 || g < least) {
				least = g
			}
		}
		for _, c := range used {
			w := int64(1)
			switch {
			case len(kept) > 0 && sum > 0:
				w = max(int64(math.Round(float64(weighs)*float64(out[c].GuaranteeMilli)/float64(sum))), 1)
			case len(kept) > 0:
				w = tree.Queues[c].EffectiveWeight()
			case least > 0:
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

// TierCheck is one of Monarch's checks of a recommendation across tiers
// (leaves grouped by name, tier1 before tier2): the percentiles decrease
// from tier to tier, and usage/capacity (the use over the window against
// the recommended guarantees) increases, so tier 1 has the most headroom.
type TierCheck struct {
	Check  string
	OK     bool
	Detail string
}

// CheckTiers runs Monarch's checks over a recommendation for a window of
// seconds. Tiers without a guarantee are left out of the second.
func CheckTiers(tree *QueueTree, recs []Recommendation, seconds int64) []TierCheck {
	type tier struct {
		name           string
		lo, hi         int64
		used, capacity float64
	}
	byName := map[string]*tier{}
	for i := range tree.Queues {
		if !tree.IsLeaf(int32(i)) {
			continue
		}
		name := TierOf(tree.Queues[i].Path)
		t := byName[name]
		if t == nil {
			t = &tier{name: name, lo: recs[i].Permille, hi: recs[i].Permille}
			byName[name] = t
		}
		t.lo, t.hi = min(t.lo, recs[i].Permille), max(t.hi, recs[i].Permille)
		t.used += float64(recs[i].Allocation.MilliSeconds)
		t.capacity += float64(recs[i].GuaranteeMilli) * float64(seconds)
	}
	tiers := slices.Collect(maps.Values(byName))
	slices.SortFunc(tiers, func(a, b *tier) int { return compareTiers(a.name, b.name) })
	if len(tiers) < 2 {
		return nil
	}
	pct := TierCheck{Check: "percentiles decrease from tier to tier", OK: true}
	ratio := TierCheck{Check: "usage/capacity increases from tier to tier", OK: true}
	var words, ratios []string
	var last *tier
	lastRatio := -1.0
	for _, t := range tiers {
		words = append(words, fmt.Sprintf("%s %s", t.name, permilleRange(t.lo, t.hi)))
		if last != nil && t.hi > last.lo {
			pct.OK = false
		}
		last = t
		if t.capacity > 0 {
			r := t.used / t.capacity
			ratios = append(ratios, fmt.Sprintf("%s %.2f", t.name, r))
			if r < lastRatio {
				ratio.OK = false
			}
			lastRatio = r
		}
	}
	pct.Detail = strings.Join(words, ", ")
	ratio.Detail = strings.Join(ratios, ", ")
	if len(ratios) < 2 {
		return []TierCheck{pct}
	}
	return []TierCheck{pct, ratio}
}

func permilleRange(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprintf("%g%%", float64(lo)/10)
	}
	return fmt.Sprintf("%g-%g%%", float64(lo)/10, float64(hi)/10)
}

// compareTiers orders tier names by the number they end in (tier2 before
// tier10), then by name.
func compareTiers(a, b string) int {
	na, oka := trailingNumber(a)
	nb, okb := trailingNumber(b)
	if oka && okb && na != nb {
		return cmp.Compare(na, nb)
	}
	return cmp.Compare(a, b)
}

func trailingNumber(s string) (int64, bool) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' && len(s)-i < 9 {
		i--
	}
	if i == len(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s[i:], 10, 64)
	return n, err == nil
}
