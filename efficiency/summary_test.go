package efficiency

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// TestPeriodAddsWhatBatchesReport: attempts summed per batch (as the
// history store keeps them) and added over a period report what one
// report of all the attempts does: the same attempts, hours and cost,
// percentiles at most one bucket (4.4%) above the exact ones, and a
// suggested cost that reprices each attempt as Report does.
func TestPeriodAddsWhatBatchesReport(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 45))
	lines := []api.CostLine{
		{Resource: "compute/default", Units: 4, PricePerHour: money.RateFromDollars(0.04)},
		{Resource: "memory/default", Units: 8, PricePerHour: money.RateFromDollars(0.005)},
		{Resource: "disk", Units: 10, PricePerHour: money.RateFromDollars(0.001)},
	}
	var all []Attempt
	var sums []Owned
	for batch := range 3 {
		var z Summarizer
		for range 200 {
			name := []string{"align", "call"}[rng.IntN(2)]
			sec := 60 + rng.Float64()*3600
			a := Attempt{Group: name, CPU: 4, Memory: 8 << 30, Seconds: sec, CPUSeconds: sec * rng.Float64() * 3,
				PeakMemory: int64(rng.Float64() * float64(6<<30)), Lines: lines, Day: 20000 + int32(rng.IntN(2))}
			a.Cost = repriced(a, a.CPU, a.Memory)
			all = append(all, a)
			z.Add(a)
		}
		for _, d := range z.Summaries() {
			sums = append(sums, Owned{BillingProject: "genomics", User: "alice", Batch: uint64(batch + 1), Summary: &d.Summary})
		}
	}
	if len(sums) != 3*2*2 {
		t.Fatalf("%d summaries: want one per batch, day and group", len(sums))
	}
	exact := Report(all, DefaultOptions())
	period := ReportPeriod(sums, DefaultOptions())
	if period.Batches != 3 || len(period.Groups) != 2 || len(period.Users) != 1 || len(period.Projects) != 1 {
		t.Fatalf("period: %d batches, %d groups, %d users, %d projects", period.Batches, len(period.Groups), len(period.Users), len(period.Projects))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	for _, e := range exact.Groups {
		var p api.EfficiencyGroup
		for _, g := range period.Groups {
			if g.Name == e.Name {
				p = g
			}
		}
		what := fmt.Sprintf("group %s", e.Name)
		if p.Attempts != e.Attempts || p.Cost != e.Cost || !near(p.CoreHoursReserved, e.CoreHoursReserved) || !near(p.CoreHoursUsed, e.CoreHoursUsed) ||
			!near(p.GiBHoursPeak, e.GiBHoursPeak) || p.CPUEfficiency != e.CPUEfficiency || p.MemoryEfficiency != e.MemoryEfficiency {
			t.Errorf("%s: period %+v\nexact %+v", what, p, e)
		}
		step := math.Exp2(1.0 / bucketsPerOctave)
		if p.PeakMemoryP95 < e.PeakMemoryP95 || float64(p.PeakMemoryP95) > float64(e.PeakMemoryP95)*step+1 {
			t.Errorf("%s: peak p95 %d, exact %d: want at most one bucket above", what, p.PeakMemoryP95, e.PeakMemoryP95)
		}
		if p.CoresP95 < e.CoresP95 || p.CoresP95 > e.CoresP95*step*(1+1e-12) {
			t.Errorf("%s: cores p95 %g, exact %g: want at most one bucket above", what, p.CoresP95, e.CoresP95)
		}
		// The same suggestion reprices to the same cost (to a
		// nano-dollar an attempt: Report rounds each).
		if p.SuggestedCPU == e.SuggestedCPU && p.SuggestedMemory == e.SuggestedMemory {
			if d := p.SuggestedCost - e.SuggestedCost; d > money.Amount(e.Attempts) || d < -money.Amount(e.Attempts) {
				t.Errorf("%s: suggested cost %s over the period, %s exact", what, p.SuggestedCost, e.SuggestedCost)
			}
		} else {
			t.Logf("%s: the period suggests %g cores, %d bytes; exact %g, %d", what, p.SuggestedCPU, p.SuggestedMemory, e.SuggestedCPU, e.SuggestedMemory)
		}
	}
	if period.Total.Attempts != exact.Total.Attempts || period.Total.Cost != exact.Total.Cost || period.Users[0].Cost != exact.Total.Cost {
		t.Errorf("total %+v, exact %+v", period.Total, exact.Total)
	}
	// Groups with the most savings come first.
	if period.Groups[0].Savings < period.Groups[1].Savings {
		t.Errorf("groups in order %s (%s), %s (%s)", period.Groups[0].Name, period.Groups[0].Savings, period.Groups[1].Name, period.Groups[1].Savings)
	}
}

// TestHistogramQuantile: the quantile is the upper bound of the bucket of
// the ⌈q·n⌉th value, never below it; zero stays zero.
func TestHistogramQuantile(t *testing.T) {
	var h Histogram
	for v := 1; v <= 100; v++ {
		h.add(float64(v), 1)
	}
	if q := h.Quantile(0.95); q < 95 || q > 95*math.Exp2(1.0/16) {
		t.Errorf("p95 of 1..100: %g", q)
	}
	if q := h.Quantile(0); q < 1 || q > math.Exp2(1.0/16) {
		t.Errorf("p0 of 1..100: %g", q)
	}
	var z Histogram
	z.add(0, 5)
	if q := z.Quantile(0.95); q != 0 {
		t.Errorf("p95 of zeros: %g", q)
	}
	if q := (Histogram{}).Quantile(0.5); q != 0 {
		t.Errorf("an empty histogram: %g", q)
	}
}

// TestSummarizerBoundsItsSummaries: a batch of more groups than
// MaxSummaries keeps MaxSummaries, and counts the rest in OtherJobs.
func TestSummarizerBoundsItsSummaries(t *testing.T) {
	var z Summarizer
	for i := range MaxSummaries + 50 {
		z.Add(Attempt{Group: fmt.Sprint("g", i), CPU: 1, Memory: 1 << 30, Seconds: 10, CPUSeconds: 5, PeakMemory: 1 << 20, Day: 3})
	}
	s := z.Summaries()
	if len(s) != MaxSummaries+1 || s[MaxSummaries].Name != OtherJobs || s[MaxSummaries].Attempts != 50 {
		t.Fatalf("%d summaries, the last %+v", len(s), s[len(s)-1].Summary)
	}
}
