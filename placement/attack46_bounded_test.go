package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Attacks on Bounded, StepToward, Recommend/Percentiles and TallySLO.

// atkTree builds a random valid tree: up to depth 4, each parent either
// without a cpu guarantee or with at least its children's sum.
func atkTree(rng *rand.Rand, scale int64) []Queue {
	var qs []Queue
	var build func(path string, depth int) int64
	build = func(path string, depth int) int64 {
		q := Queue{Path: path, Weight: rng.Int64N(12)}
		if rng.IntN(3) == 0 {
			q.Limits.MaxRunningJobs = 1 + rng.Int64N(500)
		}
		idx := len(qs)
		qs = append(qs, q)
		var sum int64
		if depth < 4 && rng.IntN(3) != 0 {
			for i := range 1 + rng.IntN(4) {
				sum += build(fmt.Sprintf("%s/q%d", path, i), depth+1)
			}
		}
		g := int64(0)
		switch {
		case sum == 0 && rng.IntN(2) == 0:
			g = rng.Int64N(scale)
		case sum > 0 && rng.IntN(3) != 0:
			g = min(sum+rng.Int64N(scale), MaxQueueMilli)
		}
		qs[idx].Guarantee.CPUMilli = g
		return g
	}
	for i := range 1 + rng.IntN(3) {
		build(fmt.Sprintf("top%d", i), 1)
	}
	return qs
}

// atkApply puts the bounded settings into the tree's queues and checks
// the tree.
func atkApply(tree *QueueTree, out []Recommendation) error {
	qs := slices.Clone(tree.Queues)
	for i := range qs {
		qs[i].Weight, qs[i].Guarantee.CPUMilli, qs[i].Limits.MaxRunningJobs = out[i].Weight, out[i].GuaranteeMilli, out[i].MaxRunningJobs
	}
	_, err := NewQueueTree(qs)
	return err
}

// TestAttack46BoundedRandomTreesStayValid: for many random valid trees
// of realistic size (up to 10,000 cores a queue), random usage and
// percentiles, and any step, Bounded leaves a valid tree; every weight
// is in 1..MaxQueueWeight; every setting but a parent's guarantee (which
// follows its children) moves at most its step; max_running is never
// added where there was none.
func TestAttack46BoundedRandomTreesStayValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 1))
	for n := range 3000 {
		qs := atkTree(rng, 10_000_000)
		tree, err := NewQueueTree(qs)
		if err != nil {
			t.Fatalf("tree %d: the generator made an invalid tree: %v", n, err)
		}
		samples := map[string][]UsageSample{}
		own := make([]int64, len(tree.Queues))
		for i, q := range tree.Queues {
			if rng.IntN(2) == 0 {
				for range rng.IntN(5) {
					samples[q.Path] = append(samples[q.Path], UsageSample{Seconds: 60 * (1 + rng.Int64N(100)), CPUMilli: rng.Int64N(40_000_000), Jobs: rng.Int64N(1000)})
				}
			}
			if rng.IntN(3) == 0 {
				own[i] = 1 + rng.Int64N(1000)
			}
		}
		recs := Recommend(tree, samples, Percentiles(tree, own, 950))
		step := []int64{1, 10, 250, 999, 1000, 1 + rng.Int64N(1000)}[rng.IntN(6)]
		out := Bounded(tree, recs, step)
		if err := atkApply(tree, out); err != nil {
			t.Fatalf("tree %d (step %d): Bounded left an invalid tree: %v", n, step, err)
		}
		for i := range out {
			q := &tree.Queues[i]
			o := out[i]
			if o.Weight < 1 || o.Weight > MaxQueueWeight || o.GuaranteeMilli < 0 || o.GuaranteeMilli > MaxQueueMilli {
				t.Fatalf("tree %d: %s out of bounds: %+v", n, q.Path, o)
			}
			if q.Limits.MaxRunningJobs == 0 && o.MaxRunningJobs != 0 {
				t.Fatalf("tree %d: %s gained a max_running cap %d", n, q.Path, o.MaxRunningJobs)
			}
			within := func(now, target, next int64) bool {
				base := now
				if base == 0 {
					base = target
				}
				d := max(int64(math.Ceil(float64(base)*float64(step)/1000)), 1)
				return next >= now-d && next <= now+d
			}
			if !within(q.EffectiveWeight(), recs[i].Weight, o.Weight) || !within(q.Limits.MaxRunningJobs, recs[i].MaxRunningJobs, o.MaxRunningJobs) {
				t.Fatalf("tree %d (step %d): %s moved more than a step: weight %d->%d, max_running %d->%d", n, step, q.Path,
					q.EffectiveWeight(), o.Weight, q.Limits.MaxRunningJobs, o.MaxRunningJobs)
			}
			if tree.IsLeaf(int32(i)) && !within(q.Guarantee.CPUMilli, recs[i].GuaranteeMilli, o.GuaranteeMilli) {
				t.Fatalf("tree %d (step %d): leaf %s's guarantee moved %d->%d", n, step, q.Path, q.Guarantee.CPUMilli, o.GuaranteeMilli)
			}
		}
	}
}

