package simworker

import (
	"math"
	"testing"
	"time"
)

func TestFairDeviation(t *testing.T) {
	prev := map[string]UserSample{
		"a": {Running: 1000, CoreSeconds: 0, WaitingMilli: 5000},
		"b": {Running: 1000, CoreSeconds: 0, WaitingMilli: 5000},
	}
	// Over 2 s, a held 1100 cores on average and b 900; now a holds 500
	// and b 1500.
	cur := map[string]UserSample{
		"a": {Running: 500, CoreSeconds: 2200, WaitingMilli: 5000},
		"b": {Running: 1500, CoreSeconds: 1800, WaitingMilli: 1000},
	}
	w, i, ok := FairDeviation(prev, cur, 2*time.Second, 2)
	if !ok || math.Abs(w-0.1) > 1e-9 || math.Abs(i-0.5) > 1e-9 {
		t.Fatalf("window %v instant %v ok %v, want 0.1 0.5 true", w, i, ok)
	}
	// A user with less than a share (1000) waiting may be entitled to
	// less than an equal split: no sample.
	cur["b"] = UserSample{Running: 1500, CoreSeconds: 1800, WaitingMilli: 999}
	if _, _, ok := FairDeviation(prev, cur, 2*time.Second, 2); ok {
		t.Fatal("sampled while a user had less than a share waiting")
	}
	// A user not sampled yet: no sample.
	if _, _, ok := FairDeviation(prev, cur, 2*time.Second, 3); ok {
		t.Fatal("sampled with a user missing")
	}
}

func TestRecorderIntegratesHeldCores(t *testing.T) {
	r := NewRecorder()
	t0 := time.Unix(100, 0)
	r.Track(1, 3, 6000, "u", t0)
	b := r.batch(1)
	b.assignedMilli = 2000
	b.hold(2000, t0)                   // 2 cores from t0
	b.hold(-1000, t0.Add(time.Second)) // 1 core after 1 s
	s := r.Sample(t0.Add(3 * time.Second))["u"]
	if s.Running != 1000 || s.CoreSeconds != 4000 || s.WaitingMilli != 4000 {
		t.Fatalf("sample %+v, want 1000 running, 4000 millicore-seconds, 4000 waiting", s)
	}
}
