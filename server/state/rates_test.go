package state

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
)

// TestAttemptCost: an attempt's cost is what it reserves × the rates in
// force when it started × how long it ran, exactly; a running one's
// grows with the clock; rates never apply to the past, are bounded, and
// survive a snapshot.
func TestAttemptCost(t *testing.T) {
	h := newHarness(t)
	now := time.Unix(0, h.Tick())
	h.Must(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{
		{Resource: "compute", Price: 47_500_000}, {Resource: "memory", Price: 6_370_000}, {Resource: "service-fee", Price: 10_000_000},
	}})
	h.MustFail(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{{Resource: "compute", Price: money.DollarPerHour, ValidFrom: now.Add(-time.Second).UnixNano()}}}, ErrInvalid)
	h.MustFail(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{{Resource: "Compute!", Price: money.DollarPerHour}}}, ErrInvalid)
	h.MustFail(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{{Resource: "compute", Price: math.MaxInt64}}}, ErrInvalid)
	h.MustFail(&SetRates{Now: now.UnixNano()}, ErrInvalid)
	// Tomorrow compute costs more; today's attempts keep today's price.
	h.Must(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{{Resource: "compute", Price: 100_000_000, ValidFrom: now.Add(24 * time.Hour).UnixNano()}}})

	inst := h.Activate("w", 8, 32)
	sp := spec("j", 1)
	sp.CPUMilli, sp.Memory = 2000, 4<<30
	b := h.CreateBatch(entry(1, 1, sp))
	// Billed from its reservation (the plan), not from when its worker
	// starts the command, after pulling its image.
	start := now.Add(time.Minute).UnixNano()
	h.Must(&Plan{Now: start, Placements: h.Planner(h.S, start), Reserve: true})
	pulled := start + int64(5*time.Second)
	h.Must(&Events{Now: pulled, Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Started: true, Start: pulled}}})
	const perHour = 140_480_000 // 2×0.0475 + 4×0.00637 + 2×0.01 dollars an hour
	j, _ := h.S.Job(b, 1)
	if a := j.Attempts[0]; !a.Priced || a.PerHour.Rate() != perHour || len(a.Lines) != 3 {
		t.Fatalf("a running attempt: %+v", a)
	}
	// While it runs, the project's live cost is its price × the time so
	// far, read from kept sums (no walk).
	at := time.Unix(0, start).Add(30 * time.Minute)
	if c := h.S.ProjectCost("default", at); c != perHour/2 {
		t.Fatalf("project cost after 30 running minutes: %v, want %v", c, perHour/2)
	}
	// It runs 90 minutes.
	end := start + int64(90*time.Minute)
	h.Must(&Events{Now: end, Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeSuccess, Start: pulled, End: end}}})
	j, _ = h.S.Job(b, 1)
	a := j.Attempts[0]
	if a.Start != start {
		t.Fatalf("the attempt started at %v, want its reservation's %v", time.Unix(0, a.Start), time.Unix(0, start))
	}
	cost := a.Cost(end + int64(time.Hour)) // an ended attempt: the same cost read at any time
	if want := money.Amount(perHour * 3 / 2); !a.Priced || cost != want {
		t.Fatalf("cost %v, want %v (%+v)", cost, want, a.Lines)
	}
	// The batch and its billing project cost the same: their one attempt.
	if bt, _ := h.S.Batch(b); bt.Cost(end) != cost {
		t.Fatalf("batch cost %v, attempt %v", bt.Cost(end), cost)
	}
	if p, _ := h.S.BillingProject("default"); p.Cost(end) != cost {
		t.Fatalf("project cost %v, attempt %v", p.Cost(end), cost)
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	endDay := int32(end / (24 * 3600e9))
	if days := h.S.CostByDay("default", endDay-1, endDay+1); len(days) != 1 || days[0].Cost != cost ||
		days[0].Day != endDay {
		t.Fatalf("daily cost %+v, want %v on the day it ended", days, cost)
	}
	// Read again later (tomorrow's rate in force): the same cost.
	if j2, _ := h.S.Job(b, 1); j2.Attempts[0].Cost(end+int64(48*time.Hour)) != cost {
		t.Fatal("an ended attempt's cost changed")
	}
	rates := h.S.Rates(now, false)
	if len(rates) != 4 || rates[0].Resource != "compute" || !rates[0].InForce || rates[1].InForce {
		t.Fatalf("rates now: %+v", rates)
	}
	snap := SnapshotBytes(t, h.S)
	restored := New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(SnapshotBytes(t, restored), snap) || !bytes.Equal(SnapshotBytes(t, h.Replay()), snap) {
		t.Fatal("rates differ after a restore or a replay")
	}
}

