package state

import (
	"strings"
	"testing"
	"time"
)

// autoscaled sets up a cluster with two launch configs and a $1/hour cap.
func autoscaled(t *testing.T) *Harness {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "a", Region: "east"}},
		Autoscaler: &Autoscaler{Enabled: true, MaxPerHour: 1_000_000_000, Backoff: int64(time.Minute), MaxBackoff: int64(4 * time.Minute), SpotPreemptions: 2},
		LaunchConfigs: []LaunchConfig{
			{Name: "small", Cluster: "a", MachineType: "n2-8", Zone: "east-b", CPUMilli: 8000, Memory: 32 << 30, PricePerHour: 300_000_000},
			{Name: "spot", Cluster: "a", MachineType: "n2-8", Zone: "east-c", Spot: true, CPUMilli: 8000, Memory: 32 << 30, PricePerHour: 100_000_000},
		}})
	return h
}

func TestScaleIsCappedAtApply(t *testing.T) {
	h := autoscaled(t)
	// A leader asks for 5 machines of $0.30 under a $1 cap: 3 are made.
	res := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "small", Count: 5, Reason: "demand"}}}).(*ScaleResult)
	if len(res.Requests) != 1 || len(res.Requests[0].Machines) != 3 || res.Capped != 2 {
		t.Fatalf("scale %+v; want 3 machines and 2 capped", res)
	}
	idx := uint64(len(h.Log))
	req := res.Requests[0]
	if req.Key != RequestKey("drover", idx, "small") || req.Machines[0] != "drover-"+itoa(idx)+"-0" {
		t.Fatalf("request %+v, want the key and names made from index %d", req, idx)
	}
	// The same key on every server and after a restart: a UUID.
	if k := req.Key; len(k) != 36 || k[14] != '5' || strings.Count(k, "-") != 4 {
		t.Fatalf("key %q is not a version 5 UUID", k)
	}
	// Another Scale while the first machines are requested still counts
	// them against the cap.
	res = h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "spot", Count: 1}}}).(*ScaleResult)
	if len(res.Requests) != 1 || res.Capped != 0 {
		t.Fatalf("a $0.10 machine fits the last $0.10: %+v", res)
	}
	res = h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "spot", Count: 1}}}).(*ScaleResult)
	if len(res.Requests) != 0 || res.Capped != 1 {
		t.Fatalf("past the cap: %+v", res)
	}
}

func itoa(n uint64) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

