package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Attacks (helper 46b) on ReportByCluster and Rebalance.

const atkHour = 3600

// TestAttack46bRebalanceShareIgnoresMachineSize: a queue's share of its
// target is counted in instance-hours (Used.Instance / the target's
// instance-hours), so a queue holding 57.6 of the 64 cores of a
// one-machine cluster "fits" a cluster of ten 1-core machines at 9%:
// it would need 576% of it. The move must not be proposed (or its
// ToAfter must say the truth).
func TestAttack46bRebalanceShareIgnoresMachineSize(t *testing.T) {
	samples := []ClusterSample{
		{Cluster: "big", Seconds: 10 * atkHour, CPUMilli: 64_000, Memory: 256 << 30, Instances: 1},
		{Cluster: "small", Seconds: 10 * atkHour, CPUMilli: 10_000, Memory: 40 << 30, Instances: 10},
		{Cluster: "big", Queue: "org/tier3", Seconds: 10 * atkHour, CPUMilli: 57_600, Memory: 16 << 30},
	}
	moves := Rebalance(ReportByCluster(samples), map[string][]string{"org/tier3": nil}, nil, 0.8, 0.6, 10)
	for _, m := range moves {
		if m.To == "small" {
			t.Errorf("moved %s (57.6 cores) into 10 cores of %s, ToAfter %.2f (truly %.2f): %s", m.Queue, m.To, m.ToAfter, 57.6/10, m.Reason)
		}
	}
}

// TestAttack46bRebalanceSharesAreHoursNotRates: capacity and use are
// summed hours over the window, so a cluster that has existed for one
// day of a seven-day window (east, full at 90%) looks small against one
// that has existed all week (west, idle): its queue's 86 instance-hours
// are 13% of west's 672, and it moves there, where it will run at 90%.
func TestAttack46bRebalanceSharesAreHoursNotRates(t *testing.T) {
	samples := []ClusterSample{
		{Cluster: "east", Seconds: 24 * atkHour, CPUMilli: 64_000, Memory: 256 << 30, Instances: 4},
		{Cluster: "west", Seconds: 7 * 24 * atkHour, CPUMilli: 64_000, Memory: 256 << 30, Instances: 4},
		{Cluster: "east", Queue: "org/tier3", Seconds: 24 * atkHour, CPUMilli: 57_600, Memory: 32 << 30},
	}
	moves := Rebalance(ReportByCluster(samples), map[string][]string{"org/tier3": nil}, nil, 0.8, 0.6, 10)
	for _, m := range moves {
		t.Errorf("moved %s from %s to %s with ToAfter %.3f; at the rate it runs it takes %.2f of %s (above low 0.6): %s",
			m.Queue, m.From, m.To, m.ToAfter, 0.9, m.To, m.Reason)
	}
}

// TestAttack46bRebalanceStaleUseOfMovedQueue: a queue already moved off
// east (its home clusters are [west] now) still has a week of use in
// east in the window. Rebalance counts it as east's load and "moves" it
// again from east (to north, widening its routing to a cluster nobody
// chose), and east's stale ratio keeps moving other queues step after
// step. East holds 0.3 of work that may still run there: below high,
// nothing should move.
func TestAttack46bRebalanceStaleUseOfMovedQueue(t *testing.T) {
	var samples []ClusterSample
	for _, c := range []string{"east", "north", "west"} {
		samples = append(samples, ClusterSample{Cluster: c, Seconds: 10 * atkHour, CPUMilli: 64_000, Memory: 256 << 30, Instances: 4})
	}
	samples = append(samples,
		ClusterSample{Cluster: "east", Queue: "org/a", Seconds: 10 * atkHour, CPUMilli: 38_400, Memory: 8 << 30}, // 0.6
		ClusterSample{Cluster: "east", Queue: "org/b", Seconds: 10 * atkHour, CPUMilli: 19_200, Memory: 8 << 30}, // 0.3
		ClusterSample{Cluster: "west", Queue: "org/c", Seconds: 10 * atkHour, CPUMilli: 32_000, Memory: 8 << 30}, // 0.5
	)
	home := map[string][]string{"org/a": {"west"}, "org/b": {"east"}, "org/c": {"west"}}
	moves := Rebalance(ReportByCluster(samples), home, nil, 0.8, 0.6, 10)
	for _, m := range moves {
		if !slices.Contains(home[m.Queue], m.From) {
			t.Errorf("moved %s from %s, where it is no longer routed (home %v), to %s: home clusters become %v", m.Queue, m.From, home[m.Queue], m.To, m.HomeClusters)
		} else {
			t.Errorf("moved %s from %s (its stale ratio counts org/a, gone from it): %s", m.Queue, m.From, m.Reason)
		}
	}
}

