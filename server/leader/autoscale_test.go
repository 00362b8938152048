package leader

import (
	"context"
	"testing"
	"time"

	"github.com/drover-sched/drover/autoscaler"
	simcloud "github.com/drover-sched/drover/autoscaler/provider/sim"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

type testClock struct{ t time.Time }

func (c *testClock) Now() time.Time { return c.t }

// TestRoundLaunchesOnItsClock: one round on an injected clock against the
// simulated cloud records the decision, mints the machines' join tokens
// and launches them, every command stamped with the injected time; the
// decision is what LastRound tells until Reset.
func TestRoundLaunchesOnItsClock(t *testing.T) {
	h := state.NewHarness(t, nil)
	clk := &testClock{t: time.Unix(0, h.Now).Add(time.Hour)}
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Clusters: []state.Cluster{{Name: "c", Region: "r"}},
		Autoscaler:    &state.Autoscaler{Enabled: true, MaxNodes: 4},
		LaunchConfigs: []state.LaunchConfig{{Name: "m8", Cluster: "c", MachineType: "m8", Zone: "z", CPUMilli: 8000, Memory: 32 << 30, PricePerHour: 400_000_000}}})
	h.CreateBatch(state.JobEntry{First: 1, Count: 16, Spec: &state.Spec{Name: "j", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}})
	cloud := simcloud.New(simcloud.Options{Clock: clk, BootDelay: time.Minute})
	var stamps []int64
	var decided *autoscaler.Output
	a := NewAutoscaler(AutoscalerConfig{Clock: clk, State: h.S, Provider: cloud, WorkerSecret: "s", MemoryStep: 256 << 20,
		Apply: func(c state.Command) (any, error) {
			switch c := c.(type) {
			case *state.Scale:
				stamps = append(stamps, c.Now)
			case *state.JoinTokens:
				stamps = append(stamps, c.Now)
			case *state.LaunchDone:
				stamps = append(stamps, c.Now)
			}
			return h.Must(c), nil
		},
		Decided: func(_ *autoscaler.Input, out *autoscaler.Output) { decided = out }})
	if err := a.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	if decided == nil || len(decided.Launches) == 0 {
		t.Fatalf("no launch decided: %+v", decided)
	}
	if len(stamps) < 3 {
		t.Fatalf("want a Scale, JoinTokens and LaunchDone, got %d stamped commands", len(stamps))
	}
	for _, s := range stamps {
		if s != clk.t.UnixNano() {
			t.Fatalf("a command stamped %d, the clock says %d", s, clk.t.UnixNano())
		}
	}
	machines, _ := cloud.List(context.Background())
	if len(machines) != 2 {
		t.Fatalf("the cloud has %d machines, want 2 (16 cores of 8-core machines)", len(machines))
	}
	for _, m := range view.AutoscaleState(h.S).Machines {
		if m.State != state.MachineLaunching || m.JoinHash == "" || cloud.JoinToken(m.ID) == "" {
			t.Fatalf("machine %s: state %d, join hash %q", m.ID, m.State, m.JoinHash)
		}
	}
	if r := a.LastRound(); r == nil || r.DemandCPU != 16 || !r.At.Equal(clk.t) {
		t.Fatalf("last round %+v", r)
	}
	a.Reset()
	if a.LastRound() != nil {
		t.Fatal("Reset kept the last round")
	}
}

// TestHeldRoomIsNotFreeForOtherJobs: a worker's 8 free cores held for a
// gang first in line are not free for a waiting 4-core job: the round
// launches a machine for it; without the hold, or with holds older than
// maxHoldAge, the job fits the free room and nothing is launched.
func TestHeldRoomIsNotFreeForOtherJobs(t *testing.T) {
	for _, c := range []struct {
		name   string
		holds  []scheduler.GangHold
		age    time.Duration
		free   int64
		launch bool
	}{
		{"no hold", nil, 0, 8000, false},
		{"held", []scheduler.GangHold{{Batch: 9, Gang: 1, Members: 2, CPUMilli: 8000, Memory: 2 << 30,
			On: []scheduler.HeldOn{{HeldMilli: 8000, HeldMem: 2 << 30, FreeMilli: 8000, FreeMem: 32 << 30}}}}, 0, 0, true},
		{"half held", []scheduler.GangHold{{Batch: 9, Gang: 1, Members: 1, CPUMilli: 4000, Memory: 1 << 30,
			On: []scheduler.HeldOn{{HeldMilli: 4000, HeldMem: 1 << 30, FreeMilli: 8000, FreeMem: 32 << 30}}}}, 0, 4000, false},
		{"an old hold", []scheduler.GangHold{{Batch: 9, Gang: 1, Members: 2, CPUMilli: 8000, Memory: 2 << 30,
			On: []scheduler.HeldOn{{HeldMilli: 8000, HeldMem: 2 << 30, FreeMilli: 8000, FreeMem: 32 << 30}}}}, 2 * maxHoldAge, 8000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := state.NewHarness(t, nil)
			clk := &testClock{t: time.Unix(0, h.Now).Add(time.Hour)}
			h.Must(&state.ApplyPlacement{Now: h.Tick(), Clusters: []state.Cluster{{Name: "default", Region: "default"}},
				Autoscaler:    &state.Autoscaler{Enabled: true, MaxNodes: 4},
				LaunchConfigs: []state.LaunchConfig{{Name: "m8", Cluster: "default", MachineType: "m8", Zone: "z", CPUMilli: 8000, Memory: 32 << 30, PricePerHour: 400_000_000}}})
			inst := h.Activate("w", 8, 32)
			for i := range c.holds {
				for k := range c.holds[i].On {
					c.holds[i].On[k].Instance = inst
				}
			}
			h.CreateBatch(state.JobEntry{First: 1, Count: 1, Spec: &state.Spec{Name: "small", Command: []string{"true"}, CPUMilli: 4000, Memory: 1 << 30}})
			var in *autoscaler.Input
			var out *autoscaler.Output
			a := NewAutoscaler(AutoscalerConfig{Clock: clk, State: h.S, Provider: simcloud.New(simcloud.Options{Clock: clk, BootDelay: time.Minute}),
				WorkerSecret: "s", MemoryStep: 256 << 20, Apply: func(c state.Command) (any, error) { return h.Must(c), nil },
				Decided: func(i *autoscaler.Input, o *autoscaler.Output) { in, out = i, o }})
			a.Holds = func() ([]scheduler.GangHold, time.Time) { return c.holds, clk.t.Add(-c.age) }
			if err := a.Round(context.Background()); err != nil {
				t.Fatal(err)
			}
			if in == nil || len(in.Free) != 1 || in.Free[0].CPUMilli != c.free {
				t.Fatalf("free room %+v, want %d millicores", in, c.free)
			}
			if got := len(out.Launches) > 0; got != c.launch {
				t.Fatalf("launches %+v: want a launch %v", out.Launches, c.launch)
			}
		})
	}
}
