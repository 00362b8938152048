package state

import (
	"fmt"
	"strings"
	"testing"
)

// Attacks on gangs (helper review): plans that would start a gang in part
// or oversubscribe an instance, members stopped, lost, preempted,
// restarted, cancelled and retried, and the state's counts through all of
// it (the harness checks the invariants after every command, Restored
// compares snapshot and replay).

// agWorker is a worker of an attack harness.
type agWorker struct {
	name, cluster, pool string
	labels              StringMap
}

// agHarness activates 2-core workers as ws say (clusters declared with
// their pools), and returns their instance IDs.
func agHarness(t *testing.T, ws ...agWorker) (*Harness, []uint32) {
	h := newHarness(t)
	pools := map[string][]Pool{}
	var order []string
	for _, w := range ws {
		if _, ok := pools[w.cluster]; !ok {
			order = append(order, w.cluster)
		}
		have := false
		for _, p := range pools[w.cluster] {
			have = have || p.Name == w.pool
		}
		if !have {
			pools[w.cluster] = append(pools[w.cluster], Pool{Name: w.pool, CPUMilli: 2000})
		}
	}
	var cls []Cluster
	for _, c := range order {
		cls = append(cls, Cluster{Name: c, Region: "r", Pools: pools[c]})
	}
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: cls})
	var ids []uint32
	for _, w := range ws {
		res := h.Must(&Activate{Now: h.Tick(), Name: w.name, CPUMilli: 2000, Memory: 8 << 30, TokenHash: "tok-" + w.name,
			Region: "r", Cluster: w.cluster, Pool: w.pool, Labels: w.labels})
		ids = append(ids, res.(*ActivateResult).Instance)
	}
	return h, ids
}

// agGang is a gang spec of n one-core members.
func agGang(n uint32, retries uint16, uniform string) *Spec {
	sp := spec("ranks", 1)
	sp.Array, sp.Retries = true, retries
	sp.Run = &Run{Gang: &Gang{Size: n, Uniform: uniform}}
	return sp
}

// agAllOrNone fails unless each gang (first, n) of batch b has all its
// members that have not ended running, or none of them.
func agAllOrNone(t *testing.T, h *Harness, what string, b uint64, first, n uint32) {
	t.Helper()
	running, live := 0, 0
	var states []string
	for id := first; id < first+n; id++ {
		st := h.JobState(b, id)
		states = append(states, st.String())
		if st == Running {
			running++
		}
		if !st.Final() {
			live++
		}
	}
	if running != 0 && running != live {
		t.Fatalf("%s: gang %d/%d-%d started in part: %s", what, b, first, first+n-1, strings.Join(states, " "))
	}
}

// agPlace is a placement of members first..first+count-1.
func agPlace(b uint64, first, count uint32, attempt uint16, inst uint32) Placement {
	return Placement{Batch: b, First: first, Count: count, Attempt: attempt, Instance: inst}
}

