package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestJobGroupsThroughTheAPI: a batch's nested job groups are declared
// with its jobs, counted, cost and cancelled on their own (by
// cancel_after_n_failures and by their owner, never by another tenant),
// reported to their own callbacks when they complete, and refused with a
// 400 naming the rule when a request gets them wrong.
func TestJobGroupsThroughTheAPI(t *testing.T) {
	var mu sync.Mutex
	posts := map[string][]api.JobGroup{}
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var g api.JobGroup
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &g); err != nil {
			t.Errorf("%s: %v (%s)", r.URL.Path, err, body)
		}
		mu.Lock()
		posts[r.URL.Path] = append(posts[r.URL.Path], g)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hooks.Close()
	tc := startServer(t, "", func(c *Config) {
		c.CallbackAllow = []string{hooks.URL + "/hook/"}
		c.CallbackRetry = 20 * time.Millisecond
	})
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "physics")
	w := newSimWorker(t, tc, "sim-groups", 4)

	jobIn := func(id int64, group string, parents ...int64) api.JobSpec {
		j := job(id, fmt.Sprintf("j%d", id), parents...)
		j.JobGroup = group
		return j
	}
	many := make([]api.JobGroupSpec, api.MaxJobGroupsPerRequest+1)
	for i := range many {
		many[i].Path = fmt.Sprintf("g%d", i)
	}
	for _, bad := range []struct {
		groups []api.JobGroupSpec
		jobs   []api.JobSpec
		want   string
	}{
		{nil, []api.JobSpec{jobIn(1, "align")}, "job_group align is neither declared in job_groups nor a group of the batch"},
		{[]api.JobGroupSpec{{Path: "align/chr1"}}, []api.JobSpec{jobIn(1, "align/chr1")}, "its parent align is neither declared before it"},
		{[]api.JobGroupSpec{{Path: "a/../b"}}, []api.JobSpec{jobIn(1, "")}, `neither "." nor ".."`},
		{[]api.JobGroupSpec{{Path: "a", Callback: "http://169.254.169.254/latest/"}}, []api.JobSpec{jobIn(1, "a")}, "is not under a destination the servers allow"},
		{[]api.JobGroupSpec{{Path: "a", CancelAfterNFailures: -1}}, []api.JobSpec{jobIn(1, "a")}, "cancel_after_n_failures is -1"},
		{many, []api.JobSpec{jobIn(1, "")}, fmt.Sprintf("at most %d a request", api.MaxJobGroupsPerRequest)},
		{[]api.JobGroupSpec{{Path: strings.Repeat("d/", api.MaxJobGroupDepth) + "x"}}, []api.JobSpec{jobIn(1, "")}, "deep; at most 8"},
	} {
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: bad.groups, Jobs: bad.jobs})
		if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("groups %.80v: %v, want a 400 saying %q", bad.groups, err, bad.want)
		}
	}

	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{
			{Path: "align", CancelAfterNFailures: 1, Callback: hooks.URL + "/hook/align", Attributes: map[string]string{"stage": "1"}},
			{Path: "align/chr1"},
			{Path: "merge", Callback: hooks.URL + "/hook/merge"},
		},
		Jobs: []api.JobSpec{
			{JobID: 1, Name: "chr1", Count: 3, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "align/chr1"},
			jobIn(4, "merge", 1, 2, 3),
			jobIn(5, ""),
		}})
	if err != nil {
		t.Fatal(err)
	}
	// Another tenant neither reads nor cancels them.
	if _, err := bob.JobGroups(ctx, b.ID); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("bob lists alice's groups: %v", err)
	}
	if _, err := bob.CancelJobGroup(ctx, b.ID, "align"); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("bob cancels alice's group: %v", err)
	}
	groups, err := alice.JobGroups(ctx, b.ID)
	if err != nil || len(groups) != 3 || groups[1].Path != "align/chr1" || groups[1].ParentID != groups[0].ID || groups[0].NJobs != 3 || groups[0].Attributes["stage"] != "1" {
		t.Fatalf("groups %+v, %v", groups, err)
	}
	// Jobs 1-3 and 5 run; job 1 fails, which cancels align (and chr1).
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 4 {
		t.Fatalf("assigned %+v", res.Assign)
	}
	now := time.Now()
	var known []api.AttemptRef
	for _, a := range res.Assign {
		known = append(known, a.AttemptRef)
		w.events = append(w.events, api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventStarted, StartTime: now})
	}
	w.known = known
	w.sync(0)
	w.events = []api.AttemptEvent{
		{AttemptRef: known[0], Kind: api.EventCompleted, Outcome: api.OutcomeFailed, ExitCode: 1, StartTime: now, EndTime: time.Now()},
		{AttemptRef: known[3], Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: now, EndTime: time.Now()},
	}
	w.known = known[1:3]
	res = w.sync(0)
	if len(res.Kill) != 2 {
		t.Fatalf("after align's cancel the worker is told to kill %+v, want jobs 2 and 3", res.Kill)
	}
	g, err := alice.JobGroup(ctx, b.ID, "align/chr1")
	if err != nil || !g.Cancelled || !strings.Contains(g.CancelReason, "job group align was cancelled: 1 of its jobs failed") || g.NRunning != 2 {
		t.Fatalf("align/chr1: %+v, %v", g, err)
	}
	w.events = []api.AttemptEvent{
		{AttemptRef: known[1], Kind: api.EventCompleted, Outcome: api.OutcomeCancelled, StartTime: now, EndTime: time.Now()},
		{AttemptRef: known[2], Kind: api.EventCompleted, Outcome: api.OutcomeCancelled, StartTime: now, EndTime: time.Now()},
	}
	w.known = nil
	w.sync(0)
	batch, err := alice.GetBatch(ctx, b.ID)
	if err != nil || batch.Cancelled || batch.State != api.BatchComplete || batch.NSucceeded != 1 || batch.NCancelled != 3 {
		t.Fatalf("the batch: %+v, %v", batch, err)
	}
	// Both groups are reported to their callbacks, once each.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(posts["/hook/align"]) + len(posts["/hook/merge"])
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("callbacks: %+v", posts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2*callbackPoll + 200*time.Millisecond)
	mu.Lock()
	if len(posts["/hook/align"]) != 1 || len(posts["/hook/merge"]) != 1 {
		t.Errorf("callbacks POSTed %d and %d times, want once each", len(posts["/hook/align"]), len(posts["/hook/merge"]))
	}
	if p := posts["/hook/align"][0]; p.Path != "align" || p.BatchID != b.ID || p.State != api.BatchComplete || !p.Cancelled || p.NFailed != 1 || p.NCancelled != 2 {
		t.Errorf("align's callback: %+v", p)
	}
	if p := posts["/hook/merge"][0]; p.Path != "merge" || p.Cancelled || p.NCancelled != 1 {
		t.Errorf("merge's callback: %+v", p)
	}
	mu.Unlock()
	if g, _ := alice.JobGroup(ctx, b.ID, "align"); g.CallbackResult != "HTTP 204" {
		t.Errorf("align's callback result %q", g.CallbackResult)
	}
	j, err := alice.GetJob(ctx, b.ID, 2)
	if err != nil || j.JobGroup != "align/chr1" {
		t.Fatalf("job 2: %+v, %v", j, err)
	}

	// A group cancelled by its owner: its jobs stop, the rest of the
	// batch runs; an update may name a group by path alone, not a
	// cancelled one.
	b2, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: []api.JobGroupSpec{{Path: "x"}, {Path: "y"}},
		Jobs: []api.JobSpec{jobIn(1, "x"), jobIn(2, "x"), jobIn(3, "")}})
	if err != nil {
		t.Fatal(err)
	}
	// The leader places them at once on the idle worker: x's two are
	// placed, not yet taken, when x is cancelled.
	cr, err := alice.CancelJobGroup(ctx, b2.ID, "x")
	if err != nil || cr.Cancelled+cr.Running != 2 || cr.Groups != 1 {
		t.Fatalf("cancel x: %+v, %v", cr, err)
	}
	if again, err := alice.CancelJobGroup(ctx, b2.ID, "1"); err != nil || !again.AlreadyCancelled {
		t.Fatalf("cancel x again, by its ID: %+v, %v", again, err)
	}
	if _, err := alice.CreateUpdate(ctx, b2.ID, &api.CreateUpdateRequest{Jobs: []api.JobSpec{jobIn(1, "x")}}); !api.IsStatus(err, http.StatusConflict) {
		t.Fatalf("jobs added to a cancelled group: %v", err)
	}
	if _, err := alice.CreateUpdate(ctx, b2.ID, &api.CreateUpdateRequest{Jobs: []api.JobSpec{jobIn(1, "y")}}); err != nil {
		t.Fatalf("jobs added to group y by its path: %v", err)
	}
	// What the worker is given, until it holds two jobs (the update's
	// job is placed in a round after job 3's).
	var assigned []int64
	w.known = nil
	for end := time.Now().Add(30 * time.Second); len(assigned) < 2 && time.Now().Before(end); {
		res = w.sync(time.Second)
		for _, a := range res.Assign {
			assigned = append(assigned, a.JobID)
			w.known = append(w.known, a.AttemptRef)
		}
	}
	if fmt.Sprint(assigned) != "[3 4]" {
		t.Fatalf("after x's cancel, assigned jobs %v; want job 3 and the update's job 4", assigned)
	}
	if gy, _ := alice.JobGroup(ctx, b2.ID, "y"); gy.NJobs != 1 || gy.NRunning != 1 {
		t.Fatalf("y: %+v", gy)
	}
	if b, _ := alice.GetBatch(ctx, b2.ID); b.Cancelled || b.NCancelled != 2 {
		t.Fatalf("batch after its group's cancel: %+v", b)
	}
}
