package state

import (
	"slices"
	"testing"
)

// TestRetiredInstancesLeave: a retired instance stays while a held
// batch's attempt (current or lost, in its history) or a machine names
// it, and while its retention window has not passed; then
// ForgetInstances removes it with its token, and reads of the attempts
// that named it keep working until their batch goes. A worker that
// activates again (a restart) retires its previous incarnation, which
// goes the same way. The command re-checks all of it at apply, is
// bounded, and survives snapshots and replay.
func TestRetiredInstancesLeave(t *testing.T) {
	h := newHarness(t)
	// The planner only ever has one active instance to choose from: ran
	// runs batch a, then restarts (again); lost loses an attempt of
	// batch b; unused runs nothing.
	ran := h.Activate("ran", 4, 8)
	a := h.CreateBatch(entry(1, 3, spec("a", 1)))
	h.RunAll([]uint32{ran}, nil)
	lost := h.Activate("lost", 4, 8)
	b := h.CreateBatch(entry(1, 1, spec("b", 1)))
	h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 1, lost)}})
	h.Must(&Retire{Now: h.Tick(), Instance: lost, Reason: "no contact"})
	unused := h.Activate("unused", 4, 8)
	h.Must(&Retire{Now: h.Tick(), Instance: unused, Reason: "deactivated"})
	again := h.Activate("ran", 4, 8) // the same worker restarted
	if active, retired := h.S.InstanceCounts(); active != 1 || retired != 3 {
		t.Fatalf("%d active and %d retired instances, want 1 and 3", active, retired)
	}
	h.RunAll([]uint32{again}, nil)
	retiredAt := h.Now

	// Before the window passed nothing is due; after, only the unused one:
	// batch a's attempts name ran, batch b's lost attempt names lost.
	if due := h.S.RetiredDue(retiredAt-int64(100e6), 10); len(due) != 0 {
		t.Fatalf("due before the window passed: %v", due)
	}
	if due := h.S.RetiredDue(retiredAt, 10); !slices.Equal(due, []uint32{unused}) {
		t.Fatalf("due %v, want only the unused instance %d", due, unused)
	}
	// Apply re-checks: the window (Before), the references, the active
	// one, an unknown one.
	if res := h.Must(&ForgetInstances{Now: h.Tick(), Before: retiredAt - int64(100e6), Instances: []uint32{unused}}).(*ForgetInstancesResult); len(res.Forgotten) != 0 {
		t.Fatalf("forgot %v before the window passed", res.Forgotten)
	}
	unusedTok := h.tokenOf(t, unused)
	res := h.Must(&ForgetInstances{Now: h.Tick(), Before: retiredAt, Instances: []uint32{ran, lost, unused, again, 999}}).(*ForgetInstancesResult)
	if !slices.Equal(res.Forgotten, []uint32{unused}) {
		t.Fatalf("forgot %v, want only %d", res.Forgotten, unused)
	}
	if _, ok := h.S.InstanceByTokenHash(unusedTok); ok {
		t.Fatal("a forgotten instance's token still names it")
	}
	for _, in := range h.S.Instances() {
		if in.ID == unused {
			t.Fatal("a forgotten instance is still listed")
		}
	}
	// The attempts on retired instances still read with their names.
	if j, ok := h.S.Job(a, 1); !ok || len(j.Attempts) != 1 || j.Attempts[0].Instance != "ran" {
		t.Fatalf("job a/1 reads %+v", j)
	}
	if j, ok := h.S.Job(b, 1); !ok || len(j.Attempts) != 2 || j.Attempts[0].Instance != "lost" || j.Attempts[1].Instance != "ran" {
		t.Fatalf("job b/1 reads %+v", j)
	}

	// Once both batches have gone to the history store, ran and lost go
	// too; the active incarnation stays.
	q, _ := h.S.ExportQueue(10)
	var marks []ExportMark
	for _, it := range q {
		marks = append(marks, ExportMark{it.Batch, it.Version})
	}
	h.Must(&MarkExported{Marks: marks})
	if fr := h.Must(&ForgetBatches{Now: h.Tick(), Batches: []uint64{a, b}}).(*ForgetResult); len(fr.Forgotten) != 2 {
		t.Fatalf("forgot batches %v", fr.Forgotten)
	}
	if due := h.S.RetiredDue(h.Now, 10); !slices.Equal(due, []uint32{ran, lost}) {
		t.Fatalf("due once the batches went: %v, want %d and %d", due, ran, lost)
	}
	h.Restored() // the retired ones are in snapshots until they go
	res = h.Must(&ForgetInstances{Now: h.Tick(), Before: h.Now, Instances: h.S.RetiredDue(h.Now, MaxForgetInstances)}).(*ForgetInstancesResult)
	if !slices.Equal(res.Forgotten, []uint32{ran, lost}) {
		t.Fatalf("forgot %v", res.Forgotten)
	}
	if active, retired := h.S.InstanceCounts(); active != 1 || retired != 0 {
		t.Fatalf("%d active and %d retired instances left, want 1 and 0", active, retired)
	}
	restored := h.Restored()
	if in := restored.Instances(); len(in) != 1 || in[0].ID != again {
		t.Fatalf("restored instances %+v", in)
	}
	// A new activation does not reuse a forgotten ID.
	if id := h.Activate("new", 1, 1); id <= again {
		t.Fatalf("new instance %d reuses an ID (last %d)", id, again)
	}
	h.MustFail(&ForgetInstances{Now: h.Tick(), Before: h.Now, Instances: make([]uint32, MaxForgetInstances+1)}, ErrInvalid)
}

// TestRetiredInstanceOnAMachineStays: a machine names the worker that ran
// on it (a restarted worker rejoins with that instance's token), so the
// instance stays as long as the machine record does.
func TestRetiredInstanceOnAMachineStays(t *testing.T) {
	h := autoscaled(t)
	res := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "small", Count: 1}}}).(*ScaleResult)
	m := res.Requests[0].Machines[0]
	h.Must(&LaunchDone{Now: h.Tick(), Request: res.Requests[0].Key, Created: []LaunchedMachine{{Machine: m, ProviderID: "gce-1"}}})
	act := h.Must(&Activate{Now: h.Tick(), Name: m, NodeID: "n0", CPUMilli: 8000, Memory: 32 << 30, TokenHash: "t0",
		Region: "east", Cluster: "a", Machine: m}).(*ActivateResult)
	h.Must(&Retire{Now: h.Tick(), Instance: act.Instance, Reason: "no contact"})
	if due := h.S.RetiredDue(h.Now, 10); len(due) != 0 {
		t.Fatalf("due while its machine names it: %v", due)
	}
	if r := h.Must(&ForgetInstances{Now: h.Tick(), Before: h.Now, Instances: []uint32{act.Instance}}).(*ForgetInstancesResult); len(r.Forgotten) != 0 {
		t.Fatalf("forgot %v while its machine names it", r.Forgotten)
	}
}

// tokenOf is an instance's token hash.
func (h *Harness) tokenOf(t *testing.T, id uint32) string {
	t.Helper()
	h.S.mu.RLock()
	defer h.S.mu.RUnlock()
	inst := h.S.instances[id]
	if inst == nil {
		t.Fatalf("no instance %d", id)
	}
	return inst.TokenHash
}
