package server

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-sched/drover/server/state"
)

// lockMetrics measure the state's lock: how long readers waited for it
// (the scheduling round's read apart from the others) and how long apply
// waited for it and held it. They say whether a round's wall clock is
// spent waiting for the lock or for a core (docs/performance.md, issue 26).
type lockMetrics struct {
	readWait  *prometheus.HistogramVec // by reader: round, other
	applyWait prometheus.Histogram
	applyHold prometheus.Histogram
	holdCPU   prometheus.Histogram
	entries   *prometheus.HistogramVec // by command

	round, other prometheus.Observer
	// roundThread is the OS thread of the scheduling loop (locked to it),
	// roundReading set while that loop reads the state: a wait observed
	// on that thread meanwhile is the round's.
	roundThread  atomic.Int64
	roundReading atomic.Bool
}

// lockBuckets grow by 10% from 10 µs to 16 s (a million-job commit on a
// loaded machine holds the lock for seconds), so a percentile read off
// them is within 10% of the truth.
var lockBuckets = prometheus.ExponentialBucketsRange(0.00001, 16, 150)

func newLockMetrics(reg *prometheus.Registry) *lockMetrics {
	m := &lockMetrics{
		readWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "drover_state_read_wait_seconds",
			Help:    "Time a reader waited for the state's read lock (0 when it had it at once), by reader: the scheduling round's read, or any other (worker syncs, API reads, snapshots).",
			Buckets: lockBuckets}, []string{"reader"}),
		applyWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_state_apply_wait_seconds",
			Help:    "Time apply waited for the state's write lock while readers held it.",
			Buckets: lockBuckets}),
		applyHold: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_state_apply_hold_seconds",
			Help:    "Time apply held the state's write lock at once: what a reader may wait behind.",
			Buckets: lockBuckets}),
		holdCPU: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_state_apply_hold_cpu_seconds",
			Help:    "CPU time apply's thread used while it held the state's write lock at once (beside drover_state_apply_hold_seconds: the rest of a hold, it waited for a core).",
			Buckets: lockBuckets}),
		entries: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "drover_state_apply_entry_seconds",
			Help:    "Time applying one log entry took, by command.",
			Buckets: lockBuckets}, []string{"command"}),
	}
	m.round, m.other = m.readWait.WithLabelValues("round"), m.readWait.WithLabelValues("other")
	m.roundThread.Store(-1)
	reg.MustRegister(m.readWait, m.applyWait, m.applyHold, m.holdCPU, m.entries)
	return m
}

// observer is what the state reports its lock's waits and holds to.
func (m *lockMetrics) observer() *state.LockObserver {
	return &state.LockObserver{
		Now: time.Now,
		ReadWait: func(d time.Duration) {
			if m.roundReading.Load() && threadID() == m.roundThread.Load() {
				m.round.Observe(d.Seconds())
				return
			}
			m.other.Observe(d.Seconds())
		},
		WriteWait: func(d time.Duration) { m.applyWait.Observe(d.Seconds()) },
		CPU: func() time.Duration {
			cpu, _ := threadCPU()
			return cpu
		},
		Held: func(d, cpu time.Duration, _ int) {
			m.applyHold.Observe(d.Seconds())
			m.holdCPU.Observe(cpu.Seconds())
		},
		Entry: func(t state.CommandType, d time.Duration) { m.entries.WithLabelValues(t.String()).Observe(d.Seconds()) },
	}
}

// roundRead runs read (the scheduling round's read of the state) as the
// round's: lock waits on this thread meanwhile count as the round's. The
// caller's goroutine is locked to its OS thread.
func (m *lockMetrics) roundRead(read func()) {
	m.roundThread.Store(threadID())
	m.roundReading.Store(true)
	defer m.roundReading.Store(false)
	read()
}