func TestMachineLifecycle(t *testing.T) {
	h := autoscaled(t)
	res := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "small", Count: 2}}}).(*ScaleResult)
	req := res.Requests[0]
	// The provider made one, and refused the other for capacity.
	h.Must(&LaunchDone{Now: h.Tick(), Request: req.Key, Created: []LaunchedMachine{{Machine: req.Machines[0], ProviderID: "gce-1"}},
		Refused: true, CapacityLimited: true, Reason: "ZONE_RESOURCE_POOL_EXHAUSTED"})
	ms := map[string]MachineInfo{}
	for _, m := range h.S.Machines() {
		ms[m.ID] = m
	}
	if ms[req.Machines[0]].State != MachineLaunching || ms[req.Machines[0]].ProviderID != "gce-1" || ms[req.Machines[1]].State != MachineFailed {
		t.Fatalf("machines %+v", ms)
	}
	_, _, marks := h.S.AutoscalerSettings()
	if m := marks["small"]; m.Backoff != int64(time.Minute) || m.Until != h.Now+int64(time.Minute) || m.Reason != "ZONE_RESOURCE_POOL_EXHAUSTED" {
		t.Fatalf("mark %+v", m)
	}
	// A Scale for a marked config makes nothing.
	if r := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "small", Count: 1}}}).(*ScaleResult); len(r.Requests) != 0 {
		t.Fatalf("launched a capacity-limited config: %+v", r)
	}
	// A worker on an unknown machine is refused; on the made one, linked.
	h.MustFail(&Activate{Now: h.Tick(), Name: "x", CPUMilli: 8000, Memory: 32 << 30, TokenHash: "tx", Region: "east", Cluster: "a", Machine: "nope"}, ErrConflict)
	act := h.Must(&Activate{Now: h.Tick(), Name: req.Machines[0], NodeID: "n0", CPUMilli: 8000, Memory: 32 << 30, TokenHash: "t0",
		Region: "east", Cluster: "a", Machine: req.Machines[0]}).(*ActivateResult)
	for _, m := range h.S.Machines() {
		if m.ID == req.Machines[0] && (m.State != MachineActive || m.Instance != act.Instance) {
			t.Fatalf("after activation: %+v", m)
		}
	}
	// A job runs there; deciding to delete the machine drains it: no new
	// attempt goes there, and it leaves the scheduling view.
	b := h.CreateBatch(entry(1, 2, spec("j", 1)))
	h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 1, act.Instance)}})
	h.Must(&Scale{Now: h.Tick(), Deletes: []ScaleDelete{{Machine: req.Machines[0], Reason: "idle"}}})
	if r := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 2, 1, act.Instance)}}).(*PlanResult); r.Placed != 0 {
		t.Fatalf("placed on a draining machine: %+v", r)
	}
	h.S.Read(func(r Reader) {
		for inst := range r.Instances() {
			if inst.ID == act.Instance && (!r.Reserved(inst) || !r.Draining(inst)) {
				t.Fatalf("a draining machine's worker is open to the scheduler: %+v", inst)
			}
		}
	})
	// Gone: its worker is retired and the job runs again elsewhere.
	h.Must(&MachineGone{Now: h.Tick(), Machine: req.Machines[0], Reason: "deleted"})
	if st := h.JobState(b, 1); st != Ready {
		t.Fatalf("job on the deleted machine is %s, want Ready again", st)
	}
	for _, m := range h.S.Machines() {
		if m.ID == req.Machines[0] && m.State != MachineDeleted {
			t.Fatalf("after gone: %+v", m)
		}
	}
	// The state survives replay and a snapshot.
	for _, s := range []*State{h.Replay(), func() *State {
		s := New()
		if err := s.Restore(strings.NewReader(string(SnapshotBytes(t, h.S)))); err != nil {
			t.Fatal(err)
		}
		return s
	}()} {
		checkInvariants(t, s)
		if got, want := len(s.Machines()), len(h.S.Machines()); got != want {
			t.Fatalf("%d machines after restore, want %d", got, want)
		}
		if _, cfgs, marks := s.AutoscalerSettings(); len(cfgs) != 2 || marks["small"].Reason == "" {
			t.Fatalf("configs %+v marks %+v after restore", cfgs, marks)
		}
	}
}

func TestSpotPreemptionsMarkTheConfig(t *testing.T) {
	h := autoscaled(t)
	res := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "spot", Count: 3}}}).(*ScaleResult)
	ms := res.Requests[0].Machines
	h.Must(&MachineGone{Now: h.Tick(), Machine: ms[0], Reason: "preempted", Preempted: true})
	if _, _, marks := h.S.AutoscalerSettings(); marks["spot"].Until > h.Now {
		t.Fatalf("marked after one preemption: %+v", marks["spot"])
	}
	h.Must(&MachineGone{Now: h.Tick(), Machine: ms[1], Reason: "preempted", Preempted: true})
	_, _, marks := h.S.AutoscalerSettings()
	if m := marks["spot"]; m.Until <= h.Now || !strings.Contains(m.Reason, "reclaimed 2 times in") {
		t.Fatalf("after two preemptions: %+v", m)
	}
	// Marked again soon after: the backoff doubles, up to the maximum.
	h.Now += int64(time.Minute)
	for _, want := range []time.Duration{2 * time.Minute, 4 * time.Minute, 4 * time.Minute} {
		h.S.mu.Lock()
		h.S.markCapacity("spot", h.Tick(), "again")
		got := h.S.marks["spot"].Backoff
		h.S.mu.Unlock()
		if got != int64(want) {
			t.Fatalf("backoff %s, want %s", time.Duration(got), want)
		}
	}
}

