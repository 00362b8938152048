package e2e

import (
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
)

// TestNomadTemplates registers a parameterized and a periodic Nomad job
// through the official nomad/api client on a three-server cluster:
// dispatches run with their meta and payload, a repeated idempotency
// token makes no second child, the leader launches the periodic job on
// schedule, and after the leader is killed the new one goes on launching
// (no launch made twice) while every evaluation and allocation keeps its
// ID.
func TestNomadTemplates(t *testing.T) {
	c := newCluster(t, 3)
	c.startWorker("w1", 4)
	nomadOf := func(i int) *nomad.Client {
		nc, err := nomad.NewClient(&nomad.Config{Address: c.Servers[i].URL(), SecretID: c.token()})
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	leader := c.waitLeader(30 * time.Second)
	nc := nomadOf((leader + 1) % 3) // a follower: writes are forwarded

	src, err := os.ReadFile("../examples/nomad/parameterized.nomad.hcl")
	if err != nil {
		t.Fatal(err)
	}
	param, err := nc.Jobs().ParseHCL(string(src), true)
	if err != nil {
		t.Fatal(err)
	}
	reg, _, err := nc.Jobs().Register(param, nil)
	if err != nil || reg.EvalID != "" {
		t.Fatalf("register a parameterized job: %+v %v", reg, err)
	}
	if _, _, err := nc.Jobs().Dispatch("render-report", nil, nil, "", nil); err == nil || !strings.Contains(err.Error(), `requires the meta key "sample"`) {
		t.Fatalf("a dispatch without required meta: %v", err)
	}
	if _, _, err := nc.Jobs().Dispatch("render-report", map[string]string{"sample": "x", "color": "red"}, nil, "", nil); err == nil || !strings.Contains(err.Error(), `"color"`) {
		t.Fatalf("a dispatch with meta the job does not allow: %v", err)
	}
	wo := &nomad.WriteOptions{IdempotencyToken: "report-1"}
	d1, _, err := nc.Jobs().Dispatch("render-report", map[string]string{"sample": "NA12878"}, []byte("42 variants"), "", wo)
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	d2, _, err := nc.Jobs().Dispatch("render-report", map[string]string{"sample": "NA12878"}, []byte("42 variants"), "", wo)
	if err != nil || d2.DispatchedJobID != d1.DispatchedJobID {
		t.Fatalf("a repeated idempotency token made %q, then %q (%v)", d1.DispatchedJobID, d2.DispatchedJobID, err)
	}
	if !strings.HasPrefix(d1.DispatchedJobID, "render-report/dispatch-") {
		t.Fatalf("child ID %q", d1.DispatchedJobID)
	}
	waitFor(t, "the dispatched job to end", time.Minute, func() bool {
		j, _, err := nc.Jobs().Info(d1.DispatchedJobID, nil)
		return err == nil && *j.Status == "dead"
	})
	child, _, err := nc.Jobs().Info(d1.DispatchedJobID, nil)
	if err != nil || deref(child.ParentID) != "render-report" || child.Meta["sample"] != "NA12878" {
		t.Fatalf("child %+v %v", child, err)
	}
	allocs, _, err := nc.Jobs().Allocations(d1.DispatchedJobID, false, nil)
	if err != nil || len(allocs) != 1 || allocs[0].ClientStatus != "complete" {
		t.Fatalf("child allocations %+v %v", allocs, err)
	}
	full, _, err := nc.Allocations().Info(allocs[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readLog(t, nc, full, "render"); got != "report for NA12878: 42 variants\n" {
		t.Fatalf("the child's log: %q", got)
	}

	// A periodic job every 2 seconds.
	periodic := nomad.NewBatchJob("tick", "tick", "global", 50)
	periodic.Periodic = &nomad.PeriodicConfig{Spec: new("*/2 * * * * * *"), ProhibitOverlap: new(false)}
	periodic.AddTaskGroup(nomad.NewTaskGroup("g", 1).AddTask(nomad.NewTask("t", "exec").SetConfig("command", "/bin/true")))
	if _, _, err := nc.Jobs().Register(periodic, nil); err != nil {
		t.Fatalf("register a periodic job: %v", err)
	}
	// children lists the periodic job's children, asking again while
	// leadership moves (a 503, which a Nomad client passes on).
	children := func() []string {
		var ids []string
		waitFor(t, "a listing of the periodic job's children", 30*time.Second, func() bool {
			stubs, _, err := nc.Jobs().PrefixList("tick/periodic-")
			if err != nil {
				return false
			}
			ids = ids[:0]
			for _, s := range stubs {
				ids = append(ids, s.ID)
			}
			return true
		})
		sort.Strings(ids)
		return ids
	}
	waitFor(t, "two periodic launches", time.Minute, func() bool { return len(children()) >= 2 })
	evalID := d1.EvalID
	allocID := allocs[0].ID

	// Kill the leader: the next one goes on launching, and reads give the
	// same IDs.
	before := children()
	c.Servers[leader].Kill9()
	next := c.waitLeader(30 * time.Second)
	nc = nomadOf((next + 1) % 3)
	if (next+1)%3 == leader {
		nc = nomadOf((next + 2) % 3)
	}
	waitFor(t, "launches after the failover", time.Minute, func() bool { return len(children()) >= len(before)+2 })
	after := children()
	if len(slices.Compact(slices.Clone(after))) != len(after) {
		t.Fatalf("a launch was made twice: %v", after)
	}
	for _, id := range before {
		if !slices.Contains(after, id) {
			t.Fatalf("child %s is gone after the failover", id)
		}
	}
	if ev, _, err := nc.Evaluations().Info(evalID, nil); err != nil || ev.JobID != d1.DispatchedJobID {
		t.Fatalf("the dispatch's evaluation after the failover: %+v %v", ev, err)
	}
	if al, _, err := nc.Allocations().Info(allocID, nil); err != nil || al.JobID != d1.DispatchedJobID || al.ClientStatus != "complete" {
		t.Fatalf("the child's allocation after the failover: %+v %v", al, err)
	}
	// Forced, and stopped: no more launches.
	if _, _, err := nc.Jobs().PeriodicForce("tick", nil); err != nil {
		t.Fatalf("force: %v", err)
	}
	if _, _, err := nc.Jobs().Deregister("tick", false, nil); err != nil {
		t.Fatal(err)
	}
	stopped := len(children())
	time.Sleep(5 * time.Second)
	if n := len(children()); n != stopped {
		t.Fatalf("a stopped periodic job launched %d more", n-stopped)
	}
}

// readLog reads a finished allocation's task log through the nomad/api
// client.
func readLog(t *testing.T, nc *nomad.Client, alloc *nomad.Allocation, task string) string {
	t.Helper()
	cancel := make(chan struct{})
	defer close(cancel)
	frames, errs := nc.AllocFS().Logs(alloc, false, task, "stdout", "start", 0, cancel, nil)
	var got strings.Builder
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				return got.String()
			}
			got.Write(f.Data)
		case err := <-errs:
			t.Fatalf("logs: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the log did not end")
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
