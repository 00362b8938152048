package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/jobspec"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// Attacks on gangs through the API, the jobspec and the scheduling view
// (helper review).

// TestAttackGangAPIRefusals: what a tenant may not ask of a gang is
// refused with a 400 on create and on an update: no count, one job, more
// than 4,096, oom_retry, max_spot_attempts, machine_type, a uniformity
// with an empty or hostile label key, a uniformity without gang.
func TestAttackGangAPIRefusals(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	newSimWorker(t, tc, "sim-r1", 8)
	gang := func(n int64, f func(*api.JobSpec)) api.JobSpec {
		j := api.JobSpec{JobID: 1, Name: "ranks", Count: n, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, Gang: true}
		if f != nil {
			f(&j)
		}
		return j
	}
	for _, bad := range []struct {
		js   api.JobSpec
		want string
	}{
		{gang(0, nil), "a gang is an array of 2 to 4096 jobs"},
		{gang(1, nil), "a gang is an array of 2 to 4096 jobs"},
		{gang(4097, nil), "a gang is an array of 2 to 4096 jobs"},
		{gang(4, func(j *api.JobSpec) { j.MaxSpotAttempts = 2 }), "a gang takes no max_spot_attempts"},
		{gang(4, func(j *api.JobSpec) { j.MachineType = "n2-standard-4" }), "a gang takes no machine_type"},
		{gang(4, func(j *api.JobSpec) { j.OOMRetry = &api.OOMRetry{Factor: 2, MaxMemory: 1 << 30} }), "a gang takes no oom_retry"},
		{gang(4, func(j *api.JobSpec) { j.GangUniformity = "label:" }), "gang_uniformity"},
		{gang(4, func(j *api.JobSpec) { j.GangUniformity = "label:rack=r1" }), "gang_uniformity"},
		{gang(4, func(j *api.JobSpec) { j.GangUniformity = "label:" + strings.Repeat("k", 5000) }), "gang_uniformity"},
		{gang(4, func(j *api.JobSpec) { j.GangUniformity = "label:\x00" }), "gang_uniformity"},
		{gang(4, func(j *api.JobSpec) { j.GangUniformity = "Pool" }), "gang_uniformity"},
		{gang(4, func(j *api.JobSpec) { j.Gang, j.GangUniformity = false, "pool" }), "gang_uniformity is set without gang"},
	} {
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{bad.js}})
		if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("create %.60q count %d: %v, want a 400 saying %q", bad.js.GangUniformity, bad.js.Count, err, bad.want)
		}
	}
	// On an update of a batch too.
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{{JobID: 1, Name: "x", Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = alice.CreateUpdate(ctx, b.ID, &api.CreateUpdateRequest{Jobs: []api.JobSpec{gang(4, func(j *api.JobSpec) { j.MaxSpotAttempts = 1 })}})
	if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "a gang takes no max_spot_attempts") {
		t.Errorf("an update with a spot-capped gang: %v", err)
	}
}

