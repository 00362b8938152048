package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/testkit/testlog"
	"github.com/drover-sched/drover/version"
)

func testLogger(t *testing.T) *slog.Logger {
	return testlog.New(t)
}

type testCluster struct {
	t     *testing.T
	srv   *Server
	dir   string
	url   string
	admin *api.Client
}

func startServer(t *testing.T, dir string, tweak func(*Config)) *testCluster {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := TestConfig(dir, testLogger(t))
	if tweak != nil {
		tweak(cfg)
	}
	srv, token, err := StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{t: t, srv: srv, dir: dir, url: "http://" + srv.HTTPAddr()}
	tc.admin = api.NewClient(tc.url, token)
	// The tests assert what the server answers, not how fast: on a
	// loaded machine (make test runs packages side by side) one Raft
	// write has taken longer than the client's 5 s attempt deadline.
	tc.admin.AttemptTimeout, tc.admin.RetryUnreachable = 2*time.Minute, 2*time.Minute
	t.Cleanup(func() { tc.stop() })
	return tc
}

func (tc *testCluster) stop() {
	if tc.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tc.srv.Shutdown(ctx)
	tc.srv = nil
}

// raw sends a request and returns the status code and decoded error message.
func (tc *testCluster) raw(method, path, token, body string) (int, string) {
	tc.t.Helper()
	req, err := http.NewRequest(method, tc.url+path, strings.NewReader(body))
	if err != nil {
		tc.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tc.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			tc.t.Fatalf("%s %s: error with content type %q: %s", method, path, ct, data)
		}
		var e api.ErrorResponse
		if err := json.Unmarshal(data, &e); err != nil || e.Error == "" {
			tc.t.Fatalf("%s %s: error body is not {\"error\": ...}: %s", method, path, data)
		}
		return resp.StatusCode, e.Error
	}
	return resp.StatusCode, string(data)
}

func (tc *testCluster) user(name string, projects ...string) *api.Client {
	tc.t.Helper()
	ctx := context.Background()
	u, err := tc.admin.CreateUser(ctx, &api.CreateUserRequest{Name: name})
	if err != nil {
		tc.t.Fatal(err)
	}
	for _, p := range projects {
		if _, err := tc.admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: p}); err != nil && !api.IsStatus(err, http.StatusConflict) {
			tc.t.Fatal(err)
		}
		if err := tc.admin.AddMember(ctx, p, name); err != nil {
			tc.t.Fatal(err)
		}
	}
	return api.NewClient(tc.url, u.Token)
}

func job(id int64, name string, parents ...int64) api.JobSpec {
	return api.JobSpec{JobID: id, Name: name, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, ParentIDs: parents}
}

