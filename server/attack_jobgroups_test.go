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

// Attacks on job groups through the API: another tenant's reach, odd
// encodings of a group's name, what a request may make the servers hold,
// and the groups' callbacks.

// TestAttackJobGroupsTenantIsolation: neither a tenant of another
// project nor a viewer of the batch's own may cancel its groups, however
// the group is spelled (an ID, a path, escaped, double-escaped, with
// leading zeros, out of range); the other tenant may not read them
// either; the groups stay as they were.
func TestAttackJobGroupsTenantIsolation(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "physics")
	viewer, err := tc.admin.CreateUser(ctx, &api.CreateUserRequest{Name: "vera"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tc.admin.SetRole(ctx, "genomics", "vera", "viewer"); err != nil {
		t.Fatal(err)
	}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "align"}, {Path: "align/chr1"}},
		Jobs:      []api.JobSpec{{JobID: 1, Name: "a", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "align/chr1"}}})
	if err != nil {
		t.Fatal(err)
	}
	bobTok, veraTok := bob.Token(), viewer.Token
	spellings := []string{"1", "2", "01", "0002", "align", "align%2Fchr1", "align%2fchr1", "%61lign", "align%252Fchr1", "4294967297", "0", "-1", "%2E%2E", "align%2F..%2Fx"}
	for _, g := range spellings {
		for _, p := range []string{
			fmt.Sprintf("/api/v1/batches/%d/job-groups/%s", b.ID, g),
			fmt.Sprintf("/api/v1/batches/%d/job-groups", b.ID),
		} {
			if code, msg := tc.raw("GET", p, bobTok, ""); code != http.StatusForbidden {
				t.Errorf("bob GET %s: %d %s", p, code, msg)
			}
		}
		p := fmt.Sprintf("/api/v1/batches/%d/job-groups/%s/cancel", b.ID, g)
		if code, msg := tc.raw("POST", p, bobTok, ""); code != http.StatusForbidden {
			t.Errorf("bob POST %s: %d %s", p, code, msg)
		}
		if code, msg := tc.raw("POST", p, veraTok, ""); code != http.StatusForbidden {
			t.Errorf("viewer POST %s: %d %s", p, code, msg)
		}
	}
	// The viewer reads them, escaped paths included.
	if code, body := tc.raw("GET", fmt.Sprintf("/api/v1/batches/%d/job-groups/align%%2Fchr1", b.ID), veraTok, ""); code != 200 || !strings.Contains(body, `"path":"align/chr1"`) {
		t.Errorf("viewer GET align%%2Fchr1: %d %s", code, body)
	}
	gs, err := alice.JobGroups(ctx, b.ID)
	if err != nil || len(gs) != 2 || gs[0].Cancelled || gs[1].Cancelled {
		t.Fatalf("alice's groups after the attempts: %+v, %v", gs, err)
	}
	// Bob's own batch's group IDs do not reach alice's.
	mine, err := bob.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "physics", JobGroups: []api.JobGroupSpec{{Path: "x"}},
		Jobs: []api.JobSpec{{JobID: 1, Name: "b", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.CancelJobGroup(ctx, mine.ID, "1"); err != nil {
		t.Fatal(err)
	}
	if g, err := alice.JobGroup(ctx, b.ID, "1"); err != nil || g.Cancelled {
		t.Fatalf("alice's group 1 after bob cancelled his own group 1: %+v, %v", g, err)
	}
}

// TestAttackJobGroupsDigitPath: a group may be named with digits alone
// ("1", "2019"); the API reads such a {group} as an ID. The name must
// then either be refused when the group is declared, or reach that
// group: here GET …/job-groups/1 answers another group ("rep"), and a
// cancel of "1" would cancel rep and everything below it; "7" (a group
// of a 3-group batch) is not found at all.
func TestAttackJobGroupsDigitPath(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "rep"}, {Path: "rep/x"}, {Path: "1"}, {Path: "7"}},
		Jobs: []api.JobSpec{
			{JobID: 1, Name: "a", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "rep/x"},
			{JobID: 2, Name: "b", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "1"},
			{JobID: 3, Name: "c", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "7"},
		}})
	if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "would read as a group's ID") {
		t.Fatalf("groups named with digits alone: %v, want a 400 saying why", err)
	}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "rep"}, {Path: "rep/x"}, {Path: "1a"}},
		Jobs:      []api.JobSpec{{JobID: 1, Name: "a", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "1a"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"1a"} {
		g, err := alice.JobGroup(ctx, b.ID, name)
		if err != nil || g.Path != name {
			got := "an error: " + fmt.Sprint(err)
			if err == nil {
				got = fmt.Sprintf("group %d %q", g.ID, g.Path)
			}
			t.Errorf("GET job-groups/%s (a group named %q exists) answers %s", name, name, got)
		}
	}
}

