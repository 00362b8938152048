package state

import (
	"bytes"
	"strconv"
	"testing"
)

func registerNomad(h *Harness, id string, spec string, enforce bool, index uint64) any {
	c := &RegisterNomadJob{Now: h.Tick(), Namespace: "default", ID: id, User: "root", Project: "default", Spec: []byte(spec),
		EnforceIndex: enforce, JobModifyIndex: index,
		Batch: &CreateBatch{Now: h.Now, User: "root", BillingProject: "default", Name: id, Jobs: []JobEntry{entry(1, 4, spec2())}}}
	return h.Apply(c)
}

func spec2() *Spec { return spec("t", 0.5) }

// A Nomad job's registration creates its batch in the same entry; an
// unchanged spec changes nothing; a new version cancels the last one's
// batch; enforce-index is Nomad's check-and-set; stop cancels and purge
// forgets; all of it survives a snapshot and a replay.
func TestNomadJobVersions(t *testing.T) {
	h := newHarness(t)
	h.Activate("w", 1, 4)
	r1 := registerNomad(h, "sweep", `{"v":1}`, true, 0).(*NomadResult)
	if r1.Batch == 0 || r1.Job.Version != 0 || len(r1.Job.Batches) != 1 || r1.Job.CreateIndex == 0 || r1.Job.JobModifyIndex != r1.Job.CreateIndex {
		t.Fatalf("first registration: %+v", r1)
	}
	if b := h.Batch(r1.Batch); b == nil || b.Name != "sweep" {
		t.Fatalf("no batch %d", r1.Batch)
	}
	h.Schedule()
	// Enforce index 0 on an existing job, or a stale index: refused.
	if err, ok := registerNomad(h, "sweep", `{"v":2}`, true, 0).(*ApplyError); !ok || err.Kind != ErrConflict {
		t.Fatalf("enforce 0 on an existing job: %v", err)
	}
	if err, ok := registerNomad(h, "sweep", `{"v":2}`, true, r1.Job.JobModifyIndex+1).(*ApplyError); !ok || err.Kind != ErrConflict {
		t.Fatalf("stale enforce index: %v", err)
	}
	same := registerNomad(h, "sweep", `{"v":1}`, false, 0).(*NomadResult)
	if !same.Unchanged || same.Batch != 0 || h.S.nextBatch != r1.Batch+1 {
		t.Fatalf("an unchanged spec: %+v", same)
	}
	r2 := registerNomad(h, "sweep", `{"v":2}`, true, r1.Job.JobModifyIndex).(*NomadResult)
	if r2.Job.Version != 1 || r2.Batch == r1.Batch || len(r2.Job.Batches) != 2 || r2.Job.CreateIndex != r1.Job.CreateIndex || r2.Job.JobModifyIndex <= r1.Job.JobModifyIndex {
		t.Fatalf("second version: %+v", r2)
	}
	if b := h.Batch(r1.Batch); !b.Cancelled {
		t.Fatal("the replaced version's batch runs on")
	}
	stop := h.Must(&DeregisterNomadJob{Now: h.Tick(), Namespace: "default", ID: "sweep", User: "root"}).(*NomadResult)
	if stop.Batch != r2.Batch || !stop.Job.Stopped || !h.Batch(r2.Batch).Cancelled {
		t.Fatalf("stop: %+v", stop)
	}
	for _, s := range []*State{h.Replay(), h.Restored()} {
		j, ok := s.NomadJob("default", "sweep")
		if !ok || !j.Stopped || j.Version != 1 || !bytes.Equal(j.Spec, []byte(`{"v":2}`)) || len(j.Batches) != 2 {
			t.Fatalf("after a replay or restore: %+v %v", j, ok)
		}
	}
	// A stopped job registered again with its spec runs again.
	r3 := registerNomad(h, "sweep", `{"v":2}`, false, 0).(*NomadResult)
	if r3.Unchanged || r3.Batch == 0 || r3.Job.Stopped {
		t.Fatalf("re-run after stop: %+v", r3)
	}
	h.Must(&DeregisterNomadJob{Now: h.Tick(), Namespace: "default", ID: "sweep", User: "root", Purge: true})
	if _, ok := h.S.NomadJob("default", "sweep"); ok {
		t.Fatal("a purged job is still there")
	}
	h.MustFail(&DeregisterNomadJob{Now: h.Tick(), Namespace: "default", ID: "sweep", User: "root"}, ErrNotFound)
}