func TestAPIStatusCodesAndErrors(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	tc.user("bob", "physics")
	aliceTok := userToken(t, alice)

	cases := []struct {
		name, method, path, token, body string
		code                            int
		msg                             string
	}{
		{"health needs no token", "GET", "/api/v1/health", "", "", 200, ""},
		{"missing token", "GET", "/api/v1/batches", "", "", 401, "missing token"},
		{"bad token", "GET", "/api/v1/batches", "nope", "", 401, "invalid token"},
		{"unknown endpoint", "GET", "/api/v1/nothing", aliceTok, "", 404, "no such endpoint"},
		{"wrong method", "DELETE", "/api/v1/batches", aliceTok, "", 405, "not allowed"},
		{"malformed json", "POST", "/api/v1/batches", aliceTok, "{", 400, "not valid"},
		{"empty body", "POST", "/api/v1/batches", aliceTok, "", 400, "empty"},
		{"unknown field", "POST", "/api/v1/batches", aliceTok, `{"billing_project":"genomics","jobz":[]}`, 400, `unknown field "jobz"`},
		{"empty command", "POST", "/api/v1/batches", aliceTok, `{"billing_project":"genomics","jobs":[{"job_id":1,"name":"x","command":[]}]}`, 400, `jobs[0] (job_id 1, "x"): command is empty`},
		{"negative cpu", "POST", "/api/v1/batches", aliceTok, `{"billing_project":"genomics","jobs":[{"job_id":1,"command":["true"],"cpu":-1}]}`, 400, "cpu is -1"},
		{"job outside update", "POST", "/api/v1/batches", aliceTok, `{"billing_project":"genomics","jobs":[{"job_id":2,"command":["true"]}]}`, 400, "outside this update"},
		{"cycle", "POST", "/api/v1/batches", aliceTok, `{"billing_project":"genomics","jobs":[{"job_id":1,"command":["true"],"parent_ids":[2]},{"job_id":2,"command":["true"],"parent_ids":[1]}]}`, 400, "dependency cycle"},
		{"not a member", "POST", "/api/v1/batches", aliceTok, `{"billing_project":"physics","jobs":[{"job_id":1,"command":["true"]}]}`, 403, `not a member of billing project "physics"`},
		{"unknown project", "POST", "/api/v1/batches", aliceTok, `{"billing_project":"nope","jobs":[{"job_id":1,"command":["true"]}]}`, 404, `billing project "nope" does not exist`},
		{"missing batch", "GET", "/api/v1/batches/999", aliceTok, "", 404, "batch 999 does not exist"},
		{"bad batch id", "GET", "/api/v1/batches/abc", aliceTok, "", 400, "not a positive integer"},
		{"bad filter", "GET", "/api/v1/batches?q=colour%3Dred", aliceTok, "", 400, "unknown filter term"},
		{"bad last_id", "GET", "/api/v1/batches?last_id=x", aliceTok, "", 400, "last_id"},
		{"admin only", "POST", "/api/v1/users", aliceTok, `{"name":"carol"}`, 403, "not an admin"},
		{"admin only list", "GET", "/api/v1/instances", aliceTok, "", 403, "not an admin"},
		{"bad user name", "POST", "/api/v1/users", tc.admin.Token(), `{"name":"has space"}`, 400, "invalid user name"},
		{"duplicate user", "POST", "/api/v1/users", tc.admin.Token(), `{"name":"alice"}`, 409, "already exists"},
		{"worker endpoint needs worker token", "POST", "/api/v1/workers/sync", aliceTok, `{}`, 401, "unknown worker token"},
		{"wrong worker secret", "POST", "/api/v1/workers/activate", "", `{"name":"w","cpu":1,"memory":1000,"secret":"wrong"}`, 401, "worker secret does not match"},
		{"bad activation", "POST", "/api/v1/workers/activate", "", `{"name":"","cpu":1,"memory":1000,"secret":"test-secret"}`, 400, "needs a name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, msg := tc.raw(c.method, c.path, c.token, c.body)
			if code != c.code {
				t.Fatalf("status %d (%s), want %d", code, msg, c.code)
			}
			if c.msg != "" && !strings.Contains(msg, c.msg) {
				t.Fatalf("message %q does not mention %q", msg, c.msg)
			}
		})
	}

	// Tenancy: bob cannot see or cancel alice's batch; the admin can.
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{job(1, "a")}})
	if err != nil {
		t.Fatal(err)
	}
	bobTok := userToken(t, tc.user("bob2", "physics"))
	for _, p := range []string{fmt.Sprintf("/api/v1/batches/%d", b.ID), fmt.Sprintf("/api/v1/batches/%d/jobs", b.ID)} {
		if code, msg := tc.raw("GET", p, bobTok, ""); code != 403 || !strings.Contains(msg, "not a member") {
			t.Fatalf("bob GET %s: %d %s", p, code, msg)
		}
	}
	if code, _ := tc.raw("POST", fmt.Sprintf("/api/v1/batches/%d/cancel", b.ID), bobTok, ""); code != 403 {
		t.Fatalf("bob cancelled alice's batch: %d", code)
	}
	if list, err := api.NewClient(tc.url, bobTok).ListBatches(ctx, "", 0); err != nil || len(list.Batches) != 0 {
		t.Fatalf("bob lists %v, %v", list, err)
	}
	if _, err := tc.admin.GetBatch(ctx, b.ID); err != nil {
		t.Fatalf("admin cannot see the batch: %v", err)
	}
	// Idempotency: the same key gives the same batch.
	req := &api.CreateBatchRequest{BillingProject: "genomics", IdempotencyKey: "k", Jobs: []api.JobSpec{job(1, "a")}}
	b1, err := alice.CreateBatch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := alice.CreateBatch(ctx, req)
	if err != nil || b2.ID != b1.ID {
		t.Fatalf("retried create: %v %v", b2, err)
	}
	// Cancel, then updates are refused with 409.
	if err := alice.CancelBatch(ctx, b1.ID); err != nil {
		t.Fatal(err)
	}
	_, err = alice.CreateUpdate(ctx, b1.ID, &api.CreateUpdateRequest{Jobs: []api.JobSpec{job(1, "late")}})
	if !api.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("update of a cancelled batch: %v", err)
	}
}

