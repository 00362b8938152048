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

// TestReadersGetInWhileACommitIsPrepared: committing an update makes all
// its jobs live in one entry, whose cost grows with the update, so it is
// made on copies without the lock and only published with it. The seam
// holds the commit open once it is made and before it is published: the
// read lock is free there, and a reader (a snapshot, the batch, the
// state's counts) completes and sees none of the commit; after the entry
// it sees all of it. Were the commit made under the write lock, TryRLock
// would fail and the reader would block it for good.
func TestReadersGetInWhileACommitIsPrepared(t *testing.T) {
	const n, bunch = 20_000, 5_000
	s := New()
	idx := []uint64{1, 2, 3}
	cmds := []Command{
		&Bootstrap{Now: 1, Admin: "root", TokenHash: "h-root", DefaultProject: "default"},
		&CreateBatch{Now: 1, User: "root", BillingProject: "default"},
		&CreateUpdate{Now: 1, Batch: 1, NJobs: n, User: "root"},
	}
	spec := &Spec{Name: "j", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}
	for lo := uint32(1); lo <= n; lo += bunch {
		jobs := make([]JobEntry, bunch)
		for k := range jobs {
			jobs[k] = JobEntry{First: lo + uint32(k), Count: 1, Spec: spec}
			if id := lo + uint32(k); id%2 == 0 {
				jobs[k].Parents = []Range{{id - 1, id - 1}} // half the jobs wait for one
			}
		}
		idx = append(idx, uint64(len(idx)+1))
		cmds = append(cmds, &AddJobs{Batch: 1, Update: 1, Jobs: jobs, Now: 1, User: "root"})
	}
	staged := uint64(len(idx))
	idx = append(idx, staged+1, staged+2)
	cmds = append(cmds, &CommitUpdate{Now: 2, Batch: 1, Update: 1}, &CreateUser{Now: 3, Name: "late", TokenHash: "h-late"})

	prepared := 0
	s.preparing = func() {
		prepared++
		if !s.mu.mu.TryRLock() {
			t.Fatal("the write lock is held while the commit is prepared")
		}
		s.mu.mu.RUnlock()
		type read struct {
			index   uint64
			rec     BatchRecord
			byState [numStates]int64
			held    Footprint
		}
		got := make(chan read)
		go func() {
			var r read
			r.index = s.Snapshot().Index()
			r.rec, _ = s.Batch(1)
			r.byState, _, _ = s.Counts()
			s.Read(func(rd Reader) { r.held = rd.Admission(1, "root", "default", "").Held })
			got <- r
		}()
		r := <-got
		if r.index != staged || r.rec.NJobs != 0 || r.rec.Count(Ready) != 0 || r.byState[Pending]+r.byState[Ready] != 0 || r.held.Groups != 0 {
			t.Errorf("a read while the commit is prepared saw index %d (want %d), %d jobs committed, %d ready, %d pending or ready in all, %d groups: want none of the commit",
				r.index, staged, r.rec.NJobs, r.rec.Count(Ready), r.byState[Pending]+r.byState[Ready], r.held.Groups)
		}
	}
	res := s.ApplyBatch(idx, cmds)
	if err, ok := res[len(res)-2].(*ApplyError); ok {
		t.Fatal(err)
	}
	if prepared != 1 {
		t.Fatalf("the commit was prepared %d times, want once", prepared)
	}
	rec, _ := s.Batch(1)
	byState, _, _ := s.Counts()
	if rec.NJobs != n || rec.Count(Ready) != n/2 || rec.Count(Pending) != n/2 || byState[Ready] != n/2 || s.Index() != idx[len(idx)-1] {
		t.Fatalf("after the commit: %d jobs, %d ready, %d pending (%d ready in all), index %d; want %d, %d, %d, index %d",
			rec.NJobs, rec.Count(Ready), rec.Count(Pending), byState[Ready], s.Index(), n, n/2, n/2, idx[len(idx)-1])
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestPreparedCommitsShareNothingWithReaders: commits prepared without
// the lock while readers (snapshots, job listings, the planner) run all
// the time, into a batch that already has groups, dependency ranges and
// Ready jobs: the later of two open updates committed first (its jobs
// past the batch's) and then the earlier (its jobs inside the batch's, so
// they are copied), with batch parents of which one failed, whose
// children are cancelled by the commit. The race detector (make race)
// finds any write of preparing to what a reader reads; the harness checks
// the invariants after each entry, and that a replay and a restore of a
// snapshot give the same state.
func TestPreparedCommitsShareNothingWithReaders(t *testing.T) {
	h := NewHarness(t, nil)
	inst := h.Activate("w", 2, 8)
	sp := func(name string) *Spec {
		return &Spec{Name: name, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}
	}
	b := h.CreateBatch(
		JobEntry{First: 1, Count: 1, Spec: sp("ok")},
		JobEntry{First: 2, Count: 1, Spec: sp("fails")},
		JobEntry{First: 3, Count: 4, Spec: sp("waits"), Parents: []Range{{1, 2}}},
		JobEntry{First: 7, Count: 50, Spec: sp("ready")},
	)
	h.Schedule()
	h.Complete(inst, func(_ uint64, j uint32) Outcome {
		if j == 2 {
			return OutcomeFailed
		}
		return OutcomeSuccess
	})

	stop := make(chan struct{})
	var reads atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := h.S.Snapshot()
			_ = s.Index()
			h.S.ListJobs(b, nil, 0)
			FirstFit(h.S, 1)
			h.S.Counts()
			reads.Add(1)
		}
	}()

	const n = 3000
	u2 := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: n, User: "root"}).(*UpdateResult)
	u3 := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: n, User: "root"}).(*UpdateResult)
	for _, u := range []*UpdateResult{u2, u3} {
		jobs := make([]JobEntry, 0, n)
		for id := uint32(1); id <= n; id++ {
			e := JobEntry{First: id, Count: 1, Spec: sp(fmt.Sprint("u", u.Update, "-", id))}
			switch id % 4 {
			case 1:
				e.BatchParents = []Range{{1, 1}} // succeeded
			case 2:
				e.BatchParents = []Range{{2, 2}} // failed: cancelled with those waiting for it
			case 3:
				e.Parents = []Range{{id - 1, id - 1}}
			}
			jobs = append(jobs, e)
		}
		h.Must(&AddJobs{Batch: b, Update: u.Update, Jobs: jobs, Now: h.Tick(), User: "root"})
	}
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u3.Update})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u2.Update})
	close(stop)
	<-done
	if reads.Load() == 0 {
		t.Fatal("no read ran")
	}
	rec, _ := h.S.Batch(b)
	// Per update: a quarter wait for job 2 (failed) and a quarter for
	// those: cancelled; a quarter wait for job 1 and the rest none:
	// Ready. Before them: jobs 3-6 cancelled, 7-56 Ready.
	if rec.NJobs != 56+2*n || rec.Count(Cancelled) != 4+n || rec.Count(Ready) != 50+n {
		t.Fatalf("%d jobs, %d cancelled, %d ready; want %d, %d, %d", rec.NJobs, rec.Count(Cancelled), rec.Count(Ready), 56+2*n, 4+n, 50+n)
	}
	h.Restored()
}