// TestAttackGangJobspecDefaults: a batch's default oom_retry and
// max_spot_attempts are not a gang's; a gang's own are refused; a gang
// without count is refused.
func TestAttackGangJobspecDefaults(t *testing.T) {
	src := `
batch "b" {
  billing_project = "p"
  max_spot_attempts = 2
  oom_retry {
    factor = 2
    max_memory = "16GiB"
  }
  job "ranks" {
    command = ["true"]
    count = 4
    gang = true
    gang_uniformity = "label:rack"
  }
  job "plain" {
    command = ["true"]
  }
}
`
	b, diags := jobspec.Parse("b.hcl", []byte(src), nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	specs := b.JobSpecs()
	if specs[0].OOMRetry != nil || specs[0].MaxSpotAttempts != 0 || !specs[0].Gang || specs[0].GangUniformity != "label:rack" {
		t.Fatalf("the gang: %+v", specs[0])
	}
	if specs[1].OOMRetry == nil || specs[1].MaxSpotAttempts != 2 {
		t.Fatalf("the plain job lost the batch's defaults: %+v", specs[1])
	}
	if err := api.ValidateJobs(specs); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"no count":          `command = ["true"]` + "\n gang = true",
		"own oom_retry":     `command = ["true"]` + "\n count = 4\n gang = true\n oom_retry {\n factor = 2\n max_memory = \"16GiB\"\n }",
		"own spot cap":      `command = ["true"]` + "\n count = 4\n gang = true\n max_spot_attempts = 1",
		"machine_type":      `command = ["true"]` + "\n count = 4\n gang = true\n machine_type = \"n2\"",
		"empty label key":   `command = ["true"]` + "\n count = 4\n gang = true\n gang_uniformity = \"label:\"",
		"uniformity alone":  `command = ["true"]` + "\n count = 4\n gang_uniformity = \"pool\"",
		"count 4097":        `command = ["true"]` + "\n count = 4097\n gang = true",
		"gang not a bool":   `command = ["true"]` + "\n count = 4\n gang = \"yes please\"",
		"gang = null":       `command = ["true"]` + "\n count = 4\n gang = null",
		"uniformity a list": `command = ["true"]` + "\n count = 4\n gang = true\n gang_uniformity = [\"pool\"]",
	} {
		src := "batch \"b\" {\n billing_project = \"p\"\n job \"g\" {\n" + body + "\n }\n}\n"
		if _, diags := jobspec.Parse("b.hcl", []byte(src), nil); !diags.HasErrors() {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestAttackGangAdmissionIgnoresWhereItMayRun: a gang that no cluster it
// may use could ever hold waits for ever; checkGangs is meant to refuse
// it (400). It counts every cluster's room whatever the gang's clusters,
// pool or label uniformity: a gang of 4 one-core members limited to a
// 2-core cluster, or asking for one pool (or one rack) where each holds
// 2, is admitted, and then never starts.
func TestAttackGangAdmissionIgnoresWhereItMayRun(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	for _, w := range []api.ActivateRequest{
		{Name: "small", CPU: 2, Memory: 64 << 30, Region: "r", Cluster: "small", Pool: "p"},
		{Name: "big-p", CPU: 2, Memory: 64 << 30, Region: "r", Cluster: "big", Pool: "p", Labels: map[string]string{"rack": "r1"}},
		{Name: "big-q", CPU: 2, Memory: 64 << 30, Region: "r", Cluster: "big", Pool: "q", Labels: map[string]string{"rack": "r2"}},
	} {
		activateSimWorker(t, tc, &w)
	}
	gang := func(f func(*api.JobSpec)) api.JobSpec {
		j := api.JobSpec{JobID: 1, Name: "ranks", Count: 4, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, Gang: true}
		f(&j)
		return j
	}
	// The whole of "big" holds 4: admitted (and it runs there).
	if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{gang(func(*api.JobSpec) {})}}); err != nil {
		t.Fatalf("a gang big holds: %v", err)
	}
	var admitted []string
	for name, js := range map[string]api.JobSpec{
		"clusters = [small]":       gang(func(j *api.JobSpec) { j.Clusters = []string{"small"} }),
		"gang_uniformity = pool":   gang(func(j *api.JobSpec) { j.GangUniformity = "pool" }),
		"gang_uniformity = rack":   gang(func(j *api.JobSpec) { j.GangUniformity = "label:rack" }),
		"a label no worker has":    gang(func(j *api.JobSpec) { j.GangUniformity = "label:zone" }),
		"worker_labels rack=r1":    gang(func(j *api.JobSpec) { j.WorkerLabels = map[string]string{"rack": "r1"} }),
		"pool = q":                 gang(func(j *api.JobSpec) { j.Pool = "q" }),
		"members larger than half": gang(func(j *api.JobSpec) { j.CPU = 1.5 }),
	} {
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{js}})
		switch {
		case err == nil:
			admitted = append(admitted, name)
		case !api.IsStatus(err, http.StatusBadRequest):
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(admitted) > 0 {
		t.Fatalf("gangs no cluster they may use could ever hold were admitted (they wait for ever): %v", admitted)
	}
}

// TestAttackGangAdmissionUncappedLaunchConfig: a launch config with no
// node cap (max_nodes 0: no cap) may add as many machines as a gang
// needs, and the README counts "every machine its launch configs may
// add"; checkGangs counts only capped configs and refuses the gang.
func TestAttackGangAdmissionUncappedLaunchConfig(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true},
		LaunchConfigs: []api.LaunchConfig{{Name: "c4", Cluster: "a", MachineType: "n4", Zone: "z", CPU: 4, Memory: 16 << 30, PricePerHour: 200_000_000}}}); err != nil {
		t.Fatal(err)
	}
	activateSimWorker(t, tc, &api.ActivateRequest{Name: "a1", CPU: 2, Memory: 16 << 30, Region: "r", Cluster: "a"})
	js := api.JobSpec{JobID: 1, Name: "ranks", Count: 8, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, Gang: true}
	if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{js}}); err != nil {
		t.Fatalf("a gang of 8 in a cluster whose launch config has no node cap: %v", err)
	}
}

