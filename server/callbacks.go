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
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// Completion callbacks: the leader POSTs a complete batch, as the API
// shows it, to the URL the batch named, from the server (never from a
// worker or a job's network), after checking the URL against the
// destinations the servers allow (api.CallbackAllowed, the rule the API
// checked it with). A 2xx answer is a delivery; anything else is tried
// again after CallbackRetry, doubling, up to CallbackAttempts in all.
// Either way the outcome goes through Raft (state.CallbackDone), so a
// new leader does not report a completion again, but one the last leader
// reported just before it stopped may be (at least once).

// callbacksInFlight bounds the deliveries the leader makes at once, and
// callbackTimeout one POST.
const (
	callbacksInFlight = 8
	callbackTimeout   = 10 * time.Second
	callbackPoll      = time.Second
)

// callbackClient POSTs callbacks: no redirects (a receiver cannot send a
// batch on to a destination nobody allowed) and no cookies.
var callbackClient = &http.Client{
	Timeout: callbackTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
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
	slots := make(chan struct{}, callbacksInFlight)
	var mu sync.Mutex
	busy := map[uint64]bool{} // batches being delivered
	tick := time.NewTicker(callbackPoll)
	defer tick.Stop()
	for {
		for _, due := range s.state.CallbacksDue(4 * callbacksInFlight) {
			mu.Lock()
			if busy[due.Batch] {
				mu.Unlock()
				continue
			}
			busy[due.Batch] = true
			mu.Unlock()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Add(1)
			go func() {
				defer func() {
					mu.Lock()
					delete(busy, due.Batch)
					mu.Unlock()
					<-slots
					wg.Done()
				}()
				s.deliverCallback(ctx, due, allow)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// deliverCallback reports one completion and records how it went.
func (s *Server) deliverCallback(ctx context.Context, due state.CallbackDue, allow []*url.URL) {
	result := s.postCallback(ctx, due, allow)
	if ctx.Err() != nil {
		return // no longer the leader: the next one reports it
	}
	if _, err := s.raft.Apply(&state.CallbackDone{Now: time.Now().UnixNano(), Batch: due.Batch, Version: due.Version, Result: result}); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("callbacks: record a report", "batch", due.Batch, "err", err)
		}
	}
}

// postCallback POSTs the batch until a 2xx answer or the last attempt,
// and says how it went.
func (s *Server) postCallback(ctx context.Context, due state.CallbackDue, allow []*url.URL) string {
	u, err := api.ParseCallback("callback", due.URL)
	if err == nil && !api.CallbackAllowed(u, allow) {
		err = errors.New("its destination is not allowed by this server (-callback-allow)")
	}
	if err != nil {
		s.log.Warn("callbacks: not sent", "batch", due.Batch, "err", err)
		return "not sent: " + err.Error()
	}
	wait := s.cfg.CallbackRetry
	var last string
	for attempt := 1; attempt <= s.cfg.CallbackAttempts; attempt++ {
		rec, ok := s.state.Batch(due.Batch)
		if !ok {
			return "not sent: the batch left the state"
		}
		body, _ := json.Marshal(apiview.Batch(&rec, time.Now()))
		last, err = postOnce(ctx, u.String(), body)
		if err == nil {
			return last
		}
		s.log.Info("callbacks: a report failed; retrying", "batch", due.Batch, "attempt", attempt, "err", err, "retry", wait)
		if attempt == s.cfg.CallbackAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(wait):
		}
		wait *= 2
	}
	return fmt.Sprintf("given up after %d attempts: %s", s.cfg.CallbackAttempts, last)
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
