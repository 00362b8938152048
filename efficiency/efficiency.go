// Package efficiency measures what jobs asked for against what they used
// and says what they should ask for instead (right-sizing): per group of
// jobs (a job block, an array), the cores and memory reserved and used,
// the waste in core-hours and dollars, and a suggested cpu and memory
// with what the same attempts would have cost with it. It is pure: the
// server hands it the ended attempts it read.
package efficiency

import (
	"cmp"
	"math"
	"slices"
	"strings"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// Attempt is one ended attempt with its worker's usage.
type Attempt struct {
	Group      string  // its job's name without the array index
	CPU        float64 // cores asked
	Memory     int64   // bytes given
	Seconds    float64 // wall time
	CPUSeconds float64 // CPU time used
	PeakMemory int64
	Cost       money.Amount
	Lines      []api.CostLine // its price per hour, by resource
}

// Options are the rule's numbers.
type Options struct {
	// Quantile of the attempts' use a suggestion covers, and Headroom
	// the factor above it (peak memory p95 × 1.2).
	Quantile float64
	Headroom float64
}

// DefaultOptions covers the 95th percentile with 20% to spare.
func DefaultOptions() Options { return Options{Quantile: 0.95, Headroom: 1.2} }

// Report groups the attempts by Group (in order of first appearance)
// and measures each group and all of them.
func Report(atts []Attempt, opt Options) api.Efficiency {
	var order []string
	by := map[string][]Attempt{}
	for _, a := range atts {
		if a.Seconds <= 0 {
			continue
		}
		if _, ok := by[a.Group]; !ok {
			order = append(order, a.Group)
		}
		by[a.Group] = append(by[a.Group], a)
	}
	out := api.Efficiency{Groups: []api.EfficiencyGroup{}}
	var total api.EfficiencyGroup
	total.Name = "all"
	for _, name := range order {
		g := measure(name, by[name], opt)
		out.Groups = append(out.Groups, g)
		total.Attempts += g.Attempts
		total.CoreHoursReserved += g.CoreHoursReserved
		total.CoreHoursUsed += g.CoreHoursUsed
		total.WastedCoreHours += g.WastedCoreHours
		total.GiBHoursReserved += g.GiBHoursReserved
		total.GiBHoursPeak += g.GiBHoursPeak
		total.Cost = total.Cost.Add(g.Cost)
		total.SuggestedCost = total.SuggestedCost.Add(g.SuggestedCost)
	}
	total.CPUEfficiency = ratio(total.CoreHoursUsed, total.CoreHoursReserved)
	total.MemoryEfficiency = ratio(total.GiBHoursPeak, total.GiBHoursReserved)
	total.Savings = max(total.Cost.Add(-total.SuggestedCost), 0)
	out.Total = total
	return out
}

func measure(name string, atts []Attempt, opt Options) api.EfficiencyGroup {
	g := api.EfficiencyGroup{Name: name, Attempts: int64(len(atts))}
	cores := make([]float64, len(atts))
	peaks := make([]int64, len(atts))
	for i, a := range atts {
		h := a.Seconds / 3600
		g.CoreHoursReserved += a.CPU * h
		g.CoreHoursUsed += a.CPUSeconds / 3600
		g.GiBHoursReserved += float64(a.Memory) / (1 << 30) * h
		g.GiBHoursPeak += float64(a.PeakMemory) / (1 << 30) * h
		g.Cost = g.Cost.Add(a.Cost)
		cores[i] = a.CPUSeconds / a.Seconds
		peaks[i] = a.PeakMemory
		g.CPU = max(g.CPU, a.CPU)
		g.Memory = max(g.Memory, a.Memory)
	}
	g.WastedCoreHours = max(g.CoreHoursReserved-g.CoreHoursUsed, 0)
	g.CPUEfficiency = ratio(g.CoreHoursUsed, g.CoreHoursReserved)
	g.MemoryEfficiency = ratio(g.GiBHoursPeak, g.GiBHoursReserved)
	slices.Sort(cores)
	slices.Sort(peaks)
	g.CoresP95 = quantile(cores, opt.Quantile)
	g.PeakMemoryP95 = quantile(peaks, opt.Quantile)
	// Never more than was asked: a job cannot use more than its limits,
	// so using them all is no evidence that it needs more (oom_retry is
	// the way to grow memory).
	g.SuggestedCPU = min(cpuMenu(g.CoresP95*opt.Headroom), g.CPU)
	g.SuggestedMemory = min(memoryMenu(int64(math.Ceil(float64(g.PeakMemoryP95)*opt.Headroom))), g.Memory)
	for _, a := range atts {
		g.SuggestedCost = g.SuggestedCost.Add(repriced(a, g.SuggestedCPU, g.SuggestedMemory))
	}
	g.Savings = max(g.Cost.Add(-g.SuggestedCost), 0)
	return g
}

// repriced is what attempt a would have cost asking for cpu cores and
// mem bytes: each line of its price with those units (cores for compute
// and the per-core fee, GiB for memory; the rest as it was), over its
// time.
func repriced(a Attempt, cpu float64, mem int64) money.Amount {
	var perHour float64 // dollars
	for _, l := range a.Lines {
		units := l.Units
		switch {
		case strings.HasPrefix(l.Resource, "compute"), l.Resource == "service-fee":
			units = cpu
		case strings.HasPrefix(l.Resource, "memory"):
			units = float64(mem) / (1 << 30)
		}
		perHour += l.PricePerHour.Dollars() * units
	}
	return money.FromDollars(perHour * a.Seconds / 3600)
}

// cpuMenu rounds cores up to what a job is usually given: quarters of a
// core below one, then whole powers of two.
func cpuMenu(c float64) float64 {
	if c <= 0.25 {
		return 0.25
	}
	if c <= 1 {
		return math.Ceil(c*4) / 4
	}
	return math.Pow(2, math.Ceil(math.Log2(c)))
}

// memoryMenu rounds bytes up to a power of two MiB, 256 MiB at least.
func memoryMenu(b int64) int64 {
	m := int64(256 << 20)
	for m < b && m < api.MaxMemory {
		m *= 2
	}
	return m
}

func quantile[T cmp.Ordered](sorted []T, q float64) T {
	var zero T
	if len(sorted) == 0 {
		return zero
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return math.Round(a/b*1000) / 1000
}