func userToken(t *testing.T, c *api.Client) string { return c.Token() }

func TestUpdateFlowOverHTTP(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	res, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{NJobs: 5, Attributes: map[string]string{"sample": "NA1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.UpdateID != 1 || res.StartJobID != 1 || res.State != api.BatchRunning {
		t.Fatalf("create: %+v", res)
	}
	bunch1 := []api.JobSpec{{JobID: 1, Name: "arr", Count: 3, Command: []string{"true"}}}
	bunch2 := []api.JobSpec{{JobID: 4, Name: "x", Command: []string{"true"}, ParentRanges: []api.IDRange{{1, 3}}}, job(5, "y", 4)}
	if err := tc.admin.AddJobs(ctx, res.ID, 1, bunch2); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.CommitUpdate(ctx, res.ID, 1); !api.IsStatus(err, 400) || !strings.Contains(err.Error(), "has 2 of its 5 jobs") {
		t.Fatalf("early commit: %v", err)
	}
	if err := tc.admin.AddJobs(ctx, res.ID, 1, bunch1); err != nil {
		t.Fatal(err)
	}
	if err := tc.admin.AddJobs(ctx, res.ID, 1, bunch1); err != nil {
		t.Fatalf("retried bunch: %v", err)
	}
	ur, err := tc.admin.CommitUpdate(ctx, res.ID, 1)
	if err != nil || !ur.Committed {
		t.Fatalf("commit: %+v %v", ur, err)
	}
	jobs, err := tc.admin.AllJobs(ctx, res.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, j := range jobs {
		states = append(states, j.Name+"="+j.State)
	}
	if got := strings.Join(states, " "); got != "arr[0]=ready arr[1]=ready arr[2]=ready x=pending y=pending" {
		t.Fatalf("jobs: %s", got)
	}
	list, err := tc.admin.ListBatches(ctx, "attr:sample=NA1", 0)
	if err != nil || len(list.Batches) != 1 {
		t.Fatalf("filter by attribute: %+v %v", list, err)
	}
	// A second update referring to the first by batch job IDs.
	u2, err := tc.admin.CreateUpdate(ctx, res.ID, &api.CreateUpdateRequest{Jobs: []api.JobSpec{
		{JobID: 1, Name: "after", Command: []string{"true"}, BatchParentIDs: []int64{5}},
	}})
	if err != nil || u2.StartJobID != 6 || !u2.Committed {
		t.Fatalf("second update: %+v %v", u2, err)
	}
	j, err := tc.admin.GetJob(ctx, res.ID, 6)
	if err != nil || j.State != api.JobPending || len(j.Parents) != 1 || j.Parents[0] != (api.IDRange{5, 5}) {
		t.Fatalf("job 6: %+v %v", j, err)
	}
}

// simWorker drives the worker protocol by hand.
type simWorker struct {
	t      *testing.T
	c      *api.Client
	id     int64
	known  []api.AttemptRef
	events []api.AttemptEvent
}

func newSimWorker(t *testing.T, tc *testCluster, name string, cpu float64) *simWorker {
	return activateSimWorker(t, tc, &api.ActivateRequest{Name: name, CPU: cpu, Memory: 64 << 30})
}

// activateSimWorker activates a simulated worker as req says (with the
// cluster's worker secret).
func activateSimWorker(t *testing.T, tc *testCluster, req *api.ActivateRequest) *simWorker {
	t.Helper()
	c := api.NewClient(tc.url, "")
	req.Secret = "test-secret"
	res, err := c.Workers().Activate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(res.Token)
	return &simWorker{t: t, c: c, id: res.InstanceID}
}

func (w *simWorker) sync(wait time.Duration) *api.SyncResponse {
	w.t.Helper()
	res, err := w.c.Workers().Sync(context.Background(), &api.SyncRequest{Events: w.events, Known: w.known, WaitMillis: wait.Milliseconds()})
	if err != nil {
		w.t.Fatal(err)
	}
	if res.Acked != len(w.events) {
		w.t.Fatalf("acked %d of %d events", res.Acked, len(w.events))
	}
	w.events = nil
	return res
}

func TestWorkerProtocol(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	w := newSimWorker(t, tc, "sim-1", 2)
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{
		{JobID: 1, Name: "a", Count: 3, Command: []string{"echo", "hi"}, CPU: 1, Memory: 1 << 20, Env: map[string]string{"K": "V"}, TimeoutSeconds: 5},
		job(4, "b", 1, 2, 3),
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The sync is held until the scheduler places work here.
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 2 {
		t.Fatalf("assigned %d jobs to a 2-core worker, want 2", len(res.Assign))
	}
	a := res.Assign[0]
	if a.Name != "a[0]" || a.ArrayIndex != 0 || a.Attempt != 1 || a.Env["K"] != "V" || a.TimeoutSeconds != 5 {
		t.Fatalf("assignment %+v", a)
	}
	// Log chunks for an attempt of this instance are stored and readable.
	if err := w.c.Workers().UploadLogChunk(ctx, a.AttemptRef, 0, []byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if err := w.c.Workers().UploadLogChunk(ctx, a.AttemptRef, 1, []byte("world\n")); err != nil {
		t.Fatal(err)
	}
	other := api.AttemptRef{BatchID: b.ID, JobID: 3, Attempt: 1}
	if err := w.c.Workers().UploadLogChunk(ctx, other, 0, []byte("x")); !api.IsStatus(err, 403) {
		t.Fatalf("upload for an attempt not on this instance: %v", err)
	}
	if log, err := tc.admin.JobLog(ctx, b.ID, 1, 0); err != nil || string(log) != "hello world\n" {
		t.Fatalf("log %q %v", log, err)
	}
	if _, err := tc.admin.JobLog(ctx, b.ID, 4, 0); !api.IsStatus(err, 404) || !strings.Contains(err.Error(), "has not started") {
		t.Fatalf("log of a pending job: %v", err)
	}
	now := time.Now()
	for _, as := range res.Assign {
		w.known = append(w.known, as.AttemptRef)
		w.events = append(w.events, api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: now, EndTime: now.Add(time.Millisecond)})
	}
	// A repeated event (say, after a lost response) changes nothing.
	w.events = append(w.events, w.events[0])
	res = w.sync(5 * time.Second)
	w.known = nil
	for _, as := range res.Assign {
		w.known = append(w.known, as.AttemptRef)
	}
	if len(res.Assign) != 1 || res.Assign[0].JobID != 3 {
		t.Fatalf("after completing 2 jobs: %+v", res.Assign)
	}
	// Kill: a cancelled batch's running attempts are killed through sync.
	if err := tc.admin.CancelBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	res = w.sync(0)
	if len(res.Kill) != 1 || res.Kill[0].JobID != 3 {
		t.Fatalf("kills %+v", res.Kill)
	}
	w.events = []api.AttemptEvent{{AttemptRef: res.Kill[0], Kind: api.EventCompleted, Outcome: api.OutcomeCancelled, StartTime: now, EndTime: time.Now()}}
	w.sync(0)
	bt, _ := tc.admin.GetBatch(ctx, b.ID)
	if bt.State != api.BatchComplete || bt.NSucceeded != 2 || bt.NCancelled != 2 {
		t.Fatalf("batch %+v", bt)
	}
	// A worker may say it is stopping only attempts it holds: a list
	// longer than what it holds is refused, naming why.
	_, err = w.c.Workers().Sync(ctx, &api.SyncRequest{Stopping: []api.AttemptRef{{BatchID: 1, JobID: 1, Attempt: 1}}})
	if !api.IsStatus(err, 400) || !strings.Contains(err.Error(), "stops only attempts it holds") {
		t.Fatalf("stopping what it does not hold: %v", err)
	}
	// Bad events are refused with a reason.
	_, err = w.c.Workers().Sync(ctx, &api.SyncRequest{Events: []api.AttemptEvent{{AttemptRef: api.AttemptRef{BatchID: 1, JobID: 1, Attempt: 1}, Kind: "exploded"}}})
	if !api.IsStatus(err, 400) || !strings.Contains(err.Error(), "kind") {
		t.Fatalf("bad event: %v", err)
	}
	// Deactivation retires the instance; its token stops working with 410.
	if err := w.c.Workers().Deactivate(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.Workers().Sync(ctx, &api.SyncRequest{}); !api.IsStatus(err, http.StatusGone) {
		t.Fatalf("sync after deactivate: %v", err)
	}
}

func TestLostWorkerJobsRunElsewhere(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.LostTimeout = time.Second })
	ctx := context.Background()
	w1 := newSimWorker(t, tc, "w1", 1)
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{job(1, "a")}})
	if err != nil {
		t.Fatal(err)
	}
	if res := w1.sync(5 * time.Second); len(res.Assign) != 1 {
		t.Fatalf("w1 got %d assignments", len(res.Assign))
	}
	// w1 goes silent; after LostTimeout its job is given to w2 (whose
	// syncs are held a quarter of LostTimeout at most: it syncs again).
	w2 := newSimWorker(t, tc, "w2", 1)
	var res *api.SyncResponse
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if res = w2.sync(10 * time.Second); len(res.Assign) > 0 {
			break
		}
	}
	if len(res.Assign) != 1 || res.Assign[0].Attempt != 2 {
		t.Fatalf("w2 got %+v, want attempt 2 of the lost job", res.Assign)
	}
	j, _ := tc.admin.GetJob(ctx, b.ID, 1)
	if len(j.Attempts) != 2 || j.Attempts[0].State != "lost" || !strings.Contains(j.Attempts[0].Message, "no contact") {
		t.Fatalf("attempts %+v", j.Attempts)
	}
}

