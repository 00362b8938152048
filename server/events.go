package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/drover-sched/drover/server/state"
)

// Worker events on their way into the log, and the wake-ups of syncs held
// open for them. Neither knows the Server: the batcher is given the apply
// function, the notifier is called from the state's hooks.

// notifier wakes syncs held open for an instance when its assignments or
// kills change (the state's hooks call notify and notifyAll after apply).
type notifier struct {
	mu    sync.Mutex
	waits map[uint32]chan struct{}
}

func newNotifier() *notifier { return &notifier{waits: map[uint32]chan struct{}{}} }

// Wait returns a channel closed at the next change for the instance. Take it
// before reading the state so no change is missed.
func (n *notifier) Wait(id uint32) <-chan struct{} {
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
	apply     func(state.Command) (any, error)
	maxEvents int // per entry
	log       *slog.Logger
	committed func(n int) // events committed, for metrics
	ch        chan *eventReq
}

type eventReq struct {
	events []state.Event
	done   chan error
}

func newEventBatcher(apply func(state.Command) (any, error), maxEvents int, log *slog.Logger, committed func(int)) *eventBatcher {
	return &eventBatcher{apply: apply, maxEvents: maxEvents, log: log, committed: committed, ch: make(chan *eventReq, 1024)}
}

// Submit commits events and returns once they are in the log (or failed).
func (b *eventBatcher) Submit(ctx context.Context, events []state.Event) error {
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
		for n < b.maxEvents {
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
		_, err := b.apply(&state.Events{Now: time.Now().UnixNano(), Events: all})
		if err == nil {
			b.committed(len(all))
		} else if !errors.Is(err, ErrNotLeader) {
			b.log.Warn("recording worker events failed", "events", len(all), "err", err)
		}
		for _, r := range reqs {
			r.done <- err
		}
	}
}
