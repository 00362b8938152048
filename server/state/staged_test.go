package state

import (
	"bytes"
	"testing"
)

// TestStagedBunchesCommitInAnyOrder stages an update's jobs in bunches
// that arrive out of order and interleave (jobs 1 and 5 in one, 4, 2 and
// 6 in the next), with parents inside the update and before it that
// merge into one range across the update's start, snapshots the open
// update, and commits it both in the state and in the restored one: the
// dependencies must hold as they were sent, and both states must agree.
func TestStagedBunchesCommitInAnyOrder(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w1", 8, 16)
	b := h.CreateBatch(entry(1, 4, spec("first", 1)))
	h.RunAll([]uint32{w}, nil)
	u := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 6, User: "root"}).(*UpdateResult)
	if u.Start != 5 {
		t.Fatalf("update starts at %d, want 5", u.Start)
	}
	h.Must(&AddJobs{Batch: b, Update: u.Update, User: "root", Now: h.Tick(), Jobs: []JobEntry{
		entry(5, 1, spec("e", 1)),
		{First: 1, Count: 1, Spec: spec("a", 1), Parents: []Range{{5, 5}}, BatchParents: []Range{{3, 4}}},
	}})
	h.Must(&AddJobs{Batch: b, Update: u.Update, User: "root", Now: h.Tick(), Jobs: []JobEntry{
		entry(4, 1, spec("d", 1)),
		// [4, 4] before the update and [1, 1] inside it: [4, 5] once absolute.
		{First: 2, Count: 1, Spec: spec("b", 1), Parents: []Range{{1, 1}}, BatchParents: []Range{{4, 4}}},
		entry(6, 1, spec("f", 1)),
	}})
	h.Must(&AddJobs{Batch: b, Update: u.Update, User: "root", Now: h.Tick(), Jobs: []JobEntry{
		entry(3, 1, spec("c", 1), Range{6, 6}),
	}})
	restored := h.Restored()
	commit := &CommitUpdate{Now: h.Tick(), Batch: b, Update: u.Update}
	h.Must(commit)
	restored.Apply(uint64(len(h.Log)), commit)
	if !bytes.Equal(SnapshotBytes(t, restored), SnapshotBytes(t, h.S)) {
		t.Fatal("the update committed from a snapshot differs from the one committed where it was staged")
	}
	want := map[uint32]JobState{5: Pending, 6: Pending, 7: Pending, 8: Ready, 9: Ready, 10: Ready}
	for id, st := range want {
		if got := h.JobState(b, id); got != st {
			t.Errorf("job %d (%s) is %s, want %s", id, h.Batch(b).groupOf(id).spec.Name, got, st)
		}
	}
	bt := h.Batch(b)
	if ps := bt.parentsOf(bt.groupOf(6)); len(ps) != 1 || bt.ranges[ps[0]].r != (Range{4, 5}) {
		t.Fatalf("job 6 waits for ranges %v, want the one range [4, 5]", ps)
	}
	h.RunAll([]uint32{w}, nil)
	if bt := h.Batch(b).record(); bt.Count(Success) != 10 || bt.Completed == 0 {
		t.Fatalf("after the update: %+v", bt)
	}
	h.Restored()
}
