package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/jobspec"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// Attacks on gangs of job groups (gang = true on a job group) through the
// API, as a tenant would send them: raw requests, not jobspec.

// aggMPI is a gang group "mpi" of a launcher (job 1) and an array of
// three ranks (jobs 2-4) in "mpi/ranks", one core each.
func aggMPI() ([]api.JobGroupSpec, []api.JobSpec) {
	return []api.JobGroupSpec{{Path: "mpi", Gang: true}, {Path: "mpi/ranks"}}, []api.JobSpec{
		{JobID: 1, Name: "launcher", Command: []string{"mpirun"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi"},
		{JobID: 2, Name: "ranks", Count: 3, Command: []string{"rank"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi/ranks"},
	}
}

// aggJobStates reads the states of jobs first..last.
func aggJobStates(t *testing.T, c *api.Client, b, first, last int64) []string {
	t.Helper()
	var out []string
	for id := first; id <= last; id++ {
		j, err := c.GetJob(context.Background(), b, id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, j.State)
	}
	return out
}

// aggTake syncs w until it holds n assignments (or 30 s pass).
func aggTake(t *testing.T, w *simWorker, n int) []api.Assignment {
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

// TestAttackGangGroupCancelSubgroupThroughAPI: a tenant cancels the job
// group below its gang group (mpi/ranks) while the gang waits for room
// (no worker yet). The ranks are cancelled; the launcher can never start
// without them (the scheduler lists a gang only whole), so it must be
// cancelled too and the batch complete. Today the launcher stays Ready
// for ever and the batch never completes (server/state/jobgroups.go
// cancelJobGroup cancels a gang's members without cancelGang).
func TestAttackGangGroupCancelSubgroupThroughAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	groups, jobs := aggMPI()
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: groups, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	res, err := alice.CancelJobGroup(ctx, b.ID, "mpi/ranks")
	if err != nil || res.Cancelled != 3 {
		t.Fatalf("cancel mpi/ranks: %+v, %v", res, err)
	}
	st := aggJobStates(t, alice, b.ID, 1, 4)
	if st[0] != api.JobCancelled {
		t.Errorf("jobs 1-4 are %v after mpi/ranks was cancelled: the launcher waits for a gang that can never start whole", st)
	}
	bb, err := alice.GetBatch(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bb.Complete() {
		t.Errorf("batch %d is %s with n_ready %d: it never completes", b.ID, bb.State, bb.NReady)
	}
	// And nothing ever starts the launcher alone: a worker that comes
	// gets nothing; job why answers for it.
	w := newSimWorker(t, tc, "sim-late", 4)
	if got := w.sync(2 * time.Second); len(got.Assign) != 0 {
		t.Fatalf("the launcher started alone: %+v", got.Assign)
	}
	if why, err := alice.JobWhy(ctx, b.ID, 1); err != nil {
		t.Errorf("job why of the launcher: %v", err)
	} else {
		t.Logf("job why of the launcher: %s", whyText(why))
	}
}

// TestAttackGangGroupMemberParentFailsThroughAPI: the members of a gang
// group may wait for different jobs outside the gang. The rank waits for
// a setup job that fails: the rank is cancelled, and the launcher, Ready,
// waits for ever for a gang that can never be whole (deps.go releaseRun
// cancels a gang member without cancelGang).
func TestAttackGangGroupMemberParentFailsThroughAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-1", 2)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "mpi", Gang: true}},
		Jobs: []api.JobSpec{
			{JobID: 1, Name: "launcher", Command: []string{"mpirun"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi"},
			{JobID: 2, Name: "rank", Command: []string{"rank"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi", ParentIDs: []int64{3}},
			{JobID: 3, Name: "setup", Command: []string{"setup"}, CPU: 1, Memory: 1 << 20},
		}})
	if err != nil {
		t.Fatal(err)
	}
	as := aggTake(t, w, 1)
	if len(as) != 1 || as[0].JobID != 3 {
		t.Fatalf("assigned %+v, want the setup job alone", as)
	}
	now := time.Now()
	w.events = []api.AttemptEvent{
		{AttemptRef: as[0].AttemptRef, Kind: api.EventStarted, StartTime: now},
		{AttemptRef: as[0].AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeFailed, ExitCode: 1, StartTime: now, EndTime: time.Now()},
	}
	w.known = nil
	w.sync(0)
	st := aggJobStates(t, alice, b.ID, 1, 3)
	if st[1] != api.JobCancelled || st[2] != api.JobFailed {
		t.Fatalf("jobs 1-3: %v", st)
	}
	if st[0] != api.JobCancelled {
		t.Errorf("jobs 1-3 are %v: the launcher waits for ever for its cancelled rank", st)
	}
	if got := w.sync(2 * time.Second); len(got.Assign) != 0 {
		t.Fatalf("the launcher started alone: %+v", got.Assign)
	}
	if bb, err := alice.GetBatch(ctx, b.ID); err != nil || !bb.Complete() {
		t.Errorf("batch: %+v, %v: it never completes", bb, err)
	}
}

// TestAttackGangGroupDeadlockThroughAPI: no member waits for another,
// which ValidateGangGroups checks, but rank (job 3) waits for job 1,
// outside the gang, which waits for the launcher (job 2). The gang can
// only start once job 1 ended, and job 1 only once the gang ran: the
// batch waits for ever. The request must be refused (400), as a member
// waiting for another member is.
func TestAttackGangGroupDeadlockThroughAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-1", 4)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "mpi", Gang: true}},
		Jobs: []api.JobSpec{
			{JobID: 1, Name: "post", Command: []string{"post"}, CPU: 1, Memory: 1 << 20, ParentIDs: []int64{2}},
			{JobID: 2, Name: "launcher", Command: []string{"mpirun"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi"},
			{JobID: 3, Name: "rank", Command: []string{"rank"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi", ParentIDs: []int64{1}},
		}})
	if api.IsStatus(err, http.StatusBadRequest) {
		return // refused: fixed
	}
	if err != nil {
		t.Fatal(err)
	}
	got := w.sync(2 * time.Second)
	t.Errorf("a gang waiting on itself through job 1 was accepted (batch %d); a 4-core worker was given %d jobs, states %v: it waits for ever",
		b.ID, len(got.Assign), aggJobStates(t, alice, b.ID, 1, 3))
}

// TestAttackGangGroupRetriedBunchThroughAPI: a client posts a bunch of a
// staged update that declares a gang group with its members, and posts
// it again (its answer was lost). A retried bunch is ignored (as the
// same bunch with a plain job group is): the gang group must not make it
// a 409, which fails the client's upload of a batch that is fine.
func TestAttackGangGroupRetriedBunchThroughAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	tok := userToken(t, alice)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", NJobs: 4})
	if err != nil {
		t.Fatal(err)
	}
	groups, jobs := aggMPI()
	body, _ := json.Marshal(api.AddJobsRequest{JobGroups: groups, Jobs: jobs})
	path := fmt.Sprintf("/api/v1/batches/%d/updates/%d/jobs", b.ID, b.UpdateID)
	if code, msg := tc.raw(http.MethodPost, path, tok, string(body)); code != http.StatusOK {
		t.Fatalf("the bunch: %d %s", code, msg)
	}
	// The same with a plain job group is a retry (the rule).
	plainGroups := []api.JobGroupSpec{{Path: "plain"}}
	plainBody := func(id int64) string {
		data, _ := json.Marshal(api.AddJobsRequest{JobGroups: plainGroups, Jobs: []api.JobSpec{{JobID: id, Name: "p", Command: []string{"true"}, JobGroup: "plain"}}})
		return string(data)
	}
	b2, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", NJobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	p2 := fmt.Sprintf("/api/v1/batches/%d/updates/%d/jobs", b2.ID, b2.UpdateID)
	for i := 0; i < 2; i++ {
		if code, msg := tc.raw(http.MethodPost, p2, tok, plainBody(1)); code != http.StatusOK {
			t.Fatalf("a plain group's bunch, try %d: %d %s", i+1, code, msg)
		}
	}
	if code, msg := tc.raw(http.MethodPost, path, tok, string(body)); code != http.StatusOK {
		t.Errorf("the gang group's bunch posted again: %d %s; want it taken as the retry it is", code, msg)
	}
	if _, err := alice.CommitUpdate(ctx, b.ID, b.UpdateID); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 4; id++ {
		if j, err := alice.GetJob(ctx, b.ID, id); err != nil || j.Gang != 4 {
			t.Fatalf("job %d: gang %d, %v", id, j.Gang, err)
		}
	}
}

// TestAttackGangGroupAPIBoundaries pins what the API refuses and takes
// of gang groups, raw requests a tenant could send (all hold).
func TestAttackGangGroupAPIBoundaries(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	two := func(edit func(a, b *api.JobSpec)) []api.JobSpec {
		js := []api.JobSpec{
			{JobID: 1, Name: "a", Command: []string{"a"}, CPU: 1, Memory: 1 << 20, JobGroup: "g"},
			{JobID: 2, Name: "b", Command: []string{"b"}, CPU: 1, Memory: 1 << 20, JobGroup: "g"},
		}
		if edit != nil {
			edit(&js[0], &js[1])
		}
		return js
	}
	gang := []api.JobGroupSpec{{Path: "g", Gang: true}}
	for _, c := range []struct {
		name   string
		groups []api.JobGroupSpec
		jobs   []api.JobSpec
		want   string
	}{
		{"gpu types differ", gang, two(func(a, b *api.JobSpec) { a.GPUs, a.GPUType, b.GPUs, b.GPUType = 1, "a100", 1, "h100" }), "of one type"},
		{"gpu types differ past a member without", gang, append(two(func(a, b *api.JobSpec) { a.GPUs, a.GPUType = 1, "a100" }),
			api.JobSpec{JobID: 3, Name: "c", Command: []string{"c"}, CPU: 1, Memory: 1 << 20, JobGroup: "g", GPUs: 1, GPUType: "h100"}), "of one type"},
		{"labels differ", gang, two(func(a, b *api.JobSpec) { a.WorkerLabels = map[string]string{"zone": "a"} }), "one place"},
		{"label values differ", gang, two(func(a, b *api.JobSpec) {
			a.WorkerLabels, b.WorkerLabels = map[string]string{"zone": "a"}, map[string]string{"zone": "b"}
		}), "one place"},
		{"pools differ", gang, two(func(a, b *api.JobSpec) { a.Pool = "p" }), "one place"},
		{"clusters differ", gang, two(func(a, b *api.JobSpec) { a.Clusters = []string{"c1"} }), "one place"},
		{"oom_retry", gang, two(func(a, b *api.JobSpec) { b.OOMRetry = &api.OOMRetry{Factor: 2, MaxMemory: 1 << 30} }), "oom_retry"},
		{"max_spot_attempts", gang, two(func(a, b *api.JobSpec) { b.MaxSpotAttempts = 1 }), "max_spot_attempts"},
		{"machine_type", gang, two(func(a, b *api.JobSpec) { a.MachineType = "m1"; b.MachineType = "m1" }), "machine_type"},
		{"an array gang inside", gang, two(func(a, b *api.JobSpec) { b.Count, b.Gang = 2, true }), "a gang of its own"},
		{"member waits via range", gang, two(func(a, b *api.JobSpec) { b.ParentRanges = []api.IDRange{{1, 1}} }), "of the same gang"},
		{"one member", gang, two(func(a, b *api.JobSpec) { b.JobGroup = "" }), "2 to"},
		{"a hole", gang, two(func(a, b *api.JobSpec) { b.JobID = 3; a.JobID = 1 }), "consecutive"},
		{"a plain job between", gang, append(two(func(a, b *api.JobSpec) { b.JobID = 3 }), api.JobSpec{JobID: 2, Name: "x", Command: []string{"x"}}), "consecutive"},
		{"too many", gang, two(func(a, b *api.JobSpec) { b.Count = api.MaxGangSize }), "2 to 4096"},
		{"a gang declared alone", []api.JobGroupSpec{{Path: "g", Gang: true}, {Path: "h"}}, two(func(a, b *api.JobSpec) { a.JobGroup, b.JobGroup = "h", "h" }), "2 to"},
		{"a gang in a gang", []api.JobGroupSpec{{Path: "g", Gang: true}, {Path: "g/in", Gang: true}}, two(func(a, b *api.JobSpec) { a.JobGroup, b.JobGroup = "g/in", "g/in" }), "inside another"},
		{"a child before its gang parent", []api.JobGroupSpec{{Path: "g/in"}, {Path: "g", Gang: true}}, two(func(a, b *api.JobSpec) { b.JobGroup = "g/in" }), "parent"},
		{"a grandchild before its parent", []api.JobGroupSpec{{Path: "g", Gang: true}, {Path: "g/a/b"}, {Path: "g/a"}}, two(func(a, b *api.JobSpec) { b.JobGroup = "g/a/b" }), "parent"},
		{"uniformity without gang", []api.JobGroupSpec{{Path: "g", GangUniformity: "pool"}}, two(nil), "without gang"},
		{"a bad uniformity", []api.JobGroupSpec{{Path: "g", Gang: true, GangUniformity: "rack"}}, two(nil), ""},
		{"a gang group twice", []api.JobGroupSpec{{Path: "g", Gang: true}, {Path: "g", Gang: true}}, two(nil), ""},
	} {
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: c.groups, Jobs: c.jobs})
		if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a 400 saying %q", c.name, err, c.want)
		}
	}
	// Taken: regions in another order and repeated (one set), labels
	// written in another order; the largest gang; an array gang beside
	// a gang group, in a plain group.
	ok := two(func(a, b *api.JobSpec) {
		a.Regions, b.Regions = []string{"r1", "r2"}, []string{"r2", "r1", "r2"}
		a.WorkerLabels, b.WorkerLabels = map[string]string{"x": "1", "y": "2"}, map[string]string{"y": "2", "x": "1"}
	})
	if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: gang, Jobs: ok}); err != nil {
		t.Errorf("regions of one set in two orders: %v", err)
	}
	// Members of several sizes, with GPUs and without.
	for name, edit := range map[string]func(a, b *api.JobSpec){
		"memory by default vs given": func(a, b *api.JobSpec) { a.Memory = 0 },
		"two sizes":                  func(a, b *api.JobSpec) { a.CPU = 0.5 },
	} {
		if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: gang, Jobs: two(edit)}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	big := two(func(a, b *api.JobSpec) { b.Count = api.MaxGangSize - 1 })
	big = append(big, api.JobSpec{JobID: api.MaxGangSize + 1, Name: "arr", Count: 3, Gang: true, Command: []string{"x"}, CPU: 1, Memory: 1 << 20, JobGroup: "plain"})
	bb, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: []api.JobGroupSpec{{Path: "g", Gang: true}, {Path: "plain"}}, Jobs: big})
	if err != nil {
		t.Fatalf("a gang group of %d beside an array gang: %v", api.MaxGangSize, err)
	}
	for id, want := range map[int64]int64{1: api.MaxGangSize, api.MaxGangSize: api.MaxGangSize, api.MaxGangSize + 1: 3, api.MaxGangSize + 3: 3} {
		if j, err := alice.GetJob(ctx, bb.ID, id); err != nil || j.Gang != want {
			t.Errorf("job %d: gang %d, %v; want %d", id, j.Gang, err, want)
		}
	}
	// The batch's gang group takes nothing later: by path alone, declared
	// again, a group made below it, a gang below it.
	late := []api.JobSpec{{JobID: 1, Name: "l", Command: []string{"l"}, CPU: 1, Memory: 1 << 20, JobGroup: "g"}, {JobID: 2, Name: "m", Command: []string{"m"}, CPU: 1, Memory: 1 << 20, JobGroup: "g"}}
	for _, c := range []struct {
		name   string
		groups []api.JobGroupSpec
		path   string
		status int
	}{
		{"by path alone", nil, "g", http.StatusConflict},
		{"declared again", gang, "g", http.StatusConflict},
		{"a group below it", []api.JobGroupSpec{{Path: "g/later"}}, "g/later", http.StatusConflict},
		{"a gang below it", []api.JobGroupSpec{{Path: "g/later2", Gang: true}}, "g/later2", http.StatusBadRequest},
	} {
		js := append([]api.JobSpec(nil), late...)
		js[0].JobGroup, js[1].JobGroup = c.path, c.path
		if _, err := alice.CreateUpdate(ctx, bb.ID, &api.CreateUpdateRequest{JobGroups: c.groups, Jobs: js}); !api.IsStatus(err, c.status) {
			t.Errorf("jobs into the gang group %s: %v, want HTTP %d", c.name, err, c.status)
		}
	}
	// A staged update: the gang group's members split over two bunches
	// are refused, bunch by bunch; whole in one bunch it is taken, at its
	// batch IDs once committed.
	up, err := alice.CreateUpdate(ctx, bb.ID, &api.CreateUpdateRequest{NJobs: 3})
	if err != nil {
		t.Fatal(err)
	}
	tok := userToken(t, alice)
	post := func(groups []api.JobGroupSpec, js []api.JobSpec) (int, string) {
		data, _ := json.Marshal(api.AddJobsRequest{JobGroups: groups, Jobs: js})
		return tc.raw(http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/updates/%d/jobs", bb.ID, up.UpdateID), tok, string(data))
	}
	member := func(id int64, group string) api.JobSpec {
		return api.JobSpec{JobID: id, Name: fmt.Sprint("m", id), Command: []string{"m"}, CPU: 1, Memory: 1 << 20, JobGroup: group}
	}
	if code, msg := post([]api.JobGroupSpec{{Path: "s", Gang: true}}, []api.JobSpec{member(2, "s")}); code != http.StatusBadRequest {
		t.Errorf("one member of a staged gang: %d %s", code, msg)
	}
	if code, msg := post([]api.JobGroupSpec{{Path: "s", Gang: true}}, []api.JobSpec{member(2, "s"), member(3, "s")}); code != http.StatusOK {
		t.Fatalf("a staged gang, whole: %d %s", code, msg)
	}
	if code, msg := post(nil, []api.JobSpec{member(1, "s")}); code != http.StatusConflict {
		t.Errorf("a third member in the next bunch: %d %s", code, msg)
	}
	if code, msg := post(nil, []api.JobSpec{member(1, "")}); code != http.StatusOK {
		t.Fatalf("a plain job: %d %s", code, msg)
	}
	if _, err := alice.CommitUpdate(ctx, bb.ID, up.UpdateID); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]int64{up.StartJobID: 0, up.StartJobID + 1: 2, up.StartJobID + 2: 2} {
		if j, err := alice.GetJob(ctx, bb.ID, id); err != nil || j.Gang != want {
			t.Errorf("job %d of the staged update: gang %d, %v; want %d", id, j.Gang, err, want)
		}
	}
}

