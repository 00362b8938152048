package why

import (
	"sync"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/view"
)

// maxWaitingPerBatch bounds the stretches of unplaced jobs kept per batch.
const maxWaitingPerBatch = 64

// Book keeps, per batch, why the leader's last scheduling round left
// Ready jobs unplaced, as the scheduler's filter chain recorded it. It is
// the leader's memory, not Raft state: it is replaced by every round and
// read by consistent batch and job reads, which the leader answers. A
// round only hands over what it recorded; the sentences are written when
// someone first reads them, off the scheduling path.
type Book struct {
	mu      sync.Mutex
	byBatch map[uint64][]api.Waiting
	pending func() map[uint64][]api.Waiting
	// byQueue: the last preemption round's clocks of the queues that wait.
	byQueue map[string][]api.Waiting
}

// SetQueues replaces what the book says of queues that wait.
func (w *Book) SetQueues(m map[string][]api.Waiting) {
	w.mu.Lock()
	w.byQueue = m
	w.mu.Unlock()
}

// Queue says what the last preemption round found of a queue (nil:
// nothing).
func (w *Book) Queue(path string) []api.Waiting {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]api.Waiting(nil), w.byQueue[path]...)
}

// Set replaces the book with a round's result.
func (w *Book) Set(m map[uint64][]api.Waiting) {
	w.mu.Lock()
	w.byBatch, w.pending = m, nil
	w.mu.Unlock()
}

// SetRound replaces the book with a round's unplaced runs, worded on the
// first read.
func (w *Book) SetRound(out *scheduler.Output, in *scheduler.Input, clusters []view.ClusterRecord) {
	w.mu.Lock()
	w.byBatch = nil
	w.pending = func() map[uint64][]api.Waiting { return Round(out, in, clusters) }
	if len(out.Unplaced) == 0 {
		w.pending = nil
	}
	w.mu.Unlock()
}

// book returns the reasons, wording them first if needed. Call with mu.
func (w *Book) book() map[uint64][]api.Waiting {
	if w.pending != nil {
		w.byBatch, w.pending = w.pending(), nil
	}
	return w.byBatch
}

// Batch returns why the batch's unplaced Ready jobs wait (nil: none seen).
func (w *Book) Batch(id uint64) []api.Waiting {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]api.Waiting(nil), w.book()[id]...)
}

// Job returns why one job waits, or nil.
func (w *Book) Job(batch uint64, job uint32) *api.Waiting {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wt := range w.book()[batch] {
		if int64(job) >= wt.FirstJob && int64(job) < wt.FirstJob+wt.Count {
			return &wt
		}
	}
	return nil
}
