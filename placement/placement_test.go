package placement

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func clusters() []Cluster {
	return []Cluster{
		{Name: "a", Region: "east", CapacityMilli: 100_000, FreeMilli: 90_000, PricePerCoreHour: 40_000_000},
		{Name: "b", Region: "east", CapacityMilli: 100_000, FreeMilli: 20_000, PricePerCoreHour: 20_000_000},
		{Name: "c", Region: "west", CapacityMilli: 200_000, FreeMilli: 100_000, PricePerCoreHour: 30_000_000},
		{Name: "d", Region: "west", Disabled: true, CapacityMilli: 100_000, FreeMilli: 100_000},
	}
}

func TestOrderByStrategy(t *testing.T) {
	cs := clusters()
	allowed := []bool{true, true, true, false}
	for _, c := range []struct {
		s     Strategy
		quota *Quota
		want  []int
	}{
		// least-loaded: a is 10% busy, c 50%, b 80%.
		{LeastLoaded, nil, []int{0, 2, 1}},
		{Pack, nil, []int{1, 2, 0}},
		{Cheapest, nil, []int{1, 2, 0}},
		// spread: the team's own use per cluster, least first.
		{Spread, &Quota{UsedByCluster: []int64{5000, 1000, 3000, 0}}, []int{1, 2, 0}},
		// spread with equal use: the cluster with more free cores first.
		{Spread, &Quota{UsedByCluster: []int64{0, 0, 0, 0}}, []int{2, 0, 1}},
		// spread for no team: the clusters' own reserved cores.
		{Spread, nil, []int{0, 1, 2}},
	} {
		got := Order(c.s, cs, allowed, c.quota, nil)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %+v: order %v, want %v", c.s, c.quota, got, c.want)
		}
	}
}

func TestConstraintAdmits(t *testing.T) {
	cs := clusters()
	k := Constraint{Regions: []string{"west"}, Pool: "highmem"}
	if r := k.Admits(&cs[0], "highmem", nil, false); r != ReasonRegion {
		t.Errorf("east cluster: %v, want region", r)
	}
	if r := k.Admits(&cs[2], "standard", nil, false); r != ReasonPool {
		t.Errorf("other pool: %v, want pool", r)
	}
	if r := k.Admits(&cs[3], "highmem", nil, false); r != ReasonDisabled {
		t.Errorf("disabled cluster: %v, want disabled", r)
	}
	if r := k.Admits(&cs[2], "highmem", nil, false); r != 0 {
		t.Errorf("allowed: %v", r)
	}
	down := cs[2]
	down.Down = true
	if r := k.AdmitsCluster(&down); r != ReasonDown {
		t.Errorf("down cluster: %v", r)
	}
	var none Constraint
	if !none.Empty() || none.Admits(&cs[0], "any", nil, false) != 0 {
		t.Error("the empty constraint must admit an enabled cluster")
	}
	// Labels: the worker carries every one, with its value.
	kl := Constraint{Labels: []string{"rack=r1", "ssd=true"}}
	for _, c := range []struct {
		labels map[string]string
		want   Reason
	}{
		{nil, ReasonLabels},
		{map[string]string{"rack": "r1"}, ReasonLabels},
		{map[string]string{"rack": "r2", "ssd": "true"}, ReasonLabels},
		{map[string]string{"rack": "r1", "ssd": "true", "other": "x"}, 0},
	} {
		if r := kl.Admits(&cs[2], "any", c.labels, false); r != c.want {
			t.Errorf("labels %v: %v, want %v", c.labels, r, c.want)
		}
	}
	if kl.Serves(cs[2].Name, cs[2].Region, "any", "", 0, 0, false) {
		t.Error("the autoscaler's machines carry no labels: they serve no job that asks for some")
	}
	if kl.Key() == none.Key() || kl.Empty() {
		t.Error("a constraint on labels is not the empty one")
	}
	// Labels a job may ask for: name-like keys, printable values, few.
	many := map[string]string{}
	for i := range MaxJobLabels + 1 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for _, bad := range []map[string]string{
		{"a": "x\x00b=y"}, {"a": "line\nbreak"}, {"": "v"}, {"a=b": "c"}, {"a b": "c"}, {"a": strings.Repeat("v", MaxLabelValue+1)},
		{"a": "\xff"}, many,
	} {
		if ValidateLabels(bad) == nil {
			t.Errorf("labels %q accepted", bad)
		}
	}
	if err := ValidateLabels(map[string]string{"rack": "r1", "topology/zone": "eu west 1", "disk.kind": "ssd"}); err != nil {
		t.Error(err)
	}
	// No value makes two constraints' keys alike.
	for _, pair := range [][2]Constraint{
		{{Labels: []string{"a=x\x00b=y"}}, {Labels: []string{"a=x", "b=y"}}},
		{{Regions: []string{"a"}, Clusters: []string{"b"}}, {Regions: []string{"a", "b"}}},
		{{Pool: "p\x00"}, {Pool: "p", GPUType: ""}},
		{{Labels: []string{"c=1"}}, {JobClusters: []string{"c=1"}}},
	} {
		if pair[0].Key() == pair[1].Key() {
			t.Errorf("%+v and %+v share the key %q", pair[0], pair[1], pair[0].Key())
		}
	}
}