// TestAttackGangGroupRestartFailRetryThroughAPI: a gang group's gang on
// two 2-core workers: `job restart` of one rank stops all the others
// (launcher included, another spec) and the gang starts again whole; a
// rank failing for good cancels the others and the batch completes; a
// retry of the batch runs the four again, together. No member ever
// starts alone. (Holds.)
func TestAttackGangGroupRestartFailRetryThroughAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w1 := newSimWorker(t, tc, "sim-1", 2)
	w2 := newSimWorker(t, tc, "sim-2", 2)
	groups, jobs := aggMPI()
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: groups, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	start := func(attempt int) map[int64]*simWorker {
		t.Helper()
		a1, a2 := aggTake(t, w1, 2), aggTake(t, w2, 2)
		if len(a1) != 2 || len(a2) != 2 {
			t.Fatalf("attempt %d: assigned %d and %d", attempt, len(a1), len(a2))
		}
		on := map[int64]*simWorker{}
		for _, x := range []struct {
			w  *simWorker
			as []api.Assignment
		}{{w1, a1}, {w2, a2}} {
			for _, a := range x.as {
				if a.Attempt != attempt {
					t.Fatalf("member %d as attempt %d, want %d", a.JobID, a.Attempt, attempt)
				}
				on[a.JobID] = x.w
			}
		}
		return on
	}
	end := func(w *simWorker, job int64, attempt int, o string) {
		t.Helper()
		ref := api.AttemptRef{BatchID: b.ID, JobID: job, Attempt: attempt}
		now := time.Now()
		w.events = append(w.events, api.AttemptEvent{AttemptRef: ref, Kind: api.EventCompleted, Outcome: o, ExitCode: 1, StartTime: now, EndTime: now})
		var keep []api.AttemptRef
		for _, k := range w.known {
			if k != ref {
				keep = append(keep, k)
			}
		}
		w.known = keep
	}
	stopOrders := func() int {
		r1, r2 := w1.sync(0), w2.sync(0)
		return len(r1.Preempt) + len(r2.Preempt) + len(r1.Kill) + len(r2.Kill)
	}
	on := start(1)
	if _, err := alice.RestartJob(ctx, b.ID, 3); err != nil {
		t.Fatal(err)
	}
	end(on[3], 3, 1, api.OutcomePreempted)
	on[3].sync(0)
	if n := stopOrders(); n != 3 {
		t.Fatalf("after a rank's restart, %d stop orders; want the other 3 members stopped", n)
	}
	for _, id := range []int64{1, 2, 4} {
		end(on[id], id, 1, api.OutcomePreempted)
	}
	w1.sync(0)
	w2.sync(0)
	on = start(2)
	// Rank 4 fails for good: the others are stopped, and cancelled.
	end(on[4], 4, 2, api.OutcomeFailed)
	on[4].sync(0)
	if n := stopOrders(); n != 3 {
		t.Fatalf("after a rank failed, %d stop orders; want 3", n)
	}
	for _, id := range []int64{1, 2, 3} {
		end(on[id], id, 2, api.OutcomePreempted)
	}
	w1.sync(0)
	w2.sync(0)
	if st := aggJobStates(t, alice, b.ID, 1, 4); st[0] != api.JobCancelled || st[1] != api.JobCancelled || st[2] != api.JobCancelled || st[3] != api.JobFailed {
		t.Fatalf("after the rank's failure: %v", st)
	}
	if bb, err := alice.GetBatch(ctx, b.ID); err != nil || !bb.Complete() {
		t.Fatalf("batch %+v, %v: want it complete", bb, err)
	}
	// A retry of the failed rank alone runs the gang whole.
	rr, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{JobIDs: []int64{4}})
	if err != nil || rr.Retried != 4 {
		t.Fatalf("retry: %+v, %v; want the 4 members", rr, err)
	}
	start(3)
}

