package server

import (
	"context"
	"time"
)

// The exporter yields to the scheduler. History is not urgent (a batch
// stays readable in memory until it is stored), and on a small machine, or
// one shared with MySQL, reading a batch out of the state and writing it
// takes CPU that placing jobs needs. So while the scheduler is placing
// jobs the exporter waits; if it has waited exportMaxDefer it goes on, but
// works only exportBusyDuty of the time, so a scheduler that is never idle
// cannot hold finished batches in memory for ever.
const (
	exportMaxDefer = time.Minute
	exportBusyDuty = 0.25
	// schedBusyFor is how long after jobs were last placed or finished
	// the cluster counts as busy.
	schedBusyFor = time.Second
)

// exportPacer paces the exporter. busy reports whether the cluster is
// placing or finishing jobs; now and sleep are the clock (injected for tests).
type exportPacer struct {
	busy     func() bool
	now      func() time.Time
	sleep    func(ctx context.Context, d time.Duration) error
	maxDefer time.Duration
	duty     float64

	deferredSince time.Time // zero while not deferring
}

func newExportPacer(busy func() bool) *exportPacer {
	return &exportPacer{busy: busy, now: time.Now, sleep: sleepCtx, maxDefer: exportMaxDefer, duty: exportBusyDuty}
}

// before returns when the exporter may start a piece of work: at once
// while the scheduler is idle, or once it has deferred to a busy
// scheduler for maxDefer.
func (p *exportPacer) before(ctx context.Context) error {
	for p.busy() {
		now := p.now()
		if p.deferredSince.IsZero() {
			p.deferredSince = now
		}
		if now.Sub(p.deferredSince) >= p.maxDefer {
			return nil
		}
		if err := p.sleep(ctx, min(100*time.Millisecond, p.maxDefer-now.Sub(p.deferredSince))); err != nil {
			return err
		}
	}
	p.deferredSince = time.Time{}
	return nil
}

// after is told how long a piece of work took: while the scheduler is
// busy it rests so that the work takes duty of the time.
func (p *exportPacer) after(ctx context.Context, took time.Duration) error {
	if !p.busy() {
		return nil
	}
	return p.sleep(ctx, time.Duration(float64(took)*(1-p.duty)/p.duty))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
