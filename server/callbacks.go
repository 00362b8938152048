package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// Completion callbacks: the leader POSTs a complete batch, as the API
// shows it, to the URL the batch named, from the server (never from a
// worker or a job's network), after checking the URL again with the rule
// the API checked it with (api.ParseCallback, which refuses paths a
// receiver could resolve elsewhere, then api.CallbackAllowed against the
// destinations the servers allow). A 2xx answer is a delivery; anything
// else is tried again CallbackRetry later, doubling, up to
// CallbackAttempts attempts in all. The outcome goes through Raft
// (state.CallbackDone), so a new leader does not report a completion
// again, but one the last leader reported just before it stopped may be
// (at least once).
//
// Deliveries are fair between billing projects: one POST holds one of
// callbacksInFlight slots only while it is on the wire (a failed attempt
// gives its slot back and waits for its retry in the leader's memory), a
// project holds at most callbacksPerProject of them, and free slots go to
// the projects with due callbacks in turn (round-robin), each project's
// oldest first. However many failing or slow callbacks a project has, it
// costs another project's next one at most the wait for one slot: that
// project's turn comes with the first slot free after this one's.
//
// What the leader keeps of a due callback is bounded and small: each scan
// of the state lists at most callbacksQueued per project (the URL is the
// state's own string), and a report waiting for its retry is a
// callbackRetry (a version, a count and a time) until its next attempt or
// until it is no longer due. The retry schedule is not in the Raft log: a
// new leader starts each due report again at its first attempt (a
// receiver that keeps failing may be tried CallbackAttempts times per
// leader; at least once holds).

// callbacksInFlight bounds the POSTs the leader makes at once, and
// callbacksPerProject those of one billing project: half of them, so a
// project whose receiver hangs until callbackTimeout on every POST leaves
// the other half to everyone else, while a project alone with a backlog
// still has 4 POSTs going at once. callbacksQueued bounds what one scan
// lists per project (enough to refill its slots until the next scan),
// callbackTimeout one POST, callbackPoll how often the leader looks for
// newly complete batches, and callbackRescan how soon after a slot frees
// it looks again when it has nothing left to start (each look is a pass
// over the batches in memory).
const (
	callbacksInFlight   = 8
	callbacksPerProject = callbacksInFlight / 2
	callbacksQueued     = 2 * callbacksPerProject
	callbackTimeout     = 10 * time.Second
	callbackPoll        = time.Second
	callbackRescan      = 100 * time.Millisecond
)