func TestQuotaRoom(t *testing.T) {
	q := Quota{CPUMilli: 10_000, Memory: 8 << 30, UsedMilli: 7_000, UsedMemory: 2 << 30}
	if n, r := q.RoomGPU(1000, 1<<30, "", 0, 100); n != 3 || r != 0 {
		t.Errorf("room %d %v, want 3 (cpu bound)", n, r)
	}
	if n, r := q.RoomGPU(500, 4<<30, "", 0, 100); n != 1 || r != 0 {
		t.Errorf("room %d %v, want 1 (memory bound)", n, r)
	}
	if n, r := q.RoomGPU(4000, 1<<30, "", 0, 100); n != 0 || r != ReasonQuotaCPU {
		t.Errorf("room %d %v, want 0 for cpu", n, r)
	}
	if n, r := q.RoomGPU(100, 7<<30, "", 0, 100); n != 0 || r != ReasonQuotaMemory {
		t.Errorf("room %d %v, want 0 for memory", n, r)
	}
	if n, _ := (&Quota{}).RoomGPU(1000, 1<<30, "", 0, 42); n != 42 {
		t.Errorf("no quota: room %d, want the limit", n)
	}
	if _, err := ParseStrategy("biggest"); err == nil {
		t.Error("an unknown strategy parsed")
	}
}

// TestRankerGroups: a team's strategy orders groups (and clusters in
// none) as if each were one cluster; a group's strategy orders its own.
func TestRankerGroups(t *testing.T) {
	cs := []Cluster{
		{Name: "g1", CapacityMilli: 100_000, FreeMilli: 10_000, Group: 1},  // 90% busy
		{Name: "g2", CapacityMilli: 100_000, FreeMilli: 60_000, Group: 1},  // 40% busy
		{Name: "g3", CapacityMilli: 100_000, FreeMilli: 100_000, Group: 1}, // idle
		{Name: "lone", CapacityMilli: 100_000, FreeMilli: 50_000},
	}
	all := []bool{true, true, true, true}
	r := Ranker{Clusters: cs, Groups: []Group{{Name: "gpu", Strategy: Pack}}}
	// The team has 6 cores in the group (2 a cluster) and 3 in lone: the
	// group's use per cluster is less, so spread goes to the group first,
	// and inside it pack fills the busiest cluster first.
	q := &Quota{UsedByCluster: []int64{2000, 2000, 2000, 3000}}
	if got, want := r.Order(Spread, all, q, nil), []int{0, 1, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("spread team, pack group: %v, want %v", got, want)
	}
	if b := r.Best(Spread, all, q); b != 0 {
		t.Errorf("best %d, want 0 (the group, then its busiest cluster)", b)
	}
	// More use in the group per cluster than in lone: lone first.
	q = &Quota{UsedByCluster: []int64{5000, 5000, 5000, 3000}}
	if got, want := r.Order(Spread, all, q, nil), []int{3, 0, 1, 2}; !slices.Equal(got, want) {
		t.Errorf("spread team, group busier: %v, want %v", got, want)
	}
	// A group with no strategy of its own orders by the team's.
	r.Groups[0].Strategy = ""
	if got, want := r.Order(LeastLoaded, all, nil, nil), []int{2, 1, 0, 3}; !slices.Equal(got, want) {
		// group: 170 of 300 free (43% busy), lone 50% busy: the group
		// first, its clusters least loaded first.
		t.Errorf("least-loaded team, group without a strategy: %v, want %v", got, want)
	}
	// Only allowed clusters count: with g3 out, the group is 65% busy.
	some := []bool{true, true, false, true}
	if got, want := r.Order(LeastLoaded, some, nil, nil), []int{3, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("least-loaded without g3: %v, want %v", got, want)
	}
	if b := r.Best(LeastLoaded, some, nil); b != 3 {
		t.Errorf("best without g3: %d, want 3", b)
	}
	// With no groups, the ranker is the plain order.
	plain := Ranker{Clusters: clusters()}
	if got, want := plain.Order(Cheapest, []bool{true, true, true, false}, nil, nil), Order(Cheapest, clusters(), []bool{true, true, true, false}, nil, nil); !slices.Equal(got, want) {
		t.Errorf("no groups: %v, want %v", got, want)
	}
}
