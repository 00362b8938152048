package bench

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/drover-sched/drover/testkit/simworker"
)

// Millis converts durations to milliseconds (to the microsecond), the
// unit the benchmarks report.
func Millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d.Microseconds()) / 1000
	}
	return out
}

// Median is the middle of xs (the mean of the two middle values for an
// even count; 0 for none). xs is not changed.
func Median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Max is the largest of xs, and 0 for none (the figures are all positive).
func Max(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// Percentile is the value at p percent of sorted (ascending):
// sorted[len*p/100] (0 for none). bench e2e's p50 and p99 are this.
func Percentile(sorted []float64, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(max(len(sorted)*p/100, 0), len(sorted)-1)]
}

// Rate is events per second from the first of ts to the last (0 for
// fewer than two). ts is sorted in place.
func Rate(ts []time.Time) float64 {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	if len(ts) < 2 {
		return 0
	}
	return float64(len(ts)) / ts[len(ts)-1].Sub(ts[0]).Seconds()
}

// Bucket is one cumulative bucket of a Prometheus histogram.
type Bucket struct {
	UpperBound float64
	Count      uint64 // observations at or below UpperBound
}

// HistogramP99 is the 99th percentile of a histogram of n observations:
// the upper bound of the first bucket holding 99% of them (with drover's
// buckets, at most 10% above the true value), +Inf when none does.
func HistogramP99(buckets []Bucket, n uint64) float64 { return HistogramQuantile(buckets, n, 0.99) }

// HistogramQuantile is the q quantile of a histogram of n observations,
// as HistogramP99 reads the 99th.
func HistogramQuantile(buckets []Bucket, n uint64, q float64) float64 {
	for _, b := range buckets {
		if float64(b.Count) >= q*float64(n) {
			return b.UpperBound
		}
	}
	return math.Inf(1)
}

// HistogramMax is the largest observation of a histogram of n as its
// buckets tell it: the upper bound of the first bucket holding all n, 0
// with none, +Inf when one lies above every bucket.
func HistogramMax(buckets []Bucket, n uint64) float64 {
	if n == 0 {
		return 0
	}
	for _, b := range buckets {
		if b.Count >= n {
			return b.UpperBound
		}
	}
	return math.Inf(1)
}

// FairShareTolerance is the deviation from an equal split of the cores
// that a fair-share sample may show and still count as fair.
const FairShareTolerance = 0.05

// Fairness summarizes per-sample deviations from the fair share.
type Fairness struct {
	// Max and P50 are the worst and the median deviation; Within is the
	// fraction of samples within FairShareTolerance.
	Max, P50, Within float64
	// SettledAt is the run time (s) from which every sample was within
	// FairShareTolerance (-1: the last one was not).
	SettledAt float64
}

// SummarizeFairness reduces deviations devs, sampled at run times at
// (seconds), to a Fairness.
func SummarizeFairness(devs, at []float64) Fairness {
	f := Fairness{SettledAt: -1}
	if len(devs) == 0 {
		return f
	}
	sorted := slices.Sorted(slices.Values(devs))
	f.Max, f.P50 = sorted[len(sorted)-1], sorted[len(sorted)/2]
	for _, d := range sorted {
		if d <= FairShareTolerance {
			f.Within++
		}
	}
	f.Within /= float64(len(sorted))
	for i := len(devs) - 1; i >= 0 && devs[i] <= FairShareTolerance; i-- {
		f.SettledAt = at[i]
	}
	return f
}

// FairSample is one fair-share sample of bench sched: the deviations over
// the window and at the instant, and the tenants that held the fewest and
// the most cores on average over the window (ties to the first name).
type FairSample struct {
	At                    time.Duration // since the first submission
	Window, Instant       float64       // deviations from an equal split
	Least, Most           string
	LeastCores, MostCores float64
}

// NewFairSample makes a FairSample from two recorder samples dt apart.
func NewFairSample(at time.Duration, window, instant float64, prev, cur map[string]simworker.UserSample, dt time.Duration) FairSample {
	s := FairSample{At: at, Window: window, Instant: instant, LeastCores: math.Inf(1), MostCores: math.Inf(-1)}
	for name, c := range cur {
		avg := (c.CoreSeconds - prev[name].CoreSeconds) / dt.Seconds() / 1000
		if avg < s.LeastCores || (avg == s.LeastCores && name < s.Least) {
			s.Least, s.LeastCores = name, avg
		}
		if avg > s.MostCores || (avg == s.MostCores && name < s.Most) {
			s.Most, s.MostCores = name, avg
		}
	}
	return s
}