func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	tc := startServer(t, dir, func(c *Config) { c.SnapshotThreshold = 4; c.TrailingLogs = 2 })
	ctx := context.Background()
	for i := 0; i < 12; i++ {
		if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: fmt.Sprint("b", i), Jobs: []api.JobSpec{{JobID: 1, Count: 50, Command: []string{"true"}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tc.srv.raft.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "after-snapshot", Jobs: []api.JobSpec{job(1, "x")}}); err != nil {
		t.Fatal(err)
	}
	if err := tc.srv.api.WaitAudit(ctx); err != nil {
		t.Fatal(err)
	}
	// The leader's first export round adopts the history store (a Raft
	// entry, once): on a loaded machine it may come after the batches,
	// so wait for it, or it lands between the snapshot and the stop.
	waitFor(t, "the history store adopted", func() bool { return tc.srv.State().Lineage().Store != "" })
	before := state.SnapshotBytes(t, tc.srv.state)
	tc.stop()
	tc2 := startServer(t, dir, nil)
	if after := state.SnapshotBytes(t, tc2.srv.state); !bytes.Equal(before, after) {
		t.Fatal("state after restart differs from before")
	}
	list, err := tc2.admin.ListBatches(ctx, "", 0)
	if err != nil || len(list.Batches) != 13 || list.Batches[0].Name != "after-snapshot" {
		t.Fatalf("after restart: %d batches, %v", len(list.Batches), err)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	tc := startServer(t, "", nil)
	resp, err := http.Get(tc.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"drover_is_leader 1", `drover_jobs{state="ready"}`, "drover_raft_apply_seconds", "drover_raft_last_contact_seconds", "drover_raft_peers 1",
		`drover_build_info{version="` + version.Get() + `"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Open metrics leave out the Raft term and indexes (see
	// TestPublicEndpointsNameNoRaftAddress for those behind a token).
	for _, hidden := range []string{"drover_raft_term", "drover_raft_applied_index", "drover_raft_commit_index", "drover_raft_last_index"} {
		if strings.Contains(string(body), hidden) {
			t.Errorf("open /metrics show %q", hidden)
		}
	}
}

// TestCancelBeforeWorkerTakesAttempt: jobs placed on an instance whose batch
// is cancelled before the worker syncs must still end, or the batch would
// never complete.
func TestCancelBeforeWorkerTakesAttempt(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	w := newSimWorker(t, tc, "slow-worker", 2)
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{{JobID: 1, Count: 5, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		bt, _ := tc.admin.GetBatch(ctx, b.ID)
		if bt.NRunning == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs not placed: %+v", bt)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tc.admin.CancelBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if bt, _ := tc.admin.GetBatch(ctx, b.ID); bt.State == api.BatchComplete {
		t.Fatal("complete while two attempts are placed")
	}
	res := w.sync(0)
	if len(res.Assign) != 0 || len(res.Kill) != 0 {
		t.Fatalf("sync %+v", res)
	}
	bt, _ := tc.admin.GetBatch(ctx, b.ID)
	if bt.State != api.BatchComplete || bt.NCancelled != 5 {
		t.Fatalf("batch %+v", bt)
	}
	j, _ := tc.admin.GetJob(ctx, b.ID, 1)
	if len(j.Attempts) != 1 || j.Attempts[0].State != "cancelled" || !strings.Contains(j.Attempts[0].Message, "before the attempt started") {
		t.Fatalf("job %+v", j)
	}
}

// TestShutdownDoesNotWaitForIdleNewConnections: a client's spare connection
// that never sent a request must not hold a shutdown (net/http would wait
// 5 seconds for it).
func TestShutdownDoesNotWaitForIdleNewConnections(t *testing.T) {
	tc := startServer(t, "", nil)
	conn, err := net.Dial("tcp", tc.srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(100 * time.Millisecond) // the server has accepted it
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := tc.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown after %s: %v", time.Since(start), err)
	}
	tc.srv = nil
}

// TestBulkEndpointsSpeakJSONAndMsgpack: a client that sends JSON and one
// that sends MessagePack (the Go client's default) submit the same batch
// through bunches and run it through worker syncs alike, and each is
// answered in the encoding it asked for.
func TestBulkEndpointsSpeakJSONAndMsgpack(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	for _, jsonOnly := range []bool{true, false} {
		cl := api.NewClient(tc.url, tc.admin.Token())
		cl.JSONOnly = jsonOnly
		b, err := cl.Submit(ctx, &api.CreateBatchRequest{Name: fmt.Sprint("json-only-", jsonOnly)},
			api.GeneratedJobs{N: 30, Make: func(i int) api.JobSpec { return job(int64(i+1), fmt.Sprint("j", i)) }},
			&api.SubmitOptions{InlineEntries: 5, BunchSize: 7})
		if err != nil {
			t.Fatalf("json-only=%v: %v", jsonOnly, err)
		}
		w := api.NewClient(tc.url, "")
		w.JSONOnly = jsonOnly
		act, err := w.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", NodeID: fmt.Sprint("n-", jsonOnly), CPU: 64, Memory: 64 << 30, Secret: tc.srv.cfg.WorkerSecret})
		if err != nil {
			t.Fatal(err)
		}
		w.SetToken(act.Token)
		res, err := w.Workers().Sync(ctx, &api.SyncRequest{WaitMillis: 5000})
		if err != nil || len(res.Assign) != 30 || res.Assign[0].Command[0] != "true" {
			t.Fatalf("json-only=%v: sync %+v %v", jsonOnly, res, err)
		}
		var evs []api.AttemptEvent
		now := time.Now()
		for _, a := range res.Assign {
			evs = append(evs, api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: now, EndTime: now})
		}
		if res, err := w.Workers().Sync(ctx, &api.SyncRequest{Events: evs}); err != nil || res.Acked != 30 {
			t.Fatalf("json-only=%v: completing: %+v %v", jsonOnly, res, err)
		}
		got, err := cl.GetBatch(ctx, b.ID)
		if err != nil || got.NSucceeded != 30 || got.State != api.BatchComplete {
			t.Fatalf("json-only=%v: batch %+v %v", jsonOnly, got, err)
		}
		if err := w.Workers().Deactivate(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	// The answer's encoding follows Accept.
	req, _ := http.NewRequest("POST", tc.url+"/api/v1/batches", strings.NewReader(`{"name": "x"}`))
	req.Header.Set("Authorization", "Bearer "+tc.admin.Token())
	req.Header.Set("Accept", api.MsgpackContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out api.CreateBatchResponse
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 201 || ct != api.MsgpackContentType || api.UnmarshalMsgpack(data, &out) != nil || out.Name != "x" {
		t.Fatalf("create with Accept msgpack: %d %q %+v", resp.StatusCode, ct, out)
	}
}

// TestUsageSampleOfAnotherWorkersAttempt: a worker that sends a usage
// sample for an attempt running on another worker neither changes its
// usage nor uses up the owner's sample slot.
func TestUsageSampleOfAnotherWorkersAttempt(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	w := newSimWorker(t, tc, "sim-owner", 1)
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{
		{JobID: 1, Name: "u", Command: []string{"true"}, CPU: 1, Memory: 1 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 1 {
		t.Fatalf("assigned %d", len(res.Assign))
	}
	a := res.Assign[0].AttemptRef
	w.known = []api.AttemptRef{a}
	started := time.Now().Add(-10 * time.Second)
	w.events = []api.AttemptEvent{{AttemptRef: a, Kind: api.EventStarted, StartTime: started}}
	w.sync(0)

	other := newSimWorker(t, tc, "sim-other", 1)
	other.events = []api.AttemptEvent{{AttemptRef: a, Kind: api.EventUsage, StartTime: started, Usage: &api.Usage{CPUSeconds: 1, PeakMemory: 1 << 20}}}
	other.sync(0)
	usage := func() *api.Usage {
		j, err := tc.admin.GetJob(ctx, b.ID, a.JobID)
		if err != nil {
			t.Fatal(err)
		}
		return j.Attempts[len(j.Attempts)-1].Usage
	}
	if u := usage(); u != nil && u.CPUSeconds != 0 {
		t.Fatalf("another worker's sample changed the attempt's usage: %+v", u)
	}
	w.events = []api.AttemptEvent{{AttemptRef: a, Kind: api.EventUsage, StartTime: started, Usage: &api.Usage{CPUSeconds: 4, PeakMemory: 100 << 20}}}
	w.sync(0)
	if u := usage(); u == nil || u.CPUSeconds != 4 {
		t.Fatalf("the owner's sample after another worker's did not reach the attempt: %+v", u)
	}
}

// TestWorkerUsageAndPreemption: a worker's usage samples reach the job's
// attempt (a second one within the minimum gap does not reach the log),
// usage beyond what the instance can give is refused with a 400 naming
// the bound, the completed event's usage is the attempt's, and a worker
// that leaves preempted has its remaining attempts run again with no
// failure or lost attempt counted.
func TestWorkerUsageAndPreemption(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	w := newSimWorker(t, tc, "sim-u", 2)
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{
		{JobID: 1, Name: "u", Count: 2, Command: []string{"true"}, CPU: 1, Memory: 1 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 2 {
		t.Fatalf("assigned %d", len(res.Assign))
	}
	a1, a2 := res.Assign[0].AttemptRef, res.Assign[1].AttemptRef
	w.known = []api.AttemptRef{a1, a2}
	started := time.Now().Add(-10 * time.Second)
	w.events = []api.AttemptEvent{
		{AttemptRef: a1, Kind: api.EventStarted, StartTime: started},
		{AttemptRef: a2, Kind: api.EventStarted, StartTime: started},
		{AttemptRef: a1, Kind: api.EventUsage, StartTime: started, Usage: &api.Usage{CPUSeconds: 4, PeakMemory: 100 << 20}},
	}
	w.sync(0)
	usage := func(ref api.AttemptRef) *api.Usage {
		j, err := tc.admin.GetJob(ctx, b.ID, ref.JobID)
		if err != nil {
			t.Fatal(err)
		}
		return j.Attempts[len(j.Attempts)-1].Usage
	}
	if u := usage(a1); u == nil || u.CPUSeconds != 4 || u.PeakMemory != 100<<20 {
		t.Fatalf("usage after a sample: %+v", u)
	}
	// A second sample within the gap is acknowledged but not kept.
	w.events = []api.AttemptEvent{{AttemptRef: a1, Kind: api.EventUsage, StartTime: started, Usage: &api.Usage{CPUSeconds: 5}}}
	w.sync(0)
	if u := usage(a1); u.CPUSeconds != 4 {
		t.Fatalf("a sample sooner than the gap was kept: %+v", u)
	}
	// More CPU than 2 cores give over 10 s (plus a minute of slack).
	_, err = w.c.Workers().Sync(ctx, &api.SyncRequest{Events: []api.AttemptEvent{{AttemptRef: a2, Kind: api.EventUsage, StartTime: started, Usage: &api.Usage{CPUSeconds: 500}}}})
	if !api.IsStatus(err, 400) || !strings.Contains(err.Error(), "more than the instance's 2 cores") {
		t.Fatalf("impossible usage: %v", err)
	}
	w.events = []api.AttemptEvent{{AttemptRef: a1, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: started, EndTime: time.Now(),
		Usage: &api.Usage{CPUSeconds: 6, PeakMemory: 120 << 20, BytesIn: 3, BytesOut: 4, InputSeconds: 0.5}}}
	w.sync(0)
	if u := usage(a1); u == nil || u.CPUSeconds != 6 || u.BytesOut != 4 || u.InputSeconds != 0.5 {
		t.Fatalf("final usage: %+v", u)
	}
	// The worker leaves preempted with job 2 still running.
	if err := w.c.Workers().Deactivate(ctx, true); err != nil {
		t.Fatal(err)
	}
	j2, _ := tc.admin.GetJob(ctx, b.ID, a2.JobID)
	if j2.State != api.JobReady || len(j2.Attempts) != 1 || j2.Attempts[0].State != api.OutcomePreempted {
		t.Fatalf("job 2 after its worker left preempted: %+v", j2)
	}
	w2 := newSimWorker(t, tc, "sim-v", 2)
	res = w2.sync(5 * time.Second)
	if len(res.Assign) != 1 || res.Assign[0].Attempt != 2 {
		t.Fatalf("the preempted job is not run again: %+v", res.Assign)
	}
}
