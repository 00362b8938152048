package placement

import (
	"math"
	"testing"
	"time"
)

// TestDecayHalvesEachHalfLife: use halves every half-life, within 1%
// between, reaches nothing after 63, and never overflows.
func TestDecayHalvesEachHalfLife(t *testing.T) {
	h := int64(7 * 24 * time.Hour)
	v := int64(36_000_000_000) // 10,000 core-hours in milli-core-seconds
	for _, c := range []struct {
		elapsed int64
		want    float64
	}{{0, 1}, {h, 0.5}, {2 * h, 0.25}, {h / 2, math.Sqrt(0.5)}, {3 * h / 4, math.Pow(2, -0.75)}, {10*h + h/3, math.Pow(2, -10.333333)}} {
		got := float64(Decay(v, c.elapsed, h)) / float64(v)
		if math.Abs(got-c.want) > 0.011*c.want {
			t.Errorf("after %v: %.5f of it left, want %.5f", time.Duration(c.elapsed), got, c.want)
		}
	}
	if Decay(v, 63*h, h) != 0 || Decay(math.MaxInt64, h/3, h) <= 0 || Decay(-5, h, h) != 0 || Decay(v, -1, h) != v || Decay(v, h, 0) != v {
		t.Error("edges")
	}
	// Decaying in two steps is decaying once (within a step's rounding).
	once := Decay(v, 3*h/2, h)
	twice := Decay(Decay(v, h, h), h/2, h)
	if d := math.Abs(float64(once-twice)) / float64(once); d > 0.001 {
		t.Errorf("once %d, in two steps %d", once, twice)
	}
}

// TestUsageRate: 10,000 core-hours with a 7-day half-life weigh as the
// cores that would leave it, about 41 (10,000 / (168 h / ln 2)).
func TestUsageRate(t *testing.T) {
	h := int64(7 * 24 * time.Hour)
	got := UsageRate(36_000_000_000, h)
	want := 10000.0 / (168 / math.Ln2) * 1000
	if math.Abs(float64(got)-want) > 0.01*want {
		t.Errorf("rate %d millicores, want about %.0f", got, want)
	}
	if UsageRate(0, h) != 0 || UsageRate(5, 0) != 0 || UsageRate(math.MaxInt64, MinUsageHalfLife) <= 0 {
		t.Error("edges")
	}
	if CoreSeconds(2500, int64(90*time.Minute+500*time.Millisecond)) != 2500*5400+1250 {
		t.Errorf("core seconds %d", CoreSeconds(2500, int64(90*time.Minute+500*time.Millisecond)))
	}
}