// TestAttackGangPlanShapes: plans a leader (or a bug) could write, each
// applied to a fresh state: apply must place every gang whole or not at
// all, never oversubscribe (the invariants), and never split.
func TestAttackGangPlanShapes(t *testing.T) {
	two := []agWorker{
		{"a1", "c1", "p", StringMap{"rack": "r1"}}, {"a2", "c1", "q", StringMap{"rack": "r2"}},
		{"b1", "c2", "p", StringMap{"rack": "r1"}}, {"b2", "c2", "p", StringMap{"rack": "r1"}},
	}
	type setup struct {
		h    *Harness
		in   []uint32
		a, c uint64 // gang batch (1-4, plain 5), second gang batch (1-4)
	}
	mk := func(t *testing.T, uniform string) setup {
		h, in := agHarness(t, two...)
		a := h.CreateBatch(entry(1, 4, agGang(4, 1, uniform)), entry(5, 1, spec("plain", 1)))
		c := h.CreateBatch(entry(1, 4, agGang(4, 1, uniform)))
		return setup{h, in, a, c}
	}
	cases := []struct {
		name    string
		uniform string
		prep    func(s setup)
		plans   func(s setup) [][]Placement
		want    int // members of gang a that must be running after (0 or 4; -1: either)
	}{
		{name: "split over two plans", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0])}, {agPlace(s.a, 3, 2, 1, s.in[1])}}
		}},
		{name: "whole then a duplicate of part", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 2, 1, s.in[1]), agPlace(s.a, 1, 2, 1, s.in[2])}}
		}},
		{name: "overlapping ranges", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 2, 2, 1, s.in[1]), agPlace(s.a, 4, 1, 1, s.in[2])}}
		}},
		{name: "a part past the gang into the plain job", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 3, 1, s.in[1])}}
		}},
		{name: "count wraps uint32", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, ^uint32(0), 1, s.in[1])}}
		}},
		{name: "a retired instance", prep: func(s setup) {
			s.h.Must(&Retire{Now: s.h.Tick(), Instance: s.in[3], Reason: "gone"})
		}, plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[2]), agPlace(s.a, 3, 2, 1, s.in[3])}}
		}},
		{name: "a leaving instance", prep: func(s setup) {
			s.h.Must(&Plan{Now: s.h.Tick(), Reserve: true, Placements: []Placement{agPlace(s.a, 5, 1, 1, s.in[3])}})
			s.h.Must(&Events{Now: s.h.Tick(), Events: []Event{{Instance: s.in[3], Batch: s.a, Job: 5, Attempt: 1, Outcome: OutcomePreempted, Leaving: true, Start: s.h.Now, End: s.h.Now}}})
		}, plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[2]), agPlace(s.a, 3, 2, 1, s.in[3])}}
		}},
		{name: "a disabled cluster", prep: func(s setup) {
			s.h.Must(&SetCluster{Now: s.h.Tick(), Name: "c2", Disabled: true, Reason: "x"})
		}, plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[2]), agPlace(s.a, 3, 2, 1, s.in[3])}}
		}},
		{name: "two clusters", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 2, 1, s.in[2])}}
		}},
		{name: "two pools of a pool gang", uniform: "pool", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 2, 1, s.in[1])}}
		}},
		{name: "two racks of a rack gang", uniform: "label:rack", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 2, 1, s.in[1])}}
		}},
		{name: "a worker without the label", uniform: "label:zone", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[2]), agPlace(s.a, 3, 2, 1, s.in[3])}}
		}},
		{name: "one part on the wrong attempt", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 2, 2, s.in[1])}}
		}},
		{name: "too many on one instance", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 3, 1, s.in[0]), agPlace(s.a, 4, 1, 1, s.in[1])}}
		}},
		{name: "room only in total: a plain job first", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 5, 1, 1, s.in[0]), agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 2, 1, s.in[1])}}
		}},
		{name: "room only in total: a plain job inside the gang's placements", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 5, 1, 1, s.in[0]), agPlace(s.a, 3, 2, 1, s.in[1])}}
		}},
		{name: "room only in total: two gangs interleaved on the same instances", plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.c, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 2, 1, s.in[1]), agPlace(s.c, 3, 2, 1, s.in[1])}}
		}},
		{name: "zero-count placements among the gang's", want: 4, plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 0, 1, s.in[2]), agPlace(s.a, 3, 2, 1, s.in[1])}}
		}},
		{name: "the whole gang twice", want: -1, plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 1, 2, 1, s.in[0]), agPlace(s.a, 3, 2, 1, s.in[1]), agPlace(s.a, 1, 2, 1, s.in[2]), agPlace(s.a, 3, 2, 1, s.in[3])}}
		}},
		{name: "members out of order", want: 4, plans: func(s setup) [][]Placement {
			return [][]Placement{{agPlace(s.a, 3, 2, 1, s.in[1]), agPlace(s.a, 1, 2, 1, s.in[0])}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mk(t, c.uniform)
			if c.prep != nil {
				c.prep(s)
			}
			for i, ps := range c.plans(s) {
				s.h.Must(&Plan{Now: s.h.Tick(), Reserve: true, Placements: ps})
				agAllOrNone(t, s.h, fmt.Sprintf("plan %d", i), s.a, 1, 4)
				agAllOrNone(t, s.h, fmt.Sprintf("plan %d", i), s.c, 1, 4)
			}
			n := 0
			for id := uint32(1); id <= 4; id++ {
				if s.h.JobState(s.a, id) == Running {
					n++
				}
			}
			if c.want >= 0 && n != c.want {
				t.Fatalf("%d members of the gang run, want %d", n, c.want)
			}
			s.h.Restored()
		})
	}
}