// TestAttackJobGroupsMemoryBudget: job groups (up to 1,000 a request with
// 1 MiB of paths, attributes and callbacks, 10,000 a batch) are held in
// every server's memory and logged, as jobs are; the state memory
// budget must count them, or a tenant fills the servers' memory past it
// with batches of one job.
func TestAttackJobGroupsMemoryBudget(t *testing.T) {
	tc := startServer(t, "", func(cfg *Config) { cfg.StateMemoryBudget = 4 << 20 })
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	groups := make([]api.JobGroupSpec, api.MaxJobGroupsPerRequest)
	for i := range groups {
		groups[i] = api.JobGroupSpec{Path: fmt.Sprintf("g%d", i), Attributes: map[string]string{"k": strings.Repeat("v", 1000)}}
	}
	const tries = 12 // 12 MB of attributes alone, three times the budget
	for i := 0; i < tries; i++ {
		_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: groups,
			Jobs: []api.JobSpec{{JobID: 1, Name: "a", Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
		if api.IsStatus(err, http.StatusRequestEntityTooLarge) {
			if i < 2 {
				t.Fatalf("refused at batch %d: %v", i+1, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("%d batches of 1,000 job groups (about %d MB of group attributes) were admitted under a 4 MiB state memory budget", tries, tries)
}

// groupHooks is a receiver of group callbacks that records what each
// path was POSTed.
func groupHooks(t *testing.T) (*httptest.Server, func(path string) []api.JobGroup) {
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
	t.Cleanup(hooks.Close)
	return hooks, func(path string) []api.JobGroup {
		mu.Lock()
		defer mu.Unlock()
		return append([]api.JobGroup(nil), posts[path]...)
	}
}

// waitPosts waits until path was POSTed n times (or 20 s), then a while
// longer for any extra POST, and returns them all.
func waitPosts(t *testing.T, got func(string) []api.JobGroup, path string, n int) []api.JobGroup {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); len(got(path)) < n && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2*callbackPoll + 200*time.Millisecond)
	return got(path)
}

// TestAttackJobGroupsEmptyBatchCallback: a batch submitted with job
// groups and no jobs is complete at once; its groups (no jobs) must be
// complete with it and their callbacks told, once.
func TestAttackJobGroupsEmptyBatchCallback(t *testing.T) {
	hooks, got := groupHooks(t)
	tc := startServer(t, "", func(c *Config) {
		c.CallbackAllow = []string{hooks.URL + "/hook/"}
		c.CallbackRetry = 20 * time.Millisecond
	})
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "empty", Callback: hooks.URL + "/hook/empty"}}})
	if err != nil {
		t.Fatal(err)
	}
	if b.State != api.BatchComplete {
		t.Fatalf("the empty batch: %+v", b)
	}
	g, err := alice.JobGroup(ctx, b.ID, "empty")
	if err != nil {
		t.Fatal(err)
	}
	if g.State != api.BatchComplete {
		t.Errorf("group empty of complete batch %d is %s", b.ID, g.State)
	}
	if posts := waitPosts(t, got, "/hook/empty", 1); len(posts) != 1 {
		t.Errorf("group empty's callback was POSTed %d times, want once", len(posts))
	}
}

