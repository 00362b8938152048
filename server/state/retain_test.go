package state

import (
	"bytes"
	"runtime"
	"testing"
	"weak"
)

// TestRetentionLifecycle: a complete batch waits for export with its
// version; a mark at another version, or for a batch still running,
// changes nothing; an exported batch is due once its retention window has
// passed and ForgetBatches removes it with everything it held; a batch
// reopened or cancelled after its export is exported again before it may
// go; all of it survives snapshots and replay.
func TestRetentionLifecycle(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 4, 8)
	emptyHeld := h.S.held
	a := h.CreateBatch(entry(1, 20, spec("a", 1)), entry(21, 1, spec("b", 1), Range{1, 20}))
	b := h.CreateBatch(entry(1, 5, spec("c", 1)))
	running := h.CreateBatch(entry(1, 1, spec("too-big", 100))) // never placed
	h.RunAll([]uint32{w}, nil)
	if q, n := h.S.ExportQueue(10); n != 2 || len(q) != 2 || q[0].Batch != a || q[1].Batch != b || q[0].Jobs != 21 {
		t.Fatalf("export queue %+v (%d waiting), want batches %d and %d", q, n, a, b)
	}
	q, _ := h.S.ExportQueue(10)
	va := q[0].Version
	if va == 0 {
		t.Fatal("a complete batch has version 0")
	}

	// The export reads the batch in pieces, groups where they start.
	jobs, groups, next, ok := h.S.ExportJobs(a, va, 1, 15)
	if !ok || len(jobs) != 15 || next != 16 || len(groups) != 1 || groups[0].First != 1 || groups[0].Count != 20 || groups[0].Name != "a" {
		t.Fatalf("first piece: %d jobs, groups %+v, next %d, %v", len(jobs), groups, next, ok)
	}
	jobs, groups, next, ok = h.S.ExportJobs(a, va, next, 15)
	if !ok || len(jobs) != 6 || next != 0 || len(groups) != 1 || groups[0].First != 21 || jobs[5].Name != "b" || jobs[5].State != Success {
		t.Fatalf("second piece: %d jobs, groups %+v, next %d, %v", len(jobs), groups, next, ok)
	}
	if _, _, _, ok := h.S.ExportJobs(a, va+1, 1, 10); ok {
		t.Fatal("a read at another version went ahead")
	}
	if hd, ok := h.S.ExportHeader(a, va); !ok || hd.Batch.Count(Success) != 21 || hd.Batch.Completed == 0 {
		t.Fatalf("header %+v, %v", hd, ok)
	}

	// Marks at a wrong version or for a running batch are no-ops.
	res := h.Must(&MarkExported{Marks: []ExportMark{{a, va + 1}, {running, 1}, {999, 1}}}).(*MarkResult)
	if res.Marked != 0 {
		t.Fatalf("wrong marks applied: %+v", res)
	}
	if due := h.S.RetentionDue(h.Now, 10); len(due) != 0 {
		t.Fatalf("due before any export: %v", due)
	}
	h.Must(&MarkExported{Marks: []ExportMark{{a, va}, {b, q[1].Version}}})
	if _, n := h.S.ExportQueue(10); n != 0 {
		t.Fatalf("%d batches waiting after both were marked", n)
	}
	completedA := h.Batch(a).Completed
	if due := h.S.RetentionDue(completedA-1, 10); len(due) != 0 {
		t.Fatalf("due before the window passed: %v", due)
	}
	if due := h.S.RetentionDue(h.Now, 10); len(due) != 2 {
		t.Fatalf("due once the window passed: %v", due)
	}

	// b is reopened by an update after its export: it is exported again.
	h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, Jobs: []JobEntry{entry(1, 1, spec("more", 1))}})
	h.RunAll([]uint32{w}, nil)
	q, n := h.S.ExportQueue(10)
	if n != 1 || q[0].Batch != b || q[0].Version <= va {
		t.Fatalf("after b reopened and completed again: %+v", q)
	}
	// Forgetting b (exported at its old version) and the running batch
	// leaves them; a goes.
	fr := h.Must(&ForgetBatches{Now: h.Tick(), Batches: []uint64{a, b, running}}).(*ForgetResult)
	if len(fr.Forgotten) != 1 || fr.Forgotten[0] != a {
		t.Fatalf("forgot %v, want only %d", fr.Forgotten, a)
	}
	if h.S.HasBatch(a) || !h.S.HasBatch(b) || !h.S.HasBatch(running) {
		t.Fatal("the wrong batches are gone")
	}
	if _, ok := h.S.Batch(a); ok {
		t.Fatal("a forgotten batch is still read from the state")
	}
	if held := h.S.held; held.Jobs != emptyHeld.Jobs+7 || held.Batches != 2 {
		t.Fatalf("held after forgetting a: %+v", held)
	}

	// A complete batch that is cancelled has changed: exported again.
	h.Must(&MarkExported{Marks: []ExportMark{{b, q[0].Version}}})
	h.Must(&CancelBatch{Now: h.Tick(), Batch: b, Reason: "late"})
	if q, n := h.S.ExportQueue(10); n != 1 || q[0].Batch != b {
		t.Fatalf("a complete batch cancelled is not waiting for export: %+v", q)
	}

	// Snapshot and replay agree with the state.
	snap := SnapshotBytes(t, h.S)
	restored := New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if err := restored.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(SnapshotBytes(t, restored), snap) {
		t.Fatal("a restored state's snapshot differs")
	}
	if !bytes.Equal(SnapshotBytes(t, h.Replay()), snap) {
		t.Fatal("a replayed state's snapshot differs")
	}
	if q, n := restored.ExportQueue(10); n != 1 || q[0].Batch != b {
		t.Fatalf("restored export queue %+v", q)
	}
	h.MustFail(&ForgetBatches{Now: h.Tick(), Batches: make([]uint64, MaxForget+1)}, ErrInvalid)
}