// What apply refuses whatever the API let through: a refused batch
// registers nothing, and bounds hold.
func TestNomadJobBounds(t *testing.T) {
	h := newHarness(t)
	bad := &RegisterNomadJob{Now: h.Tick(), Namespace: "default", ID: "j", User: "root", Project: "nope", Spec: []byte("{}"),
		Batch: &CreateBatch{Now: h.Now, User: "root", BillingProject: "nope", Jobs: []JobEntry{entry(1, 1, spec2())}}}
	if _, ok := h.Apply(bad).(*ApplyError); !ok {
		t.Fatal("a batch in a project that does not exist was registered")
	}
	if _, ok := h.S.NomadJob("default", "j"); ok {
		t.Fatal("a refused batch left its job registered")
	}
	for _, c := range []*RegisterNomadJob{
		{Namespace: "default", ID: "", User: "root", Project: "default", Template: true},
		{Namespace: "default", ID: string(make([]byte, MaxNomadIDBytes+1)), User: "root", Project: "default", Template: true},
		{Namespace: "default", ID: "a\nb", User: "root", Project: "default", Template: true},
		{Namespace: "default", ID: "big", User: "root", Project: "default", Template: true, Spec: make([]byte, MaxNomadSpecBytes+1)},
		{Namespace: "default", ID: "t", User: "root", Project: "default", Template: false},
		{Namespace: "default", ID: "u", User: "root", Project: "default", Batch: &CreateBatch{User: "someone", BillingProject: "default"}},
	} {
		h.MustFail(c, ErrInvalid)
	}
	tmpl := h.Must(&RegisterNomadJob{Now: h.Tick(), Namespace: "default", ID: "nightly", User: "root", Project: "default", Spec: []byte("{}"), Template: true}).(*NomadResult)
	if tmpl.Batch != 0 || !tmpl.Job.Template || len(tmpl.Job.Batches) != 0 {
		t.Fatalf("a template: %+v", tmpl)
	}
}

// A Nomad job whose batch left the state for the history store is
// forgettable (the leader purges it); one whose batch is in the state, or
// a template, is not.
func TestNomadJobsFollowRetention(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 4, 8)
	r := registerNomad(h, "done", `{}`, false, 0).(*NomadResult)
	registerNomad(h, "running", `{}`, false, 0)
	h.Must(&RegisterNomadJob{Now: h.Tick(), Namespace: "default", ID: "nightly", User: "root", Project: "default", Spec: []byte("{}"), Template: true})
	if f := h.S.NomadForgettable(10); len(f) != 0 {
		t.Fatalf("forgettable with every batch in the state: %v", f)
	}
	h.RunAll([]uint32{w}, nil)
	b := h.Batch(r.Batch)
	h.Must(&MarkExported{Marks: []ExportMark{{r.Batch, b.version}}})
	h.Must(&ForgetBatches{Now: h.Tick(), Batches: []uint64{r.Batch}})
	f := h.S.NomadForgettable(10)
	if len(f) != 1 || f[0] != (NomadKey{"default", "done"}) {
		t.Fatalf("forgettable: %v", f)
	}
	h.MustFail(&DeregisterNomadJob{Now: h.Tick(), Namespace: "default", ID: "running", GC: true, Purge: true}, ErrConflict)
	h.Must(&DeregisterNomadJob{Now: h.Tick(), Namespace: "default", ID: "done", GC: true, Purge: true})
	if f := h.S.NomadForgettable(10); len(f) != 0 {
		t.Fatalf("after the purge: %v", f)
	}
}