// TestAttack46bReportOrderOfSamples: "the order of the samples does not
// matter": memory is summed as float64 bytes×seconds, past 2^53 for any
// cluster of real size over days (256 GiB for 10 hours is 2^52.2), so
// the sums round differently with the order of the samples.
func TestAttack46bReportOrderOfSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 2))
	var samples []ClusterSample
	for m := range 3000 {
		samples = append(samples,
			ClusterSample{Cluster: "east", Seconds: 60, CPUMilli: 64_000 + rng.Int64N(1000), Memory: 256<<30 + rng.Int64N(1<<30), Instances: 4},
			ClusterSample{Cluster: "east", Queue: fmt.Sprintf("org/q%d", m%7), Seconds: 60, CPUMilli: rng.Int64N(20_000), Memory: rng.Int64N(200 << 30)})
	}
	want := ReportByCluster(samples)
	for i := range 20 {
		s := slices.Clone(samples)
		rand.New(rand.NewPCG(uint64(i), 9)).Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		if got := ReportByCluster(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffle %d: the report differs (east all ratio %.20g vs %.20g, capacity %.20g vs %.20g GiB-hours)", i,
				got[0].All.Ratio, want[0].All.Ratio, got[0].Capacity.MemoryGiB, want[0].Capacity.MemoryGiB)
		}
	}
}

// atkClusterSamples makes random samples over nc clusters and nq queues.
func atkClusterSamples(rng *rand.Rand, nc, nq int) []ClusterSample {
	var out []ClusterSample
	for c := range nc {
		name := fmt.Sprintf("c%02d", c)
		inst := 1 + rng.Int64N(8)
		out = append(out, ClusterSample{Cluster: name, Seconds: 3600, CPUMilli: inst * 16_000, Memory: inst * 64 << 30, Instances: inst})
		for q := range nq {
			if rng.IntN(3) == 0 {
				continue
			}
			out = append(out, ClusterSample{Cluster: name, Queue: fmt.Sprintf("org/t%d/tier%d", q, 1+q%3), Seconds: 3600,
				CPUMilli: rng.Int64N(inst * 16_000 / int64(nq) * 2), Memory: rng.Int64N(inst * 64 << 30 / int64(nq) * 2)})
		}
	}
	return out
}

// TestAttack46bRebalanceInvariants: over random reports, every move is
// from a cluster above high (as the moves so far left it) to another
// below low that stays within low, no queue moves twice, at most max
// moves, home clusters sorted, without duplicates and including To but
// not From; and the answer is the same for any order of the reports
// and of the samples (samples in small integers: sums exact).
func TestAttack46bRebalanceInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 46))
	for iter := range 300 {
		nc, nq := 2+rng.IntN(6), 1+rng.IntN(12)
		samples := atkClusterSamples(rng, nc, nq)
		reps := ReportByCluster(samples)
		home := map[string][]string{}
		for q := range nq {
			path := fmt.Sprintf("org/t%d/tier%d", q, 1+q%3)
			switch rng.IntN(3) {
			case 0:
				home[path] = nil
			case 1:
				home[path] = slices.Compact(slices.Sorted(slices.Values([]string{fmt.Sprintf("c%02d", rng.IntN(nc)), fmt.Sprintf("c%02d", rng.IntN(nc))})))
			}
		}
		high := 0.3 + rng.Float64()*0.7
		low := high * rng.Float64()
		maxMoves := rng.IntN(5)
		moves := Rebalance(reps, home, nil, high, low, maxMoves)
		if len(moves) > maxMoves {
			t.Fatalf("iter %d: %d moves, max %d", iter, len(moves), maxMoves)
		}
		seen := map[string]bool{}
		for _, m := range moves {
			if seen[m.Queue] {
				t.Fatalf("iter %d: %s moved twice", iter, m.Queue)
			}
			seen[m.Queue] = true
			if _, ok := home[m.Queue]; !ok {
				t.Fatalf("iter %d: moved %s, not allowed to move", iter, m.Queue)
			}
			if m.From == m.To || m.FromRatio <= high || m.ToAfter > low || m.ToRatio >= low || math.IsNaN(m.ToAfter) || math.IsNaN(m.FromAfter) {
				t.Fatalf("iter %d: move %+v (high %g low %g)", iter, m, high, low)
			}
			if !slices.IsSorted(m.HomeClusters) || len(slices.Compact(slices.Clone(m.HomeClusters))) != len(m.HomeClusters) ||
				!slices.Contains(m.HomeClusters, m.To) || slices.Contains(m.HomeClusters, m.From) {
				t.Fatalf("iter %d: home clusters %v of move %+v", iter, m.HomeClusters, m)
			}
		}
		for range 3 {
			r2 := slices.Clone(reps)
			rng.Shuffle(len(r2), func(i, j int) { r2[i], r2[j] = r2[j], r2[i] })
			if got := Rebalance(r2, home, nil, high, low, maxMoves); !reflect.DeepEqual(got, moves) {
				t.Fatalf("iter %d: reports shuffled, moves %+v, want %+v", iter, got, moves)
			}
			s2 := slices.Clone(samples)
			rng.Shuffle(len(s2), func(i, j int) { s2[i], s2[j] = s2[j], s2[i] })
			if got := Rebalance(ReportByCluster(s2), home, nil, high, low, maxMoves); !reflect.DeepEqual(got, moves) {
				t.Fatalf("iter %d: samples shuffled, moves %+v, want %+v", iter, got, moves)
			}
		}
	}
}

