package view

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

func spec(name string, cpu float64) *state.Spec {
	return &state.Spec{Name: name, Command: []string{"true"}, CPUMilli: int64(cpu * 1000), Memory: 1 << 30}
}

func entry(first, count uint32, s *state.Spec) state.JobEntry {
	return state.JobEntry{First: first, Count: count, Spec: s}
}

// distinct returns n entries of one job each, every one its own spec (the
// jobs of bench sched -users), of cpu cores.
func distinct(n int, cpu func(i int) float64) []state.JobEntry {
	out := make([]state.JobEntry, n)
	for i := range out {
		out[i] = entry(uint32(i+1), 1, spec(fmt.Sprint("j", i), cpu(i)))
	}
	return out
}

func activateIn(h *state.Harness, name, region, cluster string, cores int64) uint32 {
	h.T.Helper()
	res := h.Must(&state.Activate{Now: h.Tick(), Name: name, CPUMilli: cores * 1000, Memory: cores << 30, TokenHash: "tok-" + name,
		NodeID: "node-" + name, Region: region, Cluster: cluster})
	return res.(*state.ActivateResult).Instance
}

func place(b uint64, first, count uint32, inst uint32) state.Placement {
	return state.Placement{Batch: b, First: first, Count: count, Attempt: 1, Instance: inst}
}

func runsOf(in *scheduler.Input) []scheduler.Run {
	var runs []scheduler.Run
	for _, u := range in.Users {
		runs = append(runs, u.Runs...)
	}
	return runs
}

// TestViewDoesNotLetOneRegionBlockAnother: a user whose queue starts with
// jobs restricted to a region with no free cores still has the jobs behind
// them, restricted to another region, listed for the round (the region
// deadlock of Hail Batch).
func TestViewDoesNotLetOneRegionBlockAnother(t *testing.T) {
	h := state.NewHarness(t, nil)
	a := activateIn(h, "wa", "east", "a", 4)
	activateIn(h, "wb", "west", "b", 4)
	east, west := spec("e", 1), spec("w", 1)
	east.Where, west.Where = &state.Where{Regions: []string{"east"}}, &state.Where{Regions: []string{"west"}}
	fill := h.CreateBatch(entry(1, 4, spec("fill", 1)))
	h.Must(&state.Plan{Now: h.Tick(), Placements: []state.Placement{place(fill, 1, 4, a)}})
	// 20,000 east-only jobs, then 4 west-only ones.
	be := h.CreateBatch(entry(1, 20000, east))
	bw := h.CreateBatch(entry(1, 4, west))
	for _, o := range []Options{{Now: h.Now, MaxJobs: 100, Unbounded: true}, {Now: h.Now, MaxJobs: 100}} {
		in := Scheduling(h.S, o).Input
		found, sawEast := false, false
		for _, r := range runsOf(in) {
			if r.Batch == bw && r.Count == 4 {
				found = true
			}
			if r.Batch == be {
				sawEast = true
			}
		}
		if !found || !sawEast {
			t.Fatalf("%+v: the view lists west jobs %v and east jobs (for their reason) %v: %+v", o, found, sawEast, in.Users)
		}
		if out := scheduler.Schedule(in); out.Jobs != 4 {
			t.Fatalf("%+v: the round placed %d jobs, want the 4 west ones", o, out.Jobs)
		}
	}
}