// TestAttackGangGroupShippedExamplePrepareFails: the jobspec shipped as
// the gang group's example (jobspec/testdata/good/gang-group.hcl) has the
// launcher wait for "prepare" and the ranks wait for nothing. When
// prepare fails, the launcher is cancelled, and the four ranks sit Ready
// for ever: the batch never completes (the same fault as a member whose
// parent fails).
func TestAttackGangGroupShippedExamplePrepareFails(t *testing.T) {
	spec, diags := jobspec.ParseFile("../jobspec/testdata/good/gang-group.hcl", nil)
	if diags.HasErrors() {
		t.Fatal(jobspec.FormatDiagnostics(diags))
	}
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-1", 16)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Name: spec.Name, JobGroups: spec.Groups, Jobs: spec.JobSpecs()})
	if err != nil {
		t.Fatal(err)
	}
	as := aggTake(t, w, 1)
	if len(as) != 1 || as[0].JobID != 1 {
		t.Fatalf("assigned %+v, want prepare alone", as)
	}
	now := time.Now()
	w.events = []api.AttemptEvent{{AttemptRef: as[0].AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeFailed, ExitCode: 2, StartTime: now, EndTime: now}}
	w.known = nil
	w.sync(0)
	st := aggJobStates(t, alice, b.ID, 1, 6)
	if st[1] != api.JobCancelled {
		t.Fatalf("jobs 1-6: %v", st)
	}
	for i, s := range st[2:] {
		if s != api.JobCancelled {
			t.Errorf("rank %d is %s once its launcher was cancelled: it waits for ever (jobs 1-6: %v)", i+3, s, st)
			break
		}
	}
	if got := w.sync(2 * time.Second); len(got.Assign) != 0 {
		t.Fatalf("ranks started without their launcher: %+v", got.Assign)
	}
	if bb, err := alice.GetBatch(ctx, b.ID); err != nil || !bb.Complete() {
		t.Errorf("batch %d: state %s, n_ready %d, %v: it never completes", b.ID, bb.State, bb.NReady, err)
	}
}