func TestLaunchConfigsAreChecked(t *testing.T) {
	h := newHarness(t)
	h.MustFail(&ApplyPlacement{Now: h.Tick(), LaunchConfigs: []LaunchConfig{{Name: "x", Cluster: "nowhere", CPUMilli: 1000, Memory: 1 << 30}}}, ErrInvalid)
	h.MustFail(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "a", Region: "r"}},
		LaunchConfigs: []LaunchConfig{{Name: "x", Cluster: "a", CPUMilli: 0, Memory: 1 << 30}}}, ErrInvalid)
	h.MustFail(&ApplyPlacement{Now: h.Tick(), Autoscaler: &Autoscaler{Strategy: "random"}}, ErrInvalid)
	h.MustFail(&ApplyPlacement{Now: h.Tick(), Autoscaler: &Autoscaler{NamePrefix: "Bad_Prefix"}}, ErrInvalid)
}

func TestDrainingMachineIsRevived(t *testing.T) {
	h := autoscaled(t)
	req := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "small", Count: 1}}}).(*ScaleResult).Requests[0]
	h.Must(&LaunchDone{Now: h.Tick(), Request: req.Key, Created: []LaunchedMachine{{Machine: req.Machines[0]}}})
	act := h.Must(&Activate{Now: h.Tick(), Name: "w", NodeID: "n", CPUMilli: 8000, Memory: 32 << 30, TokenHash: "t", Region: "east", Cluster: "a", Machine: req.Machines[0]}).(*ActivateResult)
	h.Must(&Scale{Now: h.Tick(), Deletes: []ScaleDelete{{Machine: req.Machines[0], Reason: "underused"}}})
	h.S.Read(func(r Reader) {
		for inst := range r.Instances() {
			if inst.ID == act.Instance && !r.Draining(inst) {
				t.Fatalf("the worker of a machine to delete is not draining: %+v", inst)
			}
		}
	})
	h.Must(&Scale{Now: h.Tick(), Revives: []string{req.Machines[0]}})
	b := h.CreateBatch(entry(1, 1, spec("j", 1)))
	if r := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 1, act.Instance)}}).(*PlanResult); r.Placed != 1 {
		t.Fatalf("a revived machine takes no placement: %+v", r)
	}
	for _, m := range h.S.Machines() {
		if m.State != MachineActive || m.Deleted != 0 {
			t.Fatalf("after revival: %+v", m)
		}
	}
}