// TestViewPassesOneRunATeamQuotaBlocks: a team at its quota has every run
// blocked for the same reason; the view passes one to be explained, not
// one per job, and still lists a smaller job the team has room for.
func TestViewPassesOneRunATeamQuotaBlocks(t *testing.T) {
	h := state.NewHarness(t, nil)
	w := activateIn(h, "w", "east", "a", 64)
	h.Must(&state.SetTeam{Now: h.Tick(), Team: state.Team{Name: "genomics", Projects: []string{"default"}, QuotaMilli: 2500}})
	fill := h.CreateBatch(entry(1, 2, spec("fill", 1)))
	h.Must(&state.Plan{Now: h.Tick(), Placements: []state.Placement{place(fill, 1, 2, w)}})
	// 0.5 cores of quota left: 200 one-core jobs but the 11th, a quarter
	// of a core.
	b := h.CreateBatch(distinct(200, func(i int) float64 { return map[bool]float64{true: 0.25, false: 1}[i == 10] })...)
	in := Scheduling(h.S, Options{Now: h.Now}).Input
	runs := runsOf(in)
	if len(runs) != 2 || runs[0].Batch != b || runs[0].First != 1 || runs[1].First != 11 {
		t.Fatalf("runs %+v: want the first blocked job (to explain) and the small one that fits the quota", runs)
	}
	if len(in.Queues) != 1 || runs[0].Queue != 1 || in.Queues[0].Quota.CPUMilli != 2500 || in.Queues[0].Quota.UsedMilli != 2000 ||
		in.Queues[0].Quota.UsedByCluster[0] != 2000 {
		t.Fatalf("queues %+v", in.Queues)
	}
	// With no quota left at all, the rest of the batch is not read.
	h.Must(&state.Plan{Now: h.Tick(), Placements: []state.Placement{place(b, 11, 1, w)}})
	h.Must(&state.SetTeam{Now: h.Tick(), Team: state.Team{Name: "genomics", QuotaMilli: 2250}, QuotaOnly: true})
	in = Scheduling(h.S, Options{Now: h.Now}).Input
	if n := len(in.Users[0].Runs); n != 1 {
		t.Fatalf("%d runs listed for a team with no quota left, want 1", n)
	}
}

// TestViewListsFewRunsForUsersWithNoShare: once fair share gives a user
// nothing this round, its list holds a few runs (for leftovers), not the
// 16 a user with a share gets; and the shares the view bounded the lists
// by are the ones the scheduler uses (fair share is computed once).
func TestViewListsFewRunsForUsersWithNoShare(t *testing.T) {
	h := state.NewHarness(t, nil)
	busy := activateIn(h, "w1", "east", "a", 64)
	activateIn(h, "w2", "east", "a", 64)
	h.Must(&state.CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "h-alice"})
	h.Must(&state.SetMember{Project: "default", User: "alice", Member: true})
	// alice runs 64 cores; 64 are free, and root, running nothing, has
	// more Ready than that: fair share gives root all 64 and alice none.
	fill := h.Must(&state.CreateBatch{Now: h.Tick(), User: "alice", BillingProject: "default", Name: "fill", Jobs: []state.JobEntry{entry(1, 64, spec("f", 1))}}).(*state.UpdateResult).Batch
	h.Must(&state.Plan{Now: h.Tick(), Placements: []state.Placement{place(fill, 1, 64, busy)}})
	h.CreateBatch(distinct(100, func(i int) float64 { return float64(1 + i%3) })...)
	h.Must(&state.CreateBatch{Now: h.Tick(), User: "alice", BillingProject: "default", Name: "a", Jobs: distinct(100, func(i int) float64 { return float64(1 + i%3) })})
	in := Scheduling(h.S, Options{Now: h.Now}).Input
	got, shares := map[string]int{}, map[string]int64{}
	for i, u := range in.Users {
		got[u.Name], shares[u.Name] = len(u.Runs), in.Shares[i]
	}
	if shares["root"] != 64000 || shares["alice"] != 0 {
		t.Fatalf("shares %v, want root 64 cores and alice none", shares)
	}
	if got["alice"] != minRunsNoShare || got["root"] < minRunsPerUser {
		t.Fatalf("runs listed %v: alice (no share) %d, root at least %d", got, minRunsNoShare, minRunsPerUser)
	}
	out := scheduler.Schedule(in)
	for i, u := range out.Users {
		if u.Share != in.Shares[i] {
			t.Fatalf("the scheduler's share of %s is %d, the view's %d", u.Name, u.Share, in.Shares[i])
		}
	}
	if want := scheduler.Shares(in); fmt.Sprint(want) != fmt.Sprint(in.Shares) {
		t.Fatalf("view's shares %v, the scheduler's rule gives %v", in.Shares, want)
	}
}

