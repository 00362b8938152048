package server

import (
	"sync"
	"time"
)

// liveness remembers when each instance was last heard from, on the
// leader only (not replicated: a new leader starts every clock afresh). An
// instance waiting in a held sync counts as heard from all along.
type liveness struct {
	mu          sync.Mutex
	lastContact map[uint32]time.Time
	syncing     map[uint32]int // syncs held open per instance
}

func newLiveness() *liveness {
	return &liveness{lastContact: map[uint32]time.Time{}, syncing: map[uint32]int{}}
}

// Touch records that an instance was heard from.
func (l *liveness) Touch(id uint32) {
	l.mu.Lock()
	l.lastContact[id] = time.Now()
	l.mu.Unlock()
}

// HoldSync marks an instance as waiting in a sync until the returned func
// is called.
func (l *liveness) HoldSync(id uint32) func() {
	l.mu.Lock()
	l.syncing[id]++
	l.lastContact[id] = time.Now()
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		if l.syncing[id]--; l.syncing[id] <= 0 {
			delete(l.syncing, id)
		}
		l.lastContact[id] = time.Now()
		l.mu.Unlock()
	}
}

// Heard returns when an instance was last heard from; an instance waiting
// in a sync is heard from now.
func (l *liveness) Heard(id uint32) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.syncing[id] > 0 {
		return time.Now(), true
	}
	t, ok := l.lastContact[id]
	return t, ok
}

// reset starts every active instance's clock at now (a new leader). It
// keeps what it already heard: an instance that activated (and was
// touched) between the leadership change and this reset must not look
// unheard, or a copy of its node ID could take it over.
func (l *liveness) reset(active []uint32, now time.Time) {
	l.mu.Lock()
	for _, id := range active {
		if last, ok := l.lastContact[id]; !ok || last.Before(now) {
			l.lastContact[id] = now
		}
	}
	l.mu.Unlock()
}

// silentFor returns how long an instance has not been heard from. An
// instance seen for the first time, or waiting in a sync, starts now.
func (l *liveness) silentFor(id uint32, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.lastContact[id]
	if !ok || l.syncing[id] > 0 {
		l.lastContact[id] = now
		last = now
	}
	return now.Sub(last)
}

// forget drops a retired instance.
func (l *liveness) forget(id uint32) {
	l.mu.Lock()
	delete(l.lastContact, id)
	l.mu.Unlock()
}
