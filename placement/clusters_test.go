package placement

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// clusterFixture: east (4 workers, 64 cores, 256 GiB) and west (same),
// over 10 hours; east's tier 3 holds 32 cores and 64 GiB, its tier 1 16
// cores and 192 GiB (memory dominates); west's tier 3 8 cores.
func clusterFixture() []ClusterSample {
	const h = 3600
	var out []ClusterSample
	for _, c := range []string{"east", "west"} {
		out = append(out, ClusterSample{Cluster: c, Seconds: 10 * h, CPUMilli: 64_000, Memory: 256 << 30, Instances: 4})
	}
	out = append(out,
		ClusterSample{Cluster: "east", Queue: "org/batch/tier3", Seconds: 10 * h, CPUMilli: 32_000, Memory: 64 << 30},
		ClusterSample{Cluster: "east", Queue: "org/prod/tier1", Seconds: 10 * h, CPUMilli: 16_000, Memory: 192 << 30},
		ClusterSample{Cluster: "west", Queue: "org/batch/tier3", Seconds: 5 * h, CPUMilli: 8_000, Memory: 8 << 30},
		ClusterSample{Cluster: "west", Queue: "org/batch/tier3", Seconds: 5 * h, CPUMilli: 8_000, Memory: 8 << 30})
	return out
}

// TestReportByCluster: hours by resource, usage/capacity by the dominant
// one, instance-hours as the dominant share of the cluster's.
func TestReportByCluster(t *testing.T) {
	reps := ReportByCluster(clusterFixture())
	if len(reps) != 2 || reps[0].Cluster != "east" {
		t.Fatalf("reports %+v", reps)
	}
	e := reps[0]
	if e.Capacity != (Hours{Instance: 40, Vcore: 640, MemoryGiB: 2560}) {
		t.Fatalf("east's capacity %+v", e.Capacity)
	}
	// All: 48 of 64 cores (0.75), 256 of 256 GiB (1.0): memory.
	if e.All.Ratio != 1 || e.All.Dominant != "memory" || e.All.Used.Vcore != 480 || e.All.Used.Instance != 40 {
		t.Fatalf("east in all %+v", e.All)
	}
	t1, t3 := e.Tiers[0], e.Tiers[1]
	if t1.Name != "tier1" || t1.Dominant != "memory" || t1.Ratio != 0.75 || t1.Used.Instance != 30 || t3.Name != "tier3" || t3.Dominant != "vcore" || t3.Ratio != 0.5 {
		t.Fatalf("east's tiers %+v", e.Tiers)
	}
	if w := reps[1]; math.Abs(w.All.Ratio-0.125) > 1e-9 || w.All.Used.Vcore != 80 {
		t.Fatalf("west %+v", w.All)
	}
	// Any order of the samples, the same report.
	s := clusterFixture()
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	if got := ReportByCluster(s); !reflect.DeepEqual(got, reps) {
		t.Fatalf("shuffled:\n%+v\nwant\n%+v", got, reps)
	}
}

// TestRebalance: from east (100%, above 80%) the largest queue that fits
// under west's 60% moves: tier 1 (75%) would take west to 87.5%, so
// tier 3 (50%) moves, its home clusters west; east then at 50% moves
// nothing more. No move where no target has room.
func TestRebalance(t *testing.T) {
	reps := ReportByCluster(clusterFixture())
	home := map[string][]string{"org/batch/tier3": {"east", "west"}, "org/prod/tier1": nil}
	moves := Rebalance(reps, home, nil, 0.8, 0.7, 10)
	if len(moves) != 1 {
		t.Fatalf("moves %+v", moves)
	}
	m := moves[0]
	if m.Queue != "org/batch/tier3" || m.From != "east" || m.To != "west" || !reflect.DeepEqual(m.HomeClusters, []string{"west"}) ||
		m.FromAfter != 0.5 || math.Abs(m.ToAfter-0.625) > 1e-9 || m.Reason == "" {
		t.Fatalf("move %+v", m)
	}
	if moves := Rebalance(reps, home, nil, 0.8, 0.3, 10); len(moves) != 0 {
		t.Fatalf("with no room under 30%%: %+v", moves)
	}
	if moves := Rebalance(reps, home, nil, 0.8, 0.7, 0); len(moves) != 0 {
		t.Fatalf("at most 0 moves: %+v", moves)
	}
	if moves := Rebalance(reps, map[string][]string{"org/prod/tier1": nil}, nil, 0.8, 0.7, 10); len(moves) != 0 {
		t.Fatalf("only tier 1 may move, and it fits nowhere: %+v", moves)
	}
}