// TestViewReadsClustersGroupsAndLiveness: the input carries the clusters
// (disabled ones with who, why and since), their groups, each cluster's
// capacity and free cores, and marks down a cluster all of whose workers
// are silent; the shares count only cores in clusters that take work.
func TestViewReadsClustersGroupsAndLiveness(t *testing.T) {
	h := state.NewHarness(t, nil)
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Groups: []state.ClusterGroup{{Name: "gpu", Strategy: "pack"}},
		Clusters: []state.Cluster{{Name: "a", Region: "east", Group: "gpu"}, {Name: "b", Region: "west"}, {Name: "c", Region: "west"}}})
	wa := activateIn(h, "wa", "east", "a", 8)
	wb := activateIn(h, "wb", "west", "b", 4)
	activateIn(h, "wc", "west", "c", 2)
	h.Must(&state.SetCluster{Now: h.Tick(), Name: "c", Disabled: true, Reason: "maintenance", By: "ops"})
	h.CreateBatch(entry(1, 100, spec("j", 1)))
	rd := Scheduling(h.S, Options{Now: h.Now, Silent: func(inst uint32) bool { return inst == wb }})
	in := rd.Input
	if len(in.Groups) != 1 || in.Groups[0].Strategy != "pack" || len(in.Clusters) != 3 || in.Clusters[0].Group != 1 || in.Clusters[1].Group != 0 {
		t.Fatalf("groups %+v clusters %+v", in.Groups, in.Clusters)
	}
	a, b, c := in.Clusters[0], in.Clusters[1], in.Clusters[2]
	if a.Down || !b.Down || c.Down || !c.Disabled || a.CapacityMilli != 8000 || a.FreeMilli != 8000 || b.FreeMilli != 4000 {
		t.Fatalf("clusters %+v", in.Clusters)
	}
	if r := rd.Records[2]; r.Name != "c" || r.Reason != "maintenance" || r.By != "ops" || r.Since == 0 {
		t.Fatalf("records %+v", rd.Records)
	}
	if len(in.Shares) != 1 || in.Shares[0] != 8000 {
		t.Fatalf("shares %v: want the 8 cores of a (b is down, c disabled)", in.Shares)
	}
	if out := scheduler.Schedule(in); out.Jobs != 8 || out.Placements[0].Instance != wa {
		t.Fatalf("placed %d (%+v), want 8 on a", out.Jobs, out.Placements)
	}
}

// TestViewKeepsDrainingAndPrivateMachinesOut: the worker of a machine
// being drained is not in the scheduler's input (the autoscaler's input
// lists its room apart), and jobs that want a machine of their own are
// the autoscaler's, not the scheduler's.
func TestViewKeepsDrainingAndPrivateMachinesOut(t *testing.T) {
	h := state.NewHarness(t, nil)
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Clusters: []state.Cluster{{Name: "a", Region: "east"}},
		Autoscaler: &state.Autoscaler{Enabled: true, MaxPerHour: 10 * money.DollarPerHour, Backoff: int64(time.Minute), MaxBackoff: int64(4 * time.Minute)},
		LaunchConfigs: []state.LaunchConfig{
			{Name: "small", Cluster: "a", MachineType: "n2-8", Zone: "east-b", CPUMilli: 8000, Memory: 32 << 30, PricePerHour: 300_000_000},
			{Name: "big", Cluster: "a", MachineType: "n2-highmem-16", Zone: "east-b", CPUMilli: 16000, Memory: 128 << 30, PricePerHour: 900_000_000},
		}})
	req := h.Must(&state.Scale{Now: h.Tick(), Launches: []state.ScaleLaunch{{Config: "small", Count: 1}}}).(*state.ScaleResult).Requests[0]
	h.Must(&state.LaunchDone{Now: h.Tick(), Request: req.Key, Created: []state.LaunchedMachine{{Machine: req.Machines[0]}}})
	h.Must(&state.Activate{Now: h.Tick(), Name: "m", NodeID: "m", CPUMilli: 8000, Memory: 32 << 30, TokenHash: "t", Region: "east", Cluster: "a", Machine: req.Machines[0]})
	plain := activateIn(h, "w", "east", "a", 4)
	sp := spec("private", 4)
	sp.Where = &state.Where{MachineType: "n2-highmem-16", Clusters: []string{"a"}, Labels: []string{"rack=r1"}}
	b := h.CreateBatch(entry(1, 2, sp))
	h.CreateBatch(entry(1, 1, spec("shared", 1)))
	if st := AutoscaleState(h.S); len(st.Private) != 2 || st.Private[0].Batch != b || st.Private[0].MachineType != "n2-highmem-16" ||
		len(st.Free) != 2 || len(st.DrainingFree) != 0 || len(st.Configs) != 2 || len(st.Machines) != 1 {
		t.Fatalf("autoscaler's input %+v", st)
	} else if k := st.Private[0].Constraint; !slices.Equal(k.JobClusters, []string{"a"}) || !slices.Equal(k.Labels, []string{"rack=r1"}) {
		// The planner sees the whole of where the job may run.
		t.Fatalf("a private job's constraint %+v", k)
	}
	h.Must(&state.Scale{Now: h.Tick(), Deletes: []state.ScaleDelete{{Machine: req.Machines[0], Reason: "idle"}}})
	in := Scheduling(h.S, Options{Now: h.Now}).Input
	if len(in.Instances) != 1 || in.Instances[0].ID != plain {
		t.Fatalf("instances %+v: a draining machine's worker is in the view", in.Instances)
	}
	for _, r := range runsOf(in) {
		if r.Batch == b {
			t.Fatalf("a private job is in the scheduling view: %+v", r)
		}
	}
	if st := AutoscaleState(h.S); len(st.Free) != 1 || len(st.DrainingFree) != 1 || st.DrainingFree[0].Machine != req.Machines[0] {
		t.Fatalf("free %+v draining %+v", st.Free, st.DrainingFree)
	}
}