// TestAttackGangRestartThroughTheAPI: `job restart` of one member stops
// the others; the gang starts again whole, attempt 2, and nothing is
// counted as a failure.
func TestAttackGangRestartThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w1 := newSimWorker(t, tc, "sim-g1", 2)
	w2 := newSimWorker(t, tc, "sim-g2", 2)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "ranks", Count: 4, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, Gang: true}}})
	if err != nil {
		t.Fatal(err)
	}
	take := func(w *simWorker, n int) []api.Assignment {
		t.Helper()
		var got []api.Assignment
		for end := time.Now().Add(30 * time.Second); len(got) < n && time.Now().Before(end); {
			res := w.sync(time.Second)
			got = append(got, res.Assign...)
			for _, a := range res.Assign {
				w.known = append(w.known, a.AttemptRef)
			}
		}
		return got
	}
	a1, a2 := take(w1, 2), take(w2, 2)
	if len(a1) != 2 || len(a2) != 2 {
		t.Fatalf("assigned %d and %d", len(a1), len(a2))
	}
	if _, err := alice.RestartJob(ctx, b.ID, a2[0].JobID); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	stop := func(w *simWorker, as []api.Assignment) {
		w.events = nil
		for _, a := range as {
			w.events = append(w.events, api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomePreempted, StartTime: now, EndTime: time.Now()})
		}
		w.known = nil
		w.sync(0)
	}
	// The restarted one stops; then the other three are told.
	stop(w2, a2[:1])
	w2.known = []api.AttemptRef{a2[1].AttemptRef}
	w1.known = []api.AttemptRef{a1[0].AttemptRef, a1[1].AttemptRef}
	if r1, r2 := w1.sync(0), w2.sync(0); len(r1.Preempt) != 2 || len(r2.Preempt) != 1 {
		t.Fatalf("stop orders %+v %+v", r1.Preempt, r2.Preempt)
	}
	stop(w1, a1)
	stop(w2, a2[1:])
	b1, b2 := take(w1, 2), take(w2, 2)
	if len(b1)+len(b2) != 4 {
		t.Fatalf("the gang again: %d + %d", len(b1), len(b2))
	}
	for _, a := range append(b1, b2...) {
		if a.Attempt != 2 {
			t.Fatalf("member %d as attempt %d", a.JobID, a.Attempt)
		}
	}
}

