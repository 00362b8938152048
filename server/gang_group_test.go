package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestJobGroupGangThroughTheAPI: a job group declared a gang, of a
// launcher and an array of three ranks (two commands, one size), on two
// 2-core workers starts whole, 2 on each; its group says it is a gang;
// the launcher's failure stops the ranks and the gang starts again whole.
// A gang group of two places, of jobs that are not consecutive, of a
// member waiting for another, or taking jobs in a later update, is
// refused with an error naming it.
func TestJobGroupGangThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w1 := newSimWorker(t, tc, "sim-g1", 2)
	w2 := newSimWorker(t, tc, "sim-g2", 2)
	groups := []api.JobGroupSpec{{Path: "mpi", Gang: true}, {Path: "mpi/ranks"}}
	jobs := func() []api.JobSpec {
		return []api.JobSpec{
			{JobID: 1, Name: "launcher", Command: []string{"mpirun"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi", Retries: 1},
			{JobID: 2, Name: "ranks", Count: 3, Command: []string{"rank"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi/ranks"},
		}
	}
	for _, bad := range []struct {
		name   string
		edit   func([]api.JobSpec) []api.JobSpec
		status int
		want   string
	}{
		{"two GPU types", func(j []api.JobSpec) []api.JobSpec {
			j[0].GPUs, j[0].GPUType, j[1].GPUs, j[1].GPUType = 1, "a100", 1, "h100"
			return j
		}, http.StatusBadRequest, "job_groups[0] (mpi): its jobs' GPUs are of one type"},
		{"two pools", func(j []api.JobSpec) []api.JobSpec { j[1].Pool = "p"; return j }, http.StatusBadRequest, "job_groups[0] (mpi): its jobs ask for one place"},
		{"a gap", func(j []api.JobSpec) []api.JobSpec { j[1].JobID = 3; return j }, http.StatusBadRequest, "consecutive IDs"},
		{"waiting for the launcher", func(j []api.JobSpec) []api.JobSpec { j[1].ParentIDs = []int64{1}; return j }, http.StatusBadRequest, "of the same gang"},
		{"a gang of its own", func(j []api.JobSpec) []api.JobSpec { j[1].Gang = true; return j }, http.StatusBadRequest, "a gang of its own"},
		{"too large for the fleet", func(j []api.JobSpec) []api.JobSpec { j[1].Count = 4; return j }, http.StatusBadRequest, "a gang of 5 members must start together in one cluster"},
	} {
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: groups, Jobs: bad.edit(jobs())})
		if !api.IsStatus(err, bad.status) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want HTTP %d saying %q", bad.name, err, bad.status, bad.want)
		}
	}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: groups, Jobs: jobs()})
	if err != nil {
		t.Fatal(err)
	}
	take := func(w *simWorker) []api.Assignment {
		t.Helper()
		var got []api.Assignment
		for end := time.Now().Add(30 * time.Second); len(got) < 2 && time.Now().Before(end); {
			res := w.sync(time.Second)
			got = append(got, res.Assign...)
			for _, a := range res.Assign {
				w.known = append(w.known, a.AttemptRef)
			}
		}
		return got
	}
	a1, a2 := take(w1), take(w2)
	if len(a1) != 2 || len(a2) != 2 {
		t.Fatalf("assigned %d and %d members, want 2 and 2", len(a1), len(a2))
	}
	gl, err := alice.JobGroups(ctx, b.ID)
	if err != nil || len(gl) != 2 || !gl[0].Gang || gl[1].Gang {
		t.Fatalf("job groups %+v, %v: want mpi a gang", gl, err)
	}
	for _, id := range []int64{1, 4} {
		if j, err := alice.GetJob(ctx, b.ID, id); err != nil || j.Gang != 4 {
			t.Fatalf("job %d: gang %d, %v", id, j.Gang, err)
		}
	}
	// The launcher fails: the three ranks are told to stop.
	var launcher api.Assignment
	w := w1
	for _, x := range []struct {
		w  *simWorker
		as []api.Assignment
	}{{w1, a1}, {w2, a2}} {
		for _, a := range x.as {
			if a.JobID == 1 {
				launcher, w = a, x.w
			}
		}
	}
	now := time.Now()
	w.events = []api.AttemptEvent{
		{AttemptRef: launcher.AttemptRef, Kind: api.EventStarted, StartTime: now},
		{AttemptRef: launcher.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeFailed, ExitCode: 1, StartTime: now, EndTime: time.Now()},
	}
	var keep []api.AttemptRef
	for _, a := range w.known {
		if a != launcher.AttemptRef {
			keep = append(keep, a)
		}
	}
	w.known = keep
	res := w.sync(0)
	w.events = nil
	other := w2
	if w == w2 {
		other = w1
	}
	res2 := other.sync(0)
	if len(res.Preempt)+len(res2.Preempt) != 3 {
		t.Fatalf("stop orders: %+v and %+v; want the 3 ranks stopped", res.Preempt, res2.Preempt)
	}
	stopped := func(w *simWorker, as []api.Assignment) {
		w.events = nil
		for _, a := range as {
			if a.JobID != 1 {
				w.events = append(w.events, api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomePreempted, StartTime: now, EndTime: time.Now()})
			}
		}
		w.known = nil
		w.sync(0)
		w.events = nil
	}
	stopped(w1, a1)
	stopped(w2, a2)
	b1, b2 := take(w1), take(w2)
	if len(b1)+len(b2) != 4 {
		t.Fatalf("the gang again: %d and %d members", len(b1), len(b2))
	}
	for _, a := range append(b1, b2...) {
		if a.Attempt != 2 {
			t.Fatalf("member %d restarted as attempt %d, want 2", a.JobID, a.Attempt)
		}
	}
	// A gang group takes no jobs later.
	_, err = alice.CreateUpdate(ctx, b.ID, &api.CreateUpdateRequest{Jobs: []api.JobSpec{{JobID: 1, Name: "late", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi"}}})
	if !api.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "job group mpi is a gang") {
		t.Fatalf("a job added to the gang group later: %v", err)
	}
}

// TestJobGroupGangOfTwoSizesThroughTheAPI: a launcher of two cores and
// two ranks of one, a gang, on two 2-core workers: it starts whole, the
// launcher alone on one worker and the ranks on the other (counted in
// launchers, the workers hold two members; in ranks, four).
func TestJobGroupGangOfTwoSizesThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w1 := newSimWorker(t, tc, "sim-s1", 2)
	w2 := newSimWorker(t, tc, "sim-s2", 2)
	gang := func(launcher float64, ranks int64) *api.CreateBatchRequest {
		return &api.CreateBatchRequest{BillingProject: "genomics",
			JobGroups: []api.JobGroupSpec{{Path: "mpi", Gang: true}, {Path: "mpi/ranks"}},
			Jobs: []api.JobSpec{
				{JobID: 1, Name: "launcher", Command: []string{"mpirun"}, CPU: launcher, Memory: 1 << 20, JobGroup: "mpi"},
				{JobID: 2, Name: "ranks", Count: ranks, Command: []string{"rank"}, CPU: 1, Memory: 1 << 20, JobGroup: "mpi/ranks"},
			}}
	}
	// Refused at submit: five cores of members on four, though each
	// size alone fits.
	if _, err := alice.CreateBatch(ctx, gang(2, 3)); !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "a gang of 4 members (5 cores") {
		t.Errorf("a launcher of 2 cores and 3 ranks of 1 on two 2-core workers: %v, want a 400", err)
	}
	if _, err := alice.CreateBatch(ctx, gang(2, 2)); err != nil {
		t.Fatal(err)
	}
	got := map[*simWorker][]int64{}
	for end := time.Now().Add(30 * time.Second); len(got[w1])+len(got[w2]) < 3 && time.Now().Before(end); {
		for _, w := range []*simWorker{w1, w2} {
			for _, a := range w.sync(200 * time.Millisecond).Assign {
				got[w] = append(got[w], a.JobID)
				w.known = append(w.known, a.AttemptRef)
			}
		}
	}
	if len(got[w1])+len(got[w2]) != 3 {
		t.Fatalf("assigned %v and %v, want the 3 members", got[w1], got[w2])
	}
	for _, ids := range got {
		if len(ids) == 2 && (ids[0] == 1 || ids[1] == 1) {
			t.Fatalf("the launcher of 2 cores beside a rank on a 2-core worker: %v", got)
		}
	}
}
