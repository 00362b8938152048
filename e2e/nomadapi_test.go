package e2e

import (
	"context"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/api"
)

// nomadClient is the official nomad/api client pointed at an agent, with
// a drover token as its Nomad token.
func nomadClient(t *testing.T, a *agent, token string) *nomad.Client {
	t.Helper()
	addr := a.addr
	if !strings.HasPrefix(addr, "http") {
		addr = "http://" + addr
	}
	c, err := nomad.NewClient(&nomad.Config{Address: addr, SecretID: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNomadAPI drives drover's Nomad API with Nomad's own Go client, as a
// Nomad user's program would: parse a job file, register it, watch it to
// the end through its summary, allocations and evaluation, read an
// allocation's log, stop and purge; a running job stops; what drover
// cannot run is refused with its block.
func TestNomadAPI(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "2", "-worker-cores", "4", "-worker-memory", "4GiB")
	nc := nomadClient(t, a, a.token)

	src, err := os.ReadFile("../examples/nomad/batch.nomad.hcl")
	if err != nil {
		t.Fatal(err)
	}
	job, err := nc.Jobs().ParseHCL(string(src), true)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if *job.ID != "word-count" || *job.TaskGroups[0].Count != 4 || *job.Type != "batch" {
		t.Fatalf("parsed %s %s", *job.ID, *job.Type)
	}
	// A plan first: it would place all four allocations (once the workers
	// are there), and nothing is registered by it.
	waitFor(t, "both workers", time.Minute, func() bool {
		nodes, _, err := nc.Nodes().List(nil)
		return err == nil && len(nodes) == 2
	})
	plan, _, err := nc.Jobs().Plan(job, true, nil)
	if err != nil || plan.Diff.Type != "Added" || plan.Annotations.DesiredTGUpdates["count"].Place != 4 || len(plan.FailedTGAllocs) != 0 {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	if _, _, err := nc.Jobs().Info("word-count", nil); err == nil {
		t.Fatal("a plan registered the job")
	}
	away := nomad.NewBatchJob("away", "away", "global", 50)
	away.Datacenters = []string{"mars"}
	away.AddTaskGroup(nomad.NewTaskGroup("far", 1).AddTask(nomad.NewTask("t", "exec").SetConfig("command", "/bin/true")))
	if plan, _, err := nc.Jobs().Plan(away, false, nil); err != nil || plan.FailedTGAllocs["far"] == nil || !strings.Contains(plan.Warnings, `datacenter "mars": drover has no cluster of that name (its clusters: default)`) {
		t.Fatalf("a plan of a job no worker may take: %+v %v", plan, err)
	}
	// A node's datacenter is its drover cluster: a job that names it
	// places there.
	nodes, _, err := nc.Nodes().List(nil)
	if err != nil || len(nodes) == 0 || nodes[0].Datacenter != "default" {
		t.Fatalf("nodes %+v %v: a dev agent's workers are in cluster default", nodes, err)
	}
	away.Datacenters = []string{nodes[0].Datacenter}
	if plan, _, err := nc.Jobs().Plan(away, false, nil); err != nil || len(plan.FailedTGAllocs) != 0 {
		t.Fatalf("a plan of a job in the workers' datacenter: %+v %v", plan, err)
	}

	// The event stream, opened before the job is registered.
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	stream, err := nc.EventStream().Stream(streamCtx, map[nomad.Topic][]string{nomad.TopicJob: {"word-count"}, nomad.TopicAllocation: {"*"}}, 0, nil)
	if err != nil {
		t.Fatalf("event stream: %v", err)
	}
	time.Sleep(time.Second) // the stream's first look sees nothing to tell
	reg, _, err := nc.Jobs().Register(job, nil)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	if reg.EvalID == "" || reg.JobModifyIndex == 0 {
		t.Fatalf("register response %+v", reg)
	}
	waitFor(t, "the job to be dead", time.Minute, func() bool {
		j, _, err := nc.Jobs().Info("word-count", nil)
		return err == nil && *j.Status == "dead"
	})
	registered, completeAllocs := false, map[string]bool{}
	for deadline := time.After(time.Minute); !registered || len(completeAllocs) < 12; {
		select {
		case evs := <-stream:
			if evs == nil || evs.Err != nil {
				t.Fatalf("event stream ended: %+v", evs)
			}
			for _, e := range evs.Events {
				switch e.Topic {
				case nomad.TopicJob:
					j, err := e.Job()
					registered = registered || err == nil && e.Type == "JobRegistered" && *j.ID == "word-count"
				case nomad.TopicAllocation:
					if a, err := e.Allocation(); err == nil && a.ClientStatus == "complete" && a.JobID == "word-count" {
						completeAllocs[a.ID] = true
					}
				}
			}
		case <-deadline:
			t.Fatalf("the event stream told registered=%v and %d complete allocations", registered, len(completeAllocs))
		}
	}
	stopStream()
	sum, _, err := nc.Jobs().Summary("word-count", nil)
	if err != nil || sum.Summary["count"].Complete != 4 || sum.Summary["count"].Failed != 0 {
		t.Fatalf("summary %+v %v", sum, err)
	}
	allocs, _, err := nc.Jobs().Allocations("word-count", false, nil)
	if err != nil || len(allocs) != 12 {
		t.Fatalf("%d allocations, %v", len(allocs), err)
	}
	names := map[string]int{}
	for _, al := range allocs {
		if al.ClientStatus != "complete" || al.TaskGroup != "count" || al.JobID != "word-count" || al.NodeID == "" || al.EvalID != reg.EvalID {
			t.Fatalf("allocation %+v", al)
		}
		names[al.Name]++
	}
	if len(names) != 4 || names["word-count.count[2]"] != 3 {
		t.Fatalf("allocation names %v", names)
	}
	ev, _, err := nc.Evaluations().Info(reg.EvalID, nil)
	if err != nil || ev.Status != "complete" || ev.JobID != "word-count" {
		t.Fatalf("evaluation %+v %v", ev, err)
	}
	// The "count" task of allocation 2, and its log.
	var mainAlloc *nomad.Allocation
	for _, al := range allocs {
		full, _, err := nc.Allocations().Info(al.ID, nil)
		if err != nil {
			t.Fatalf("allocation %s: %v", al.ID, err)
		}
		if full.Name == "word-count.count[2]" && full.TaskStates["count"] != nil {
			mainAlloc = full
		}
	}
	if mainAlloc == nil || mainAlloc.Job == nil || *mainAlloc.Job.ID != "word-count" || mainAlloc.TaskStates["count"].State != "dead" || mainAlloc.TaskStates["count"].Failed {
		t.Fatalf("allocation of count[2]: %+v", mainAlloc)
	}
	cancel := make(chan struct{})
	defer close(cancel)
	frames, errs := nc.AllocFS().Logs(mainAlloc, false, "count", "stdout", "start", 0, cancel, nil)
	var got strings.Builder
	for done := false; !done; {
		select {
		case f, ok := <-frames:
			if !ok {
				done = true
				break
			}
			got.Write(f.Data)
		case err := <-errs:
			t.Fatalf("logs: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the log did not end")
		}
	}
	if got.String() != "counting shard 2 of shakespeare as word-count.count[2]\n" {
		t.Fatalf("log %q", got.String())
	}
	rc, err := nc.AllocFS().Cat(mainAlloc, "alloc/logs/count.stdout.0", nil)
	if err != nil {
		t.Fatalf("cat: %v", err)
	}
	cat, _ := io.ReadAll(rc)
	rc.Close()
	if string(cat) != got.String() {
		t.Fatalf("cat %q", cat)
	}

	// The workers as Nomad's nodes (an admin's read).
	nodes, _, err = nc.Nodes().List(nil)
	if err != nil || len(nodes) != 2 || nodes[0].Status != "ready" {
		t.Fatalf("nodes %+v %v", nodes, err)
	}
	if n, _, err := nc.Nodes().Info(mainAlloc.NodeID, nil); err != nil || n.Name != mainAlloc.NodeName {
		t.Fatalf("the allocation's node: %+v %v", n, err)
	}

	// A log followed while its task writes it, until the task ends.
	ticker := nomad.NewBatchJob("ticker", "ticker", "global", 50)
	tt := nomad.NewTask("tick", "raw_exec").SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", "for i in 1 2 3 4; do echo tick $i; sleep 0.7; done"})
	tt.Require(&nomad.Resources{CPU: new(100), MemoryMB: new(32)})
	ticker.AddTaskGroup(nomad.NewTaskGroup("g", 1).AddTask(tt))
	if _, _, err := nc.Jobs().Register(ticker, nil); err != nil {
		t.Fatal(err)
	}
	var tick *nomad.Allocation
	waitFor(t, "the ticker to start", time.Minute, func() bool {
		as, _, err := nc.Jobs().Allocations("ticker", false, nil)
		if err != nil || len(as) == 0 || as[0].ClientStatus != "running" {
			return false
		}
		tick, _, err = nc.Allocations().Info(as[0].ID, nil)
		return err == nil
	})
	followCancel := make(chan struct{})
	frames2, errs2 := nc.AllocFS().Logs(tick, true, "tick", "stdout", "start", 0, followCancel, nil)
	var followed strings.Builder
	var whileRunning bool
	for done := false; !done; {
		select {
		case f, ok := <-frames2:
			if !ok {
				done = true
				break
			}
			followed.Write(f.Data)
			if j, _, err := nc.Jobs().Info("ticker", nil); err == nil && *j.Status == "running" {
				whileRunning = true
			}
		case err := <-errs2:
			t.Fatalf("follow: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("the followed log did not end with its task")
		}
	}
	close(followCancel)
	if followed.String() != "tick 1\ntick 2\ntick 3\ntick 4\n" || !whileRunning {
		t.Fatalf("followed log %q (frames while running: %v)", followed.String(), whileRunning)
	}

	// drover's own API shows the same batch.
	list, err := a.client().ListBatches(context.Background(), "", 0)
	if err != nil || len(list.Batches) != 2 || list.Batches[1].Name != "word-count" || list.Batches[1].NSucceeded != 12 {
		t.Fatalf("drover's batches: %+v %v", list, err)
	}

	// A job that runs until stopped.
	sleeper := nomad.NewBatchJob("sleeper", "sleeper", "global", 50)
	task := nomad.NewTask("nap", "raw_exec").SetConfig("command", "/bin/sleep").SetConfig("args", []string{"600"})
	task.Require(&nomad.Resources{CPU: new(100), MemoryMB: new(32)})
	sleeper.AddTaskGroup(nomad.NewTaskGroup("g", 2).AddTask(task))
	if _, _, err := nc.Jobs().Register(sleeper, nil); err != nil {
		t.Fatalf("register sleeper: %v", err)
	}
	var running []*nomad.AllocationListStub
	waitFor(t, "the sleeper's two allocations to run", time.Minute, func() bool {
		as, _, err := nc.Jobs().Allocations("sleeper", false, nil)
		running = running[:0]
		for _, al := range as {
			if al.ClientStatus == "running" {
				running = append(running, al)
			}
		}
		return err == nil && len(running) == 2
	})
	// A blocking query returns once something changes: here, an
	// allocation stopped, which Nomad replaces with a new one.
	_, meta, err := nc.Jobs().Allocations("sleeper", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	blocked := make(chan uint64, 1)
	go func() {
		_, m, err := nc.Jobs().Allocations("sleeper", false, &nomad.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: time.Minute})
		if err != nil {
			blocked <- 0
			return
		}
		blocked <- m.LastIndex
	}()
	select {
	case <-blocked:
		t.Fatal("a blocking query answered before anything changed")
	case <-time.After(time.Second):
	}
	stopped, _, err := nc.Allocations().Info(running[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Allocations().Stop(stopped, nil); err != nil {
		t.Fatalf("alloc stop: %v", err)
	}
	select {
	case idx := <-blocked:
		if idx <= meta.LastIndex {
			t.Fatalf("the blocking query answered with index %d, not past %d", idx, meta.LastIndex)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the blocking query did not answer after a change")
	}
	waitFor(t, "the stopped allocation to be replaced", time.Minute, func() bool {
		as, _, err := nc.Jobs().Allocations("sleeper", false, nil)
		if err != nil {
			return false
		}
		n, lost := 0, false
		for _, al := range as {
			if al.ClientStatus == "running" {
				n++
			}
			lost = lost || al.ID == stopped.ID && al.ClientStatus == "lost"
		}
		return n == 2 && lost && len(as) == 3
	})
	evalID, _, err := nc.Jobs().Deregister("sleeper", false, nil)
	if err != nil || evalID == "" {
		t.Fatalf("stop: %q %v", evalID, err)
	}
	waitFor(t, "the sleeper's allocations to stop", time.Minute, func() bool {
		as, _, err := nc.Jobs().Allocations("sleeper", false, nil)
		if err != nil {
			return false
		}
		for _, al := range as {
			if al.DesiredStatus != "stop" || al.ClientStatus == "running" {
				return false
			}
		}
		return len(as) > 0
	})
	if j, _, err := nc.Jobs().Info("sleeper", nil); err != nil || !*j.Stop || *j.Status != "dead" {
		t.Fatalf("stopped job: %v", err)
	}
	stubs, _, err := nc.Jobs().List(nil)
	if err != nil || len(stubs) != 3 {
		t.Fatalf("list: %d %v", len(stubs), err)
	}
	ids := []string{stubs[0].ID, stubs[1].ID, stubs[2].ID}
	sort.Strings(ids)
	if ids[0] != "sleeper" || ids[1] != "ticker" || ids[2] != "word-count" {
		t.Fatalf("listed %v", ids)
	}
	if _, _, err := nc.Jobs().Deregister("word-count", true, nil); err != nil {
		t.Fatalf("purge: %v", err)
	}
	if _, _, err := nc.Jobs().Info("word-count", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a purged job: %v", err)
	}

	// Refusals: a service job, and a batch job with a service block.
	svc := nomad.NewServiceJob("web", "web", "global", 50)
	svc.AddTaskGroup(nomad.NewTaskGroup("g", 1).AddTask(nomad.NewTask("t", "exec").SetConfig("command", "/bin/true")))
	if _, _, err := nc.Jobs().Register(svc, nil); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "service job") {
		t.Fatalf("a service job: %v", err)
	}
	withService := nomad.NewBatchJob("svc", "svc", "global", 50)
	g := nomad.NewTaskGroup("g", 1).AddTask(nomad.NewTask("t", "exec").SetConfig("command", "/bin/true"))
	g.Services = []*nomad.Service{{Name: "api"}}
	withService.AddTaskGroup(g)
	if _, _, err := nc.Jobs().Register(withService, nil); err == nil || !strings.Contains(err.Error(), `group "g" > service`) {
		t.Fatalf("a service block: %v", err)
	}

	// Without a token, or with one of a user outside the namespace.
	if _, _, err := nomadClient(t, a, "").Jobs().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("no token: %v", err)
	}
	if _, _, err := nomadClient(t, a, api.NewToken()).Jobs().List(nil); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "invalid token") {
		t.Fatalf("a token of no drover user: %v", err)
	}
	tok := api.NewToken()
	if _, err := a.client().CreateUser(context.Background(), &api.CreateUserRequest{Name: "mallory", Token: tok}); err != nil {
		t.Fatal(err)
	}
	m := nomadClient(t, a, tok)
	if stubs, _, err := m.Jobs().List(nil); err != nil || len(stubs) != 0 {
		t.Fatalf("an outsider lists %d jobs (%v)", len(stubs), err)
	}
	if _, _, err := m.Jobs().Info("sleeper", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("an outsider reads a job: %v", err)
	}
	if _, _, err := m.Allocations().Info(allocs[0].ID, nil); err == nil {
		t.Fatal("an outsider reads an allocation")
	}
	if _, _, err := m.Jobs().Register(sleeper, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("an outsider registers into the default namespace: %v", err)
	}
}
