// Package simworker is a worker that speaks the real worker protocol
// (activate, sync, deactivate) but runs nothing: each assigned attempt is
// reported started at once and "finishes" successfully after a duration
// drawn from a distribution (zero: at once), as a real worker reports a
// process that starts and ends. Benchmarks use hundreds of them to load the
// control plane the way a large fleet would, and record when every job was
// assigned and completed and how many cores each user holds.
package simworker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
)

// Dist is a job duration distribution: Mean every time, or exponential
// with that mean.
type Dist struct {
	Mean        time.Duration
	Exponential bool
}

// ParseDist reads "2s" (fixed) or "exp:2s" (exponential with mean 2s).
func ParseDist(s string) (Dist, error) {
	var d Dist
	rest, exp := strings.CutPrefix(s, "exp:")
	if rest == "0" {
		rest = "0s"
	}
	mean, err := time.ParseDuration(rest)
	if err != nil || mean < 0 {
		return d, fmt.Errorf("job duration %q: want a duration such as 2s, or exp:2s for an exponential distribution with that mean", s)
	}
	return Dist{Mean: mean, Exponential: exp}, nil
}

func (d Dist) String() string {
	if d.Exponential {
		return "exp:" + d.Mean.String()
	}
	return d.Mean.String()
}

// Sample draws one duration.
func (d Dist) Sample(rng *rand.Rand) time.Duration {
	if !d.Exponential || d.Mean == 0 {
		return d.Mean
	}
	return time.Duration(rng.ExpFloat64() * float64(d.Mean))
}

// Recorder collects what every simulated worker saw, for the batches it
// was told about (Track).
type Recorder struct {
	mu         sync.Mutex
	batches    map[int64]*batchRec
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

type batchRec struct {
	user  string
	ready time.Time
	n     int64
	// totalMilli is the cores all its jobs ask for; assignedMilli those of
	// the jobs assigned at least once. The difference is what waits.
	totalMilli    int64
	assignedMilli int64
	assigned      map[int64]int64 // per job, unix ns of the first assignment received
	running       int64           // cores (milli) its jobs hold now
	done          int64
	// coreNs integrates running over time (millicore-nanoseconds) up to
	// last, so a sample can read the cores held on average over a window.
	coreNs float64
	last   time.Time
}

// hold changes the cores the batch's jobs hold at t.
func (b *batchRec) hold(delta int64, t time.Time) {
	if !b.last.IsZero() && t.After(b.last) {
		b.coreNs += float64(b.running) * float64(t.Sub(b.last))
	}
	if t.After(b.last) {
		b.last = t
	}
	b.running += delta
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{batches: map[int64]*batchRec{}}
}

// batch returns a batch's record, made on first sight: a batch's first
// jobs may be assigned before its submitter calls Track.
func (r *Recorder) batch(id int64) *batchRec {
	b := r.batches[id]
	if b == nil {
		b = &batchRec{assigned: map[int64]int64{}}
		r.batches[id] = b
	}
	return b
}

// Track names a batch's user and its n jobs, which ask for coresMilli in
// all and are Ready since ready.
func (r *Recorder) Track(batch int64, n int, coresMilli int64, user string, ready time.Time) {
	r.mu.Lock()
	b := r.batch(batch)
	b.user, b.n, b.totalMilli, b.ready = user, int64(n), coresMilli, ready
	r.mu.Unlock()
}

// Mark notes a moment (a cancellation) after which assignments are counted.
func (r *Recorder) Mark(t time.Time) {
	r.mu.Lock()
	r.mark = t
	r.mu.Unlock()
}

func (r *Recorder) assign(a *api.Assignment, now, slotFree time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assigns++
	if r.firstAsg.IsZero() {
		r.firstAsg = now
	}
	r.lastAsg = now
	from := slotFree
	b := r.batch(a.BatchID)
	if _, ok := b.assigned[a.JobID]; !ok {
		b.assigned[a.JobID] = now.UnixNano()
		b.assignedMilli += int64(math.Round(a.CPU * 1000))
	}
	if b.ready.After(from) {
		from = b.ready
	}
	b.hold(int64(math.Round(a.CPU*1000)), now)
	r.latencies = append(r.latencies, float32(now.Sub(from).Seconds()*1000))
	if !r.mark.IsZero() && now.After(r.mark) {
		r.afterMark++
		r.lastAfterM = now
	}
}

func (r *Recorder) complete(batch int64, cpu float64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.firstDone.IsZero() {
		r.firstDone = now
	}
	r.lastDone = now
	r.done++
	b := r.batch(batch)
	b.done++
	b.hold(-int64(math.Round(cpu*1000)), now)
}

// Done is the number of completions the control plane acknowledged.
func (r *Recorder) Done() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// UserSample is what one user holds at a sample.
type UserSample struct {
	Running int64 // millicores held now
	// CoreSeconds is the millicore-seconds its jobs have held since the
	// start: the difference between two samples over their interval is
	// the cores held on average in between.
	CoreSeconds float64
	// WaitingMilli is the cores its jobs that were never assigned ask
	// for: what it wants beyond what it holds.
	WaitingMilli int64
}

// Sample returns what every tracked user holds at now.
func (r *Recorder) Sample(now time.Time) map[string]UserSample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]UserSample{}
	for _, b := range r.batches {
		if b.user == "" {
			continue // not tracked yet
		}
		us := out[b.user]
		us.Running += b.running
		us.CoreSeconds += b.coreNs / 1e9
		if !b.last.IsZero() && now.After(b.last) {
			us.CoreSeconds += float64(b.running) * now.Sub(b.last).Seconds()
		}
		us.WaitingMilli += max(b.totalMilli-b.assignedMilli, 0)
		out[b.user] = us
	}
	return out
}

