package state

import (
	"slices"
	"testing"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// spendWorld is a state where billing project "lab" (limit $10) has one
// attempt running since start at a dollar a second, so it reaches its
// limit at start+10s, and more Ready work; "other" (limit $1,000) has
// Ready work too.
type spendWorld struct {
	h               *Harness
	inst            uint32
	running, labB   uint64 // lab's batch with the running attempt, and its Ready one (two runs: 2 jobs, then 1 of 2 cores)
	otherB          uint64
	start, crossing int64
	before, after   int64 // 5 s before the crossing, 1 s after
}

func newSpendWorld(t *testing.T) *spendWorld {
	h := newHarness(t)
	w := &spendWorld{h: h}
	// A core costs a dollar a second.
	h.Must(&SetRates{Now: h.Tick(), Rates: []RateEntry{{Resource: "compute", Price: 3600 * money.DollarPerHour}}})
	for name, limit := range map[string]money.Amount{"lab": 10 * money.Dollar, "other": 1000 * money.Dollar} {
		h.Must(&CreateBillingProject{Now: h.Tick(), Name: name, Members: []string{"root"}})
		h.Must(&SetSpendLimit{Project: name, Limit: limit})
	}
	w.inst = h.Activate("w", 16, 64)
	batch := func(project string, es ...JobEntry) uint64 {
		return h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: project, Jobs: es}).(*UpdateResult).Batch
	}
	w.running = batch("lab", entry(1, 1, spec("lab", 1)))
	// Billed from its placement, before its worker starts it.
	w.start = h.Tick()
	if r := h.Must(&Plan{Now: w.start, Placements: h.Planner(h.S, w.start), Reserve: true}).(*PlanResult); r.Placed != 1 {
		t.Fatalf("placed %+v", r)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w.inst, Batch: w.running, Job: 1, Attempt: 1, Started: true, Start: h.Now}}})
	w.labB = batch("lab", entry(1, 2, spec("lab", 1)), entry(3, 1, spec("lab-2", 2)))
	w.otherB = batch("other", entry(1, 2, spec("other", 1)))
	w.crossing = w.start + int64(10*time.Second)
	w.before, w.after = w.crossing-int64(5*time.Second), w.crossing+int64(time.Second)
	h.Now = w.before
	return w
}

// TestPlanIsReCheckedAgainstTheSpendLimitAtItsTime: a plan computed while
// a billing project was under its limit and committed after the project
// crossed it is refused for that project's jobs at apply (the plan's
// time decides, as the leader stamped it), and applied for the others';
// the same plan stamped before the crossing places everything.
func TestPlanIsReCheckedAgainstTheSpendLimitAtItsTime(t *testing.T) {
	for _, c := range []struct {
		name                 string
		at                   func(w *spendWorld) int64
		placed, rejected     int
		labState, otherState JobState
	}{
		{"committed after the crossing", func(w *spendWorld) int64 { return w.after }, 2, 3, Ready, Running},
		{"committed before the crossing", func(w *spendWorld) int64 { return w.before + 1 }, 5, 0, Running, Running},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newSpendWorld(t)
			placements := FirstFit(w.h.S, w.before)
			if n := len(placements); n != 5 {
				t.Fatalf("planned %d placements before the crossing, want lab's 3 and other's 2", n)
			}
			res := w.h.Must(&Plan{Now: c.at(w), Placements: placements}).(*PlanResult)
			if res.Placed != c.placed || res.Rejected != c.rejected {
				t.Fatalf("plan result %+v, want %d placed and %d rejected", res, c.placed, c.rejected)
			}
			for j := uint32(1); j <= 3; j++ {
				if s := w.h.JobState(w.labB, j); s != c.labState {
					t.Fatalf("lab's job %d is %s, want %s", j, s, c.labState)
				}
			}
			if s := w.h.JobState(w.otherB, 1); s != c.otherState {
				t.Fatalf("other's job is %s, want %s", s, c.otherState)
			}
			checkInvariants(t, w.h.Replay())
		})
	}
}

// TestSpendCheck: the leader's look at spend limits. Before lab's
// crossing nothing is to stop and the next crossing is lab's, to the
// nanosecond (other runs nothing: it never crosses at these prices);
// after it, lab's open batches are listed (at most max), and once they are
// cancelled nothing is.
func TestSpendCheck(t *testing.T) {
	w := newSpendWorld(t)
	stops, next := w.h.S.SpendCheck(time.Unix(0, w.before), 100)
	if len(stops) != 0 || next != w.crossing {
		t.Fatalf("before the crossing: stops %+v, next at crossing%+v", stops, time.Duration(next-w.crossing))
	}
	stops, _ = w.h.S.SpendCheck(time.Unix(0, w.after), 100)
	if len(stops) != 1 || stops[0].Project != "lab" || stops[0].Limit != 10*money.Dollar || stops[0].Spent != 11*money.Dollar ||
		!slices.Equal(stops[0].Batches, []uint64{w.running, w.labB}) {
		t.Fatalf("after the crossing: %+v", stops)
	}
	if stops, _ = w.h.S.SpendCheck(time.Unix(0, w.after), 1); len(stops) != 1 || len(stops[0].Batches) != 1 {
		t.Fatalf("at most one batch: %+v", stops)
	}
	for _, b := range []uint64{w.running, w.labB} {
		w.h.Must(&CancelBatch{Now: w.after, Batch: b, Reason: "spend"})
	}
	if stops, _ = w.h.S.SpendCheck(time.Unix(0, w.after), 100); len(stops) != 0 {
		t.Fatalf("after the cancels: %+v", stops)
	}
	var budget billing.Budget
	w.h.S.Read(func(r Reader) { budget = r.Budget("lab") })
	if !budget.Reached(w.after) || budget.Limit != 10*money.Dollar || budget.Cost(w.after) != 11*money.Dollar {
		t.Fatalf("lab's budget at the end: %+v, spent %v", budget, budget.Cost(w.after))
	}
}

