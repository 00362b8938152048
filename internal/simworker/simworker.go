// Package simworker is a worker that speaks the real worker protocol
// (activate, sync, deactivate) but runs nothing: each assigned attempt
// "finishes" successfully after a fixed duration (zero: at once). Benchmarks
// use hundreds of them to load the control plane the way a large fleet
// would, and record when every job was assigned and completed.
package simworker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
)

// Recorder collects what every simulated worker saw. Jobs are numbered by
// their ID within one batch.
type Recorder struct {
	// Ready is when the batch's jobs became Ready (its commit).
	Ready time.Time

	mu         sync.Mutex
	assigned   []int64 // per job, unix ns of the first assignment received
	latencies  []float32
	firstAsg   time.Time
	lastAsg    time.Time
	firstDone  time.Time
	lastDone   time.Time
	done       int64
	assigns    int64
	afterMark  int64     // assignments received after Mark
	mark       time.Time // zero: no mark
	lastAfterM time.Time
}

// NewRecorder prepares for a batch of n jobs.
func NewRecorder(n int) *Recorder {
	return &Recorder{assigned: make([]int64, n+1)}
}

// Mark notes a moment (a cancellation) after which assignments are counted.
func (r *Recorder) Mark(t time.Time) {
	r.mu.Lock()
	r.mark = t
	r.mu.Unlock()
}

func (r *Recorder) assign(job int64, now, slotFree time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assigns++
	if r.firstAsg.IsZero() {
		r.firstAsg = now
	}
	r.lastAsg = now
	if job > 0 && job < int64(len(r.assigned)) && r.assigned[job] == 0 {
		r.assigned[job] = now.UnixNano()
	}
	from := r.Ready
	if slotFree.After(from) {
		from = slotFree
	}
	r.latencies = append(r.latencies, float32(now.Sub(from).Seconds()*1000))
	if !r.mark.IsZero() && now.After(r.mark) {
		r.afterMark++
		r.lastAfterM = now
	}
}

func (r *Recorder) complete(n int, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.firstDone.IsZero() {
		r.firstDone = now
	}
	r.lastDone = now
	r.done += int64(n)
}

// Done is the number of completions the control plane acknowledged.
func (r *Recorder) Done() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// Summary is what a run measured.
type Summary struct {
	Assignments      int64
	Completions      int64
	FirstAssigned    time.Time
	LastAssigned     time.Time
	FirstCompleted   time.Time
	LastCompleted    time.Time
	P50ReadyToAssign float64 // ms
	P99ReadyToAssign float64 // ms
	P50QueueWait     float64 // ms from Ready to assigned, queueing for cores included
	P99QueueWait     float64
	AfterMark        int64 // assignments received after Mark
	LastAfterMark    time.Time
	ScheduleJobsPerS float64
	CompleteJobsPerS float64
}

// Summarize computes rates and percentiles.
func (r *Recorder) Summarize() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Summary{
		Assignments: r.assigns, Completions: r.done,
		FirstAssigned: r.firstAsg, LastAssigned: r.lastAsg, FirstCompleted: r.firstDone, LastCompleted: r.lastDone,
		AfterMark: r.afterMark, LastAfterMark: r.lastAfterM,
	}
	lat := append([]float32(nil), r.latencies...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	s.P50ReadyToAssign, s.P99ReadyToAssign = pct(lat, 0.50), pct(lat, 0.99)
	var waits []float32
	for _, ns := range r.assigned[1:] {
		if ns != 0 {
			waits = append(waits, float32(time.Duration(ns-r.Ready.UnixNano()).Seconds()*1000))
		}
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	s.P50QueueWait, s.P99QueueWait = pct(waits, 0.50), pct(waits, 0.99)
	if d := r.lastAsg.Sub(r.firstAsg).Seconds(); d > 0 {
		s.ScheduleJobsPerS = float64(r.assigns) / d
	}
	if d := r.lastDone.Sub(r.firstDone).Seconds(); d > 0 {
		s.CompleteJobsPerS = float64(r.done) / d
	}
	return s
}

func pct(sorted []float32, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return float64(sorted[i])
}

// Config configures one simulated worker.
type Config struct {
	Servers  string // comma-separated
	Secret   string
	Name     string
	Cores    int
	Memory   int64
	Duration time.Duration // how long each job "runs"
	SyncWait time.Duration
	Rec      *Recorder
}

type held struct {
	ref  api.AttemptRef
	ends time.Time
}

// Run activates and syncs until ctx ends, finishing every job it is given.
func Run(ctx context.Context, cfg Config) error {
	c := api.NewClient(cfg.Servers, "")
	res, err := c.Activate(ctx, &api.ActivateRequest{Name: cfg.Name, CPU: float64(cfg.Cores), Memory: cfg.Memory, Secret: cfg.Secret})
	if err != nil {
		return fmt.Errorf("activate %s: %w", cfg.Name, err)
	}
	c.SetToken(res.Token)
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Deactivate(dctx)
	}()
	// free holds when each free core became free, oldest first.
	free := make([]time.Time, cfg.Cores)
	activated := time.Now()
	for i := range free {
		free[i] = activated
	}
	var running []held
	var events []api.AttemptEvent
	var finishing []api.AttemptRef
	for ctx.Err() == nil {
		now := time.Now()
		// Jobs whose time is up complete now.
		kept := running[:0]
		for _, h := range running {
			if !h.ends.After(now) {
				events = append(events, api.AttemptEvent{AttemptRef: h.ref, Kind: api.EventCompleted,
					Outcome: api.OutcomeSuccess, StartTime: h.ends.Add(-cfg.Duration), EndTime: now})
				finishing = append(finishing, h.ref)
			} else {
				kept = append(kept, h)
			}
		}
		running = kept
		req := &api.SyncRequest{Events: events}
		for _, h := range running {
			req.Known = append(req.Known, h.ref)
		}
		req.Known = append(req.Known, finishing...)
		wait := cfg.SyncWait
		switch {
		case len(events) > 0:
			// Report at once, as the real worker does; the next sync waits.
			wait = 0
		case len(running) > 0:
			// Wake up when the next job is due.
			next := running[0].ends
			for _, h := range running {
				if h.ends.Before(next) {
					next = h.ends
				}
			}
			wait = min(wait, max(time.Until(next), 0))
		}
		req.WaitMillis = wait.Milliseconds()
		out, err := c.Sync(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if api.IsStatus(err, http.StatusGone) || api.IsStatus(err, http.StatusUnauthorized) {
				return fmt.Errorf("%s retired: %w", cfg.Name, err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		got := time.Now()
		if n := min(out.Acked, len(events)); n > 0 {
			cfg.Rec.complete(n, got)
			for range n {
				free = append(free, got)
			}
			events = events[n:]
			finishing = finishing[min(n, len(finishing)):]
		}
		for _, a := range out.Assign {
			slot := got
			if len(free) > 0 {
				slot, free = free[0], free[1:]
			}
			cfg.Rec.assign(a.JobID, got, slot)
			running = append(running, held{ref: a.AttemptRef, ends: got.Add(cfg.Duration)})
		}
		for _, k := range out.Kill {
			for i, h := range running {
				if h.ref == k {
					events = append(events, api.AttemptEvent{AttemptRef: k, Kind: api.EventCompleted,
						Outcome: api.OutcomeCancelled, StartTime: got, EndTime: got})
					finishing = append(finishing, k)
					running = append(running[:i], running[i+1:]...)
					break
				}
			}
		}
	}
	return nil
}

// ErrIncomplete means a benchmark run did not end with every job succeeded;
// its numbers are not reported.
var ErrIncomplete = errors.New("not every job ended in success")
