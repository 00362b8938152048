package images

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestFlightsShareAndOutliveOneCaller(t *testing.T) {
	var g flights
	var runs atomic.Int32
	release := make(chan struct{})
	fn := func(ctx context.Context) error {
		runs.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	quitter, quit := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { errs <- g.do(quitter, "k", fn) }()
	waitFor(t, func() bool { return runs.Load() == 1 })
	go func() { errs <- g.do(context.Background(), "k", fn) }()
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.m["k"] != nil && g.m["k"].waiters == 2 })

	quit()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled caller: %v", err)
	}
	close(release)
	if err := <-errs; err != nil {
		t.Fatalf("remaining caller: %v (the run was canceled with the first caller)", err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

func TestFlightsCanceledWhenAllCallersLeave(t *testing.T) {
	var g flights
	stopped := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		g.do(ctx, "k", func(ctx context.Context) error {
			<-ctx.Done()
			stopped <- ctx.Err()
			return ctx.Err()
		})
	}()
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.m["k"] != nil })
	cancel()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("run stopped with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run not canceled after its only caller left")
	}
	// A new caller starts afresh.
	if err := g.do(context.Background(), "k", func(context.Context) error { return nil }); err != nil {
		t.Errorf("new run: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