// TestPrivateMachineLifecycle: a job that names a machine type is
// creating while its own machine is made, runs there when the machine's
// worker activates (and nothing else does), and the machine goes when
// the job ends; a refused machine sends the job back to Ready, and a
// cancel ends a creating job and drains its machine.
func TestPrivateMachineLifecycle(t *testing.T) {
	h := autoscaled(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), LaunchConfigs: []LaunchConfig{
		{Name: "big", Cluster: "a", MachineType: "n2-highmem-16", Zone: "east-b", CPUMilli: 16000, Memory: 128 << 30, PricePerHour: 900_000_000}}})
	sp := spec("private", 4)
	sp.Where = &Where{MachineType: "n2-highmem-16"}
	b := h.CreateBatch(entry(1, 2, sp))
	shared := h.CreateBatch(entry(1, 1, spec("shared", 1)))
	// The read models see them in its queue (server/view lists them for
	// the autoscaler and keeps them from the scheduler).
	h.S.Read(func(r Reader) {
		bt := h.Batch(b)
		var ready []ReadyRange
		for rg := range r.Ready(bt) {
			ready = append(ready, rg)
		}
		if !r.HasPrivate(bt) || len(ready) != 1 || ready[0].Len() != 2 || ready[0].Spec.Where.MachineType != "n2-highmem-16" {
			t.Fatalf("private batch's queue %+v", ready)
		}
	})
	res := h.Must(&Scale{Now: h.Tick(), Private: []ScalePrivate{{Config: "big", Batch: b, Job: 1, Reason: "own"}, {Config: "big", Batch: b, Job: 2, Reason: "own"}}}).(*ScaleResult)
	if len(res.Requests) != 1 || res.Capped != 1 {
		// $0.90 of a $1 cap: one machine.
		t.Fatalf("scale %+v", res)
	}
	if h.JobState(b, 1) != Creating || h.JobState(b, 2) != Ready {
		t.Fatalf("jobs %s %s, want creating and ready", h.JobState(b, 1), h.JobState(b, 2))
	}
	m := res.Requests[0].Machines[0]
	h.Must(&LaunchDone{Now: h.Tick(), Request: res.Requests[0].Key, Created: []LaunchedMachine{{Machine: m}}})
	act := h.Must(&Activate{Now: h.Tick(), Name: m, NodeID: m, CPUMilli: 16000, Memory: 128 << 30, TokenHash: "tp", Region: "east", Cluster: "a", Machine: m}).(*ActivateResult)
	if h.JobState(b, 1) != Running {
		t.Fatalf("job on its machine is %s, want running", h.JobState(b, 1))
	}
	if v := h.S.WorkerView(act.Instance, nil); len(v.Assign) != 1 || v.Assign[0].Batch != b || v.Assign[0].Job != 1 {
		t.Fatalf("its worker is assigned %+v", v.Assign)
	}
	// Its free cores are not the fleet's.
	if r := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(shared, 1, 1, act.Instance)}}).(*PlanResult); r.Placed != 0 {
		t.Fatalf("a shared job was placed on a private machine: %+v", r)
	}
	h.Complete(act.Instance, nil)
	if h.JobState(b, 1) != Success {
		t.Fatalf("job %s", h.JobState(b, 1))
	}
	for _, mi := range h.S.Machines() {
		if mi.ID == m && mi.State != MachineDraining {
			t.Fatalf("its machine is %s after the job ended, want draining", MachineStateName(mi.State))
		}
	}
	h.Must(&MachineGone{Now: h.Tick(), Machine: m, Reason: "deleted"})
	// Job 2: its machine is refused: Ready again.
	res = h.Must(&Scale{Now: h.Tick(), Private: []ScalePrivate{{Config: "big", Batch: b, Job: 2}}}).(*ScaleResult)
	h.Must(&LaunchDone{Now: h.Tick(), Request: res.Requests[0].Key, Refused: true, CapacityLimited: true, Reason: "ZONE_RESOURCE_POOL_EXHAUSTED"})
	if h.JobState(b, 2) != Ready {
		t.Fatalf("job with a refused machine is %s, want ready", h.JobState(b, 2))
	}
	// A cancel while it is creating: cancelled, its machine drained.
	h.Now += int64(2 * time.Minute) // the mark ends
	res = h.Must(&Scale{Now: h.Tick(), Private: []ScalePrivate{{Config: "big", Batch: b, Job: 2}}}).(*ScaleResult)
	h.Must(&CancelBatch{Now: h.Tick(), Batch: b})
	if h.JobState(b, 2) != Cancelled {
		t.Fatalf("job %s after cancel", h.JobState(b, 2))
	}
	for _, mi := range h.S.Machines() {
		if mi.ID == res.Requests[0].Machines[0] && mi.State != MachineDraining {
			t.Fatalf("the cancelled job's machine is %s", MachineStateName(mi.State))
		}
	}
	h.Must(&MachineGone{Now: h.Tick(), Machine: res.Requests[0].Machines[0], Reason: "deleted"})
	for _, s := range []*State{h.Replay(), func() *State {
		s := New()
		if err := s.Restore(strings.NewReader(string(SnapshotBytes(t, h.S)))); err != nil {
			t.Fatal(err)
		}
		return s
	}()} {
		checkInvariants(t, s)
	}
}