// TestDemandStopsAtTheTeamsQuota: jobs past their team's quota wait for
// the team's own jobs, not for a machine: they are not demand.
func TestDemandStopsAtTheTeamsQuota(t *testing.T) {
	h := state.NewHarness(t, nil)
	h.Must(&state.SetTeam{Now: h.Tick(), Team: state.Team{Name: "genomics", Projects: []string{"default"}, QuotaMilli: 3000}})
	h.CreateBatch(entry(1, 10, spec("j", 1)))
	d := AutoscaleDemand(h.S, 1<<40, 0, h.Now)
	var n int64
	for _, u := range d.Users {
		for _, sh := range u.Shapes {
			n += sh.Count
		}
	}
	if n != 3 {
		t.Fatalf("demand of %d jobs; the team's quota admits 3", n)
	}
}

// TestDemandIsWindowedByFairShare: each user's demand is its fair share
// of the budget, one job past it, with memory rounded up to the step.
func TestDemandIsWindowedByFairShare(t *testing.T) {
	h := state.NewHarness(t, nil)
	h.Must(&state.CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "h-alice"})
	h.Must(&state.SetMember{Project: "default", User: "alice", Member: true})
	h.CreateBatch(entry(1, 100, spec("r", 1)))
	odd := spec("a", 3)
	odd.Memory = 1<<30 + 1
	h.Must(&state.CreateBatch{Now: h.Tick(), User: "alice", BillingProject: "default", Jobs: []state.JobEntry{entry(1, 100, odd)}})
	d := AutoscaleDemand(h.S, 10_000, 1<<30, h.Now)
	got := map[string]DemandShape{}
	for _, u := range d.Users {
		if len(u.Shapes) != 1 {
			t.Fatalf("%s's shapes %+v", u.Name, u.Shapes)
		}
		got[u.Name] = u.Shapes[0]
	}
	// 5 cores each: root 5 one-core jobs, alice two 3-core jobs (one past).
	if r, a := got["root"], got["alice"]; r.Count != 5 || a.Count != 2 || a.Memory != 2<<30 || r.Memory != 1<<30 {
		t.Fatalf("demand %+v", got)
	}
}

// spendWorld is a state where billing project "lab" (limit $10) has one
// attempt running since start at a dollar a second, so it reaches its
// limit at start+10s, and more Ready work; "other" (limit $1,000) has
// Ready work too.
type spendWorld struct {
	h             *state.Harness
	labB, otherB  uint64
	crossing      int64
	before, after int64 // 5 s before the crossing, 1 s after
}