// Who may do what to a Nomad job, whatever the API let through: a viewer
// registers nothing, a member does not replace or stop another member's
// job, its owner, a manager and an admin do; the leader's purge is only
// of forgettable jobs; one project's jobs stay within its share.
func TestNomadJobControl(t *testing.T) {
	h := newHarness(t)
	for _, u := range []string{"alice", "bob", "victor", "mia"} {
		h.Must(&CreateUser{Now: h.Tick(), Name: u, TokenHash: u + "-hash"})
	}
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "p", Members: []string{"alice", "bob", "victor", "mia"}})
	h.Must(&SetMember{Project: "p", User: "victor", Member: true, Role: RoleViewer})
	h.Must(&SetMember{Project: "p", User: "mia", Member: true, Role: RoleManager})
	reg := func(user, id, spec string, template bool) any {
		c := &RegisterNomadJob{Now: h.Tick(), Namespace: "p", ID: id, User: user, Project: "p", Spec: []byte(spec), Template: template}
		if !template {
			c.Batch = &CreateBatch{Now: h.Now, User: user, BillingProject: "p", Name: id, Jobs: []JobEntry{entry(1, 1, spec2())}}
		}
		return h.Apply(c)
	}
	kind := func(res any) ErrorKind {
		if e, ok := res.(*ApplyError); ok {
			return e.Kind
		}
		return 0
	}
	if k := kind(reg("victor", "v", "{}", true)); k != ErrForbidden {
		t.Fatalf("a viewer registered a template: %v", k)
	}
	if k := kind(reg("ghost", "g", "{}", true)); k != ErrNotFound {
		t.Fatalf("a user who does not exist registered: %v", k)
	}
	if k := kind(reg("alice", "etl", `{"v":1}`, false)); k != 0 {
		t.Fatalf("alice's job: %v", k)
	}
	for _, u := range []string{"bob", "victor"} {
		if k := kind(reg(u, "etl", `{"v":2}`, true)); k != ErrForbidden {
			t.Fatalf("%s replaced alice's job: %v", u, k)
		}
		if k := kind(h.Apply(&DeregisterNomadJob{Now: h.Tick(), Namespace: "p", ID: "etl", User: u, Purge: true})); k != ErrForbidden {
			t.Fatalf("%s purged alice's job: %v", u, k)
		}
	}
	if k := kind(h.Apply(&DeregisterNomadJob{Now: h.Tick(), Namespace: "p", ID: "etl", GC: true, Purge: true})); k != ErrConflict {
		t.Fatalf("the leader purged a job whose batch is in the state: %v", k)
	}
	if k := kind(reg("alice", "etl", `{"v":2}`, false)); k != 0 {
		t.Fatalf("alice's own new version: %v", k)
	}
	if k := kind(reg("mia", "etl", `{"v":3}`, false)); k != 0 {
		t.Fatalf("a manager's new version: %v", k)
	}
	if k := kind(h.Apply(&DeregisterNomadJob{Now: h.Tick(), Namespace: "p", ID: "etl", User: "mia", Purge: true})); k != 0 {
		t.Fatalf("a manager's purge: %v", k)
	}
	// A project's share of jobs.
	for i := range MaxNomadJobsPerProject {
		if k := kind(reg("alice", "t"+strconv.Itoa(i), "{}", true)); k != 0 {
			t.Fatalf("template %d: %v", i, k)
		}
	}
	if k := kind(reg("alice", "one-more", "{}", true)); k != ErrConflict {
		t.Fatalf("past the project's share: %v", k)
	}
	if k := kind(registerNomad(h, "other-project", `{}`, false, 0)); k != 0 {
		t.Fatalf("another project is not held back by p's share: %v", k)
	}
}
