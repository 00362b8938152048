package state

import (
	"bytes"
	"testing"

	"github.com/drover-sched/drover/placement"
)

// TestDeleteBillingProject: a project that never had a batch and that no
// queue names goes; one that had a batch keeps its name (its batches,
// live or in the history store, carry it), across a snapshot too; one a
// queue names stays until the queue lets it go.
func TestDeleteBillingProject(t *testing.T) {
	h := NewHarness(t, nil)
	for _, name := range []string{"unused", "used", "queued"} {
		h.Must(&CreateBillingProject{Now: h.Tick(), Name: name, Members: []string{"root"}})
	}
	h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "used", NJobs: 1})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}, Projects: []string{"queued"}}})

	h.MustFail(&DeleteBillingProject{Name: "used"}, ErrConflict)
	h.MustFail(&DeleteBillingProject{Name: "queued"}, ErrConflict)
	h.MustFail(&DeleteBillingProject{Name: "nope"}, ErrNotFound)
	h.Must(&DeleteBillingProject{Name: "unused"})
	if _, ok := h.S.projects["unused"]; ok {
		t.Fatal("the unused project is still there")
	}
	// The name is free again, and the count of batches survives a snapshot.
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "unused", Members: []string{"root"}})
	var buf bytes.Buffer
	if _, err := h.S.Snapshot().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	restored := New()
	if err := restored.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if p := restored.projects["used"]; p == nil || p.Batches != 1 {
		t.Fatalf("after a snapshot, project used: %+v", p)
	}
	if ae, ok := restored.Apply(h.S.Index()+1, &DeleteBillingProject{Name: "used"}).(*ApplyError); !ok || ae.Kind != ErrConflict {
		t.Fatalf("deleting a used project after a snapshot: %v", ae)
	}
}
