package efficiency

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// Summary is a group's attempts in sums that add: the history store keeps
// one per group of jobs of a finished batch and day (an attempt counts on
// the day, UTC, it ended, as in the billing ledger), and a report over a
// period (ReportPeriod) adds those of many batches. Its percentiles come
// from histograms whose buckets are 1/16 of a power of two wide, so a
// period's p95 is at most 4.4% above the exact one (a batch's own report
// is exact).
type Summary struct {
	Name     string `json:"name"`
	JobGroup string `json:"job_group,omitempty"`
	Attempts int64  `json:"attempts"`
	// The most an attempt asked for.
	CPU    float64 `json:"cpu"`
	Memory int64   `json:"memory"`

	CoreHoursReserved float64      `json:"core_hours_reserved"`
	CoreHoursUsed     float64      `json:"core_hours_used"`
	GiBHoursReserved  float64      `json:"gib_hours_reserved"`
	GiBHoursPeak      float64      `json:"gib_hours_peak"`
	Cost              money.Amount `json:"cost"`
	// An attempt's price asking c cores and m GiB is Fixed + PerCore×c
	// + PerGiB×m dollars (priceParts); these sum the attempts'.
	Fixed   float64 `json:"fixed"`
	PerCore float64 `json:"per_core"`
	PerGiB  float64 `json:"per_gib"`
	// Cores counts the attempts by their mean cores used, Peaks by their
	// peak memory in bytes.
	Cores Histogram `json:"cores"`
	Peaks Histogram `json:"peaks"`
}

// Histogram counts values by bucket: bucket b holds the values in
// (2^((b-1)/16), 2^(b/16)]; zeroBucket holds those at most 0.
type Histogram map[int]int64

const (
	bucketsPerOctave = 16
	zeroBucket       = -1 << 20
	maxBucket        = 64 * bucketsPerOctave // 2^64
)

func bucketOf(v float64) int {
	if !(v > 0) {
		return zeroBucket
	}
	b := int(math.Ceil(bucketsPerOctave * math.Log2(v)))
	return min(max(b, -maxBucket), maxBucket)
}

// upper is the largest value bucket b holds.
func upper(b int) float64 {
	if b == zeroBucket {
		return 0
	}
	return math.Exp2(float64(b) / bucketsPerOctave)
}

func (h *Histogram) add(v float64, n int64) {
	if *h == nil {
		*h = Histogram{}
	}
	(*h)[bucketOf(v)] += n
}

// merge adds o's counts, bucket by bucket.
func (h *Histogram) merge(o Histogram) {
	if len(o) == 0 {
		return
	}
	if *h == nil {
		*h = Histogram{}
	}
	for b, n := range o {
		(*h)[b] += n
	}
}

// Quantile is the upper bound of the bucket holding the value at quantile
// q (as quantile: the ⌈q·n⌉th smallest); 0 for no values.
func (h Histogram) Quantile(q float64) float64 {
	var n int64
	keys := make([]int, 0, len(h))
	for b, c := range h {
		keys = append(keys, b)
		n += c
	}
	if n <= 0 {
		return 0
	}
	slices.Sort(keys)
	want := min(max(int64(math.Ceil(q*float64(n))), 1), n)
	var seen int64
	for _, b := range keys {
		if seen += h[b]; seen >= want {
			return upper(b)
		}
	}
	return upper(keys[len(keys)-1])
}

// Add adds attempt a (one that ran: Seconds > 0).
func (s *Summary) Add(a Attempt) {
	h := a.Seconds / 3600
	s.Attempts++
	s.CPU = max(s.CPU, a.CPU)
	s.Memory = max(s.Memory, a.Memory)
	s.CoreHoursReserved += a.CPU * h
	s.CoreHoursUsed += a.CPUSeconds / 3600
	s.GiBHoursReserved += float64(a.Memory) / (1 << 30) * h
	s.GiBHoursPeak += float64(a.PeakMemory) / (1 << 30) * h
	s.Cost = s.Cost.Add(a.Cost)
	fixed, perCore, perGiB := priceParts(a)
	s.Fixed += fixed
	s.PerCore += perCore
	s.PerGiB += perGiB
	s.Cores.add(a.CPUSeconds/a.Seconds, 1)
	s.Peaks.add(float64(a.PeakMemory), 1)
}

// bytesOf is b bytes rounded up, at most math.MaxInt64 (a histogram's
// top bucket reaches 2^64).
func bytesOf(b float64) int64 {
	if b >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Ceil(b))
}

// Merge adds another summary.
func (s *Summary) Merge(o *Summary) {
	s.Attempts += o.Attempts
	s.CPU = max(s.CPU, o.CPU)
	s.Memory = max(s.Memory, o.Memory)
	s.CoreHoursReserved += o.CoreHoursReserved
	s.CoreHoursUsed += o.CoreHoursUsed
	s.GiBHoursReserved += o.GiBHoursReserved
	s.GiBHoursPeak += o.GiBHoursPeak
	s.Cost = s.Cost.Add(o.Cost)
	s.Fixed += o.Fixed
	s.PerCore += o.PerCore
	s.PerGiB += o.PerGiB
	s.Cores.merge(o.Cores)
	s.Peaks.merge(o.Peaks)
}

