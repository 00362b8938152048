package view_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// BenchmarkSchedulingRound builds the scheduling view, adapts it to the
// scheduler's input and runs a round with 10,000 ready jobs of 100 users on 500 instances.
func BenchmarkSchedulingRound(b *testing.B) {
	s := state.New()
	s.Apply(1, &state.Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"})
	for i := 0; i < 500; i++ {
		s.Apply(2, &state.Activate{Now: 1, Name: fmt.Sprint("w", i), CPUMilli: 64000, Memory: 256 << 30, TokenHash: fmt.Sprint("t", i)})
	}
	for u := 0; u < 100; u++ {
		name := fmt.Sprint("u", u)
		s.Apply(3, &state.CreateUser{Now: 1, Name: name, TokenHash: "h" + name})
		s.Apply(3, &state.SetMember{Project: "default", User: name, Member: true})
		s.Apply(4, &state.CreateBatch{Now: 1, User: name, BillingProject: "default", Jobs: []state.JobEntry{
			{First: 1, Count: 100, Spec: &state.Spec{Name: "a", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}},
		}})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := scheduler.Schedule(view.Scheduling(s, view.Options{Now: time.Now().UnixNano(), MaxJobs: 20000, Unbounded: true}).Input)
		if out.Jobs != 10_000 {
			b.Fatalf("placed %d", out.Jobs)
		}
	}
}

// BenchmarkSchedulingRoundFederated is the first round of bench sched's
// federated load: 500 users in 50 teams (each with a cpu quota of an even
// split of the fleet), 2,000 distinct jobs of mixed sizes each, 500
// workers of 64 cores in 5 regions × 4 clusters. It builds the view (as
// the leader does, bounded by fair share) and decides.
func BenchmarkSchedulingRoundFederated(b *testing.B) {
	s := federatedLoad(b, 500, 2000, 50, 500, 5, 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := scheduler.Schedule(view.Scheduling(s, view.Options{Now: time.Now().UnixNano(), MaxJobs: 20000}).Input)
		if out.Jobs == 0 {
			b.Fatal("placed nothing")
		}
	}
}

// federatedLoad builds a state like bench sched -users -teams -regions
// -clusters does, with every job ready and every worker idle.
func federatedLoad(tb testing.TB, users, jobs, teams, workers, regions, clusters int) *state.State {
	s := state.New()
	var idx uint64
	must := func(c state.Command) {
		idx++
		if err, ok := s.Apply(idx, c).(error); ok && err != nil {
			tb.Fatalf("%T: %v", c, err)
		}
	}
	must(&state.Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"})
	for i := 0; i < workers; i++ {
		k := i % (regions * clusters)
		must(&state.Activate{Now: 1, Name: fmt.Sprint("w", i), NodeID: fmt.Sprint("n", i), CPUMilli: 64000, Memory: 64 << 30, TokenHash: fmt.Sprint("t", i),
			Region: fmt.Sprintf("r%d", k/clusters), Cluster: fmt.Sprintf("r%d-c%d", k/clusters, k%clusters)})
	}
	for u := 0; u < users; u++ {
		must(&state.CreateUser{Now: 1, Name: fmt.Sprint("u", u), TokenHash: fmt.Sprint("hu", u)})
	}
	quota := int64(workers) * 64000 / int64(teams)
	for t := 0; t < teams; t++ {
		var members []string
		for u := t; u < users; u += teams {
			members = append(members, fmt.Sprint("u", u))
		}
		project := fmt.Sprintf("team-%02d", t)
		must(&state.CreateBillingProject{Now: 1, Name: project, Members: members})
		must(&state.SetTeam{Now: 1, Team: state.Team{Name: project, Projects: []string{project}, QuotaMilli: quota}})
	}
	sizes := []int64{250, 500, 1000, 2000, 4000, 8000, 16000}
	rng := rand.New(rand.NewPCG(1, 7))
	for u := 0; u < users; u++ {
		entries := make([]state.JobEntry, jobs)
		for j := range entries {
			cpu := sizes[rng.IntN(len(sizes))]
			mem := int64(float64(cpu)*float64(1<<30)/1000*(0.25+0.75*rng.Float64())) &^ (1<<20 - 1)
			entries[j] = state.JobEntry{First: uint32(j + 1), Count: 1, Spec: &state.Spec{Name: fmt.Sprint("job-", j+1),
				Command: []string{"true", fmt.Sprint(j + 1)}, CPUMilli: cpu, Memory: max(mem, 1<<20)}}
		}
		must(&state.CreateBatch{Now: 1, User: fmt.Sprint("u", u), Name: "bench", BillingProject: fmt.Sprintf("team-%02d", u%teams), Jobs: entries})
	}
	return s
}

// BenchmarkSchedulingRoundFederatedBusy is a round of the same load once
// the fleet is full and a few jobs ended: few cores are free, in small
// holes, and most of every user's queue is larger than any hole (the
// rounds of a steady state, where bench sched spends most of its time).
func BenchmarkSchedulingRoundFederatedBusy(b *testing.B) {
	s := federatedLoad(b, 500, 2000, 50, 500, 5, 4)
	idx := uint64(1 << 20)
	var placed []state.Placement
	for {
		out := scheduler.Schedule(view.Scheduling(s, view.Options{Now: time.Now().UnixNano(), MaxJobs: 20000}).Input)
		if out.Jobs == 0 {
			break
		}
		p := leader.PlanOf(out, 2)
		idx++
		s.Apply(idx, p)
		placed = append(placed, p.Placements...)
	}
	// End one placement in 50.
	var ev []state.Event
	for i := 0; i < len(placed); i += 50 {
		pl := placed[i]
		for j := uint32(0); j < pl.Count; j++ {
			ev = append(ev, state.Event{Instance: pl.Instance, Batch: pl.Batch, Job: pl.First + j, Attempt: pl.Attempt, Outcome: state.OutcomeSuccess, Start: 2, End: 3})
		}
	}
	idx++
	s.Apply(idx, &state.Events{Now: 3, Events: ev})
	b.ResetTimer()
	var runs int
	for i := 0; i < b.N; i++ {
		in := view.Scheduling(s, view.Options{Now: time.Now().UnixNano(), MaxJobs: 20000}).Input
		runs = 0
		for _, u := range in.Users {
			runs += len(u.Runs)
		}
		scheduler.Schedule(in)
	}
	b.ReportMetric(float64(runs), "runs")
}

// BenchmarkSchedulingRoundQueues is the first round of bench sched
// -queues: 1,000 users, one in each leaf of a 10 x 10 x 10 tree (each
// leaf its own billing project, guaranteed 80% of an even split),
// 1,000 distinct jobs each, 500 workers of 64 cores; Flat is the same
// load with no tree.
func BenchmarkSchedulingRoundQueues(b *testing.B) { benchQueueRound(b, true) }

func BenchmarkSchedulingRoundQueuesFlat(b *testing.B) { benchQueueRound(b, false) }

func benchQueueRound(b *testing.B, tree bool) {
	s := state.New()
	var idx uint64
	must := func(c state.Command) {
		idx++
		if err, ok := s.Apply(idx, c).(error); ok && err != nil {
			b.Fatalf("%T: %v", c, err)
		}
	}
	must(&state.Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"})
	for i := range 500 {
		must(&state.Activate{Now: 1, Name: fmt.Sprint("w", i), NodeID: fmt.Sprint("n", i), CPUMilli: 64000, Memory: 256 << 30, TokenHash: fmt.Sprint("t", i)})
	}
	leaf := int64(500*64000*8/10) / 1000
	var queues []state.Queue
	for u := range 1000 {
		name := fmt.Sprint("u", u)
		must(&state.CreateUser{Now: 1, Name: name, TokenHash: "h" + name})
		project := fmt.Sprintf("q-%03d", u)
		must(&state.CreateBillingProject{Now: 1, Name: project, Members: []string{name}})
		o, p, t := u/100, u/10%10, u%10
		if p == 0 && t == 0 {
			queues = append(queues, state.Queue{Queue: placement.Queue{Path: fmt.Sprint("o", o), Guarantee: placement.Resources{CPUMilli: leaf * 100}}})
		}
		if t == 0 {
			queues = append(queues, state.Queue{Queue: placement.Queue{Path: fmt.Sprint("o", o, "/p", p), Guarantee: placement.Resources{CPUMilli: leaf * 10}}})
		}
		queues = append(queues, state.Queue{Queue: placement.Queue{Path: fmt.Sprint("o", o, "/p", p, "/t", t), Weight: int64(10 - t),
			Guarantee: placement.Resources{CPUMilli: leaf}}, Projects: []string{project}})
	}
	if tree {
		must(&state.ApplyPlacement{Now: 1, Queues: queues})
	}
	sizes := []int64{250, 500, 1000, 2000, 4000}
	rng := rand.New(rand.NewPCG(1, 7))
	for u := range 1000 {
		entries := make([]state.JobEntry, 1000)
		for j := range entries {
			cpu := sizes[rng.IntN(len(sizes))]
			entries[j] = state.JobEntry{First: uint32(j + 1), Count: 1, Spec: &state.Spec{Name: fmt.Sprint("job-", j+1),
				Command: []string{"true", fmt.Sprint(j + 1)}, CPUMilli: cpu, Memory: cpu << 20}}
		}
		must(&state.CreateBatch{Now: 1, User: fmt.Sprint("u", u), Name: "bench", BillingProject: fmt.Sprintf("q-%03d", u), Jobs: entries})
	}
	b.ResetTimer()
	for b.Loop() {
		out := scheduler.Schedule(view.Scheduling(s, view.Options{Now: time.Now().UnixNano(), MaxJobs: 20000}).Input)
		if out.Jobs == 0 {
			b.Fatal("placed nothing")
		}
	}
}

// BenchmarkPlaceEstimate is job why's read of a Ready job whose user runs
// 32,000 distinct jobs (a group each, so each slot's run time is its own
// group's) on 500 workers, with 32,000 more of them waiting: the read
// holds the state's read lock, so it must stay short however many
// distinct jobs a user runs (view.Place reads at most runGroups groups).
func BenchmarkPlaceEstimate(b *testing.B) {
	s := state.New()
	s.Apply(1, &state.Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"})
	for i := 0; i < 500; i++ {
		s.Apply(2, &state.Activate{Now: 1, Name: fmt.Sprint("w", i), CPUMilli: 64000, Memory: 256 << 30, TokenHash: fmt.Sprint("t", i)})
	}
	const n = 64_000
	entries := make([]state.JobEntry, n)
	for i := range entries {
		entries[i] = state.JobEntry{First: uint32(i + 1), Count: 1, Spec: &state.Spec{Name: fmt.Sprint("j", i), Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 20}}
	}
	s.Apply(3, &state.CreateBatch{Now: 1, User: "root", BillingProject: "default", Jobs: entries})
	now := time.Now().UnixNano()
	placed := 0
	for round := 0; placed < 32_000 && round < 10; round++ {
		out := scheduler.Schedule(view.Scheduling(s, view.Options{Now: now, MaxJobs: n, Unbounded: true}).Input)
		var ps []state.Placement
		for _, p := range out.Placements {
			ps = append(ps, state.Placement{Batch: p.Batch, First: p.First, Count: p.Count, Attempt: p.Attempt, Instance: p.Instance})
		}
		res := s.Apply(uint64(4+round), &state.Plan{Now: now, Placements: ps}).(*state.PlanResult)
		placed += res.Placed
	}
	if placed != 32_000 {
		b.Fatalf("placed %d jobs, want 32,000", placed)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var jp view.JobPlace
		s.Read(func(r state.Reader) { jp, _ = view.Place(r, 1, n, now) })
		if jp.State != state.Ready || jp.Estimate.Slots != 32_000 {
			b.Fatalf("job %d is %s with %d slots", n, jp.State, jp.Estimate.Slots)
		}
	}
}
