package state

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// userCommands returns a bootstrap and n user creations, at indexes 1..n+1.
func userCommands(n int) ([]uint64, []Command) {
	idx := []uint64{1}
	cmds := []Command{&Bootstrap{Now: 1, Admin: "root", TokenHash: "h-root", DefaultProject: "default"}}
	for i := range n {
		idx = append(idx, uint64(i+2))
		cmds = append(cmds, &CreateUser{Now: 2, Name: fmt.Sprintf("u%03d", i), TokenHash: fmt.Sprintf("h%03d", i)})
	}
	return idx, cmds
}

// TestReadersGetInBetweenEntries: a batch of log entries does not hold
// the state's lock from one entry to the next, so a reader (a snapshot
// here, the largest reader) runs between any two and sees the state the
// log passes through there. The seam between entries holds the batch
// open until the reader has finished: were the lock held across entries,
// TryRLock would fail and the reader would block the batch for good.
func TestReadersGetInBetweenEntries(t *testing.T) {
	s := New()
	idx, cmds := userCommands(63)
	reads := 0
	s.betweenEntries = func(i int) {
		if !s.mu.mu.TryRLock() {
			t.Fatalf("after entry %d of %d the write lock is still held", i, len(cmds))
		}
		s.mu.mu.RUnlock()
		got := make(chan uint64)
		go func() { got <- s.Snapshot().Index() }()
		if at := <-got; at != idx[i] {
			t.Errorf("a read between entries %d and %d saw index %d, want %d", i, i+1, at, idx[i])
		}
		reads++
	}
	for k, r := range s.ApplyBatch(idx, cmds) {
		if err, ok := r.(*ApplyError); ok {
			t.Fatalf("entry %d: %v", k, err)
		}
	}
	if reads != len(cmds)-1 {
		t.Fatalf("%d reads between %d entries, want %d", reads, len(cmds), len(cmds)-1)
	}
	if s.Index() != idx[len(idx)-1] {
		t.Fatalf("index %d after the batch, want %d", s.Index(), idx[len(idx)-1])
	}
}

// TestApplyHoldsTheLockPerEntry: the lock observer hears one hold per
// entry, each through exactly one entry, and one timing per entry.
func TestApplyHoldsTheLockPerEntry(t *testing.T) {
	s := New()
	var holds, entries, through int
	s.SetLockObserver(&LockObserver{
		Now:       time.Now,
		ReadWait:  func(time.Duration) {},
		WriteWait: func(time.Duration) {},
		Held: func(_, _ time.Duration, n int) {
			holds, through = holds+1, through+n
			if n != 1 {
				t.Errorf("a hold of the write lock went through %d entries", n)
			}
		},
		Entry: func(CommandType, time.Duration) { entries++ },
	})
	idx, cmds := userCommands(63)
	s.ApplyBatch(idx, cmds)
	if holds != len(cmds) || through != len(cmds) || entries != len(cmds) {
		t.Fatalf("%d entries: %d holds through %d entries, %d entry timings; want one hold per entry", len(cmds), holds, through, entries)
	}
}

// TestReadWaitsAreReported: a reader that finds the lock free reports no
// wait; one that comes while apply holds it reports the wait, timed on
// the observer's clock (here one that moves a millisecond a reading).
func TestReadWaitsAreReported(t *testing.T) {
	s := New()
	waits := make(chan time.Duration, 2)
	waiting := make(chan struct{}, 1)
	var clock atomic.Int64
	s.SetLockObserver(&LockObserver{
		Now: func() time.Time {
			select {
			case waiting <- struct{}{}:
			default:
			}
			return time.Unix(0, clock.Add(int64(time.Millisecond)))
		},
		ReadWait:  func(d time.Duration) { waits <- d },
		WriteWait: func(time.Duration) {},
		Held:      func(time.Duration, time.Duration, int) {},
		Entry:     func(CommandType, time.Duration) {},
	})
	s.Index()
	if d := <-waits; d != 0 {
		t.Fatalf("a read of a free lock waited %v", d)
	}
	s.mu.mu.Lock()
	go s.Index()
	<-waiting // the reader found the lock taken and reads the clock before it waits
	select {
	case d := <-waits:
		t.Fatalf("a reader had the lock (after %v) while apply held it", d)
	default:
	}
	s.mu.mu.Unlock()
	if d := <-waits; d != time.Millisecond {
		t.Fatalf("a reader behind apply reported a wait of %v, want 1ms on the observer's clock", d)
	}
}