// TestAttackGangRetryAfterDeath: a gang whose member failed for good (the
// others cancelled) is retried in part, as `drover batch retry --state
// failed` (or naming one job) does: the gang must not start in part. A
// member run alone is exactly what gang = true promises never happens.
func TestAttackGangRetryAfterDeath(t *testing.T) {
	for _, c := range []struct {
		name   string
		states uint16
		jobs   []Range
	}{
		{"the failed member", RetryStates(Failed), nil},
		{"the cancelled members", RetryStates(Cancelled), nil},
		{"one cancelled member by ID", RetryStates(Failed, Cancelled), []Range{{3, 3}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, in := agHarness(t, agWorker{"a1", "c1", "p", nil}, agWorker{"a2", "c1", "p", nil})
			b := h.CreateBatch(entry(1, 4, agGang(4, 0, "")))
			h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: []Placement{agPlace(b, 1, 2, 1, in[0]), agPlace(b, 3, 2, 1, in[1])}})
			ev := func(job, inst uint32, o Outcome) Event {
				return Event{Instance: inst, Batch: b, Job: job, Attempt: 1, Outcome: o, Start: h.Now, End: h.Now}
			}
			// Member 2 fails for good (no retries); the others stop and
			// are cancelled.
			h.Must(&Events{Now: h.Tick(), Events: []Event{ev(2, in[0], OutcomeFailed)}})
			h.Must(&Events{Now: h.Tick(), Events: []Event{ev(1, in[0], OutcomePreempted), ev(3, in[1], OutcomePreempted), ev(4, in[1], OutcomePreempted)}})
			for id, want := range map[uint32]JobState{1: Cancelled, 2: Failed, 3: Cancelled, 4: Cancelled} {
				if st := h.JobState(b, id); st != want {
					t.Fatalf("member %d is %s, want %s", id, st, want)
				}
			}
			res := h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: c.states, Jobs: c.jobs}).(*RetryResult)
			var ready []uint32
			for id := uint32(1); id <= 4; id++ {
				if h.JobState(b, id) == Ready {
					ready = append(ready, id)
				}
			}
			if len(ready) == 0 || len(ready) == 4 {
				return // the whole gang again, or none of it
			}
			// Part of the gang is Ready again: it must not start as it is.
			var ok bool
			var members []ReadyRange
			h.S.Read(func(r Reader) { members, _, ok = r.GangReady(r.Batch(b), ready[0]) })
			var ps []Placement
			k := 0
			for _, m := range members {
				for id := m.Lo; id <= m.Hi; id++ {
					ps = append(ps, agPlace(b, id, 1, m.Attempt, in[k/2]))
					k++
				}
			}
			placed := 0
			if len(ps) > 0 {
				placed = h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: ps}).(*PlanResult).Placed
			}
			if ok || placed > 0 {
				t.Fatalf("retried %d: members %v of the gang of 4 are Ready (the rest final, not succeeded); GangReady says it may start (%v) and apply placed %d of them alone",
					res.Retried, ready, ok, placed)
			}
		})
	}
}

// TestAttackGangPreemptedRestartsWhole: a member preempted by the queue
// preemption round (or `job restart`) stops the others; nothing counts as
// a failure; the stop orders survive a snapshot; the gang starts again
// whole on the next attempt; a second restart of a member already told
// to stop is ignored.
func TestAttackGangPreemptedRestartsWhole(t *testing.T) {
	h, in := agHarness(t, agWorker{"a1", "c1", "p", nil}, agWorker{"a2", "c1", "p", nil})
	b := h.CreateBatch(entry(1, 4, agGang(4, 0, "")))
	h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: []Placement{agPlace(b, 1, 2, 1, in[0]), agPlace(b, 3, 2, 1, in[1])}})
	res := h.Must(&Preempt{Now: h.Tick(), Attempts: []PreemptAttempt{{AttemptID{b, 3, 1}, "restarted by root"}}}).(*PreemptResult)
	if res.Stopping != 1 {
		t.Fatalf("preempt: %+v", res)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[1], Batch: b, Job: 3, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now}}})
	// The others are told to stop, and still are after a restore (a new
	// leader).
	restored := h.Restored()
	for _, s := range []*State{h.S, restored} {
		v0 := s.WorkerView(in[0], []AttemptID{{b, 1, 1}, {b, 2, 1}})
		v1 := s.WorkerView(in[1], []AttemptID{{b, 4, 1}})
		if len(v0.Preempt) != 2 || len(v1.Preempt) != 1 {
			t.Fatalf("stop orders %+v %+v; want members 1, 2 and 4 told", v0.Preempt, v1.Preempt)
		}
	}
	// A restart of a member already stopping changes nothing.
	if res := h.Must(&Preempt{Now: h.Tick(), Attempts: []PreemptAttempt{{AttemptID{b, 1, 1}, "again"}}}).(*PreemptResult); res.Stopping != 0 {
		t.Fatalf("a second order: %+v", res)
	}
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: in[0], Batch: b, Job: 1, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
		{Instance: in[0], Batch: b, Job: 2, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
		{Instance: in[1], Batch: b, Job: 4, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
	}})
	bt := h.Batch(b)
	for id := uint32(1); id <= 4; id++ {
		if st := h.JobState(b, id); st != Ready || bt.jobs[id-1].failures != 0 {
			t.Fatalf("member %d: %s, %d failures", id, st, bt.jobs[id-1].failures)
		}
	}
	if res := h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: []Placement{agPlace(b, 1, 2, 2, in[1]), agPlace(b, 3, 2, 2, in[0])}}).(*PlanResult); res.Placed != 4 {
		t.Fatalf("the gang again: %+v", res)
	}
	h.Restored()
}

