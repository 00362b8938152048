package efficiency

import (
	"fmt"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// TestReportSuggestsWhatTheJobsUse: an array that asks for 4 cores and
// 8 GiB but uses one core and at most 1.5 GiB is told to ask for 2 cores
// (1 × 1.2, rounded up to a power of two) and 2 GiB (its p95 peak, 1.4
// GiB, × 1.2, rounded up), with the cost of its attempts at that size; a
// group that uses what it asks for is never told to ask for more, and
// saves nothing.
func TestReportSuggestsWhatTheJobsUse(t *testing.T) {
	lines := []api.CostLine{
		{Resource: "compute/default", Units: 4, PricePerHour: money.RateFromDollars(0.04)},
		{Resource: "memory/default", Units: 8, PricePerHour: money.RateFromDollars(0.005)},
		{Resource: "service-fee", Units: 4, PricePerHour: money.RateFromDollars(0.01)},
	}
	perHour := 4*0.04 + 8*0.005 + 4*0.01 // $0.24
	var atts []Attempt
	for i := range 20 {
		peak := int64(1 << 30)
		if i == 19 {
			peak = 1536 << 20
		}
		if i == 18 {
			peak = 1400 << 20
		}
		atts = append(atts, Attempt{Group: "align", CPU: 4, Memory: 8 << 30, Seconds: 3600, CPUSeconds: 3600, PeakMemory: peak,
			Cost: money.FromDollars(perHour), Lines: lines})
	}
	atts = append(atts, Attempt{Group: "merge", CPU: 1, Memory: 1 << 30, Seconds: 1800, CPUSeconds: 1790, PeakMemory: 900 << 20,
		Cost: money.FromDollars(0.03), Lines: []api.CostLine{{Resource: "compute/default", Units: 1, PricePerHour: money.RateFromDollars(0.06)}}})
	atts = append(atts, Attempt{Group: "never-started", Seconds: 0})
	r := Report(atts, DefaultOptions())
	if len(r.Groups) != 2 || r.Groups[0].Name != "align" || r.Groups[1].Name != "merge" {
		t.Fatalf("groups %+v", r.Groups)
	}
	g := r.Groups[0]
	if g.Attempts != 20 || g.CoreHoursReserved != 80 || g.CoreHoursUsed != 20 || g.WastedCoreHours != 60 || g.CPUEfficiency != 0.25 {
		t.Errorf("align's cores: %+v", g)
	}
	if g.CoresP95 != 1 || g.SuggestedCPU != 2 || g.PeakMemoryP95 != 1400<<20 || g.SuggestedMemory != 2<<30 {
		t.Errorf("align's suggestion: p95 %g cores, %d bytes; suggested %g cores, %d bytes", g.CoresP95, g.PeakMemoryP95, g.SuggestedCPU, g.SuggestedMemory)
	}
	// At 2 cores and 2 GiB: 2×0.04 + 2×0.005 + 2×0.01 = $0.11 an hour.
	if want := money.FromDollars(20 * 0.11); g.SuggestedCost != want || g.Savings != money.FromDollars(20*perHour).Add(-want) {
		t.Errorf("align's suggested cost %s (want %s), savings %s", g.SuggestedCost, want, g.Savings)
	}
	m := r.Groups[1]
	if m.SuggestedCPU != 1 || m.SuggestedMemory != 1<<30 || m.Savings != 0 {
		t.Errorf("merge, which uses what it asks for: %+v", m)
	}
	if r.Total.Attempts != 21 || r.Total.Cost != g.Cost.Add(m.Cost) || r.Total.CoreHoursReserved != 80.5 {
		t.Errorf("total %+v", r.Total)
	}
}

// TestMenus: suggestions round up to the menu.
func TestMenus(t *testing.T) {
	for c, want := range map[float64]float64{0: 0.25, 0.1: 0.25, 0.3: 0.5, 0.76: 1, 1.2: 2, 3: 4, 4: 4, 5: 8} {
		if got := cpuMenu(c); got != want {
			t.Errorf("cpuMenu(%g) = %g, want %g", c, got, want)
		}
	}
	for b, want := range map[int64]int64{0: 256 << 20, 300 << 20: 512 << 20, 1 << 30: 1 << 30, 1<<30 + 1: 2 << 30} {
		if got := memoryMenu(b); got != want {
			t.Errorf("memoryMenu(%d) = %d, want %d", b, got, want)
		}
	}
}

// TestReportRollsUpJobGroups: rows are kept apart by job group (the same
// name in two groups is two rows), and each job group sums its rows and
// those of the groups below it, parents first.
func TestReportRollsUpJobGroups(t *testing.T) {
	at := func(name, group string, cpuSec float64) Attempt {
		return Attempt{Group: name, JobGroup: group, CPU: 1, Memory: 1 << 30, Seconds: 3600, CPUSeconds: cpuSec, PeakMemory: 1 << 29, Cost: 100}
	}
	rep := Report([]Attempt{at("x", "a/b", 3600), at("x", "a", 1800), at("y", "c", 900), at("z", "", 0)}, DefaultOptions())
	if len(rep.Groups) != 4 || rep.Groups[0].JobGroup != "a/b" || rep.Groups[1].JobGroup != "a" {
		t.Fatalf("rows: %+v", rep.Groups)
	}
	var names []string
	for _, g := range rep.JobGroups {
		names = append(names, g.Name)
	}
	if fmt.Sprint(names) != "[a a/b c]" {
		t.Fatalf("job groups %v, want [a a/b c]", names)
	}
	a := rep.JobGroups[0]
	if a.Attempts != 2 || a.CoreHoursUsed != 1.5 || a.CoreHoursReserved != 2 || a.CPUEfficiency != 0.75 || a.Cost != 200 {
		t.Fatalf("a sums a and a/b: %+v", a)
	}
	if rep.Total.Attempts != 4 || rep.Total.Cost != 400 {
		t.Fatalf("total %+v", rep.Total)
	}
}