// TestAttackGangGroupValidationIsQuadratic: api.ValidateGangGroups and
// apiview.GroupDecls look at every job of the request for every gang
// group it declares, building g.Path+"/" anew for each (api/limits.go
// ValidateGangGroups, server/apiview/jobgroups.go GroupDecls): O(groups
// x jobs) string work (and, for paths over 32 bytes, an allocation each),
// before admission looks at the request's size. 1,000 gang groups of two
// jobs beside 100,000 plain jobs (a 3.7 MB body, within the 64 MiB a
// request may be) cost 6 s of CPU in ValidateGangGroups alone, 36 s with
// 100-byte group paths; 1,000,000 jobs 55 s with short paths. A tenant
// can send several at once. Counted here in allocations (no timing),
// with 100-byte paths: the check
// should cost in proportion to the request (a pass over the jobs,
// grouping them by path and its ancestors), not to groups x jobs.
func TestAttackGangGroupValidationIsQuadratic(t *testing.T) {
	const gangs, plain = 100, 10_000
	var groups []api.JobGroupSpec
	var specs []api.JobSpec
	id := int64(1)
	for g := 0; g < gangs; g++ {
		p := fmt.Sprintf("g%0100d", g) // a long path: g.Path+"/" leaves the stack
		groups = append(groups, api.JobGroupSpec{Path: p, Gang: true})
		for k := 0; k < 2; k++ {
			specs = append(specs, api.JobSpec{JobID: id, Command: []string{"x"}, JobGroup: p})
			id++
		}
	}
	for len(specs) < 2*gangs+plain {
		specs = append(specs, api.JobSpec{JobID: id, Command: []string{"x"}})
		id++
	}
	entries, err := apiview.JobEntries(specs)
	if err != nil {
		t.Fatal(err)
	}
	base := testing.AllocsPerRun(1, func() {
		if _, err := apiview.GroupDecls(nil, specs, slicesClone(entries), nil); err == nil {
			_ = err
		}
	})
	allocs := testing.AllocsPerRun(1, func() {
		if _, err := apiview.GroupDecls(groups, specs, slicesClone(entries), nil); err != nil {
			t.Fatal(err)
		}
	})
	n := float64(len(specs) + len(groups))
	if extra := allocs - base; extra > 20*n {
		t.Errorf("declaring %d gang groups in a request of %d jobs costs %.0f allocations more than none (%.0f per job): the gang check walks every job for every gang group",
			gangs, len(specs), extra, extra/float64(len(specs)))
	}
}

func slicesClone(e []state.JobEntry) []state.JobEntry { return append([]state.JobEntry(nil), e...) }
