package leader

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// TestReclaimAGPUGuarantee: a queue whose guarantee is GPUs alone, with
// GPU jobs waiting, takes its GPUs back from a queue that borrowed them:
// only attempts that hold GPUs are stopped (the borrower's cpu-only jobs
// free nothing the claim needs), as many as its waiting jobs and its
// guarantee allow, never taking the borrower below its own GPU
// guarantee. Read from the state by the leader's own round.
func TestReclaimAGPUGuarantee(t *testing.T) {
	h := state.NewHarness(t, nil)
	a100 := func(n int64) placement.Resources { return placement.Resources{GPUs: map[string]int64{"a100": n}} }
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Clusters: []state.Cluster{{Name: "c", Region: "r"}}, Queues: []state.Queue{
		{Queue: placement.Queue{Path: "ml", Guarantee: a100(3)}, AllowProjects: []string{"default"}},
		{Queue: placement.Queue{Path: "batch", Guarantee: a100(1)}, AllowProjects: []string{"default"}},
	}})
	inst := h.Must(&state.Activate{Now: h.Tick(), Name: "w", CPUMilli: 64_000, Memory: 256 << 30, Region: "r", Cluster: "c",
		GPUType: "a100", GPUs: 4, TokenHash: "tok-w"}).(*state.ActivateResult).Instance
	gpuJob := func(name string) *state.Spec {
		return &state.Spec{Name: name, Command: []string{"true"}, CPUMilli: 4000, Memory: 8 << 30, Where: &state.Where{GPUType: "a100", GPUs: 1}}
	}
	cpuJob := &state.Spec{Name: "cpu", Command: []string{"true"}, CPUMilli: 4000, Memory: 8 << 30}
	borrow := h.Must(&state.CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Queue: "batch",
		Jobs: []state.JobEntry{{First: 1, Count: 4, Spec: gpuJob("g")}, {First: 5, Count: 2, Spec: cpuJob}}}).(*state.UpdateResult).Batch
	if r := h.Schedule(); r.Placed != 6 {
		t.Fatalf("placed %d of the borrower's 6 jobs", r.Placed)
	}
	start := h.Tick()
	var started []state.Event
	for j := uint32(1); j <= 6; j++ {
		started = append(started, state.Event{Instance: inst, Batch: borrow, Job: j, Attempt: 1, Started: true, Start: start})
	}
	h.Must(&state.Events{Now: start, Events: started})
	owner := h.Must(&state.CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Queue: "ml",
		Jobs: []state.JobEntry{{First: 1, Count: 4, Spec: gpuJob("train")}}}).(*state.UpdateResult).Batch
	if r := h.Schedule(); r.Placed != 0 {
		t.Fatalf("placed %d with every GPU held", r.Placed)
	}

	p := NewPreemptor()
	now := time.Unix(0, h.Tick())
	cmd, in, out := p.Round(h.S, now)
	if in == nil || cmd != nil {
		t.Fatalf("first round: input %v, command %v: the owner's clock only starts", in != nil, cmd)
	}
	for i, q := range in.Queues {
		if short := q.Name == "ml"; out.Short[i] != short {
			t.Fatalf("queue %s short %v, want %v", q.Name, out.Short[i], short)
		}
	}
	cmd, _, out = p.Round(h.S, now.Add(time.Second))
	if cmd == nil {
		t.Fatal("a queue below its GPU guarantee reclaimed nothing from the borrower")
	}
	stopped := map[uint32]bool{}
	for _, v := range out.Victims {
		if v.Batch != borrow || v.Job > 4 || v.Kind != "reclaim" || v.For != "ml" {
			t.Errorf("victim %+v: want the borrower's GPU jobs, reclaimed for ml", v)
		}
		if !strings.Contains(v.Reason, "below its guarantee of 3 a100 GPUs") {
			t.Errorf("reason %q does not name the GPU guarantee", v.Reason)
		}
		stopped[v.Job] = true
	}
	if len(out.Victims) != 3 {
		t.Fatalf("%d victims, want 3: the owner's guarantee of 3, the borrower keeping its 1", len(out.Victims))
	}
	res := h.Must(cmd).(*state.PreemptResult)
	if res.Stopping != 3 {
		t.Fatalf("%d attempts told to stop", res.Stopping)
	}
	// Once they end, the owner's GPU jobs take their places.
	var ended []state.Event
	for j := range stopped {
		ended = append(ended, state.Event{Instance: inst, Batch: borrow, Job: j, Attempt: 1, Outcome: state.OutcomePreempted, Start: start, End: h.Tick()})
	}
	h.Must(&state.Events{Now: h.Now, Events: ended})
	if r := h.Schedule(); r.Placed != 3 {
		t.Fatalf("placed %d of the owner's jobs after the reclaim, want 3", r.Placed)
	}
	if h.JobState(owner, 4) != state.Ready {
		t.Fatalf("the owner's fourth job is %s: past its guarantee, it waits", h.JobState(owner, 4))
	}
}