// Summary is what a run measured.
type Summary struct {
	Assignments      int64
	Completions      int64
	FirstAssigned    time.Time
	LastAssigned     time.Time
	FirstCompleted   time.Time
	LastCompleted    time.Time
	P50ReadyToAssign float64 // ms from a job being Ready and its cores free on the worker to its assignment
	P99ReadyToAssign float64 // ms
	P50QueueWait     float64 // ms from Ready to assigned, queueing for cores included
	P99QueueWait     float64
	AfterMark        int64 // assignments received after Mark
	LastAfterMark    time.Time
	ScheduleJobsPerS float64 // first assignment to last
	CompleteJobsPerS float64 // first completion to last
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
	for _, b := range r.batches {
		for _, ns := range b.assigned {
			waits = append(waits, float32(max(time.Duration(ns-b.ready.UnixNano()), 0).Seconds()*1000))
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
	Servers  string      // comma-separated
	TLS      *tls.Config // nil: plain HTTP
	Secret   string
	Name     string
	Cores    int
	Memory   int64
	Duration Dist   // how long each job "runs"
	Seed     uint64 // of the durations drawn
	SyncWait time.Duration
	Rec      *Recorder
	// Region and Cluster place the worker (empty: the default).
	Region, Cluster string
	// Machine is the autoscaler's machine it runs on (empty: none), and
	// JoinToken the one-time token the machine was launched with: the
	// worker joins with it instead of Secret.
	Machine   string
	JoinToken string
}

type held struct {
	a           *api.Assignment
	start, ends time.Time
}

type freePoint struct {
	t    time.Time
	free int64
}

func milli(cpu float64) int64 { return int64(math.Round(cpu * 1000)) }

type pending struct {
	ev  api.AttemptEvent
	cpu float64
}

// Run activates and syncs until ctx ends, finishing every job it is given.
func Run(ctx context.Context, cfg Config) error {
	c := api.NewTLSClient(cfg.Servers, "", cfg.TLS)
	res, err := c.Workers().Activate(ctx, &api.ActivateRequest{Name: cfg.Name, NodeID: cfg.Name,
		CPU: float64(cfg.Cores), Memory: cfg.Memory, Secret: cfg.Secret, JoinToken: cfg.JoinToken, Token: api.NewToken(), Region: cfg.Region, Cluster: cfg.Cluster, Machine: cfg.Machine})
	if err != nil {
		return fmt.Errorf("activate %s: %w", cfg.Name, err)
	}
	c.SetToken(res.Token)
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Workers().Deactivate(dctx, false)
	}()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	// hist is the worker's free cores (thousandths) over time: an
	// assignment's wait is counted from the earliest moment since which
	// enough cores for it were free without a break.
	hist := []freePoint{{time.Now(), int64(cfg.Cores) * 1000}}
	var running []held
	var events []pending
	var finishing []api.AttemptRef
	for ctx.Err() == nil {
		now := time.Now()
		// Jobs whose time is up complete now.
		kept := running[:0]
		for _, h := range running {
			if !h.ends.After(now) {
				events = append(events, pending{api.AttemptEvent{AttemptRef: h.a.AttemptRef, Kind: api.EventCompleted,
					Outcome: api.OutcomeSuccess, StartTime: h.start, EndTime: now}, h.a.CPU})
				finishing = append(finishing, h.a.AttemptRef)
			} else {
				kept = append(kept, h)
			}
		}
		running = kept
		req := &api.SyncRequest{Events: make([]api.AttemptEvent, len(events))}
		for i, p := range events {
			req.Events[i] = p.ev
		}
		for _, h := range running {
			req.Known = append(req.Known, h.a.AttemptRef)
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
		out, err := c.Workers().Sync(ctx, req)
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
			done := 0
			for _, p := range events[:n] {
				if p.ev.Kind == api.EventCompleted {
					cfg.Rec.complete(p.ev.BatchID, p.cpu, got)
					hist = append(hist, freePoint{got, hist[len(hist)-1].free + milli(p.cpu)})
					done++
				}
			}
			events = events[n:]
			finishing = finishing[min(done, len(finishing)):]
		}
		for i := range out.Assign {
			a := &out.Assign[i]
			need, since := milli(a.CPU), got
			for k := len(hist) - 1; k >= 0 && hist[k].free >= need; k-- {
				since = hist[k].t
			}
			hist = append(hist, freePoint{got, hist[len(hist)-1].free - need})
			if len(hist) > 4096 {
				hist = append(hist[:0], hist[len(hist)-1024:]...)
			}
			cfg.Rec.assign(a, got, since)
			// Started as a real worker starts a process: reported on the
			// next sync, which goes at once.
			events = append(events, pending{api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventStarted, StartTime: got}, a.CPU})
			running = append(running, held{a: a, start: got, ends: got.Add(cfg.Duration.Sample(rng))})
		}
		for _, k := range out.Kill {
			for i, h := range running {
				if h.a.AttemptRef == k {
					events = append(events, pending{api.AttemptEvent{AttemptRef: k, Kind: api.EventCompleted,
						Outcome: api.OutcomeCancelled, StartTime: h.start, EndTime: got}, h.a.CPU})
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

// FairDeviation compares users' cores between two samples taken dt apart:
// for each user the cores it held on average over the window, against an
// equal split of what all of them held, and the same for the cores held
// at cur alone. It reports the largest relative deviation of each (0.05:
// some user 5% off its share); ok is false unless users users were
// sampled and every one of them had at least an equal split's worth of
// cores waiting at both ends (only then is an equal split every user's
// fair share: a user with less left to start is entitled to less).
func FairDeviation(prev, cur map[string]UserSample, dt time.Duration, users int) (window, instant float64, ok bool) {
	if len(cur) != users || len(prev) != users || users == 0 || dt <= 0 {
		return 0, 0, false
	}
	avg := make(map[string]float64, users)
	var sumAvg, sumNow float64
	for name, c := range cur {
		p, seen := prev[name]
		if !seen {
			return 0, 0, false
		}
		avg[name] = (c.CoreSeconds - p.CoreSeconds) / dt.Seconds()
		sumAvg += avg[name]
		sumNow += float64(c.Running)
	}
	if sumAvg <= 0 || sumNow <= 0 {
		return 0, 0, false
	}
	shareAvg, shareNow := sumAvg/float64(users), sumNow/float64(users)
	for name, c := range cur {
		if float64(c.WaitingMilli) < shareAvg || float64(prev[name].WaitingMilli) < shareAvg {
			return 0, 0, false
		}
	}
	for name, c := range cur {
		window = max(window, math.Abs(avg[name]-shareAvg)/shareAvg)
		instant = max(instant, math.Abs(float64(c.Running)-shareNow)/shareNow)
	}
	return window, instant, true
}
