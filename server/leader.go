package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// runScheduler runs scheduling rounds on the leader: whenever jobs become
// Ready or resources are freed, and at least every ScheduleInterval. Each
// round is one Plan entry in the log.
func (s *Server) runScheduler(ctx context.Context) {
	tick := time.NewTicker(s.cfg.ScheduleInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.schedTrigger:
		case <-tick.C:
		}
		for ctx.Err() == nil {
			full, err := s.scheduleOnce()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("scheduling round failed", "err", err)
				}
				break
			}
			if !full {
				break
			}
		}
	}
}

// scheduleOnce runs one round and reports whether it hit MaxPlacements (so
// there may be more to place right away).
func (s *Server) scheduleOnce() (bool, error) {
	start := time.Now()
	v := s.state.SchedulingView(s.cfg.MaxPlacements)
	if len(v.Users) == 0 || len(v.Instances) == 0 {
		return false, nil
	}
	out := scheduler.Schedule(schedulerInput(v))
	s.metrics.schedRounds.Inc()
	s.metrics.schedSeconds.Observe(time.Since(start).Seconds())
	s.metrics.observeUnplaced(out)
	if out.Jobs == 0 {
		return false, nil
	}
	res, err := s.apply(planOf(out, time.Now().UnixNano()))
	if err != nil {
		return false, err
	}
	pr := res.(*state.PlanResult)
	s.metrics.placements.Add(float64(pr.Placed))
	s.metrics.rejected.Add(float64(pr.Rejected))
	return out.Jobs >= s.cfg.MaxPlacements, nil
}

// touch records that an instance was heard from (leader-local, not
// replicated: a new leader starts every clock afresh).
func (s *Server) touch(id uint32) {
	s.contactMu.Lock()
	s.lastContact[id] = time.Now()
	s.contactMu.Unlock()
}

// holdSync marks an instance as waiting in a sync until the returned func
// is called.
func (s *Server) holdSync(id uint32) func() {
	s.contactMu.Lock()
	s.syncing[id]++
	s.lastContact[id] = time.Now()
	s.contactMu.Unlock()
	return func() {
		s.contactMu.Lock()
		if s.syncing[id]--; s.syncing[id] <= 0 {
			delete(s.syncing, id)
		}
		s.lastContact[id] = time.Now()
		s.contactMu.Unlock()
	}
}

// runLiveness retires instances that have not synced within LostTimeout;
// their running jobs go back to Ready and run elsewhere.
func (s *Server) runLiveness(ctx context.Context) {
	period := min(s.cfg.LostTimeout/4, time.Second)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		for _, id := range s.state.ActiveInstances() {
			s.contactMu.Lock()
			last, ok := s.lastContact[id]
			if !ok || s.syncing[id] > 0 {
				s.lastContact[id] = now
				last = now
			}
			s.contactMu.Unlock()
			if now.Sub(last) < s.cfg.LostTimeout {
				continue
			}
			reason := fmt.Sprintf("no contact for %s", now.Sub(last).Round(time.Second))
			if _, err := s.apply(&state.Retire{Now: now.UnixNano(), Instance: id, Reason: reason}); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("retire lost instance", "instance", id, "err", err)
				}
				continue
			}
			s.log.Warn("instance lost; its jobs will run elsewhere", "instance", id, "reason", reason)
			s.contactMu.Lock()
			delete(s.lastContact, id)
			s.contactMu.Unlock()
		}
	}
}

// notifier wakes syncs held open for an instance when its assignments or
// kills change.
type notifier struct {
	mu    sync.Mutex
	waits map[uint32]chan struct{}
}

func newNotifier() *notifier { return &notifier{waits: map[uint32]chan struct{}{}} }

// wait returns a channel closed at the next change for the instance. Take it
// before reading the state so no change is missed.
func (n *notifier) wait(id uint32) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	ch, ok := n.waits[id]
	if !ok {
		ch = make(chan struct{})
		n.waits[id] = ch
	}
	return ch
}

func (n *notifier) notify(id uint32) {
	n.mu.Lock()
	if ch, ok := n.waits[id]; ok {
		close(ch)
		delete(n.waits, id)
	}
	n.mu.Unlock()
}

func (n *notifier) notifyAll() {
	n.mu.Lock()
	for id, ch := range n.waits {
		close(ch)
		delete(n.waits, id)
	}
	n.mu.Unlock()
}

// eventBatcher groups worker events from concurrent syncs into one Raft
// entry (group commit): while one entry is being committed the next one
// fills up.
type eventBatcher struct {
	s  *Server
	ch chan *eventReq
}

type eventReq struct {
	events []state.Event
	done   chan error
}

func newEventBatcher(s *Server) *eventBatcher {
	return &eventBatcher{s: s, ch: make(chan *eventReq, 1024)}
}

// submit commits events and returns once they are in the log (or failed).
func (b *eventBatcher) submit(ctx context.Context, events []state.Event) error {
	req := &eventReq{events: events, done: make(chan error, 1)}
	select {
	case b.ch <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *eventBatcher) run(ctx context.Context) {
	for {
		var first *eventReq
		select {
		case <-ctx.Done():
			return
		case first = <-b.ch:
		}
		reqs := []*eventReq{first}
		n := len(first.events)
	drain:
		for n < b.s.cfg.MaxEventsPerEntry {
			select {
			case r := <-b.ch:
				reqs = append(reqs, r)
				n += len(r.events)
			default:
				break drain
			}
		}
		all := make([]state.Event, 0, n)
		for _, r := range reqs {
			all = append(all, r.events...)
		}
		_, err := b.s.apply(&state.Events{Now: time.Now().UnixNano(), Events: all})
		if err == nil {
			b.s.metrics.events.Add(float64(len(all)))
		} else if !errors.Is(err, ErrNotLeader) {
			b.s.log.Warn("recording worker events failed", "events", len(all), "err", err)
		}
		for _, r := range reqs {
			r.done <- err
		}
	}
}