// TestAttackJobGroupsCallbackDestinations: a group callback to a
// destination the servers do not allow is refused (400) however it comes
// (a new batch, an update, a bunch of an open update), and leaves no
// group behind; an existing group cannot be given another callback.
func TestAttackJobGroupsCallbackDestinations(t *testing.T) {
	hooks, _ := groupHooks(t)
	tc := startServer(t, "", func(c *Config) { c.CallbackAllow = []string{hooks.URL + "/hook/"} })
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	j := func(id int64, group string) api.JobSpec {
		return api.JobSpec{JobID: id, Name: fmt.Sprintf("j%d", id), Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: group}
	}
	bad := []string{
		"http://169.254.169.254/latest/meta-data/",
		hooks.URL + "/other",
		hooks.URL + "/hook/../admin",
		hooks.URL + "/hook/%2e%2e/admin",
		strings.Replace(hooks.URL, "127.0.0.1", "localhost", 1) + "/hook/x",
		hooks.URL + "@evil.example.com/hook/",
		"file:///etc/passwd",
	}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: []api.JobGroupSpec{{Path: "ok", Callback: hooks.URL + "/hook/ok"}},
		Jobs: []api.JobSpec{j(1, "ok")}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := alice.CreateUpdate(ctx, b.ID, &api.CreateUpdateRequest{NJobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, cb := range bad {
		groups := []api.JobGroupSpec{{Path: "evil", Callback: cb}}
		if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", JobGroups: groups, Jobs: []api.JobSpec{j(1, "evil")}}); !api.IsStatus(err, http.StatusBadRequest) {
			t.Errorf("new batch, group callback %s: %v", cb, err)
		}
		if _, err := alice.CreateUpdate(ctx, b.ID, &api.CreateUpdateRequest{JobGroups: groups, Jobs: []api.JobSpec{j(1, "evil")}}); !api.IsStatus(err, http.StatusBadRequest) {
			t.Errorf("update, group callback %s: %v", cb, err)
		}
		err := alice.Do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/batches/%d/updates/%d/jobs", b.ID, u.UpdateID),
			&api.AddJobsRequest{JobGroups: groups, Jobs: []api.JobSpec{j(1, "evil")}}, nil)
		if !api.IsStatus(err, http.StatusBadRequest) {
			t.Errorf("bunch, group callback %s: %v", cb, err)
		}
	}
	// An existing group keeps its callback.
	_, err = alice.CreateUpdate(ctx, b.ID, &api.CreateUpdateRequest{JobGroups: []api.JobGroupSpec{{Path: "ok", Callback: hooks.URL + "/hook/stolen"}}, Jobs: []api.JobSpec{j(1, "ok")}})
	if !api.IsStatus(err, http.StatusConflict) {
		t.Errorf("a new callback for an existing group: %v", err)
	}
	gs, err := alice.JobGroups(ctx, b.ID)
	if err != nil || len(gs) != 1 || gs[0].Callback != hooks.URL+"/hook/ok" {
		t.Fatalf("groups after the refusals: %+v, %v", gs, err)
	}
}

// TestAttackJobGroupsReportedEachCompletion: a group that completes, is
// retried and completes again is reported twice, each time as it stood,
// and no more.
func TestAttackJobGroupsReportedEachCompletion(t *testing.T) {
	hooks, got := groupHooks(t)
	tc := startServer(t, "", func(c *Config) {
		c.CallbackAllow = []string{hooks.URL + "/hook/"}
		c.CallbackRetry = 20 * time.Millisecond
	})
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-attack", 2)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics",
		JobGroups: []api.JobGroupSpec{{Path: "g", Callback: hooks.URL + "/hook/g"}},
		Jobs:      []api.JobSpec{{JobID: 1, Name: "a", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "g"}}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(outcome string) {
		t.Helper()
		var assigned []api.Assignment
		for deadline := time.Now().Add(20 * time.Second); len(assigned) == 0 && time.Now().Before(deadline); {
			assigned = w.sync(time.Second).Assign
		}
		if len(assigned) != 1 {
			t.Fatalf("assigned %+v", assigned)
		}
		now := time.Now()
		w.events = []api.AttemptEvent{{AttemptRef: assigned[0].AttemptRef, Kind: api.EventCompleted, Outcome: outcome, ExitCode: map[bool]int{true: 1}[outcome == api.OutcomeFailed], StartTime: now, EndTime: now}}
		w.known = nil
		w.sync(0)
	}
	run(api.OutcomeFailed)
	if posts := waitPosts(t, got, "/hook/g", 1); len(posts) != 1 || posts[0].NFailed != 1 || posts[0].State != api.BatchComplete {
		t.Fatalf("after the first completion: %+v", posts)
	}
	if _, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{}); err != nil {
		t.Fatal(err)
	}
	run(api.OutcomeSuccess)
	posts := waitPosts(t, got, "/hook/g", 2)
	if len(posts) != 2 || posts[1].NSucceeded != 1 || posts[1].NFailed != 0 {
		t.Fatalf("after the second completion, POSTs %+v; want 2, the second a success", posts)
	}
}