// TestAttackGangLostWithWorker: a worker holding two members retires (its
// attempts lost): the members elsewhere are told to stop; the gang comes
// back whole. With max_lost 1 the lost members end Error and the rest
// are cancelled as they stop: nothing is left Ready or Running, and the
// batch completes.
func TestAttackGangLostWithWorker(t *testing.T) {
	for _, maxLost := range []uint8{0, 1} {
		t.Run(fmt.Sprint("max_lost ", maxLost), func(t *testing.T) {
			h, in := agHarness(t, agWorker{"a1", "c1", "p", nil}, agWorker{"a2", "c1", "p", nil}, agWorker{"a3", "c1", "p", nil})
			b := h.CreateBatch(entry(1, 4, agGang(4, 0, "")))
			h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: []Placement{agPlace(b, 1, 2, 1, in[0]), agPlace(b, 3, 2, 1, in[1])}})
			h.Must(&Retire{Now: h.Tick(), Instance: in[0], Reason: "lost", MaxLost: maxLost})
			v := h.S.WorkerView(in[1], []AttemptID{{b, 3, 1}, {b, 4, 1}})
			if len(v.Preempt) != 2 {
				t.Fatalf("the members on a2 are told %+v", v.Preempt)
			}
			h.Restored()
			h.Must(&Events{Now: h.Tick(), Events: []Event{
				{Instance: in[1], Batch: b, Job: 3, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
				{Instance: in[1], Batch: b, Job: 4, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
			}})
			if maxLost == 1 {
				for id, want := range map[uint32]JobState{1: Error, 2: Error, 3: Cancelled, 4: Cancelled} {
					if st := h.JobState(b, id); st != want {
						t.Fatalf("member %d is %s, want %s", id, st, want)
					}
				}
				if h.Batch(b).Completed == 0 {
					t.Fatal("the batch is not complete")
				}
				return
			}
			if res := h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: []Placement{agPlace(b, 1, 2, 2, in[1]), agPlace(b, 3, 2, 2, in[2])}}).(*PlanResult); res.Placed != 4 {
				t.Fatalf("the gang again: %+v", res)
			}
			h.Restored()
		})
	}
}

// TestAttackGangCancelWhileStopping: a member failed (with a retry), the
// others are stopping; its job group (or its batch) is cancelled: the
// Ready member is cancelled, the stopping ones end cancelled whatever
// they report, the counts hold and the batch completes.
func TestAttackGangCancelWhileStopping(t *testing.T) {
	for _, how := range []string{"group", "batch"} {
		t.Run(how, func(t *testing.T) {
			h, in := agHarness(t, agWorker{"a1", "c1", "p", nil}, agWorker{"a2", "c1", "p", nil})
			b := h.Must(&CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default", Groups: []JobGroupDecl{{Path: "mpi"}},
				Jobs: []JobEntry{entry(1, 4, inGroup(agGang(4, 3, ""), 1)), entry(5, 1, spec("plain", 1))}}).(*UpdateResult).Batch
			h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: []Placement{agPlace(b, 1, 2, 1, in[0]), agPlace(b, 3, 2, 1, in[1])}})
			h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[0], Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now}}})
			if how == "group" {
				h.Must(&CancelJobGroup{Now: h.Tick(), Batch: b, Group: 1, Reason: "x"})
			} else {
				h.Must(&CancelBatch{Now: h.Tick(), Batch: b, Reason: "x"})
			}
			h.Restored()
			h.Must(&Events{Now: h.Tick(), Events: []Event{
				{Instance: in[0], Batch: b, Job: 2, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
				{Instance: in[1], Batch: b, Job: 3, Attempt: 1, Outcome: OutcomeFailed, Exit: 137, Start: h.Now, End: h.Now},
				{Instance: in[1], Batch: b, Job: 4, Attempt: 1, Outcome: OutcomeSuccess, Start: h.Now, End: h.Now},
			}})
			for id := uint32(1); id <= 4; id++ {
				if st := h.JobState(b, id); !st.Final() {
					t.Fatalf("member %d is %s", id, st)
				}
			}
			if how == "group" {
				if g := groupByPath(t, h, b, "mpi"); g.Completed == 0 || g.Count(Running)+g.Count(Ready) != 0 {
					t.Fatalf("group: %+v", g)
				}
				h.Schedule()
				h.Complete(in[0], nil)
				h.Complete(in[1], nil)
			}
			if h.Batch(b).Completed == 0 {
				t.Fatalf("the batch is not complete: %v", h.Batch(b).counts)
			}
			h.Restored()
		})
	}
}

