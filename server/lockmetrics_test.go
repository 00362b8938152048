package server

import (
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func sampleCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestLockMetricsTellTheRoundsReadApart: a wait for the state's lock
// counts as the scheduling round's only on the round's thread while the
// round reads; another thread's wait meanwhile, and the round thread's
// after, are other readers'.
func TestLockMetricsTellTheRoundsReadApart(t *testing.T) {
	if threadID() < 0 {
		t.Skip("threads are not told apart off Linux")
	}
	m := newLockMetrics(prometheus.NewRegistry())
	obs := m.observer()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m.roundRead(func() {
		obs.ReadWait(3 * time.Millisecond)
		done := make(chan struct{})
		go func() {
			// This goroutine cannot run on the round's thread: that
			// thread is locked to the test's goroutine.
			obs.ReadWait(time.Millisecond)
			close(done)
		}()
		<-done
	})
	obs.ReadWait(0)
	if r, o := sampleCount(t, m.round), sampleCount(t, m.other); r != 1 || o != 2 {
		t.Fatalf("round waits %d, other waits %d; want 1 and 2", r, o)
	}
}