// TestLaunchConfigRates: a launch config's price gives rates for its
// cores, memory and GPUs, which price the attempts on its machines (a
// whole machine's worth costs the machine's price); a changed price adds
// a version from then on, the same config again adds nothing, so an
// admin's rate over it stays; and the instance's config survives a
// snapshot.
func TestLaunchConfigRates(t *testing.T) {
	h := autoscaled(t) // small: 8 cores, 32 GiB, $0.30 an hour; spot $0.10
	now := h.Now
	h.Must(&SetRates{Now: now, Rates: []RateEntry{{Resource: "compute", Price: 5 * money.DollarPerHour}}})
	byName := func() map[string]apiRate {
		out := map[string]apiRate{}
		for _, r := range h.S.Rates(time.Unix(0, h.Now), true) {
			out[r.Resource+"@"+itoa(uint64(r.Version))] = apiRate{r.PerHour.Dollars(), r.ValidFrom, r.InForce}
		}
		return out
	}
	unit := 0.3 / (8 + 32*0.134)
	rs := byName()
	if r := rs["compute/default/small@1"]; math.Abs(r.price-math.Round(unit*1e9)/1e9) > 1e-12 || !r.inForce {
		t.Fatalf("compute/default/small: %+v (rates %+v)", r, rs)
	}
	if _, ok := rs["memory/default/spot@1"]; !ok || len(rs) != 5 {
		t.Fatalf("rates %+v: want compute and memory for small and spot, and compute", rs)
	}

	// A worker on a machine of small runs 2 cores and 8 GiB for an hour:
	// a quarter of the machine, a quarter of its price.
	res := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "small", Count: 1}}}).(*ScaleResult)
	m := res.Requests[0].Machines[0]
	h.Must(&LaunchDone{Now: h.Tick(), Request: res.Requests[0].Key, Created: []LaunchedMachine{{Machine: m, ProviderID: "p-1"}}})
	act := h.Must(&Activate{Now: h.Tick(), Name: m, NodeID: "n0", CPUMilli: 8000, Memory: 32 << 30, TokenHash: "t0",
		Region: "east", Cluster: "a", Machine: m}).(*ActivateResult)
	sp := spec("j", 1)
	sp.CPUMilli, sp.Memory = 2000, 8<<30
	b := h.CreateBatch(entry(1, 1, sp))
	start := h.Tick()
	h.Must(&Plan{Now: start, Placements: []Placement{place(b, 1, 1, act.Instance)}, Reserve: true})
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: act.Instance, Batch: b, Job: 1, Attempt: 1, Started: true, Start: h.Now}}})
	end := start + int64(time.Hour)
	h.Now = end
	h.Must(&Events{Now: end, Events: []Event{{Instance: act.Instance, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeSuccess, Start: start, End: end}}})
	j, _ := h.S.Job(b, 1)
	a := j.Attempts[0]
	if cost := a.Cost(end); !a.Priced || math.Abs(cost.Dollars()-0.3/4) > 1e-8 || a.Lines[0].Rated != "compute/default/small" || a.Lines[1].Rated != "memory/default/small" {
		t.Fatalf("an hour on a quarter of the machine: %v, want %v (%+v)", cost, 0.3/4, a.Lines)
	}

	// Set again as they are: no new version. An admin's rate over the
	// config's stays in force.
	cfgs := func(small money.Rate) *ApplyPlacement {
		return &ApplyPlacement{Now: h.Tick(), LaunchConfigs: []LaunchConfig{
			{Name: "small", Cluster: "a", MachineType: "n2-8", Zone: "east-b", CPUMilli: 8000, Memory: 32 << 30, PricePerHour: small},
			{Name: "spot", Cluster: "a", MachineType: "n2-8", Zone: "east-c", Spot: true, CPUMilli: 8000, Memory: 32 << 30, PricePerHour: 100_000_000}}}
	}
	h.Must(&SetRates{Now: h.Tick(), Rates: []RateEntry{{Resource: "compute/default/spot", Price: 1_000_000}}})
	h.Must(cfgs(300_000_000))
	rs = byName()
	if len(rs) != 6 || !rs["compute/default/spot@2"].inForce {
		t.Fatalf("the same configs again: %+v", rs)
	}
	// A new price: a new version from now; the ended attempt keeps its
	// cost.
	h.Must(cfgs(600_000_000))
	rs = byName()
	if r := rs["compute/default/small@2"]; !r.inForce || r.from != h.Now || math.Abs(r.price-2*rs["compute/default/small@1"].price) > 1e-9 {
		t.Fatalf("after the price doubled: %+v", rs)
	}
	if j2, _ := h.S.Job(b, 1); j2.Attempts[0].Cost(h.Now) != a.Cost(end) {
		t.Fatal("an ended attempt's cost changed with the config's price")
	}
	// A price whose rates would be past the most a rate may be is refused
	// whole.
	h.MustFail(&ApplyPlacement{Now: h.Tick(), LaunchConfigs: []LaunchConfig{
		{Name: "huge", Cluster: "a", MachineType: "x", CPUMilli: 1000, Memory: 1 << 30, PricePerHour: 100_000_000_000_000_000}}}, ErrInvalid)
	if _, ok := byName()["compute/default/huge@1"]; ok {
		t.Fatal("a refused config left a rate")
	}

	snap := SnapshotBytes(t, h.S)
	restored := New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(SnapshotBytes(t, restored), snap) || !bytes.Equal(SnapshotBytes(t, h.Replay()), snap) {
		t.Fatal("state differs after a restore or a replay")
	}
	if j2, _ := restored.Job(b, 1); j2.Attempts[0].Lines[0].Rated != "compute/default/small" {
		t.Fatalf("after a restore the attempt is priced by %+v", j2.Attempts[0].Lines)
	}
}

type apiRate struct {
	price   float64
	from    int64
	inForce bool
}
