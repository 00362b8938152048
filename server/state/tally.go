package state

import "fmt"

// Per-user and per-billing-project totals that admission checks before a
// submission reaches the log. They are kept as the state applies (O(1) per
// transition), recomputed from the batches on restore, and checked by
// CheckInvariants.

// Tally is what one user, or one billing project, holds in the state.
type Tally struct {
	// Batches counts live batches: not complete (jobs not final, or an
	// update open).
	Batches int64
	// Queued counts jobs not final yet, the job IDs of open updates
	// included: what the owner has asked to run and that has not ended.
	Queued int64
	// OpenUpdates counts updates neither committed nor discarded.
	OpenUpdates int64
}

func (t *Tally) add(o Tally) {
	t.Batches += o.Batches
	t.Queued += o.Queued
	t.OpenUpdates += o.OpenUpdates
}

// tallyOf computes a batch's contribution from its own fields (restore and
// invariants; apply keeps the totals incrementally).
func (b *Batch) tallyOf() Tally {
	var t Tally
	if b.Completed == 0 {
		t.Batches = 1
	}
	for _, u := range b.updates {
		if !u.Committed && !u.Discarded {
			t.OpenUpdates++
			t.Queued += int64(u.N)
		}
	}
	t.Queued += b.nJobs - b.counts[Success] - b.counts[Failed] - b.counts[Cancelled] - b.counts[Error]
	return t
}

func tallyIn(m map[string]*Tally, name string) *Tally {
	t := m[name]
	if t == nil {
		t = &Tally{}
		m[name] = t
	}
	return t
}

// bindTallies points a batch at its owner's and its project's totals.
func (s *batchBook) bindTallies(b *Batch) {
	b.userTally = tallyIn(s.userTallies, b.User)
	b.projectTally = tallyIn(s.projectTallies, b.BillingProject)
}

// tally adds d to the batch's owner and project.
func (b *Batch) tally(d Tally) {
	b.userTally.add(d)
	b.projectTally.add(d)
}

// ended counts n jobs of b that reached a final state.
func (b *Batch) ended(n int64) { b.tally(Tally{Queued: -n}) }

// setCompleted stamps b complete at Raft index index; a live batch stops
// counting.
func (b *Batch) setCompleted(now int64, index uint64) {
	b.Completed = now
	b.version = index
	if b.live {
		b.live = false
		b.tally(Tally{Batches: -1})
		if b.tot != nil {
			b.tot.live--
		}
	}
}

// setLive marks b not complete (an update was opened or committed).
func (b *Batch) setLive() {
	b.Completed = 0
	if !b.live {
		b.live = true
		b.tally(Tally{Batches: 1})
		if b.tot != nil {
			b.tot.live++
		}
	}
}

// Tallies returns what user and billing project hold (zero for names the
// state has not seen).
func (s *batchBook) Tallies(user, project string) (u, p Tally) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if t := s.userTallies[user]; t != nil {
		u = *t
	}
	if t := s.projectTallies[project]; t != nil {
		p = *t
	}
	return u, p
}

// recomputeTallies rebuilds the totals from the batches (restore).
func (s *batchBook) recomputeTallies() {
	s.userTallies, s.projectTallies = map[string]*Tally{}, map[string]*Tally{}
	s.jobTotals = totals{}
	for _, b := range s.batches {
		s.bindTallies(b)
		b.live = b.Completed == 0
		b.tally(b.tallyOf())
		b.tot = &s.jobTotals
		for st, n := range b.counts {
			s.jobTotals.jobs[st] += n
		}
		if b.live {
			s.jobTotals.live++
		}
	}
}

// checkTallies compares the kept totals with totals recomputed from the
// batches.
func (s *batchBook) checkTallies() error {
	users, projects := map[string]Tally{}, map[string]Tally{}
	for _, b := range s.batches {
		t := b.tallyOf()
		u, p := users[b.User], projects[b.BillingProject]
		u.add(t)
		p.add(t)
		users[b.User], projects[b.BillingProject] = u, p
		if b.live != (b.Completed == 0) {
			return fmt.Errorf("batch %d: live=%v but completed=%d", b.ID, b.live, b.Completed)
		}
		if b.tot != &s.jobTotals {
			return fmt.Errorf("batch %d does not count in the state's totals", b.ID)
		}
		if b.userTally != s.userTallies[b.User] || b.projectTally != s.projectTallies[b.BillingProject] {
			return fmt.Errorf("batch %d is not bound to its owner's tallies", b.ID)
		}
	}
	var want totals
	for _, b := range s.batches {
		for st, n := range b.counts {
			want.jobs[st] += n
		}
		if b.live {
			want.live++
		}
	}
	if want != s.jobTotals {
		return fmt.Errorf("kept totals %+v, recomputed %+v", s.jobTotals, want)
	}
	for _, c := range []struct {
		what string
		kept map[string]*Tally
		want map[string]Tally
	}{{"user", s.userTallies, users}, {"billing project", s.projectTallies, projects}} {
		for name, t := range c.kept {
			if *t != c.want[name] {
				return fmt.Errorf("%s %s: kept tally %+v, recomputed %+v", c.what, name, *t, c.want[name])
			}
		}
		for name, t := range c.want {
			if c.kept[name] == nil && t != (Tally{}) {
				return fmt.Errorf("%s %s: no kept tally, recomputed %+v", c.what, name, t)
			}
		}
	}
	return nil
}