func newSpendWorld(t *testing.T) *spendWorld {
	h := state.NewHarness(t, nil)
	w := &spendWorld{h: h}
	// A core costs a dollar a second.
	h.Must(&state.SetRates{Now: h.Tick(), Rates: []state.RateEntry{{Resource: "compute", Price: 3600 * money.DollarPerHour}}})
	for _, p := range []struct {
		name  string
		limit money.Amount
	}{{"lab", 10 * money.Dollar}, {"other", 1000 * money.Dollar}} {
		h.Must(&state.CreateBillingProject{Now: h.Tick(), Name: p.name, Members: []string{"root"}})
		h.Must(&state.SetSpendLimit{Project: p.name, Limit: p.limit})
	}
	inst := h.Activate("w", 16, 64)
	batch := func(project string, es ...state.JobEntry) uint64 {
		return h.Must(&state.CreateBatch{Now: h.Tick(), User: "root", BillingProject: project, Jobs: es}).(*state.UpdateResult).Batch
	}
	running := batch("lab", entry(1, 1, spec("lab", 1)))
	// Billed from its placement, before its worker starts it.
	start := h.Tick()
	if r := h.Must(&state.Plan{Now: start, Placements: h.Planner(h.S, start), Reserve: true}).(*state.PlanResult); r.Placed != 1 {
		t.Fatalf("placed %+v", r)
	}
	h.Must(&state.Events{Now: h.Tick(), Events: []state.Event{{Instance: inst, Batch: running, Job: 1, Attempt: 1, Started: true, Start: h.Now}}})
	w.labB = batch("lab", entry(1, 2, spec("lab", 1)), entry(3, 1, spec("lab-2", 2)))
	w.otherB = batch("other", entry(1, 2, spec("other", 1)))
	w.crossing = start + int64(10*time.Second)
	w.before, w.after = w.crossing-int64(5*time.Second), w.crossing+int64(time.Second)
	h.Now = w.before
	return w
}

// TestSchedulingViewAtASpendLimit: the view weighs each project's spend
// at its own time: after lab's crossing it passes one run of lab's (for
// the scheduler to say why) and none of its batch's others, with lab's
// budget reached; before it, lab's runs are listed as any others.
func TestSchedulingViewAtASpendLimit(t *testing.T) {
	w := newSpendWorld(t)
	in := Scheduling(w.h.S, Options{Now: w.after}).Input
	if len(in.Users) != 1 {
		t.Fatalf("users %+v", in.Users)
	}
	runs := in.Users[0].Runs
	if len(runs) != 2 || runs[0].Batch != w.labB || runs[0].First != 1 || runs[1].Batch != w.otherB {
		t.Fatalf("runs %+v: want lab's first and other's", runs)
	}
	lab, other := runs[0].Project, runs[1].Project
	if lab == 0 || other == 0 || in.Projects[lab-1].Name != "lab" || in.Projects[other-1].Name != "other" {
		t.Fatalf("projects %+v, runs %+v", in.Projects, runs)
	}
	if !in.Projects[lab-1].Budget.Reached(in.Now) || in.Projects[other-1].Budget.Reached(in.Now) {
		t.Fatalf("at the view's time lab reached %v, other %v", in.Projects[lab-1].Budget.Reached(in.Now), in.Projects[other-1].Budget.Reached(in.Now))
	}
	if got := in.Projects[lab-1].Budget.Cost(in.Now); got != 11*money.Dollar {
		t.Fatalf("lab's cost at the view's time: $%v, want $11", got)
	}
	in = Scheduling(w.h.S, Options{Now: w.before}).Input
	if runs := in.Users[0].Runs; len(runs) != 3 || in.Projects[runs[0].Project-1].Budget.Reached(in.Now) {
		t.Fatalf("5 s before lab's crossing: runs %+v, want lab's two and other's", runs)
	}
}

