package state

import (
	"bytes"
	"strings"
	"testing"
)

// TestTalliesFollowEveryTransition: the per-user and per-project totals
// that admission reads move with reservations, commits, completions,
// cancellations and expiry, and equal what a snapshot restore recomputes
// (the harness also recomputes them after every command).
func TestTalliesFollowEveryTransition(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 4, 16)
	h.Must(&CreateUser{Now: h.Tick(), Name: "ann", TokenHash: "ann-hash"})
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "lab", Members: []string{"ann"}})
	want := func(user, project string, u, p Tally) {
		t.Helper()
		gotU, gotP := h.S.Tallies(user, project)
		if gotU != u || gotP != p {
			t.Fatalf("%s/%s: tallies %+v / %+v, want %+v / %+v", user, project, gotU, gotP, u, p)
		}
	}
	// An inline batch of 3 jobs; an opened update of 5 more.
	b := h.CreateBatch(entry(1, 3, &Spec{Name: "a", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 20}))
	want("root", "default", Tally{Batches: 1, Queued: 3}, Tally{Batches: 1, Queued: 3})
	upd := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 5}).(*UpdateResult)
	want("root", "default", Tally{Batches: 1, Queued: 8, OpenUpdates: 1}, Tally{Batches: 1, Queued: 8, OpenUpdates: 1})
	// Ann's batch counts for ann and lab only.
	ab := h.Must(&CreateBatch{Now: h.Tick(), User: "ann", BillingProject: "lab", NJobs: 10}).(*UpdateResult)
	want("ann", "lab", Tally{Batches: 1, Queued: 10, OpenUpdates: 1}, Tally{Batches: 1, Queued: 10, OpenUpdates: 1})
	want("root", "default", Tally{Batches: 1, Queued: 8, OpenUpdates: 1}, Tally{Batches: 1, Queued: 8, OpenUpdates: 1})

	// Running the 3 jobs ends them; the batch stays live (its update is open).
	h.RunAll([]uint32{w}, nil)
	want("root", "default", Tally{Batches: 1, Queued: 5, OpenUpdates: 1}, Tally{Batches: 1, Queued: 5, OpenUpdates: 1})
	// Commit: the 5 reserved IDs become jobs, still queued.
	h.Must(&AddJobs{Batch: b, Update: upd.Update, Jobs: []JobEntry{entry(1, 5, &Spec{Name: "b", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 20})}, Now: h.Tick()})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: upd.Update})
	want("root", "default", Tally{Batches: 1, Queued: 5}, Tally{Batches: 1, Queued: 5})
	h.RunAll([]uint32{w}, nil)
	want("root", "default", Tally{}, Tally{})

	// Expiry discards ann's idle update: nothing queued, the batch completes.
	snap := SnapshotBytes(t, h.S)
	res := h.Must(&ExpireUpdates{Now: h.Tick(), Before: h.Now, Reason: "idle for 1h", Updates: []UpdateRef{{Batch: ab.Batch, Update: ab.Update}}}).(*ExpireResult)
	if res.Discarded != 1 {
		t.Fatalf("expired %d updates, want 1", res.Discarded)
	}
	want("ann", "lab", Tally{}, Tally{})
	if bt := h.Batch(ab.Batch).record(); bt.Completed == 0 {
		t.Fatal("ann's batch is running after its only update expired")
	}

	// The snapshot taken before expiry restores the same totals.
	s := New()
	if err := s.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s)
	if u, p := s.Tallies("ann", "lab"); u != (Tally{Batches: 1, Queued: 10, OpenUpdates: 1}) || p != u {
		t.Fatalf("restored tallies %+v / %+v", u, p)
	}
}

// TestExpireUpdatesSparesActiveOnes: an update that received a bunch after
// the leader's cutoff is kept, a discarded update refuses bunches and
// commits with a message naming why, and its idempotency key no longer
// matches (a retried create opens a fresh update).
func TestExpireUpdatesSparesActiveOnes(t *testing.T) {
	h := newHarness(t)
	cb := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default"}).(*UpdateResult)
	b := cb.Batch
	u1 := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Key: "k1", NJobs: 4}).(*UpdateResult)
	u2 := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Key: "k2", NJobs: 4}).(*UpdateResult)
	cutoff := h.Tick()
	// u2 gets a bunch after the cutoff the leader chose.
	sp := &Spec{Name: "x", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 20}
	h.Must(&AddJobs{Batch: b, Update: u2.Update, Jobs: []JobEntry{entry(1, 2, sp)}, Now: h.Tick()})
	if idle := h.S.IdleUpdates(cutoff, 10); len(idle) != 1 || idle[0].Update != u1.Update {
		t.Fatalf("idle updates %+v, want only update %d", idle, u1.Update)
	}
	res := h.Must(&ExpireUpdates{Now: h.Tick(), Before: cutoff, Reason: "no bunch or commit for 1h0m0s (server setting update_idle_timeout)",
		Updates: []UpdateRef{{b, u1.Update}, {b, u2.Update}, {b, 99}, {12345, 1}}}).(*ExpireResult)
	if res.Discarded != 1 {
		t.Fatalf("discarded %d, want 1 (update 2 was active after the cutoff)", res.Discarded)
	}
	err := h.MustFail(&AddJobs{Batch: b, Update: u1.Update, Jobs: []JobEntry{entry(1, 4, sp)}, Now: h.Tick()}, ErrConflict)
	if !strings.Contains(err.Msg, "was discarded (no bunch or commit for 1h0m0s (server setting update_idle_timeout)); open a new update") {
		t.Fatalf("bunch into a discarded update: %v", err)
	}
	h.MustFail(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u1.Update}, ErrConflict)
	again := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Key: "k1", NJobs: 4}).(*UpdateResult)
	if again.Existing || again.Update == u1.Update {
		t.Fatalf("a retried create with the discarded update's key got %+v", again)
	}
	// u2 still commits; a later update may not name the discarded IDs as parents.
	h.Must(&AddJobs{Batch: b, Update: u2.Update, Jobs: []JobEntry{entry(3, 2, sp)}, Now: h.Tick()})
	h.Must(&CommitUpdate{Now: h.Tick(), Batch: b, Update: u2.Update})
	child := JobEntry{First: 1, Count: 4, Spec: sp, BatchParents: []Range{{1, 1}}}
	h.Must(&AddJobs{Batch: b, Update: again.Update, Jobs: []JobEntry{child}, Now: h.Tick()})
	h.MustFail(&CommitUpdate{Now: h.Tick(), Batch: b, Update: again.Update}, ErrInvalid)
}
