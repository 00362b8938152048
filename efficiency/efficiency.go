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
	JobGroup   string  // the path of its job's job group (empty: none)
	CPU        float64 // cores asked
	Memory     int64   // bytes given
	Seconds    float64 // wall time
	CPUSeconds float64 // CPU time used
	PeakMemory int64
	Cost       money.Amount
	Lines      []api.CostLine // its price per hour, by resource
	// Day is the day it ended (days since 1970-01-01, UTC).
	Day int32
}

// JobAttempts are a job's ended attempts that reported their usage, as a
// report reads them.
func JobAttempts(j *api.Job) []Attempt {
	group := j.Name
	if k := strings.LastIndexByte(group, '['); k > 0 && strings.HasSuffix(group, "]") {
		group = group[:k]
	}
	var out []Attempt
	for _, a := range j.Attempts {
		if a.Usage == nil || a.StartTime == nil || a.EndTime == nil {
			continue
		}
		mem := a.Memory
		if mem == 0 {
			mem = j.Memory
		}
		at := Attempt{Group: group, JobGroup: j.JobGroup, CPU: j.CPU, Memory: mem, Seconds: a.EndTime.Sub(*a.StartTime).Seconds(),
			CPUSeconds: a.Usage.CPUSeconds, PeakMemory: a.Usage.PeakMemory, Lines: a.CostLines, Day: int32(a.EndTime.Unix() / 86400)}
		if a.Cost != nil {
			at.Cost = *a.Cost
		}
		out = append(out, at)
	}
	return out
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

// Report groups the attempts by Group and JobGroup (in order of first
// appearance) and measures each group, each job group (with the job
// groups below it) and all of them.
func Report(atts []Attempt, opt Options) api.Efficiency {
	type key struct{ name, jobGroup string }
	var order []key
	by := map[key][]Attempt{}
	for _, a := range atts {
		if a.Seconds <= 0 {
			continue
		}
		k := key{a.Group, a.JobGroup}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], a)
	}
	out := api.Efficiency{Groups: []api.EfficiencyGroup{}}
	total := api.EfficiencyGroup{Name: "all"}
	var paths []string
	rollup := map[string]*api.EfficiencyGroup{}
	for _, k := range order {
		g := measure(k.name, by[k], opt)
		g.JobGroup = k.jobGroup
		out.Groups = append(out.Groups, g)
		sum(&total, &g)
		// The job group and each one above it.
		for p := k.jobGroup; p != ""; p = parentPath(p) {
			r := rollup[p]
			if r == nil {
				r = &api.EfficiencyGroup{Name: p, JobGroup: p}
				rollup[p] = r
				paths = append(paths, p)
			}
			sum(r, &g)
		}
	}
	slices.Sort(paths) // parents before their children
	for _, p := range paths {
		out.JobGroups = append(out.JobGroups, finished(*rollup[p]))
	}
	out.Total = finished(total)
	return out
}

// sum adds a measured group's attempts to a sum of groups.
func sum(t, g *api.EfficiencyGroup) {
	t.Attempts += g.Attempts
	t.CoreHoursReserved += g.CoreHoursReserved
	t.CoreHoursUsed += g.CoreHoursUsed
	t.WastedCoreHours += g.WastedCoreHours
	t.GiBHoursReserved += g.GiBHoursReserved
	t.GiBHoursPeak += g.GiBHoursPeak
	t.Cost = t.Cost.Add(g.Cost)
	t.SuggestedCost = t.SuggestedCost.Add(g.SuggestedCost)
}

// finished is a sum of groups with its ratios and savings.
func finished(t api.EfficiencyGroup) api.EfficiencyGroup {
	t.CPUEfficiency = ratio(t.CoreHoursUsed, t.CoreHoursReserved)
	t.MemoryEfficiency = ratio(t.GiBHoursPeak, t.GiBHoursReserved)
	t.Savings = max(t.Cost.Add(-t.SuggestedCost), 0)
	return t
}

// parentPath is the path of the job group above path ("": the batch).
func parentPath(path string) string {
	if k := strings.LastIndexByte(path, '/'); k >= 0 {
		return path[:k]
	}
	return ""
}

func measure(name string, atts []Attempt, opt Options) api.EfficiencyGroup {
	s := Summary{Name: name}
	cores := make([]float64, len(atts))
	peaks := make([]int64, len(atts))
	for i, a := range atts {
		s.Add(a)
		cores[i] = a.CPUSeconds / a.Seconds
		peaks[i] = a.PeakMemory
	}
	slices.Sort(cores)
	slices.Sort(peaks)
	g := s.finish(quantile(cores, opt.Quantile), quantile(peaks, opt.Quantile), opt)
	for _, a := range atts {
		g.SuggestedCost = g.SuggestedCost.Add(repriced(a, g.SuggestedCPU, g.SuggestedMemory))
	}
	g.Savings = max(g.Cost.Add(-g.SuggestedCost), 0)
	return g
}

// finish measures a summary whose attempts' cores used and peak memory are
// coresQ and peakQ at opt.Quantile, and suggests a size (the cost at that
// size is the caller's: exact per attempt, or from the summary's sums).
func (s *Summary) finish(coresQ float64, peakQ int64, opt Options) api.EfficiencyGroup {
	g := api.EfficiencyGroup{Name: s.Name, JobGroup: s.JobGroup, Attempts: s.Attempts, CPU: s.CPU, Memory: s.Memory,
		CoreHoursReserved: s.CoreHoursReserved, CoreHoursUsed: s.CoreHoursUsed, GiBHoursReserved: s.GiBHoursReserved,
		GiBHoursPeak: s.GiBHoursPeak, Cost: s.Cost, CoresP95: coresQ, PeakMemoryP95: peakQ}
	g.WastedCoreHours = max(g.CoreHoursReserved-g.CoreHoursUsed, 0)
	g.CPUEfficiency = ratio(g.CoreHoursUsed, g.CoreHoursReserved)
	g.MemoryEfficiency = ratio(g.GiBHoursPeak, g.GiBHoursReserved)
	// Never more than was asked: a job cannot use more than its limits,
	// so using them all is no evidence that it needs more (oom_retry is
	// the way to grow memory).
	g.SuggestedCPU = min(cpuMenu(coresQ*opt.Headroom), g.CPU)
	g.SuggestedMemory = min(memoryMenu(bytesOf(float64(peakQ)*opt.Headroom)), g.Memory)
	return g
}

// repriced is what attempt a would have cost asking for cpu cores and
// mem bytes (priceParts).
func repriced(a Attempt, cpu float64, mem int64) money.Amount {
	fixed, perCore, perGiB := priceParts(a)
	return money.FromDollars(fixed + perCore*cpu + perGiB*float64(mem)/(1<<30))
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
