package state

import (
	"bytes"
	"testing"
)

// TestForkAndAdoptStore: a forked snapshot restores with a new timeline,
// batch IDs resumed past the discarded ones, and every export mark
// cleared; marks made against another store or timeline are dropped; a
// new store clears the marks and raises the batch IDs past its own.
func TestForkAndAdoptStore(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 4, 8)
	h.Must(&AdoptStore{Now: h.Tick(), Store: "store-1"})
	a := h.CreateBatch(entry(1, 3, spec("a", 1)))
	h.RunAll([]uint32{w}, nil)
	q, _ := h.S.ExportQueue(10)
	lin := h.S.Lineage()
	if lin.Store != "store-1" || lin.Timeline != 0 {
		t.Fatalf("lineage %+v", lin)
	}
	// A mark from an exporter that read another store changes nothing.
	if res := h.Must(&MarkExported{Marks: []ExportMark{{a, q[0].Version}}, Store: "store-0"}).(*MarkResult); res.Marked != 0 {
		t.Fatalf("a mark against another store applied: %+v", res)
	}
	h.Must(&MarkExported{Marks: []ExportMark{{a, q[0].Version}}, Store: "store-1"})
	if _, n := h.S.ExportQueue(10); n != 0 {
		t.Fatalf("%d batches wait after the mark", n)
	}

	// Fork: the snapshot's next batch ID is a+1; the discarded timeline
	// went on to a+9.
	var forked bytes.Buffer
	info, err := ForkSnapshot(bytes.NewReader(SnapshotBytes(t, h.S)), &forked, 77, a+10, h.Tick())
	if err != nil {
		t.Fatal(err)
	}
	if info.Below != a+1 || info.Resume != a+10 || info.Unmarked != 1 || info.NewTimeline != 77 {
		t.Fatalf("fork %+v", info)
	}
	s := New()
	if err := s.Restore(&forked); err != nil {
		t.Fatal(err)
	}
	lin = s.Lineage()
	if lin.Timeline != 77 || len(lin.Forks) != 1 || lin.Forks[0].Timeline != 0 || !lin.Ancestor(0) || lin.Ancestor(77) {
		t.Fatalf("lineage after the fork %+v", lin)
	}
	if lin.Discarded(a) || !lin.Discarded(a+1) || !lin.Discarded(a+9) || lin.Discarded(a+10) {
		t.Fatal("the discarded IDs are not a+1 to a+9")
	}
	if s.NextBatchID() != a+10 {
		t.Fatalf("next batch ID %d, want %d", s.NextBatchID(), a+10)
	}
	if _, n := s.ExportQueue(10); n != 1 {
		t.Fatalf("%d batches wait for export after the fork, want the one marked before", n)
	}
	// A mark made in the timeline before the fork is dropped.
	s.Apply(s.Index()+1, &MarkExported{Marks: []ExportMark{{a, q[0].Version}}, Store: "store-1", Timeline: 0})
	if _, n := s.ExportQueue(10); n != 1 {
		t.Fatal("a mark from before the fork applied")
	}
	s.Apply(s.Index()+1, &MarkExported{Marks: []ExportMark{{a, q[0].Version}}, Store: "store-1", Timeline: 77})
	if _, n := s.ExportQueue(10); n != 0 {
		t.Fatal("a mark of the new timeline did not apply")
	}
	// Forking into a timeline the lineage has is refused.
	if _, err := ForkSnapshot(bytes.NewReader(SnapshotBytes(t, s)), &bytes.Buffer{}, 77, 0, 1); err == nil {
		t.Fatal("a fork into the current timeline went ahead")
	}

	// Another store: the marks go, and batch IDs move past its highest.
	h.Must(&AdoptStore{Now: h.Tick(), Store: "store-2", Floor: 500})
	if _, n := h.S.ExportQueue(10); n != 1 {
		t.Fatal("a new store left the marks")
	}
	if b := h.CreateBatch(entry(1, 1, spec("b", 1))); b != 501 {
		t.Fatalf("the first batch after adopting a store whose highest is 500 got ID %d", b)
	}
	h.MustFail(&AdoptStore{Now: h.Tick(), Store: ""}, ErrInvalid)
	// A recheck of the same store clears the marks too.
	h.RunAll([]uint32{w}, nil)
	q, _ = h.S.ExportQueue(10)
	marks := make([]ExportMark, len(q))
	for i, it := range q {
		marks[i] = ExportMark{it.Batch, it.Version}
	}
	h.Must(&MarkExported{Marks: marks, Store: "store-2"})
	if _, n := h.S.ExportQueue(10); n != 0 {
		t.Fatalf("%d batches wait after every one was marked", n)
	}
	if res := h.Must(&AdoptStore{Now: h.Tick(), Store: "store-2", Recheck: true}).(*AdoptResult); res.Unmarked != 2 {
		t.Fatalf("a recheck cleared %d marks, want 2", res.Unmarked)
	}
	h.Restored()
}
