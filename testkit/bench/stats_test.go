package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/testkit/simworker"
)

func TestMedianAndMax(t *testing.T) {
	for _, c := range []struct {
		xs          []float64
		median, max float64
	}{
		{nil, 0, 0},
		{[]float64{7}, 7, 7},
		{[]float64{3, 1, 2}, 2, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 4},
		{[]float64{785.191, 929.045}, 857.118, 929.045},
	} {
		in := slices.Clone(c.xs)
		if got := Median(c.xs); math.Abs(got-c.median) > 1e-9 {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.median)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median sorted its argument: %v", c.xs)
		}
		if got := Max(c.xs); got != c.max {
			t.Errorf("Max(%v) = %v, want %v", c.xs, got, c.max)
		}
	}
}

func TestMillis(t *testing.T) {
	got := Millis([]time.Duration{1500 * time.Microsecond, 2 * time.Second, 999 * time.Nanosecond})
	if !slices.Equal(got, []float64{1.5, 2000, 0}) {
		t.Fatalf("Millis = %v", got)
	}
}

// TestPercentile: the nearest rank below, sorted[len*p/100], the figure
// bench e2e has always reported: p99 of 100 values is the 100th, not the
// 99th that (len-1)*p/100 would give.
func TestPercentile(t *testing.T) {
	s := make([]float64, 100)
	for i := range s {
		s[i] = float64(i + 1)
	}
	if got := Percentile(s, 99); got != 100 {
		t.Errorf("p99 of 1..100 = %v, want 100", got)
	}
	if got := Percentile(s, 50); got != 51 {
		t.Errorf("p50 of 1..100 = %v, want 51", got)
	}
	if got := Percentile(s[:3], 99); got != 3 {
		t.Errorf("p99 of 1..3 = %v, want 3", got)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func TestRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ts := []time.Time{t0.Add(2 * time.Second), t0, t0.Add(time.Second), t0.Add(4 * time.Second)}
	if got := Rate(ts); got != 1 {
		t.Errorf("4 events over 4s: %v/s, want 1", got)
	}
	if !ts[0].Equal(t0) {
		t.Errorf("not sorted: %v", ts)
	}
	if Rate(ts[:1]) != 0 || Rate(nil) != 0 {
		t.Error("a rate of fewer than two events")
	}
}

func TestHistogramP99(t *testing.T) {
	b := []Bucket{{0.001, 10}, {0.01, 98}, {0.1, 99}, {1, 100}}
	if got := HistogramP99(b, 100); got != 0.1 {
		t.Errorf("p99 = %v, want 0.1 (the first bucket holding 99)", got)
	}
	if got := HistogramP99(b, 98); got != 0.01 {
		t.Errorf("p99 of 98 = %v, want 0.01", got)
	}
	if got := HistogramP99(b, 1000); !math.IsInf(got, 1) {
		t.Errorf("observations above every bucket: %v, want +Inf", got)
	}
	if got := HistogramP99(nil, 0); !math.IsInf(got, 1) {
		t.Errorf("no buckets: %v", got)
	}
}

func TestHistogramMax(t *testing.T) {
	b := []Bucket{{0.001, 10}, {0.01, 98}, {0.1, 99}, {1, 100}}
	if got := HistogramMax(b, 99); got != 0.1 {
		t.Errorf("max of 99 = %v, want 0.1 (the first bucket holding all)", got)
	}
	if got := HistogramMax(b, 100); got != 1 {
		t.Errorf("max of 100 = %v, want 1", got)
	}
	if got := HistogramMax(b, 101); !math.IsInf(got, 1) {
		t.Errorf("one above every bucket: %v, want +Inf", got)
	}
	if got := HistogramMax(b, 0); got != 0 {
		t.Errorf("no observations: %v, want 0", got)
	}
}

// TestSummarizeFairness: the median and worst deviation, the share of
// samples within 5%, and the time from which every sample was.
func TestSummarizeFairness(t *testing.T) {
	devs := []float64{0.30, 0.02, 0.10, 0.04, 0.05, 0.01}
	at := []float64{1, 2, 3, 4, 5, 6}
	f := SummarizeFairness(devs, at)
	if f.Max != 0.30 || f.P50 != 0.05 || math.Abs(f.Within-4.0/6) > 1e-12 || f.SettledAt != 4 {
		t.Errorf("%+v, want max 0.30, p50 0.05, within 4/6, settled at 4", f)
	}
	if f := SummarizeFairness([]float64{0.01, 0.2}, []float64{1, 2}); f.SettledAt != -1 {
		t.Errorf("the last sample is off but settled at %v", f.SettledAt)
	}
	if f := SummarizeFairness(nil, nil); f != (Fairness{SettledAt: -1}) {
		t.Errorf("no samples: %+v", f)
	}
}

func TestNewFairSample(t *testing.T) {
	prev := map[string]simworker.UserSample{"a": {CoreSeconds: 1000}, "b": {CoreSeconds: 0}, "c": {CoreSeconds: 0}}
	cur := map[string]simworker.UserSample{"a": {CoreSeconds: 9000}, "b": {CoreSeconds: 4000}, "c": {CoreSeconds: 4000}}
	s := NewFairSample(3*time.Second, 0.1, 0.2, prev, cur, 2*time.Second)
	if s.Most != "a" || s.MostCores != 4 || s.Least != "b" || s.LeastCores != 2 || s.At != 3*time.Second || s.Window != 0.1 || s.Instant != 0.2 {
		t.Errorf("%+v: want most a 4 cores, least b (before c at a tie) 2 cores", s)
	}
}

func TestVmHWM(t *testing.T) {
	status := "Name:\tdrover\nVmPeak:\t 2000000 kB\nVmHWM:\t  731136 kB\nVmRSS:\t  500000 kB\n"
	if kb, ok := VmHWM(strings.NewReader(status)); !ok || kb != 731136 {
		t.Errorf("VmHWM = %v %v", kb, ok)
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\n", "VmHWM:\tlots kB\n"} {
		if _, ok := VmHWM(strings.NewReader(bad)); ok {
			t.Errorf("%q read", bad)
		}
	}
}

// TestSchedConfigValidate: the combinations the CLI refuses.
func TestSchedConfigValidate(t *testing.T) {
	ok := SchedConfig{Servers: 3, Jobs: 1, Workers: 1, WorkerCores: 1, Bunch: 1, Batches: 1, Clusters: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*SchedConfig){
		"no servers":       func(c *SchedConfig) { c.Servers = 0 },
		"negative regions": func(c *SchedConfig) { c.Regions = -1 },
		"more teams":       func(c *SchedConfig) { c.Users, c.Teams = 2, 3 },
		"users and array":  func(c *SchedConfig) { c.Users, c.Array = 2, true },
		"users and cancel": func(c *SchedConfig) { c.Users, c.CancelAt = 2, 0.5 },
		"history":          func(c *SchedConfig) { c.History = "postgres" },
	} {
		c := ok
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