// TestAttackGangRetryWhileStopping: the member that failed for good is
// retried while the others are still stopping: they come back Ready
// (the gang is whole again), and it starts whole.
func TestAttackGangRetryWhileStopping(t *testing.T) {
	h, in := agHarness(t, agWorker{"a1", "c1", "p", nil}, agWorker{"a2", "c1", "p", nil})
	b := h.CreateBatch(entry(1, 4, agGang(4, 0, "")))
	h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: []Placement{agPlace(b, 1, 2, 1, in[0]), agPlace(b, 3, 2, 1, in[1])}})
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[0], Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Now}}})
	h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Failed)})
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: in[0], Batch: b, Job: 2, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
		{Instance: in[1], Batch: b, Job: 3, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
		{Instance: in[1], Batch: b, Job: 4, Attempt: 1, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
	}})
	for id := uint32(1); id <= 4; id++ {
		if st := h.JobState(b, id); st != Ready {
			t.Fatalf("member %d is %s", id, st)
		}
	}
	if res := h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: []Placement{agPlace(b, 1, 2, 2, in[0]), agPlace(b, 3, 2, 2, in[1])}}).(*PlanResult); res.Placed != 4 {
		t.Fatalf("the gang again: %+v", res)
	}
	h.Restored()
}

// TestAttackGangLivelockAttempts: a member that keeps being lost (no
// max_lost) restarts the whole gang each time: the attempts of every
// member are bounded (MaxAttemptsPerJob), so the gang ends, and the
// state stays consistent all the way.
func TestAttackGangLivelockAttempts(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	h, in := agHarness(t, agWorker{"a1", "c1", "p", nil}, agWorker{"a2", "c1", "p", nil})
	b := h.CreateBatch(entry(1, 4, agGang(4, 0, "")))
	h.T = quietTB{t} // a thousand rounds: the invariant checks stay on
	for round := 1; round <= MaxAttemptsPerJob+2; round++ {
		var ps []Placement
		h.S.Read(func(r Reader) {
			members, _, ok := r.GangReady(r.Batch(b), 1)
			if !ok {
				return
			}
			for _, m := range members {
				ps = append(ps, agPlace(b, m.Lo, m.Len(), m.Attempt, in[0]))
			}
		})
		if len(ps) == 0 {
			break
		}
		// Two on each worker.
		ps = []Placement{agPlace(b, 1, 2, ps[0].Attempt, in[0]), agPlace(b, 3, 2, ps[0].Attempt, in[1])}
		if res := h.Must(&Plan{Now: h.Tick(), Reserve: true, Placements: ps}).(*PlanResult); res.Placed != 4 {
			t.Fatalf("round %d: %+v", round, res)
		}
		at := ps[0].Attempt
		h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: in[0], Batch: b, Job: 1, Attempt: at, Outcome: OutcomePreempted, Start: h.Now, End: h.Now}}})
		h.Must(&Events{Now: h.Tick(), Events: []Event{
			{Instance: in[0], Batch: b, Job: 2, Attempt: at, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
			{Instance: in[1], Batch: b, Job: 3, Attempt: at, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
			{Instance: in[1], Batch: b, Job: 4, Attempt: at, Outcome: OutcomePreempted, Start: h.Now, End: h.Now},
		}})
	}
	if h.Batch(b).Completed == 0 {
		t.Fatalf("the gang never ended: %v", h.Batch(b).counts)
	}
}

// quietTB is a testing.T for the harness (the same checks, no logs).
type quietTB struct{ *testing.T }