// TestForgottenBatchIsCollected: once forgotten, nothing in the state
// keeps a batch alive (its jobs, groups and specs with it): the garbage
// collector frees it.
func TestForgottenBatchIsCollected(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 4, 8)
	id := h.CreateBatch(entry(1, 50, spec("a", 1)))
	h.RunAll([]uint32{w}, nil)
	q, _ := h.S.ExportQueue(1)
	if len(q) != 1 || q[0].Batch != id {
		t.Fatalf("export queue %+v", q)
	}
	h.Must(&MarkExported{Marks: []ExportMark{{id, q[0].Version}}})
	ref := weak.Make(h.S.batches[id])
	h.Must(&ForgetBatches{Now: h.Tick(), Batches: []uint64{id}})
	if h.S.HasBatch(id) {
		t.Fatal("the batch was not forgotten")
	}
	runtime.GC()
	runtime.GC()
	if ref.Value() != nil {
		t.Fatal("a forgotten batch is still reachable from the state")
	}
	runtime.KeepAlive(h.S) // the state must outlive the check
}

// TestSnapshotAuditSizeIsItsOwn: a snapshot says how much of it is the
// audit log as of its own index: entries committed after it was taken
// are not counted (the state's AuditSize, read a moment later, counts
// them), and the snapshot less that share is the state's own size
// (what a state with no audit log snapshots to, but for the two empty
// lists).
func TestSnapshotAuditSizeIsItsOwn(t *testing.T) {
	h := newHarness(t)
	h.Activate("w", 4, 8)
	entry := func(n int) AuditEntry {
		return AuditEntry{Time: h.Tick(), User: "root", Method: "POST", Route: "/api/v1/batches", Path: "/api/v1/batches", Status: 200, Count: 1, Message: string(rune('a' + n))}
	}
	h.Must(&Audit{Entries: []AuditEntry{entry(0), entry(1)}})
	sn := h.S.Snapshot()
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	at := sn.AuditSize()
	h.Must(&Audit{Entries: []AuditEntry{entry(2), entry(3), entry(4)}})
	if sn.AuditSize() != at || h.S.AuditSize() <= at {
		t.Fatalf("the snapshot's audit share %d (was %d); the state's now %d", sn.AuditSize(), at, h.S.AuditSize())
	}
	bare := New()
	if err := bare.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	bare.audit, bare.anonAudit = nil, nil
	if got, want := int64(len(SnapshotBytes(t, bare))), int64(buf.Len())-at+2; got != want {
		t.Fatalf("the snapshot without its audit log is %d bytes; %d less its audit share %d (+2) is %d", got, buf.Len(), at, want)
	}
}