// callbackClient POSTs callbacks: no redirects (a receiver cannot send a
// batch on to a destination nobody allowed) and no cookies.
var callbackClient = &http.Client{
	Timeout: callbackTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// callbackKey names what a report is about: a batch, or one of its job
// groups.
type callbackKey struct {
	batch uint64
	group uint32
}

func keyOf(d state.CallbackDue) callbackKey { return callbackKey{d.Batch, d.Group} }

// callbackTry is one attempt at reporting a completion (the first is 1).
type callbackTry struct {
	state.CallbackDue
	attempt int
}

// callbackOutcome is how a try went: retry says it failed and may be
// tried again (last is its failure); otherwise it is over (recorded, or
// this server no longer leads).
type callbackOutcome struct {
	try   callbackTry
	retry bool
	last  string
}

// callbackRetry is a failed report waiting for its next attempt.
type callbackRetry struct {
	version uint64    // the completion it reports
	tried   int       // attempts made
	at      time.Time // the next attempt, not before
	scan    uint64    // the last scan that saw it due
}

// callbackQueue is the leader's delivery schedule; runCallbacks' loop
// alone uses it.
type callbackQueue struct {
	retry    map[callbackKey]*callbackRetry
	busy     map[callbackKey]bool     // batches and groups being POSTed
	inFlight map[string]int           // POSTs being made, per project
	ready    map[string][]callbackTry // per project, from the last scan, not started
	last     string                   // the project the last slot went to
	scans    uint64
	nextTry  time.Time // the earliest retry (zero: none)
}

func newCallbackQueue() *callbackQueue {
	return &callbackQueue{retry: map[callbackKey]*callbackRetry{}, busy: map[callbackKey]bool{}, inFlight: map[string]int{}, ready: map[string][]callbackTry{}}
}

// scan lists the due reports that may start now, at most callbacksQueued
// per project, leaving out those in flight and those waiting for their
// retry; it forgets the retries of reports no longer due.
func (q *callbackQueue) scan(st *state.State, now time.Time) {
	q.scans++
	q.nextTry = time.Time{}
	due := st.CallbacksDue(callbacksQueued, func(d state.CallbackDue) bool {
		if q.busy[keyOf(d)] {
			return true
		}
		r := q.retry[keyOf(d)]
		if r == nil {
			return false
		}
		if r.version != d.Version { // completed again since: a new report
			delete(q.retry, keyOf(d))
			return false
		}
		r.scan = q.scans
		if r.at.After(now) {
			if q.nextTry.IsZero() || r.at.Before(q.nextTry) {
				q.nextTry = r.at
			}
			return true
		}
		return false
	})
	clear(q.ready)
	for _, d := range due {
		t := callbackTry{CallbackDue: d, attempt: 1}
		if r := q.retry[keyOf(d)]; r != nil {
			t.attempt = r.tried + 1
		}
		q.ready[d.BillingProject] = append(q.ready[d.BillingProject], t)
	}
	for id, r := range q.retry {
		if r.scan != q.scans {
			delete(q.retry, id) // reported, or gone from the state
		}
	}
}

// next takes the try the next free slot goes to: the oldest of the first
// project after the last one served (in name order, wrapping) that has one
// ready and fewer than callbacksPerProject in flight.
func (q *callbackQueue) next() (callbackTry, bool) {
	names := make([]string, 0, len(q.ready))
	for p := range q.ready {
		if q.inFlight[p] < callbacksPerProject {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return callbackTry{}, false
	}
	slices.Sort(names)
	i, _ := slices.BinarySearch(names, q.last)
	if i < len(names) && names[i] == q.last {
		i++
	}
	p := names[i%len(names)]
	t := q.ready[p][0]
	if q.ready[p] = q.ready[p][1:]; len(q.ready[p]) == 0 {
		delete(q.ready, p)
	}
	q.last = p
	q.busy[keyOf(t.CallbackDue)] = true
	q.inFlight[p]++
	return t, true
}

// done frees a try's slot; a failure to try again waits backoff.
func (q *callbackQueue) done(o callbackOutcome, backoff time.Duration, now time.Time) {
	t := o.try
	delete(q.busy, keyOf(t.CallbackDue))
	if q.inFlight[t.BillingProject]--; q.inFlight[t.BillingProject] <= 0 {
		delete(q.inFlight, t.BillingProject)
	}
	if !o.retry {
		delete(q.retry, keyOf(t.CallbackDue))
		return
	}
	at := now.Add(backoff)
	q.retry[keyOf(t.CallbackDue)] = &callbackRetry{version: t.Version, tried: t.attempt, at: at, scan: q.scans}
	if q.nextTry.IsZero() || at.Before(q.nextTry) {
		q.nextTry = at
	}
}

// runCallbacks delivers completion callbacks while this server leads.
func (s *Server) runCallbacks(ctx context.Context) {
	allow, err := api.ParseCallbackAllow(s.cfg.CallbackAllow) // Validate checked it
	if err != nil {
		s.log.Error("callbacks: allowed destinations", "err", err)
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	q := newCallbackQueue()
	outcomes := make(chan callbackOutcome, callbacksInFlight)
	free := callbacksInFlight
	tick := time.NewTicker(callbackPoll)
	defer tick.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	var lastScan time.Time
	scan, freed := true, false
	for {
		now := time.Now()
		if scan {
			q.scan(s.state, now)
			lastScan, scan, freed = now, false, false
		}
		for free > 0 {
			t, ok := q.next()
			if !ok {
				break
			}
			free--
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := s.tryCallback(ctx, t, allow)
				select {
				case outcomes <- o: // room for every slot: never blocks
				case <-ctx.Done():
				}
			}()
		}
		// Wake for the earliest retry, and after a slot frees when nothing
		// is left to start (the next scan lists more), but never sooner
		// than callbackRescan after the last scan.
		at := q.nextTry
		if freed && free > 0 && (at.IsZero() || lastScan.Before(at)) {
			at = lastScan
		}
		if at.IsZero() {
			wake.Stop()
		} else {
			wake.Reset(max(time.Until(at), time.Until(lastScan.Add(callbackRescan)), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			scan = true
		case <-wake.C:
			scan = true
		case o := <-outcomes:
			free++
			q.done(o, s.callbackBackoff(o.try.attempt), time.Now())
			if o.retry {
				s.log.Info("callbacks: a report failed; retrying", "batch", o.try.Batch, "group", o.try.Group, "project", o.try.BillingProject,
					"attempt", o.try.attempt, "err", o.last, "retry", s.callbackBackoff(o.try.attempt))
			}
			freed = true
		}
	}
}

// callbackBackoff is the wait after a report's attempt-th failure:
// CallbackRetry, doubling.
func (s *Server) callbackBackoff(attempt int) time.Duration {
	return s.cfg.CallbackRetry << (attempt - 1) // Validate: at most 1h << 19
}

// tryCallback makes one attempt at a report, records the outcome through
// Raft unless it is to be tried again, and says how it went.
func (s *Server) tryCallback(ctx context.Context, t callbackTry, allow []*url.URL) callbackOutcome {
	result, retry := s.postCallback(ctx, t, allow)
	if ctx.Err() != nil {
		return callbackOutcome{try: t} // no longer the leader: the next one reports it
	}
	if retry {
		return callbackOutcome{try: t, retry: true, last: result}
	}
	if _, err := s.raft.Apply(&state.CallbackDone{Now: time.Now().UnixNano(), Batch: t.Batch, Version: t.Version, Result: result, Group: t.Group}); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("callbacks: record a report", "batch", t.Batch, "err", err)
		}
	}
	return callbackOutcome{try: t}
}

// postCallback POSTs the batch once, and says how it went and whether to
// try again.
func (s *Server) postCallback(ctx context.Context, t callbackTry, allow []*url.URL) (string, bool) {
	u, err := api.ParseCallback("callback", t.URL)
	if err == nil && !api.CallbackAllowed(u, allow) {
		err = errors.New("its destination is not allowed by this server (-callback-allow)")
	}
	if err != nil {
		s.log.Warn("callbacks: not sent", "batch", t.Batch, "err", err)
		return "not sent: " + err.Error(), false
	}
	var body []byte
	if t.Group != 0 {
		g, ok := s.state.JobGroup(t.Batch, t.Group)
		if !ok {
			return "not sent: the batch left the state", false
		}
		body, _ = json.Marshal(apiview.JobGroup(&g, time.Now()))
	} else {
		rec, ok := s.state.Batch(t.Batch)
		if !ok {
			return "not sent: the batch left the state", false
		}
		body, _ = json.Marshal(apiview.Batch(&rec, time.Now()))
	}
	last, err := postOnce(ctx, u.String(), body)
	switch {
	case err == nil:
		return last, false
	case t.attempt >= s.cfg.CallbackAttempts:
		s.log.Info("callbacks: a report failed; given up", "batch", t.Batch, "attempts", t.attempt, "err", last)
		return fmt.Sprintf("given up after %d attempts: %s", s.cfg.CallbackAttempts, last), false
	}
	return last, true
}

// postOnce POSTs body to url and reads (at most 64 KiB of) the answer: an
// error unless it is a 2xx.
func postOnce(ctx context.Context, url string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err.Error(), err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "drover-callback")
	resp, err := callbackClient.Do(req)
	if err != nil {
		return err.Error(), err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	status := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return status, errors.New(status)
	}
	return status, nil
}