// TestDemandListsAGangWhole: a gang's members are one shape of all of
// them, past the user's share (whole or nothing), apart from plain jobs
// of the same size and from another gang; a gang its queue's quota cannot
// take whole is no demand.
func TestDemandListsAGangWhole(t *testing.T) {
	h := state.NewHarness(t, nil)
	gang := func(size uint32) *state.Spec {
		sp := spec("g", 1)
		sp.Array, sp.Run = true, &state.Run{Gang: &state.Gang{Size: size, Uniform: "pool"}}
		return sp
	}
	h.CreateBatch(entry(1, 8, gang(8)), entry(9, 8, gang(8)), entry(17, 4, spec("p", 1)))
	d := AutoscaleDemand(h.S, 3000, 0, h.Now)
	if len(d.Users) != 1 || len(d.Users[0].Shapes) != 1 {
		t.Fatalf("demand %+v; want one shape: the first gang", d.Users)
	}
	if sh := d.Users[0].Shapes[0]; sh.Count != 8 || sh.Gang == 0 || sh.GangUniform != "pool" {
		t.Fatalf("shape %+v; want the gang's 8 members whole, of one pool", sh)
	}
	d = AutoscaleDemand(h.S, 1<<40, 0, h.Now)
	shapes := d.Users[0].Shapes
	if len(shapes) != 3 || shapes[0].Gang == shapes[1].Gang || shapes[2].Gang != 0 || shapes[2].Count != 4 {
		t.Fatalf("shapes %+v; want two gangs of 8 apart, then 4 plain jobs", shapes)
	}
	// A quota of 12 cores takes the first gang, not the second.
	h.Must(&state.SetTeam{Now: h.Tick(), Team: state.Team{Name: "genomics", Projects: []string{"default"}, QuotaMilli: 12000}})
	d = AutoscaleDemand(h.S, 1<<40, 0, h.Now)
	var gangs, plain int64
	for _, sh := range d.Users[0].Shapes {
		if sh.Gang != 0 {
			gangs += sh.Count
		} else {
			plain += sh.Count
		}
	}
	if gangs != 8 || plain != 4 {
		t.Fatalf("under a 12-core quota: %d gang members, %d plain jobs; want 8 and 4", gangs, plain)
	}
}

// TestDemandListsAGangOfSeveralSizes: a job group's gang of a launcher (1
// core, 8 GiB) and three ranks (4 cores, 2 GiB) is one shape of four
// members as large as its largest in each resource (4 cores, 8 GiB), with
// its parts by size, the largest first, for the autoscaler to pack; its
// queue's quota counts the members' sum (13 cores): 12 cores is no
// demand.
func TestDemandListsAGangOfSeveralSizes(t *testing.T) {
	h := state.NewHarness(t, nil)
	launcher := spec("launcher", 1)
	launcher.Memory = 8 << 30
	launcher.Run = &state.Run{Group: 1, Gang: &state.Gang{Size: 4}}
	ranks := spec("ranks", 4)
	ranks.Memory = 2 << 30
	ranks.Array, ranks.Run = true, &state.Run{Group: 1, Gang: &state.Gang{Size: 4, Lead: 1}}
	h.Must(&state.CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Groups: []state.JobGroupDecl{{Path: "mpi", Gang: true}}, Jobs: []state.JobEntry{entry(1, 1, launcher), entry(2, 3, ranks)}})
	d := AutoscaleDemand(h.S, 1<<40, 0, h.Now)
	if len(d.Users) != 1 || len(d.Users[0].Shapes) != 1 {
		t.Fatalf("demand %+v; want one shape: the gang", d.Users)
	}
	if sh := d.Users[0].Shapes[0]; sh.Count != 4 || sh.Gang == 0 || sh.CPUMilli != 4000 || sh.Memory < 8<<30 ||
		len(sh.Parts) != 2 || sh.Parts[0].CPUMilli != 4000 || sh.Parts[0].Count != 3 || sh.Parts[1].CPUMilli != 1000 || sh.Parts[1].Count != 1 || sh.Parts[1].Memory < 8<<30 {
		t.Fatalf("shape %+v; want 4 members of up to 4 cores and 8 GiB: 3 ranks of 4 cores, a launcher of 8 GiB", sh)
	}
	for quota, want := range map[int64]int{12000: 0, 13000: 1} {
		h.Must(&state.SetTeam{Now: h.Tick(), Team: state.Team{Name: "genomics", Projects: []string{"default"}, QuotaMilli: quota}})
		d := AutoscaleDemand(h.S, 1<<40, 0, h.Now)
		shapes := 0
		for _, u := range d.Users {
			shapes += len(u.Shapes)
		}
		if shapes != want {
			t.Fatalf("under a quota of %d millicores: demand %+v, want %d shapes", quota, d.Users, want)
		}
	}
}