// TestAttackGangListerOnceWholeAndBounded: the scheduling view lists a
// gang whole and once (however its Ready members lie in the queue,
// interleaved with the batch's plain jobs), not at all when the round's
// bound cannot take it, and a gang of 4,096 whose members came back one
// by one (4,096 runs in the queue) costs the round's read little: the
// view reads the whole gang (GangReady) for every run of it in the queue
// before it checks it listed the gang already.
func TestAttackGangListerOnceWholeAndBounded(t *testing.T) {
	const gangs, size = 4, 4096
	h := state.NewHarness(t, SchedulerPlanner)
	var insts []uint32
	for i := 0; i < gangs*size/64+1; i++ {
		insts = append(insts, h.Activate(fmt.Sprint("w", i), 64, 256))
	}
	sp := &state.Spec{Name: "ranks", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30, Array: true, Retries: 5,
		Run: &state.Run{Gang: &state.Gang{Size: size}}}
	var batches []uint64
	for g := 0; g < gangs; g++ {
		batches = append(batches, h.CreateBatch(state.JobEntry{First: 1, Count: 3, Spec: &state.Spec{Name: "plain", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30, Array: true}},
			state.JobEntry{First: 4, Count: size, Spec: sp}))
	}
	if res := h.Schedule(); res.Placed != gangs*(size+3) {
		t.Fatalf("placed %+v", res)
	}
	// Each gang's member 4 fails; the others stop one by one: each comes
	// back on its own in the queue.
	for _, b := range batches {
		var evs []state.Event
		var fail state.Event
		for _, inst := range insts {
			for _, a := range h.S.WorkerView(inst, nil).Assign {
				if a.Batch != b {
					continue
				}
				e := state.Event{Instance: inst, Batch: b, Job: a.Job, Attempt: a.Attempt, Outcome: state.OutcomePreempted, Start: h.Now, End: h.Now}
				switch {
				case a.Job == 4:
					e.Outcome, e.Exit = state.OutcomeFailed, 1
					fail = e
				case a.Job <= 3:
					e.Outcome = state.OutcomeFailed // the plain jobs fail and retry: behind
					evs = append(evs, e)
				default:
					evs = append(evs, e)
				}
			}
		}
		h.Must(&state.Events{Now: h.Tick(), Events: []state.Event{fail}})
		h.Must(&state.Events{Now: h.Tick(), Events: evs})
	}
	// Listed whole and once each.
	start := time.Now()
	rd := view.Scheduling(h.S, view.Options{Now: h.Tick(), Unbounded: true})
	took := time.Since(start)
	listed := map[uint64]map[uint32]int{}
	for _, u := range rd.Input.Users {
		for _, r := range u.Runs {
			if listed[r.Batch] == nil {
				listed[r.Batch] = map[uint32]int{}
			}
			for id := r.First; id < r.First+r.Count; id++ {
				listed[r.Batch][id]++
			}
		}
	}
	for _, b := range batches {
		for id := uint32(4); id < 4+size; id++ {
			if listed[b][id] != 1 {
				t.Fatalf("batch %d: member %d listed %d times", b, id, listed[b][id])
			}
		}
	}
	// A round bound below the gang: the gang is not listed, none of it.
	rd2 := view.Scheduling(h.S, view.Options{Now: h.Tick(), MaxJobs: size - 1, Unbounded: true})
	for _, u := range rd2.Input.Users {
		for _, r := range u.Runs {
			if r.Gang != 0 {
				t.Fatalf("a gang of %d listed in a round of at most %d jobs: %+v", size, size-1, r)
			}
		}
	}
	t.Logf("the view of %d gangs of %d, each member its own run in the queue: %v", gangs, size, took)
	// Then the gangs start again whole, the apply bounded too.
	plan := h.Plan()
	start = time.Now()
	res := h.Must(plan).(*state.PlanResult)
	applied := time.Since(start)
	t.Logf("apply of %d placements: %v (%+v)", len(plan.Placements), applied, res)
	if res.Placed != gangs*size { // the plain jobs failed for good
		t.Fatalf("placed %+v", res)
	}
	// How long the view took is logged, not asserted: a test asserts
	// what drover controls, not the machine's speed (the view reads a
	// gang's members once: state.Reader.GangOf before GangReady).
}

// TestAttackGangAdmissionIgnoresQueueLimits: a gang larger than its
// queue's max_running (or its quota, guarantee plus borrow limit) can
// never start whole: every round refuses it for the quota, and it waits
// for ever. Admission refuses a gang no cluster could hold; one its
// queue could never hold is admitted.
func TestAttackGangAdmissionIgnoresQueueLimits(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	if _, err := tc.admin.PutQueue(ctx, &api.Queue{Path: "small", BillingProjects: []string{"default"}, MaxRunning: api.MaxRunning{Jobs: 3}}); err != nil {
		t.Fatal(err)
	}
	newSimWorker(t, tc, "sim-q1", 8)
	_, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "default", Queue: "small", Jobs: []api.JobSpec{
		{JobID: 1, Name: "ranks", Count: 4, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, Gang: true}}})
	if err == nil {
		t.Fatal("a gang of 4 in a queue of max_running 3 was admitted: it can never start")
	}
}

