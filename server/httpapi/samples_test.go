package httpapi

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/server/state"
)

func TestSampleGate(t *testing.T) {
	var g sampleGate
	t0 := time.Unix(1000, 0)
	a := state.Event{Batch: 1, Job: 1, Attempt: 1, Sample: true}
	b := state.Event{Batch: 1, Job: 2, Attempt: 1, Sample: true}
	if !g.allow(a, t0) || !g.allow(b, t0) {
		t.Fatal("the first sample of an attempt was dropped")
	}
	if g.allow(a, t0.Add(minSampleGap-time.Millisecond)) {
		t.Fatalf("a second sample %s after the first went through", minSampleGap-time.Millisecond)
	}
	if !g.allow(a, t0.Add(minSampleGap)) {
		t.Fatalf("a sample %s after the last was dropped", minSampleGap)
	}
	if g.allow(a, t0.Add(minSampleGap+time.Second)) {
		t.Fatal("a sample a second after the last one let through went through")
	}

	// Past 100,000 attempts the ones not sampled for ten gaps are
	// forgotten, once a gap.
	for i := range 100_001 {
		g.allow(state.Event{Batch: 2, Job: uint32(i), Attempt: 1}, t0)
	}
	later := t0.Add(12 * minSampleGap)
	g.allow(state.Event{Batch: 3, Job: 1, Attempt: 1}, later)
	if n := len(g.last); n != 1 {
		t.Fatalf("%d attempts remembered after the sweep, want the 1 sampled since", n)
	}
	if !g.allow(a, later) {
		t.Fatal("a forgotten attempt's sample was dropped")
	}
}
