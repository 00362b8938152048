package state

import "testing"

// TestCallbacksAreDueOncePerCompletion: a batch with a callback is due
// once it completes, not before; CallbackDone for that completion
// settles it (a stale one does not); a batch that completes again (a new
// update) is due again; and it stays in memory until its completion is
// reported.
func TestCallbacksAreDueOncePerCompletion(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w1", 4, 16)
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Callback: "https://hooks.example/done",
		Jobs: []JobEntry{entry(1, 2, spec("a", 1))}}).(*UpdateResult).Batch
	if due := h.S.CallbacksDue(10, nil); len(due) != 0 {
		t.Fatalf("due before completion: %+v", due)
	}
	h.RunAll([]uint32{w}, nil)
	due := h.S.CallbacksDue(10, nil)
	if len(due) != 1 || due[0].Batch != b || due[0].URL != "https://hooks.example/done" || due[0].Version == 0 {
		t.Fatalf("due after completion: %+v", due)
	}
	if h.Batch(b).forgettable() {
		t.Fatal("a batch whose completion is not reported may leave memory")
	}
	h.Must(&CallbackDone{Now: h.Tick(), Batch: b, Version: due[0].Version - 1, Result: "stale"})
	if len(h.S.CallbacksDue(10, nil)) != 1 {
		t.Fatal("a report of another completion settled this one")
	}
	h.Must(&CallbackDone{Now: h.Tick(), Batch: b, Version: due[0].Version, Result: "HTTP 200"})
	if got := h.S.CallbacksDue(10, nil); len(got) != 0 || h.Batch(b).record().CallbackResult != "HTTP 200" {
		t.Fatalf("after the report: due %+v, result %q", got, h.Batch(b).record().CallbackResult)
	}
	h.Restored()
	// A new update runs, and the batch completes again: due again.
	h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Jobs: []JobEntry{entry(1, 1, spec("more", 1))}, User: "root"})
	if len(h.S.CallbacksDue(10, nil)) != 0 {
		t.Fatal("due while running again")
	}
	h.RunAll([]uint32{w}, nil)
	again := h.S.CallbacksDue(10, nil)
	if len(again) != 1 || again[0].Version == due[0].Version {
		t.Fatalf("the second completion: %+v", again)
	}
	// Batches without a callback are never due.
	h.CreateBatch(entry(1, 1, spec("plain", 1)))
	h.RunAll([]uint32{w}, nil)
	if len(h.S.CallbacksDue(10, nil)) != 1 {
		t.Fatalf("due: %+v", h.S.CallbacksDue(10, nil))
	}
	h.Restored()
}

// TestCallbacksDuePerProject: one project's backlog of due callbacks does
// not hide another project's first: each project lists its oldest
// perProject, and what skip passes over (the leader's in-flight and
// backing-off reports) is not counted; skip sees every due batch.
func TestCallbacksDuePerProject(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w1", 64, 256)
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "other", Members: []string{"root"}})
	var many []uint64
	for range 10 {
		b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Callback: "https://hooks.example/a",
			Jobs: []JobEntry{entry(1, 1, spec("a", 1))}}).(*UpdateResult).Batch
		many = append(many, b)
	}
	other := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "other", Callback: "https://hooks.example/b",
		Jobs: []JobEntry{entry(1, 1, spec("b", 1))}}).(*UpdateResult).Batch
	h.RunAll([]uint32{w}, nil)
	due := h.S.CallbacksDue(3, nil)
	if len(due) != 4 || due[0].Batch != many[0] || due[2].Batch != many[2] || due[3].Batch != other || due[3].BillingProject != "other" || due[0].BillingProject != "default" {
		t.Fatalf("3 per project: %+v", due)
	}
	seen := 0
	due = h.S.CallbacksDue(3, func(d CallbackDue) bool { seen++; return d.Batch == many[0] || d.Batch == many[1] })
	if seen != 11 || len(due) != 4 || due[0].Batch != many[2] || due[2].Batch != many[4] || due[3].Batch != other {
		t.Fatalf("skipping the first two (skip saw %d): %+v", seen, due)
	}
}
