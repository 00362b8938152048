package autoscaler

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
)

var spotT0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func spotCfg(name string, cores int64, price float64, spot bool) LaunchConfig {
	return LaunchConfig{Name: name, Cluster: "c", Region: "r", Pool: "default", MachineType: name, Zone: "z", Spot: spot,
		CPUMilli: cores * 1000, Memory: cores << 32, PricePerHour: money.RateFromDollars(price)}
}

// TestDemandKeepsJobsOffSpotApart: WindowedDemand (the leader's path from
// view.Demand to Plan) merges shapes of a size, but never a job kept off
// spot into a shape that may take spot (it did: Plan then launched spot
// machines for it).
func TestDemandKeepsJobsOffSpotApart(t *testing.T) {
	any := Shape{CPUMilli: 1000, Memory: 1 << 30, Count: 8}
	off := any
	off.Constraint = placement.Constraint{NoSpot: true}
	d := WindowedDemand([]UserQueue{{Name: "u", Ready: []Shape{any, off}}}, 1<<40)
	var offJobs int64
	for _, sh := range d {
		if sh.Constraint.NoSpot {
			offJobs += sh.Count
		}
	}
	if offJobs != 8 {
		t.Errorf("windowed demand %+v: %d jobs kept off spot, want 8 (merged into the unconstrained shape)", d, offJobs)
	}
	out := Plan(&Input{Now: spotT0, Demand: d,
		Configs: []LaunchConfig{spotCfg("spot", 8, 0.08, true), spotCfg("od", 8, 0.32, false)}})
	od := 0
	for _, l := range out.Launches {
		if l.Config == "od" {
			od += l.Count
		}
	}
	if od == 0 {
		t.Fatalf("launches %+v: no on-demand machine for the 8 jobs kept off spot", out.Launches)
	}
}

// TestRightSizingSkipsSpotSizesForJobsOffSpot: the right-sizing rule
// (scheduler.LeftForLarger, through Output.Sizes -> Input.Launchable)
// never takes a pool's spot config for the machine the autoscaler would
// launch for a job kept off spot. With a small spot config and only a
// large on-demand one, a 1-core job kept off spot takes an idle 8-core
// on-demand worker, and the autoscaler counts that room (it used to leave
// the worker to larger jobs and launch another, left idle too).
func TestRightSizingSkipsSpotSizesForJobsOffSpot(t *testing.T) {
	off := Shape{CPUMilli: 1000, Memory: 1 << 30, Count: 1, Constraint: placement.Constraint{NoSpot: true}}
	out := Plan(&Input{Now: spotT0, Demand: []Shape{off},
		Configs: []LaunchConfig{spotCfg("spot-2", 2, 0.02, true), spotCfg("od-8", 8, 0.32, false)},
		Free:    []Room{{Region: "r", Cluster: "c", Pool: "default", CPUMilli: 8000, Memory: 32 << 30, TotalMilli: 8000}}})
	bad := ""
	if len(out.Launches) != 0 {
		bad += "the autoscaler launched " + out.Launches[0].Config + " though an idle on-demand worker fits the job kept off spot; "
	}
	in := &scheduler.Input{Launchable: out.Sizes, Clusters: []placement.Cluster{{Name: "c", Region: "r"}},
		Instances:   []scheduler.Instance{{ID: 1, CPUMilli: 8000, Memory: 32 << 30, FreeMilli: 8000, FreeMem: 32 << 30, Cluster: 0, Pool: "default"}},
		Constraints: []placement.Constraint{{NoSpot: true}}}
	run := scheduler.NewRun(1, 1, 1, 1000, 1<<30)
	run.Constraint = 1
	in.Users = []scheduler.User{{Name: "u", ReadyMilli: 1000, Runs: []scheduler.Run{run}}}
	if s := scheduler.Schedule(in); s.Jobs != 1 {
		bad += "the scheduler left the only on-demand worker idle (left_for_larger: the smaller machine is spot, never launched for it)"
	}
	if bad != "" {
		t.Fatalf("sizes %+v: %s", out.Sizes, bad)
	}
}