// MaxSummaries bounds the summaries of one batch the history keeps: the
// attempts of groups past it count in one named OtherJobs.
const MaxSummaries = 1000

// OtherJobs names the summary of a batch's groups past MaxSummaries.
const OtherJobs = "(other jobs)"

// DaySummary is a Summary of the attempts that ended on one day (days
// since 1970-01-01, UTC).
type DaySummary struct {
	Day int32
	Summary
}

// Summarizer sums a batch's attempts by day, group and job group, in the
// order they first appear, as the history store keeps them.
type Summarizer struct {
	by  map[sumKey]int
	out []DaySummary
}

type sumKey struct {
	day            int32
	name, jobGroup string
}

// Add adds attempt a.
func (z *Summarizer) Add(a Attempt) {
	if a.Seconds <= 0 {
		return
	}
	if z.by == nil {
		z.by = map[sumKey]int{}
	}
	k := sumKey{a.Day, a.Group, a.JobGroup}
	i, ok := z.by[k]
	if !ok {
		if len(z.out) >= MaxSummaries {
			k = sumKey{a.Day, OtherJobs, ""}
			i, ok = z.by[k]
		}
		if !ok {
			i = len(z.out)
			z.by[k] = i
			z.out = append(z.out, DaySummary{Day: a.Day, Summary: Summary{Name: k.name, JobGroup: k.jobGroup}})
		}
	}
	z.out[i].Add(a)
}

// Summaries are the sums so far.
func (z *Summarizer) Summaries() []DaySummary { return z.out }

// Owned is a summary with the billing project and user whose batch it is.
type Owned struct {
	BillingProject string
	User           string
	Batch          uint64
	Summary        *Summary
}

// ReportPeriod adds the summaries of many batches by billing project,
// user, group and job group, and measures each, each user, each project
// and all of them (groups with the most savings first).
func ReportPeriod(sums []Owned, opt Options) api.EfficiencyPeriod {
	type key struct{ project, user, name, jobGroup string }
	by := map[key]*Summary{}
	var order []key
	batches := map[uint64]bool{}
	users := map[string]*api.EfficiencyGroup{}
	projects := map[string]*api.EfficiencyGroup{}
	total := api.EfficiencyGroup{Name: "all"}
	for _, o := range sums {
		batches[o.Batch] = true
		k := key{o.BillingProject, o.User, o.Summary.Name, o.Summary.JobGroup}
		s := by[k]
		if s == nil {
			s = &Summary{Name: k.name, JobGroup: k.jobGroup}
			by[k] = s
			order = append(order, k)
		}
		s.Merge(o.Summary)
	}
	out := api.EfficiencyPeriod{Batches: int64(len(batches)), Groups: []api.EfficiencyGroup{}}
	for _, k := range order {
		s := by[k]
		g := s.finish(s.Cores.Quantile(opt.Quantile), bytesOf(s.Peaks.Quantile(opt.Quantile)), opt)
		g.SuggestedCost = money.FromDollars(s.Fixed + s.PerCore*g.SuggestedCPU + s.PerGiB*float64(g.SuggestedMemory)/(1<<30))
		g.Savings = max(g.Cost.Add(-g.SuggestedCost), 0)
		g.BillingProject, g.User = k.project, k.user
		out.Groups = append(out.Groups, g)
		for _, t := range []struct {
			m    map[string]*api.EfficiencyGroup
			name string
		}{{users, k.user}, {projects, k.project}} {
			r := t.m[t.name]
			if r == nil {
				r = &api.EfficiencyGroup{Name: t.name}
				t.m[t.name] = r
			}
			sum(r, &g)
		}
		sum(&total, &g)
	}
	slices.SortStableFunc(out.Groups, func(a, b api.EfficiencyGroup) int { return cmp.Compare(b.Savings, a.Savings) })
	for _, t := range []struct {
		m   map[string]*api.EfficiencyGroup
		out *[]api.EfficiencyGroup
	}{{users, &out.Users}, {projects, &out.Projects}} {
		for _, name := range slices.Sorted(maps.Keys(t.m)) {
			*t.out = append(*t.out, finished(*t.m[name]))
		}
	}
	out.Total = finished(total)
	return out
}

// priceParts splits what attempt a cost an hour by what it asked for: a
// price line of compute or the per-core fee scales with its cores, one of
// memory with its GiB, the rest not. a's price asking c cores and m GiB
// is fixed + perCore×c + perGiB×m dollars, each over its time.
func priceParts(a Attempt) (fixed, perCore, perGiB float64) {
	h := a.Seconds / 3600
	for _, l := range a.Lines {
		rate := l.PricePerHour.Dollars() * h
		switch {
		case strings.HasPrefix(l.Resource, "compute"), l.Resource == "service-fee":
			perCore += rate
		case strings.HasPrefix(l.Resource, "memory"):
			perGiB += rate
		default:
			fixed += rate * l.Units
		}
	}
	return fixed, perCore, perGiB
}
