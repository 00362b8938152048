package state

import (
	"sync"
	"sync/atomic"
	"time"
)

// LockObserver is told how long readers waited for the state's lock and
// how long apply held it, for the server's metrics. The state reads no
// clock of its own (apply is deterministic): the times come from Now, and
// nothing the state decides depends on them. Every func must be set; they
// run on the caller's goroutine, the Held and Entry ones with the write
// lock held, and must not call back into the State.
type LockObserver struct {
	// Now returns the time; only differences of it are used.
	Now func() time.Time
	// ReadWait: a reader waited d for the read lock (0: it had it at once).
	ReadWait func(d time.Duration)
	// WriteWait: apply waited d for the write lock, held by readers.
	WriteWait func(d time.Duration)
	// Held: apply held the write lock for d, through n log entries.
	Held func(d time.Duration, n int)
	// Entry: applying one log entry of type t took d.
	Entry func(t CommandType, d time.Duration)
}

// stateLock is the state's RWMutex, measured when an observer is set.
// Readers (the scheduling round's view, worker syncs, API reads,
// snapshots) take it shared; apply takes it for one log entry at a time
// (ApplyBatch), so no reader waits behind more than one entry.
type stateLock struct {
	mu  sync.RWMutex
	obs atomic.Pointer[LockObserver]
}

// RLock takes the lock shared and reports how long that waited.
func (l *stateLock) RLock() {
	o := l.obs.Load()
	if o == nil {
		l.mu.RLock()
		return
	}
	if l.mu.TryRLock() {
		o.ReadWait(0)
		return
	}
	t := o.Now()
	l.mu.RLock()
	o.ReadWait(o.Now().Sub(t))
}

// RUnlock releases a shared hold.
func (l *stateLock) RUnlock() { l.mu.RUnlock() }

// Lock takes the lock exclusively, unmeasured (setup and restore).
func (l *stateLock) Lock() { l.mu.Lock() }

// Unlock releases an exclusive hold taken with Lock.
func (l *stateLock) Unlock() { l.mu.Unlock() }

// SetLockObserver has the state report its lock's waits and holds to o
// (nil: stop reporting). It may be called at any time.
func (s *State) SetLockObserver(o *LockObserver) { s.mu.obs.Store(o) }

// lockApply takes the lock for apply and returns when it had it (the zero
// time without an observer).
func (l *stateLock) lockApply(o *LockObserver) time.Time {
	if o == nil {
		l.mu.Lock()
		return time.Time{}
	}
	if l.mu.TryLock() {
		o.WriteWait(0)
		return o.Now()
	}
	t := o.Now()
	l.mu.Lock()
	now := o.Now()
	o.WriteWait(now.Sub(t))
	return now
}

// unlockApply releases the lock apply took at taken, through n entries.
func (l *stateLock) unlockApply(o *LockObserver, taken time.Time, n int) {
	if o != nil {
		o.Held(o.Now().Sub(taken), n)
	}
	l.mu.Unlock()
}

// applyEntry applies one entry with the write lock held, timing it for o.
func (s *State) applyEntry(o *LockObserver, index uint64, c Command) any {
	if o == nil {
		return s.applyLocked(index, c)
	}
	if c == nil {
		return s.applyLocked(index, c)
	}
	t := o.Now()
	r := s.applyLocked(index, c)
	o.Entry(c.Type(), o.Now().Sub(t))
	return r
}