// TestSpendHook: the leader hears of every start and end of an attempt of
// a project with a spend limit, and of a new limit, and of nothing for a
// project without one.
func TestSpendHook(t *testing.T) {
	s := New()
	calls := 0
	s.SetHooks(Hooks{Spend: func() { calls++ }})
	n := uint64(0)
	apply := func(c Command) any {
		n++
		res := s.Apply(n, c)
		if err, ok := res.(*ApplyError); ok {
			t.Fatalf("%T: %v", c, err)
		}
		return res
	}
	apply(&Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"})
	apply(&SetRates{Now: 2, Rates: []RateEntry{{Resource: "compute", Price: money.DollarPerHour}}})
	apply(&CreateBillingProject{Now: 3, Name: "lab", Members: []string{"root"}})
	inst := apply(&Activate{Now: 4, Name: "w", CPUMilli: 8000, Memory: 8 << 30, TokenHash: "t"}).(*ActivateResult).Instance
	run := func(project string, at int64) {
		b := apply(&CreateBatch{Now: at, User: "root", BillingProject: project, Jobs: []JobEntry{entry(1, 1, spec("j", 1))}}).(*UpdateResult).Batch
		apply(&Plan{Now: at, Placements: []Placement{place(b, 1, 1, inst)}})
		apply(&Events{Now: at + 1, Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Started: true, Start: at + 1}}})
		apply(&Events{Now: at + 2, Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeSuccess, Start: at + 1, End: at + 2}}})
	}
	run("lab", 10)
	run("default", 20)
	if calls != 0 {
		t.Fatalf("%d calls without a limit", calls)
	}
	apply(&SetSpendLimit{Project: "lab", Limit: 5 * money.Dollar})
	run("lab", 30)
	run("default", 40)
	if calls != 3 {
		t.Fatalf("%d calls, want 3: the limit, lab's start and end", calls)
	}
}

// TestPrivateMachineRespectsTheSpendLimit: a job that runs on a machine of
// its own starts an attempt there only while its project is under its
// limit: the decision to make the machine is refused at apply once the
// project reached it, and a machine whose worker comes up after the
// crossing is drained and its job sent back to Ready.
func TestPrivateMachineRespectsTheSpendLimit(t *testing.T) {
	h := autoscaled(t)
	h.Must(&SetRates{Now: h.Tick(), Rates: []RateEntry{{Resource: "compute", Price: 3600 * money.DollarPerHour}}})
	h.Must(&SetSpendLimit{Project: "default", Limit: 10 * money.Dollar})
	h.Must(&ApplyPlacement{Now: h.Tick(), LaunchConfigs: []LaunchConfig{
		{Name: "big", Cluster: "a", MachineType: "n2-highmem-16", Zone: "east-b", CPUMilli: 16000, Memory: 128 << 30, PricePerHour: 500_000_000}}})
	inst := h.Activate("w", 8, 32)
	shared := h.CreateBatch(entry(1, 1, spec("shared", 1)))
	h.Schedule()
	start := h.Tick()
	h.Must(&Events{Now: start, Events: []Event{{Instance: inst, Batch: shared, Job: 1, Attempt: 1, Started: true, Start: start}}})
	crossing := start + int64(10*time.Second)
	sp := spec("private", 4)
	sp.Where = &Where{MachineType: "n2-highmem-16"}
	b := h.CreateBatch(entry(1, 2, sp))
	// Before the crossing a machine is made for job 1.
	res := h.Must(&Scale{Now: crossing - int64(time.Second), Private: []ScalePrivate{{Config: "big", Batch: b, Job: 1, Reason: "own"}}}).(*ScaleResult)
	if len(res.Requests) != 1 || h.JobState(b, 1) != Creating {
		t.Fatalf("before the crossing: %+v, job %s", res, h.JobState(b, 1))
	}
	// After it, none for job 2.
	if res := h.Must(&Scale{Now: crossing, Private: []ScalePrivate{{Config: "big", Batch: b, Job: 2, Reason: "own"}}}).(*ScaleResult); len(res.Requests) != 0 || res.Capped != 1 || h.JobState(b, 2) != Ready {
		t.Fatalf("after the crossing: %+v, job %s", res, h.JobState(b, 2))
	}
	// Job 1's machine comes up after the crossing: no attempt starts.
	m := res.Requests[0].Machines[0]
	h.Now = crossing
	h.Must(&LaunchDone{Now: h.Tick(), Request: res.Requests[0].Key, Created: []LaunchedMachine{{Machine: m}}})
	h.Must(&Activate{Now: h.Tick(), Name: m, NodeID: m, CPUMilli: 16000, Memory: 128 << 30, TokenHash: "tp", Region: "east", Cluster: "a", Machine: m})
	if h.JobState(b, 1) != Ready {
		t.Fatalf("job 1 is %s after its machine came up past the crossing, want ready", h.JobState(b, 1))
	}
	for _, mi := range h.S.Machines() {
		if mi.ID == m && mi.State != MachineDraining {
			t.Fatalf("its machine is %s, want draining", MachineStateName(mi.State))
		}
	}
	checkInvariants(t, h.Replay())
}
