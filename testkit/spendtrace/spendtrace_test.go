package spendtrace

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestTrace: two attempts, $1 a second from t0 for 4 s and $2 a second
// from t0+1s for 1 s, cost $6 in all: $3 is reached at t0+5/3 s ($5/3
// of the first and $4/3 of the second).
func TestTrace(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	tr := Trace{Charges: []Charge{
		{PerSecond: 1, Start: t0, End: t0.Add(4 * time.Second)},
		{PerSecond: 2, Start: t0.Add(time.Second), End: t0.Add(2 * time.Second)},
	}}
	if got := tr.At(t0.Add(10 * time.Second)); math.Abs(got-6) > 1e-9 {
		t.Fatalf("total %v, want 6", got)
	}
	if got := tr.Crossing(3); got.Sub(t0.Add(5*time.Second/3)).Abs() > time.Millisecond {
		t.Fatalf("crossing at t0%+v, want t0+1.667s", got.Sub(t0))
	}
	// A project stopped exactly at its limit: its attempts, rebuilt in
	// floating point, may sum to a hair below it; it reached the limit.
	if got := tr.Crossing(6 * (1 + 1e-12)); got.IsZero() {
		t.Fatal("a cost at the limit up to rounding did not reach it")
	}
	if !tr.Crossing(7).IsZero() {
		t.Fatal("a limit never reached was crossed")
	}
	if !tr.LastEnd().Equal(t0.Add(4 * time.Second)) {
		t.Fatalf("last end %v", tr.LastEnd())
	}
}

// TestHeld: the trace above against a $3 limit ended at $6, with its last
// attempt 2.333 s after the crossing: within 100% and 3 s it held, within
// 20% and 2 s it did not, on both counts.
func TestHeld(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	tr := Trace{Charges: []Charge{
		{PerSecond: 1, Start: t0, End: t0.Add(4 * time.Second)},
		{PerSecond: 2, Start: t0.Add(time.Second), End: t0.Add(2 * time.Second)},
	}}
	if m, err := tr.Held(3, 6, 1, 3*time.Second); err != nil || !strings.Contains(m, "final cost $6.00 (100.0% over); the last of 2 attempts stopped 2.333s after the crossing") {
		t.Fatalf("held: %q %v", m, err)
	}
	_, err := tr.Held(3, 6, 0.2, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "more than 20% over") || !strings.Contains(err.Error(), "want within 2s") {
		t.Fatalf("not held: %v", err)
	}
	if _, err := tr.Held(7, 6, 0.2, 2*time.Second); err == nil || !strings.Contains(err.Error(), "never reached") {
		t.Fatalf("never crossed: %v", err)
	}
	// Stopped 1.6% short of the limit (attempts that had ended still
	// counted as running): held; 14% short is not.
	if m, err := tr.Held(6.1, 6, 0.2, 2*time.Second); err != nil || !strings.Contains(m, "short of it") {
		t.Fatalf("stopped just short: %q, %v", m, err)
	}
}
