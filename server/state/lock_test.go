package state

import (
	"fmt"
	"slices"
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

// eventCommands returns a bootstrap and n entries of k worker events
// each (stale ones: apply looks at each and ignores it), at indexes
// 1..n+1.
func eventCommands(n, k int) ([]uint64, []Command) {
	idx := []uint64{1}
	cmds := []Command{&Bootstrap{Now: 1, Admin: "root", TokenHash: "h-root", DefaultProject: "default"}}
	for i := range n {
		idx = append(idx, uint64(i+2))
		cmds = append(cmds, &Events{Now: 2, Events: make([]Event, k)})
	}
	return idx, cmds
}

// TestReadersGetInBetweenHolds: a batch of large log entries does not
// hold the state's lock from the first to the last, so a reader (a
// snapshot here, the largest reader) runs between holds and sees the
// state the log passes through there. The seam between holds keeps the
// batch open until the reader has finished: were the lock held across
// the batch, TryRLock would fail and the reader would block it for good.
func TestReadersGetInBetweenHolds(t *testing.T) {
	s := New()
	idx, cmds := eventCommands(63, 1000) // 4 entries a hold
	var at []int
	s.betweenHolds = func(i int) {
		if !s.mu.mu.TryRLock() {
			t.Fatalf("before entry %d of %d the write lock is still held", i, len(cmds))
		}
		s.mu.mu.RUnlock()
		got := make(chan uint64)
		go func() { got <- s.Snapshot().Index() }()
		if seen := <-got; seen != idx[i-1] {
			t.Errorf("a read before entry %d saw index %d, want %d", i, seen, idx[i-1])
		}
		at = append(at, i)
	}
	s.ApplyBatch(idx, cmds)
	// 4 × 1,001 of work fit in a hold of 4,096 (the first hold has the
	// bootstrap too), a fifth does not.
	want := []int{5}
	for i := 9; i < len(cmds); i += 4 {
		want = append(want, i)
	}
	if !slices.Equal(at, want) {
		t.Fatalf("readers got in before entries %v, want %v", at, want)
	}
	if s.Index() != idx[len(idx)-1] {
		t.Fatalf("index %d after the batch, want %d", s.Index(), idx[len(idx)-1])
	}
}

// TestApplyHoldsBoundedWork: the lock observer hears holds whose entries
// carry at most holdWork between them, or one entry each: small entries
// share a hold, a large one (or a commit, whose cost the state decides)
// holds the lock alone, and every entry is timed.
func TestApplyHoldsBoundedWork(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cmds  func() ([]uint64, []Command)
		holds []int // entries in each hold
	}{
		{"small entries share a hold", func() ([]uint64, []Command) { return userCommands(63) }, []int{64}},
		{"large entries four a hold", func() ([]uint64, []Command) { return eventCommands(8, 1000) }, []int{5, 4}},
		{"entries above the bound each alone", func() ([]uint64, []Command) { return eventCommands(3, 5000) }, []int{1, 1, 1, 1}},
		{"a commit alone", func() ([]uint64, []Command) {
			idx, cmds := userCommands(2)
			return append(idx, 4, 5), append(cmds, &CommitUpdate{Now: 3, Batch: 9, Update: 1}, &CreateUser{Now: 3, Name: "late", TokenHash: "h-late"})
		}, []int{3, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			var holds []int
			entries := 0
			s.SetLockObserver(&LockObserver{
				Now:       time.Now,
				ReadWait:  func(time.Duration) {},
				WriteWait: func(time.Duration) {},
				Held:      func(_, _ time.Duration, n int) { holds = append(holds, n) },
				Entry:     func(CommandType, time.Duration) { entries++ },
			})
			idx, cmds := tc.cmds()
			s.ApplyBatch(idx, cmds)
			if !slices.Equal(holds, tc.holds) || entries != len(cmds) {
				t.Fatalf("%d entries: holds of %v entries, %d timed; want %v", len(cmds), holds, entries, tc.holds)
			}
		})
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
