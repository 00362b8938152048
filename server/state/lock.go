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
	// CPU, optional, returns the CPU time the calling thread has used.
	CPU func() time.Duration
	// Held: apply held the write lock for d, through n log entries,
	// using cpu of its thread's CPU time meanwhile (0 without CPU; the
	// caller keeps apply's goroutine on its thread, or cpu counts other
	// goroutines' time).
	Held func(d, cpu time.Duration, n int)
	// Entry: applying one log entry of type t took d.
	Entry func(t CommandType, d time.Duration)
}

// stateLock is the state's RWMutex, measured when an observer is set.
// Readers (the scheduling round's view, worker syncs, API reads,
// snapshots) take it shared; apply takes it for a bounded amount of work
// at a time (ApplyBatch), so no reader waits behind a long batch.
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
func (s *core) SetLockObserver(o *LockObserver) { s.mu.obs.Store(o) }

// taken is when apply took the lock, on the observer's clocks.
type taken struct {
	at  time.Time
	cpu time.Duration
}

// lockApply takes the lock for apply and returns when it had it (zero
// without an observer).
func (l *stateLock) lockApply(o *LockObserver) taken {
	if o == nil {
		l.mu.Lock()
		return taken{}
	}
	if l.mu.TryLock() {
		o.WriteWait(0)
	} else {
		t := o.Now()
		l.mu.Lock()
		o.WriteWait(o.Now().Sub(t))
	}
	tk := taken{at: o.Now()}
	if o.CPU != nil {
		tk.cpu = o.CPU()
	}
	return tk
}

// unlockApply releases the lock apply took at tk, through n entries.
func (l *stateLock) unlockApply(o *LockObserver, tk taken, n int) {
	if o != nil {
		var cpu time.Duration
		if o.CPU != nil {
			cpu = max(o.CPU()-tk.cpu, 0)
		}
		o.Held(o.Now().Sub(tk.at), cpu, n)
	}
	l.mu.Unlock()
}

// prepared is an entry applied without the lock but not yet visible.
type prepared struct {
	// publish makes it visible, with the write lock held, and returns
	// the entry's result.
	publish func() any
	took    time.Duration // preparing it, on o's clock
}

// prepare does the part of applying c at index that readers cannot see,
// without the lock, and returns the rest; nil for an entry applied
// wholly under the lock. Apply is the state's only writer, so it may read
// the state unlocked (readers never write); what it builds no reader can
// reach until it is published. Only a commit is prepared: its cost grows
// with its update (prepareCommitUpdate). A prepared entry holds the lock
// alone.
func (s *State) prepare(o *LockObserver, index uint64, c Command) *prepared {
	cu, ok := c.(*CommitUpdate)
	if !ok {
		return nil
	}
	var t time.Time
	if o != nil {
		t = o.Now()
	}
	p := &prepared{publish: s.prepareCommitUpdate(max(index, s.index), cu)}
	if o != nil {
		p.took = o.Now().Sub(t)
	}
	return p
}

// publish makes a prepared entry visible with the write lock held,
// timing the entry (preparing and publishing) for o.
func (s *State) publish(o *LockObserver, index uint64, c Command, p *prepared) any {
	if index > s.index {
		s.index = index
	}
	if o == nil {
		return p.publish()
	}
	t := o.Now()
	r := p.publish()
	o.Entry(c.Type(), p.took+o.Now().Sub(t))
	return r
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