// preemptedFor runs two preemption rounds an hour apart: queue ml, whose
// guarantee is 8 cores, waits with 8 jobs of where; queue batch borrows
// the only worker (cluster c, pool default, no labels) with 8 running.
// It returns how many attempts were chosen as victims.
func preemptedFor(t *testing.T, where *state.Where) int {
	h := state.NewHarness(t, nil)
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Clusters: []state.Cluster{{Name: "c", Region: "r"}, {Name: "d", Region: "r"}}, Queues: []state.Queue{
		{Queue: placement.Queue{Path: "ml", Guarantee: placement.Resources{CPUMilli: 8000}}, AllowProjects: []string{"default"}},
		{Queue: placement.Queue{Path: "batch"}, AllowProjects: []string{"default"}},
	}})
	inst := h.Must(&state.Activate{Now: h.Tick(), Name: "w", CPUMilli: 8000, Memory: 64 << 30, Region: "r", Cluster: "c", TokenHash: "tok-w"}).(*state.ActivateResult).Instance
	job := &state.Spec{Name: "cpu", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}
	borrow := h.Must(&state.CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Queue: "batch",
		Jobs: []state.JobEntry{{First: 1, Count: 8, Spec: job}}}).(*state.UpdateResult).Batch
	if r := h.Schedule(); r.Placed != 8 {
		t.Fatalf("placed %d", r.Placed)
	}
	start := h.Tick()
	var started []state.Event
	for j := uint32(1); j <= 8; j++ {
		started = append(started, state.Event{Instance: inst, Batch: borrow, Job: j, Attempt: 1, Started: true, Start: start})
	}
	h.Must(&state.Events{Now: start, Events: started})
	want := &state.Spec{Name: "train", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30, Where: where}
	h.Must(&state.CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Queue: "ml", Jobs: []state.JobEntry{{First: 1, Count: 8, Spec: want}}})
	p := NewPreemptor()
	now := time.Unix(0, h.Tick())
	p.Round(h.S, now)
	_, _, out := p.Round(h.S, now.Add(time.Hour))
	if out == nil {
		return 0
	}
	return len(out.Victims)
}

// TestReclaimOnlyWhereTheClaimCouldRun: a queue reclaims its guarantee
// only in clusters with a worker its waiting jobs may use: preempting the
// borrower on the only worker frees nothing for jobs that ask for a label
// it lacks, another pool or another cluster.
func TestReclaimOnlyWhereTheClaimCouldRun(t *testing.T) {
	if n := preemptedFor(t, nil); n == 0 {
		t.Fatal("nothing preempted for jobs the worker could run: the test proves nothing")
	}
	for name, where := range map[string]*state.Where{
		"a label no worker carries": {Labels: []string{"rack=nowhere"}},
		"a pool no worker is in":    {Pool: "nowhere"},
		"a cluster with no worker":  {Clusters: []string{"d"}},
	} {
		if n := preemptedFor(t, where); n > 0 {
			t.Errorf("%s: %d attempts preempted for jobs that could not use what they free", name, n)
		}
	}
}