// TestAttack46bReportOddSamples: zero capacity, zero seconds, capacity
// with no instances, negative and huge numbers stored: no NaN or
// infinity in any ratio or hour, and no move to a cluster without
// capacity.
func TestAttack46bReportOddSamples(t *testing.T) {
	samples := []ClusterSample{
		{Cluster: "zero", Seconds: 0, CPUMilli: 64_000, Memory: 1 << 30, Instances: 4},
		{Cluster: "zero", Queue: "org/a", Seconds: 60, CPUMilli: 1000, Memory: 1 << 30},
		{Cluster: "noinst", Seconds: 60, CPUMilli: 64_000, Memory: 1 << 30, Instances: 0},
		{Cluster: "neg", Seconds: -60, CPUMilli: 64_000, Memory: 1 << 30, Instances: 4},
		{Cluster: "neg", Queue: "org/b", Seconds: 60, CPUMilli: -1000, Memory: -1},
		{Cluster: "huge", Seconds: math.MaxInt64, CPUMilli: math.MaxInt64, Memory: math.MaxInt64, Instances: math.MaxInt64},
		{Cluster: "huge", Queue: "org/c", Seconds: math.MaxInt64, CPUMilli: math.MaxInt64, Memory: math.MaxInt64},
		{Cluster: "full", Seconds: 3600, CPUMilli: 1000, Memory: 1 << 30, Instances: 1},
		{Cluster: "full", Queue: "org/d", Seconds: 3600, CPUMilli: 1000, Memory: 1 << 30},
	}
	reps := ReportByCluster(samples)
	bad := func(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }
	for _, r := range reps {
		uses := append([]ClusterUse{r.All}, append(r.Tiers, r.Queues...)...)
		for _, u := range uses {
			if bad(u.Ratio) || bad(u.Used.Instance) || bad(u.Used.Vcore) || bad(u.Used.MemoryGiB) {
				t.Errorf("cluster %s, %q: %+v", r.Cluster, u.Name, u)
			}
		}
		if bad(r.Capacity.Instance) || bad(r.Capacity.Vcore) || bad(r.Capacity.MemoryGiB) {
			t.Errorf("cluster %s capacity %+v", r.Cluster, r.Capacity)
		}
	}
	home := map[string][]string{"org/a": nil, "org/b": nil, "org/c": nil, "org/d": nil}
	for _, m := range Rebalance(reps, home, nil, 0.8, 0.6, 10) {
		if m.To == "zero" || m.To == "noinst" || m.To == "neg" || bad(m.ToAfter) {
			t.Errorf("move to a cluster without capacity: %+v", m)
		}
	}
}

// TestAttack46bReportScale: a year of hourly samples (the report sums
// whatever the store returns) of 20 clusters and 200 leaves is added up
// in bounded time; Rebalance over 200 queues × 20 clusters too.
func TestAttack46bReportScale(t *testing.T) {
	if testing.Short() {
		t.Skip("scale")
	}
	const hours, nc, nq = 365 * 24, 20, 200 // hourly: 1.9M samples
	samples := make([]ClusterSample, 0, hours*nc*(nq/nc+1))
	for h := range hours {
		for c := range nc {
			name := fmt.Sprintf("c%02d", c)
			samples = append(samples, ClusterSample{Cluster: name, Seconds: 3600, CPUMilli: 640_000, Memory: 2560 << 30, Instances: 40})
			for q := c; q < nq; q += nc {
				samples = append(samples, ClusterSample{Cluster: name, Queue: fmt.Sprintf("org/t%d/tier%d", q, q%3+1), Seconds: 3600,
					CPUMilli: int64(1000 * (1 + (h+q)%60)), Memory: 1 << 30})
			}
		}
	}
	start := time.Now()
	reps := ReportByCluster(samples)
	home := map[string][]string{}
	for q := range nq {
		home[fmt.Sprintf("org/t%d/tier%d", q, q%3+1)] = nil
	}
	Rebalance(reps, home, nil, 0.05, 0.04, 1000)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("%d samples took %v", len(samples), d)
	}
}

// TestAttack46bNoNULInNames: the embedded store keys a sample by its
// queue, a NUL and its cluster; no queue path nor cluster name can hold
// a NUL (or be empty, which would read as a capacity sample).
func TestAttack46bNoNULInNames(t *testing.T) {
	for _, p := range []string{"a\x00b", "org/a\x00east", "\x00", "org/\x00"} {
		if ValidateQueuePath(p) == nil {
			t.Errorf("queue path %q accepted", p)
		}
		if ValidateName("cluster", p) == nil {
			t.Errorf("cluster name %q accepted", p)
		}
	}
	if ValidateQueuePath("") == nil || ValidateName("cluster", "") == nil {
		t.Errorf("an empty queue path or cluster name accepted")
	}
}