// TestAttackGangRetryStartsPartThroughScheduler: with the real scheduler
// and view, `drover batch retry --state failed` of a dead gang runs its
// failed member alone (the cancelled members stay cancelled): the gang's
// promise, all members together or none, is broken.
func TestAttackGangRetryStartsPartThroughScheduler(t *testing.T) {
	h := state.NewHarness(t, SchedulerPlanner)
	w := h.Activate("w", 8, 32)
	sp := &state.Spec{Name: "ranks", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30, Array: true,
		Run: &state.Run{Gang: &state.Gang{Size: 4}}}
	b := h.CreateBatch(state.JobEntry{First: 1, Count: 4, Spec: sp})
	if res := h.Schedule(); res.Placed != 4 {
		t.Fatalf("placed %+v", res)
	}
	h.Complete(w, func(_ uint64, j uint32) state.Outcome {
		if j == 2 {
			return state.OutcomeFailed
		}
		return state.OutcomePreempted // told to stop as member 2 ended
	})
	h.Must(&state.RetryJobs{Now: h.Tick(), Batch: b, States: state.RetryStates(state.Failed)})
	res := h.Schedule()
	var running []uint32
	for id := uint32(1); id <= 4; id++ {
		if h.JobState(b, id) == state.Running {
			running = append(running, id)
		}
	}
	if len(running) != 0 && len(running) != 4 {
		t.Fatalf("after a retry of the failed member: members %v of the gang of 4 run (%+v)", running, res)
	}
}

// TestAttackGangAdmissionAutoscalerCaps: a launch config without a cap
// of its own is still bounded by the autoscaler's max_nodes, and adds
// nothing while the autoscaler is disabled: a gang that only an
// uncapped fleet could hold is refused then.
func TestAttackGangAdmissionAutoscalerCaps(t *testing.T) {
	for _, c := range []struct {
		name string
		as   api.AutoscalerSettings
	}{
		{"autoscaler max_nodes 1", api.AutoscalerSettings{Enabled: true, MaxNodes: 1}},
		{"autoscaler disabled", api.AutoscalerSettings{Enabled: false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tc := startServer(t, "", nil)
			ctx := context.Background()
			alice := tc.user("alice", "genomics")
			as := c.as
			if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
				Autoscaler:    &as,
				LaunchConfigs: []api.LaunchConfig{{Name: "c4", Cluster: "a", MachineType: "n4", Zone: "z", CPU: 4, Memory: 16 << 30, PricePerHour: 200_000_000}}}); err != nil {
				t.Fatal(err)
			}
			activateSimWorker(t, tc, &api.ActivateRequest{Name: "a1", CPU: 2, Memory: 16 << 30, Region: "r", Cluster: "a"})
			// At most 2 + 4 cores (one machine more), or 2: 16 never fit.
			js := api.JobSpec{JobID: 1, Name: "ranks", Count: 16, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, Gang: true}
			if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{js}}); !api.IsStatus(err, http.StatusBadRequest) {
				t.Fatalf("a gang of 16 one-core members where at most 6 cores could ever be: %v", err)
			}
		})
	}
}

// TestAttackGangAdmissionGPUsAndClusters: GPUs count by type and by
// cluster: 2 a100 in each of two clusters hold a gang of 2 one-GPU
// members, not one of 4 (4 in all, 2 in any one), nor one of h100.
func TestAttackGangAdmissionGPUsAndClusters(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	for _, c := range []string{"c1", "c2"} {
		activateSimWorker(t, tc, &api.ActivateRequest{Name: "g-" + c, CPU: 16, Memory: 64 << 30, Region: "r", Cluster: c, GPUs: 2, GPUType: "a100"})
	}
	gang := func(n int64, typ string) api.JobSpec {
		return api.JobSpec{JobID: 1, Name: "ranks", Count: n, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, Gang: true, GPUs: 1, GPUType: typ}
	}
	if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{gang(2, "a100")}}); err != nil {
		t.Fatalf("a gang of 2 a100 members: %v", err)
	}
	for _, js := range []api.JobSpec{gang(4, "a100"), gang(2, "h100")} {
		if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{js}}); !api.IsStatus(err, http.StatusBadRequest) {
			t.Errorf("a gang of %d %s members: %v, want 400", js.Count, js.GPUType, err)
		}
	}
}
