package server

import (
	"context"
	"testing"
	"time"
)

// fakeClock is a clock whose sleeps move it.
type fakeClock struct {
	t     time.Time
	slept time.Duration
}

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.t = c.t.Add(d)
	c.slept += d
	return nil
}

func TestExportPacer(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1000, 0)}
	busyUntil := time.Time{}
	p := &exportPacer{busy: func() bool { return clk.t.Before(busyUntil) }, now: clk.now, sleep: clk.sleep, maxDefer: time.Minute, duty: 0.25}

	// Idle scheduler: no waiting, no rest.
	if err := p.before(ctx); err != nil || clk.slept != 0 {
		t.Fatalf("idle: slept %v, %v", clk.slept, err)
	}
	if err := p.after(ctx, time.Second); err != nil || clk.slept != 0 {
		t.Fatalf("idle: rested %v, %v", clk.slept, err)
	}

	// Busy for 10 seconds: the exporter waits them out.
	busyUntil = clk.t.Add(10 * time.Second)
	if err := p.before(ctx); err != nil {
		t.Fatal(err)
	}
	if clk.slept < 10*time.Second || clk.slept > 10*time.Second+100*time.Millisecond {
		t.Fatalf("waited %v for a scheduler busy 10s", clk.slept)
	}

	// Busy for good: it waits a minute, then works a quarter of the time.
	clk.slept = 0
	busyUntil = clk.t.Add(time.Hour)
	if err := p.before(ctx); err != nil {
		t.Fatal(err)
	}
	if clk.slept != time.Minute {
		t.Fatalf("deferred %v to a scheduler busy for good, want a minute", clk.slept)
	}
	clk.slept = 0
	for range 4 {
		if err := p.before(ctx); err != nil {
			t.Fatal(err)
		}
		clk.t = clk.t.Add(time.Second) // a piece of work
		if err := p.after(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if clk.slept != 12*time.Second {
		t.Fatalf("rested %v over 4s of work while busy, want 12s (a quarter duty)", clk.slept)
	}

	// Once the scheduler is idle again, the next deferral starts afresh.
	busyUntil = time.Time{}
	if err := p.before(ctx); err != nil {
		t.Fatal(err)
	}
	busyUntil = clk.t.Add(time.Hour)
	clk.slept = 0
	if err := p.before(ctx); err != nil || clk.slept != time.Minute {
		t.Fatalf("a new busy spell deferred %v, want a minute", clk.slept)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := sleepCtx(cctx, time.Hour); err == nil {
		t.Fatal("a sleep outlived its context")
	}
}

// TestActivity: the cluster is busy while the counts of jobs ready,
// being created and running change, and for schedBusyFor after; a job
// that waits for room it never gets keeps it idle.
func TestActivity(t *testing.T) {
	clock := time.Unix(1000, 0)
	counts := [3]int64{1, 0, 0} // one job ready, never placed
	a := &activity{now: func() time.Time { return clock }, counts: func() [3]int64 { return counts }}
	if !a.busy() {
		t.Fatal("the first sample is a change")
	}
	clock = clock.Add(2 * schedBusyFor)
	if a.busy() {
		t.Fatal("busy with nothing changing")
	}
	counts = [3]int64{0, 0, 1} // placed and running
	if !a.busy() {
		t.Fatal("idle right after a job was placed")
	}
	clock = clock.Add(schedBusyFor / 2)
	if !a.busy() {
		t.Fatal("idle half a second after a placement")
	}
	counts = [3]int64{0, 0, 0} // it ended
	clock = clock.Add(schedBusyFor / 2)
	if !a.busy() {
		t.Fatal("idle right after a job ended")
	}
	clock = clock.Add(schedBusyFor)
	if a.busy() {
		t.Fatal("busy a second after the last change")
	}
}
