package placement

import (
	"fmt"
	"time"
)

// Monarch regenerates queue settings from history "automatically and
// periodically": a top queue's AutoApply has the leader run the
// recommendation over its tree every so often, move each setting at most
// a bounded step toward it, and apply the result as one change, or only
// record it (a dry run).

// AutoApply is a top queue's schedule of regenerated settings (zero
// EveryNs: none).
type AutoApply struct {
	// EveryNs is how often the leader regenerates the tree's settings.
	EveryNs int64
	// MaxChangePermille bounds each step of a weight, a guarantee or a
	// max_running: at most this fraction (in thousandths) of its value
	// now (0: DefaultMaxChangePermille).
	MaxChangePermille int64
	// DryRun only records each proposal (drover queue history).
	DryRun bool
	// Days is the window of recorded use it reads (0: DefaultAutoDays).
	Days int64
	// Keep is how many versions of the tree's settings are kept (0:
	// DefaultAutoKeep).
	Keep int64
	// Rebalance moves the tree's leaves between clusters in the same
	// step (Rebalance: their home clusters), off clusters above
	// HighPermille usage/capacity onto clusters that stay within
	// LowPermille (0: the defaults), at most MovesPerStep a step.
	Rebalance                 bool
	HighPermille, LowPermille int64
}

// Defaults of a rebalancing step.
const (
	DefaultHighPermille = 800
	DefaultLowPermille  = 600
)

// Marks are the usage/capacity ratios a rebalancing step moves work
// above and below.
func (a *AutoApply) Marks() (high, low float64) {
	h, l := a.HighPermille, a.LowPermille
	if h == 0 {
		h = DefaultHighPermille
	}
	if l == 0 {
		l = DefaultLowPermille
	}
	return float64(h) / 1000, float64(l) / 1000
}

// MovesPerStep bounds the leaves a step moves between clusters: its
// max_change of the tree's leaves, at least one.
func (a *AutoApply) MovesPerStep(leaves int) int {
	return max(int((int64(leaves)*a.Step()+999)/1000), 1)
}

// Bounds and defaults of AutoApply.
const (
	MinAutoEvery             = int64(time.Second)
	MaxAutoEvery             = int64(90 * 24 * time.Hour)
	DefaultMaxChangePermille = 250
	DefaultAutoDays          = 30
	MaxAutoDays              = 365
	DefaultAutoKeep          = 10
	MaxAutoKeep              = 100
)

// On reports whether the schedule runs.
func (a *AutoApply) On() bool { return a.EveryNs > 0 }

// Step is the fraction of a value one step may move it, in thousandths.
func (a *AutoApply) Step() int64 {
	if a.MaxChangePermille == 0 {
		return DefaultMaxChangePermille
	}
	return a.MaxChangePermille
}

// Window is the days of recorded use it reads.
func (a *AutoApply) Window() int64 {
	if a.Days == 0 {
		return DefaultAutoDays
	}
	return a.Days
}

// Versions is how many versions of the tree's settings are kept.
func (a *AutoApply) Versions() int64 {
	if a.Keep == 0 {
		return DefaultAutoKeep
	}
	return a.Keep
}

// Validate checks the bounds, naming the field at fault.
func (a *AutoApply) Validate(at string) error {
	if a.EveryNs != 0 && (a.EveryNs < MinAutoEvery || a.EveryNs > MaxAutoEvery) {
		return fmt.Errorf("%s: auto_apply every is %s; it must be between 1s and 2160h (90 days)", at, time.Duration(a.EveryNs))
	}
	if a.MaxChangePermille < 0 || a.MaxChangePermille > 1000 {
		return fmt.Errorf("%s: auto_apply max_change must be more than 0 and at most 1 (a fraction of each setting a step may move it)", at)
	}
	if a.Days < 0 || a.Days > MaxAutoDays {
		return fmt.Errorf("%s: auto_apply days must be between 1 and %d", at, MaxAutoDays)
	}
	if a.Keep < 0 || a.Keep > MaxAutoKeep {
		return fmt.Errorf("%s: auto_apply keep must be between 1 and %d versions", at, MaxAutoKeep)
	}
	if a.HighPermille < 0 || a.HighPermille > 1000 || a.LowPermille < 0 || a.LowPermille > 1000 {
		return fmt.Errorf("%s: auto_apply high and low must be usage/capacity ratios more than 0 and at most 1", at)
	}
	if high, low := a.Marks(); low >= high {
		return fmt.Errorf("%s: auto_apply low (%g) must be below high (%g): work moves off clusters above high onto those that stay within low", at, low, high)
	}
	return nil
}

// StepToward moves now toward target by at most step thousandths of now
// (of target, from 0; at least 1; never below floor).
func StepToward(now, target, step, floor int64) int64 {
	if target == now {
		return now
	}
	base := now
	if base == 0 {
		base = target
	}
	// step/1000 of base, rounded up, in integers (no overflow for any
	// base and a step of at most 1000).
	d := max(base/1000*step+(base%1000*step+999)/1000, 1)
	var next int64
	switch {
	case target > now && target-now <= d, target < now && now-target <= d:
		next = target
	case target > now:
		next = now + d
	default:
		next = now - d
	}
	return max(next, floor)
}

// Bounded returns the recommendations with each setting moved from its
// value now (the tree's queues) at most step thousandths toward the
// recommended one, and a parent's guarantee kept at least its
// children's, so the tree stays valid.
func Bounded(tree *QueueTree, recs []Recommendation, step int64) []Recommendation {
	out := make([]Recommendation, len(recs))
	for i := range recs {
		q := &tree.Queues[i]
		r := recs[i]
		r.Weight = StepToward(q.EffectiveWeight(), r.Weight, step, 1)
		r.GuaranteeMilli = StepToward(q.Guarantee.CPUMilli, r.GuaranteeMilli, step, 0)
		r.MaxRunningJobs = StepToward(q.Limits.MaxRunningJobs, r.MaxRunningJobs, step, 0)
		if q.Limits.MaxRunningJobs == 0 {
			r.MaxRunningJobs = 0 // no cap now: a step does not add one
		}
		out[i] = r
	}
	for i := len(out) - 1; i >= 0; i-- {
		var sum int64
		for _, c := range tree.Children[i] {
			sum += out[c].GuaranteeMilli
		}
		out[i].GuaranteeMilli = min(max(out[i].GuaranteeMilli, sum), MaxQueueMilli)
	}
	return out
}
