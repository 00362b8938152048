package placement

import (
	"slices"
	"testing"
)

func clusters() []Cluster {
	return []Cluster{
		{Name: "a", Region: "east", CapacityMilli: 100_000, FreeMilli: 90_000, PricePerCoreHour: 0.04},
		{Name: "b", Region: "east", CapacityMilli: 100_000, FreeMilli: 20_000, PricePerCoreHour: 0.02},
		{Name: "c", Region: "west", CapacityMilli: 200_000, FreeMilli: 100_000, PricePerCoreHour: 0.03},
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
	if r := k.Admits(&cs[0], "highmem"); r != ReasonRegion {
		t.Errorf("east cluster: %v, want region", r)
	}
	if r := k.Admits(&cs[2], "standard"); r != ReasonPool {
		t.Errorf("other pool: %v, want pool", r)
	}
	if r := k.Admits(&cs[3], "highmem"); r != ReasonDisabled {
		t.Errorf("disabled cluster: %v, want disabled", r)
	}
	if r := k.Admits(&cs[2], "highmem"); r != 0 {
		t.Errorf("allowed: %v", r)
	}
	down := cs[2]
	down.Down = true
	if r := k.AdmitsCluster(&down); r != ReasonDown {
		t.Errorf("down cluster: %v", r)
	}
	var none Constraint
	if !none.Empty() || none.Admits(&cs[0], "any") != 0 {
		t.Error("the empty constraint must admit an enabled cluster")
	}
}

func TestQuotaRoom(t *testing.T) {
	q := Quota{CPUMilli: 10_000, Memory: 8 << 30, UsedMilli: 7_000, UsedMemory: 2 << 30}
	if n, r := q.Room(1000, 1<<30, 100); n != 3 || r != 0 {
		t.Errorf("room %d %v, want 3 (cpu bound)", n, r)
	}
	if n, r := q.Room(500, 4<<30, 100); n != 1 || r != 0 {
		t.Errorf("room %d %v, want 1 (memory bound)", n, r)
	}
	if n, r := q.Room(4000, 1<<30, 100); n != 0 || r != ReasonQuotaCPU {
		t.Errorf("room %d %v, want 0 for cpu", n, r)
	}
	if n, r := q.Room(100, 7<<30, 100); n != 0 || r != ReasonQuotaMemory {
		t.Errorf("room %d %v, want 0 for memory", n, r)
	}
	if n, _ := (&Quota{}).Room(1000, 1<<30, 42); n != 42 {
		t.Errorf("no quota: room %d, want the limit", n)
	}
	if _, err := ParseStrategy("biggest"); err == nil {
		t.Error("an unknown strategy parsed")
	}
}