// TestAttack46StepTowardAtInt64End: a max_running of MaxInt64 jobs (a
// queue accepts any count >= 0) stepped down by a whole step (1000
// thousandths) goes to the target; float64(MaxInt64) rounds up to 2^63,
// whose conversion back to int64 overflows (to MinInt64 on amd64), and
// the step becomes 1.
func TestAttack46StepTowardAtInt64End(t *testing.T) {
	if got := StepToward(math.MaxInt64-1, math.MaxInt64, 1000, 0); got != math.MaxInt64 {
		t.Errorf("near MaxInt64 up: %d", got)
	}
	if got := StepToward(math.MaxInt64, 0, 1000, 0); got != 0 {
		t.Errorf("StepToward(MaxInt64, 0, 1000) = %d, want 0 (a whole step)", got)
	}
	if got := StepToward(math.MaxInt64, 0, 500, 0); got > math.MaxInt64/2+1 {
		t.Errorf("StepToward(MaxInt64, 0, 500) = %d, want about half", got)
	}
}

// TestAttack46TallySLOThresholdGuards: TallySLO's threshold reads 0 (and
// anything not in (0, 1]) as the default. NaN is not in (0, 1] either;
// it must not make every workflow unsuccessful.
func TestAttack46TallySLOThresholdGuards(t *testing.T) {
	runs := []WorkflowRun{{Project: "p", Workflow: "w", Queue: "o/tier1", Completed: 1, Met: true}}
	for _, th := range []float64{0, -1, 2, math.Inf(1), math.Inf(-1), math.NaN()} {
		got := TallySLO(runs, th)
		if !got.Workflows[0].Successful || got.Tiers[0].Successful != 1 {
			t.Errorf("threshold %v: a workflow whose every run met its SLO is not SLO-successful: %+v", th, got.Workflows[0])
		}
	}
}

// TestAttack46TallySLOOrderAndHostileNames: the tally does not depend on
// the order of the runs (ties of completion time and queue included),
// and names with control characters, slashes and 1 KiB of text are
// counted as they are, each its own workflow.
func TestAttack46TallySLOOrderAndHostileNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 3))
	names := []string{"w", "w\x00", "w\n", "\x1b[2Jw", string(make([]byte, 1024)), "a/b/c", "", "W"}
	var runs []WorkflowRun
	for i := range 2000 {
		runs = append(runs, WorkflowRun{Project: []string{"p", "q", ""}[rng.IntN(3)], Workflow: names[rng.IntN(len(names))],
			Queue: []string{"", "o/tier1", "o/tier2", "x/tier1"}[rng.IntN(4)], Completed: int64(rng.IntN(5)),
			Met: rng.IntN(2) == 0, Cancelled: rng.IntN(5) == 0})
		_ = i
	}
	want := fmt.Sprintf("%+v", TallySLO(runs, 0.9))
	for range 20 {
		rng.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		if got := fmt.Sprintf("%+v", TallySLO(runs, 0.9)); got != want {
			t.Fatal("the tally depends on the order of the runs")
		}
	}
	tally := TallySLO(runs, 0.9)
	var total int64
	for _, w := range tally.Workflows {
		total += w.Runs + w.Cancelled
	}
	if total != int64(len(runs)) {
		t.Fatalf("the workflows count %d runs and cancellations of %d", total, len(runs))
	}
	if len(tally.Workflows) > 3*len(names) {
		t.Fatalf("%d workflows of %d names in 3 projects", len(tally.Workflows), len(names))
	}
}
