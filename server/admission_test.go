package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// TestAdmissionRefusesWhatApplyCouldNotHold: a batch whose job count (or
// n_jobs reservation) is beyond the per-batch limit or the state's memory
// budget is refused with 413 before it reaches Raft. Before admission, a
// jobspec with count = 2147483647 made every server allocate 64 GiB at
// apply and die again on every replay of the committed entry.
func TestAdmissionRefusesWhatApplyCouldNotHold(t *testing.T) {
	tc := startServer(t, "", func(cfg *Config) {
		cfg.MaxJobsPerBatch = 1000
		cfg.StateMemoryBudget = 4 << 20
	})
	ctx := context.Background()
	tok := tc.admin.Token()
	heap := func() uint64 {
		m, err := tc.admin.Operator().Memory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m.HeapAlloc
	}
	before := heap()
	huge := `{"jobs": [{"job_id": 1, "name": "a", "command": ["true"], "count": 2147483647}]}`
	for _, c := range []struct{ path, body, want string }{
		{"/api/v1/batches", huge, "limit is 1000 jobs per batch (server setting max_jobs_per_batch)"},
		{"/api/v1/batches", `{"n_jobs": 2147483647}`, "limit is 1000 jobs per batch"},
		{"/api/v1/batches", `{"n_jobs": 1001}`, "the new batch would hold 1001 jobs"},
	} {
		code, msg := tc.raw("POST", c.path, tok, c.body)
		if code != 413 || !strings.Contains(msg, c.want) {
			t.Errorf("POST %s %.60s: %d %q, want 413 naming %q", c.path, c.body, code, msg, c.want)
		}
	}
	// An update may not take a batch past the limit either.
	code, body := tc.raw("POST", "/api/v1/batches", tok, `{"n_jobs": 600}`)
	if code != 201 {
		t.Fatalf("a batch within the limit: %d %s", code, body)
	}
	var id int64
	fmt.Sscanf(body[strings.Index(body, `"id":`)+5:], "%d", &id)
	if code, msg := tc.raw("POST", fmt.Sprintf("/api/v1/batches/%d/updates", id), tok, `{"n_jobs": 401}`); code != 413 || !strings.Contains(msg, "the batch would hold 1001 jobs") {
		t.Errorf("update past the limit: %d %q", code, msg)
	}
	if code, _ := tc.raw("POST", fmt.Sprintf("/api/v1/batches/%d/updates", id), tok, `{"n_jobs": 400}`); code != 201 {
		t.Errorf("update up to the limit: %d", code)
	}
	// The memory budget (4 MiB here, about 100,000 array jobs) counts every
	// batch held.
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("200 batches of 1,000 jobs fit in a 4 MiB budget")
		}
		code, msg := tc.raw("POST", "/api/v1/batches", tok, `{"jobs": [{"job_id": 1, "name": "a", "command": ["true"], "count": 1000}]}`)
		if code == 413 {
			if !strings.Contains(msg, "the limit is 4 MiB (server setting state_memory_budget)") {
				t.Fatalf("budget refusal: %q", msg)
			}
			if i < 90 || i > 110 {
				t.Fatalf("the budget refused batch %d; about 100 of 1,000 jobs should fit in 4 MiB", i+1)
			}
			break
		}
		if code != 201 {
			t.Fatalf("batch %d: %d %s", i+1, code, msg)
		}
	}
	if grown := int64(heap()) - int64(before); grown > 32<<20 {
		t.Fatalf("the heap grew by %d MiB while refusing", grown>>20)
	}
	// Nothing refused reached the log: the server restarts on its data dir.
	dir := tc.dir
	tc.stop()
	again := startServer(t, dir, nil)
	if _, err := again.admin.ListBatches(ctx, "", 0); err != nil {
		t.Fatal(err)
	}
}

// TestUnauthenticatedAndSlowRequestsAreCut: a stranger's activation body
// is refused past 64 KiB, and a client that stops sending half-way
// through a body is cut off by the read timeout instead of holding a
// connection and a goroutine forever.
func TestUnauthenticatedAndSlowRequestsAreCut(t *testing.T) {
	tc := startServer(t, "", func(cfg *Config) { cfg.HTTPReadTimeout = 300 * time.Millisecond })
	big := `{"name": "w", "cpu": 1, "memory": 1, "secret": "` + strings.Repeat("x", 70<<10) + `"}`
	if code, msg := tc.raw("POST", "/api/v1/workers/activate", "", big); code != 413 || !strings.Contains(msg, "larger than 64 KiB") {
		t.Fatalf("oversized activation: %d %q", code, msg)
	}
	conn, err := net.Dial("tcp", tc.srv.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v1/workers/activate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":")
	// Cut after the 300 ms read timeout; held, it would stay open until
	// the client gives up (the margin is for a loaded machine).
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = io.ReadAll(conn)
	if took := time.Since(start); err != nil || took > 20*time.Second {
		t.Fatalf("a stalled body held the connection for %s (%v)", took, err)
	}
}

// TestOversizedInputsAreRefused posts each input beyond a limit and checks
// the 4xx names the limit, that nothing but its audit entry reached the
// Raft log (no command a request makes was applied) and that the heap did
// not grow with the input.
func TestOversizedInputsAreRefused(t *testing.T) {
	tc := startServer(t, "", func(cfg *Config) { cfg.MaxLogBytesPerAttempt = 100 })
	ctx := context.Background()
	tok := tc.admin.Token()
	big := func(n int) string { return strings.Repeat("x", n) }
	job := func(extra string) string {
		return `{"jobs": [{"job_id": 1, "command": ["true"]` + extra + `}]}`
	}
	manyArgs := `, "command": ["true"` + strings.Repeat(`, "a"`, api.MaxCommandArgs) + `]`
	var env strings.Builder
	env.WriteString(`, "env": {`)
	for i := 0; i <= api.MaxEnvVars; i++ {
		if i > 0 {
			env.WriteString(", ")
		}
		fmt.Fprintf(&env, `"V%d": "1"`, i)
	}
	env.WriteString("}")
	var attrs strings.Builder
	attrs.WriteString(`{`)
	for i := 0; i <= api.MaxAttributes; i++ {
		if i > 0 {
			attrs.WriteString(", ")
		}
		fmt.Fprintf(&attrs, `"k%d": "v"`, i)
	}
	attrs.WriteString("}")
	cases := []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"job name", "POST", "/api/v1/batches", job(`, "name": "` + big(api.MaxNameBytes+1) + `"`), 400, "name is 257 bytes; the limit is 256"},
		{"command bytes", "POST", "/api/v1/batches", `{"jobs": [{"job_id": 1, "command": ["` + big(api.MaxCommandBytes+1) + `"]}]}`, 400, "command is 65537 bytes; the limit is 65536"},
		{"command args", "POST", "/api/v1/batches", `{"jobs": [{"job_id": 1` + manyArgs + `}]}`, 400, "command has 4097 arguments; the limit is 4096"},
		{"env vars", "POST", "/api/v1/batches", job(env.String()), 400, "env has 1025 variables; the limit is 1024"},
		{"env bytes", "POST", "/api/v1/batches", job(`, "env": {"A": "` + big(api.MaxEnvBytes) + `"}`), 400, "env is 65537 bytes; the limit is 65536"},
		{"job attributes", "POST", "/api/v1/batches", job(`, "attributes": ` + attrs.String()), 400, "65 attributes; the limit is 64"},
		{"attribute value", "POST", "/api/v1/batches", job(`, "attributes": {"k": "` + big(api.MaxAttributeBytes+1) + `"}`), 400, "keys and values are at most 1024 bytes"},
		{"batch name", "POST", "/api/v1/batches", `{"name": "` + big(api.MaxNameBytes+1) + `", "n_jobs": 1}`, 400, "name is 257 bytes"},
		{"batch attributes", "POST", "/api/v1/batches", `{"n_jobs": 1, "attributes": ` + attrs.String() + `}`, 400, "65 attributes"},
		{"idempotency key", "POST", "/api/v1/batches", `{"n_jobs": 1, "idempotency_key": "` + big(api.MaxNameBytes+1) + `"}`, 400, "idempotency_key is 257 bytes"},
		{"jobs per batch", "POST", "/api/v1/batches", `{"n_jobs": 2147483648}`, 413, "the limit is 50000000 jobs per batch (server setting max_jobs_per_batch)"},
		{"cancel after failures", "POST", "/api/v1/batches", `{"n_jobs": 1, "cancel_after_n_failures": 2147483649}`, 400, "cancel_after_n_failures is 2147483649; it must be between 0 (never) and 2147483648"},
		{"cancel after failures below 0", "POST", "/api/v1/batches", `{"n_jobs": 1, "cancel_after_n_failures": -1}`, 400, "cancel_after_n_failures is -1"},
		{"activation body", "POST", "/api/v1/workers/activate", `{"name": "` + big(70<<10) + `"}`, 413, "larger than 64 KiB"},
		{"worker name", "POST", "/api/v1/workers/activate", `{"name": "` + big(api.MaxWorkerName+1) + `", "cpu": 1, "memory": 1, "secret": "` + tc.srv.cfg.WorkerSecret + `"}`, 400, "name is at most 256 bytes"},
		{"user token", "POST", "/api/v1/users", `{"name": "bob", "token": "short"}`, 400, "token must be 64 hex digits"},
	}
	status := func() (uint64, uint64) {
		runtime.GC()
		m, err := tc.admin.Operator().Memory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l, err := tc.admin.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m.HeapAlloc, l.LastIndex
	}
	// Refusals are audited: the log gets audit entries (method, path,
	// status, a bounded message) and nothing else.
	commands0 := requestCommands(t, tc.srv)
	heap0, _ := status()
	for _, c := range cases {
		code, msg := tc.raw(c.method, c.path, tok, c.body)
		if code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %.200q, want %d naming %q", c.name, code, msg, c.code, c.want)
		}
	}
	heap1, _ := status()
	if n := requestCommands(t, tc.srv) - commands0; n != 0 {
		t.Errorf("refused requests reached the Raft log: %d commands", n)
	}
	refusals := 0
	for _, e := range tc.srv.state.AuditLog(time.Now().Add(-time.Minute), "", 1000) {
		if e.Status >= 400 && e.Status < 500 {
			refusals++
		}
		if len(e.Message) > 256 || len(e.Path) > 256 {
			t.Errorf("an audit entry keeps %d bytes of message", len(e.Message))
		}
	}
	if refusals < len(cases) {
		t.Errorf("%d refusals in the audit log, want the %d refused requests", refusals, len(cases))
	}
	if grown := int64(heap1) - int64(heap0); grown > 8<<20 {
		t.Errorf("the heap grew by %d KiB while refusing", grown>>10)
	}

	// A worker's log beyond the server's per-attempt limit is refused.
	w := api.NewClient(tc.url, "")
	act, err := w.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", NodeID: "n", CPU: 1, Memory: 1 << 30, Secret: tc.srv.cfg.WorkerSecret})
	if err != nil {
		t.Fatal(err)
	}
	w.SetToken(act.Token)
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, Memory: 1 << 20}}}); err != nil {
		t.Fatal(err)
	}
	var ref api.AttemptRef
	for ref.Attempt == 0 {
		res, err := w.Workers().Sync(ctx, &api.SyncRequest{WaitMillis: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Assign) > 0 {
			ref = res.Assign[0].AttemptRef
		}
	}
	if err := w.Workers().UploadLogChunk(ctx, ref, 0, []byte(big(60))); err != nil {
		t.Fatal(err)
	}
	if err := w.Workers().UploadLogChunk(ctx, ref, 0, []byte(big(70))); err != nil {
		t.Fatalf("a retried chunk replaces itself: %v", err)
	}
	if err := w.Workers().UploadLogChunk(ctx, ref, 1, []byte(big(31))); !api.IsStatus(err, 413) || !strings.Contains(err.Error(), "reached 100 bytes (server setting max_log_bytes_per_attempt)") {
		t.Fatalf("a chunk past the log limit: %v", err)
	}
}

// TestPerUserAndProjectLimits: what one user and one billing project may
// hold at once is bounded before anything reaches the log (429 naming the
// setting), a repeat of an admitted request is still answered with its
// first result, and cancelling gives the allowance back.
func TestPerUserAndProjectLimits(t *testing.T) {
	tc := startServer(t, "", func(cfg *Config) {
		cfg.MaxJobsPerUpdate = 100
		cfg.MaxQueuedJobsPerUser = 200
		cfg.MaxQueuedJobsPerBillingProject = 300
		cfg.MaxBatchesPerUser = 3
		cfg.MaxOpenUpdatesPerUser = 2
	})
	ctx := context.Background()
	ann := tc.user("ann", "lab").Token()
	bob := tc.user("bob", "lab").Token()
	array := func(n int, key string) string {
		return fmt.Sprintf(`{"billing_project": "lab", "idempotency_key": %q, "jobs": [{"job_id": 1, "command": ["true"], "count": %d}]}`, key, n)
	}
	reserve := func(n int) string { return fmt.Sprintf(`{"billing_project": "lab", "n_jobs": %d}`, n) }
	idOf := func(body string) int64 {
		var b struct {
			ID int64 `json:"id"`
		}
		if err := json.Unmarshal([]byte(body), &b); err != nil || b.ID == 0 {
			t.Fatalf("no batch id in %s", body)
		}
		return b.ID
	}
	expect := func(what, tok, path, body string, code int, want string) string {
		t.Helper()
		before := requestCommands(t, tc.srv)
		got, msg := tc.raw("POST", path, tok, body)
		if got != code || !strings.Contains(msg, want) {
			t.Fatalf("%s: %d %q, want %d naming %q", what, got, msg, code, want)
		}
		// Its audit entry is all a refused request adds to the log.
		if code >= 400 && requestCommands(t, tc.srv) != before {
			t.Fatalf("%s: the refused request reached the log", what)
		}
		return msg
	}
	expect("an update of 101 jobs", ann, "/api/v1/batches", reserve(101), 413, "the limit is 100 jobs per update (server setting max_jobs_per_update)")
	b1 := idOf(expect("100 jobs inline", ann, "/api/v1/batches", array(100, "k1"), 201, ""))
	expect("a batch reserving 10", ann, "/api/v1/batches", reserve(10), 201, "")
	expect("another reserving 10", ann, "/api/v1/batches", reserve(10), 201, "")
	up := fmt.Sprintf("/api/v1/batches/%d/updates", b1)
	expect("a third open update", ann, up, `{"n_jobs": 10}`, 429, "user ann")
	expect("a third open update", ann, up, `{"n_jobs": 10}`, 429, "has 2 open updates (reserved with n_jobs, not committed yet); the limit is 2 (server setting max_open_updates_per_user)")
	expect("a fourth running batch", ann, "/api/v1/batches", array(1, "k4"), 429, "has 3 batches running (not complete); the limit is 3 (server setting max_batches_per_user)")
	// ann holds 120 unfinished jobs: 81 more is past 200, 80 is not.
	expect("81 more jobs", ann, up, `{"jobs": [{"job_id": 1, "command": ["true"], "count": 81}]}`, 429,
		"has 120 jobs that have not finished (open updates included) and this adds 81; the limit is 200 (server setting max_queued_jobs_per_user)")
	expect("80 more jobs", ann, up, `{"jobs": [{"job_id": 1, "command": ["true"], "count": 80}]}`, 201, "")
	// A retry of ann's first batch is answered with it, limits or not.
	if got := idOf(expect("a repeat of the first batch", ann, "/api/v1/batches", array(100, "k1"), 200, "")); got != b1 {
		t.Fatalf("the repeat answered batch %d, want %d", got, b1)
	}
	// bob shares the project: 100 fit in its 300, one more does not.
	b2 := idOf(expect("bob's 100", bob, "/api/v1/batches", array(100, "b1"), 201, ""))
	expect("bob's 101st", bob, fmt.Sprintf("/api/v1/batches/%d/updates", b2), `{"jobs": [{"job_id": 1, "command": ["true"]}]}`, 429,
		"billing project lab has 300 jobs that have not finished (open updates included) and this adds 1; the limit is 300 (server setting max_queued_jobs_per_billing_project)")
	// Cancelling ann's first batch gives its 180 jobs and the batch back.
	if err := tc.admin.CancelBatch(ctx, b1); err != nil {
		t.Fatal(err)
	}
	expect("bob after ann cancelled", bob, fmt.Sprintf("/api/v1/batches/%d/updates", b2), `{"jobs": [{"job_id": 1, "command": ["true"]}]}`, 201, "")
	expect("ann's new batch after cancelling", ann, "/api/v1/batches", array(50, "k5"), 201, "")
}

// TestIdleUpdatesExpire: an update nobody posts to is discarded after the
// idle timeout, which gives back its user's open-update allowance and
// lets its batch complete; a bunch posted later is refused with the
// reason.
func TestIdleUpdatesExpire(t *testing.T) {
	tc := startServer(t, "", func(cfg *Config) {
		cfg.UpdateIdleTimeout = time.Second
		cfg.MaxOpenUpdatesPerUser = 1
	})
	ctx := context.Background()
	res, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{NJobs: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{NJobs: 5}); !api.IsStatus(err, 429) {
		t.Fatalf("a second open update with a limit of one: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := tc.admin.GetBatch(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if b.State == api.BatchComplete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %d is %s 10s after its update went idle with a 1s timeout", res.ID, b.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	err = tc.admin.AddJobs(ctx, res.ID, res.UpdateID, []api.JobSpec{{JobID: 1, Command: []string{"true"}, Count: 5}})
	if !api.IsStatus(err, 409) || !strings.Contains(err.Error(), "no bunch or commit for 1s (server setting update_idle_timeout)") {
		t.Fatalf("a bunch into the expired update: %v", err)
	}
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{NJobs: 5}); err != nil {
		t.Fatalf("an open update after the idle one expired: %v", err)
	}
}

// TestRequestRateIsLimitedPerToken: a token past its rate gets 429 with a
// Retry-After naming the setting; other users are not slowed by it; the Go
// client waits as asked and succeeds.
func TestRequestRateIsLimitedPerToken(t *testing.T) {
	// Half a request per second: the bucket holds one and refills in 2s,
	// so nothing between two statements of the test refills it.
	tc := startServer(t, "", func(cfg *Config) { cfg.UserRequestsPerSecond = 0.5 })
	ctx := context.Background()
	ann, bob := tc.user("ann"), tc.user("bob") // the admin's second call waits out its own bucket
	get := func(tok string) *http.Response {
		req, _ := http.NewRequest("GET", tc.url+"/api/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	var limited *http.Response
	for i := 0; i < 3 && limited == nil; i++ {
		if resp := get(ann.Token()); resp.StatusCode == http.StatusTooManyRequests {
			limited = resp
		}
	}
	if limited == nil {
		t.Fatal("3 requests at once at 0.5 per second were all served")
	}
	if ra := limited.Header.Get("Retry-After"); ra != "2" {
		t.Fatalf("Retry-After %q, want 2", ra)
	}
	code, msg := tc.raw("GET", "/api/v1/whoami", ann.Token(), "")
	if code != 429 || !strings.Contains(msg, "user ann sent more than 0.5 requests per second to this server (server setting max_requests_per_second_per_user); retry after 2s") {
		t.Fatalf("limited request: %d %q", code, msg)
	}
	if resp := get(bob.Token()); resp.StatusCode != 200 {
		t.Fatalf("another user's request: %d", resp.StatusCode)
	}
	start := time.Now()
	if _, err := ann.Whoami(ctx); err != nil {
		t.Fatalf("the client did not wait out the limit: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("the client answered in %s; it should have waited for the bucket", took)
	}
}

// requestCommands waits until the server has committed the audit entries
// of the requests so far and returns how many commands it has applied
// that a request makes (the leader's own, audit entries included, are
// not counted: a refused request may add its audit entry, nothing else).
func requestCommands(t *testing.T, srv *Server) uint64 {
	t.Helper()
	if err := srv.api.WaitAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
	leaders := map[state.CommandType]bool{state.CmdBootstrap: true, state.CmdPlan: true, state.CmdRetire: true, state.CmdExpireUpdates: true,
		state.CmdScale: true, state.CmdLaunchDone: true, state.CmdMachineGone: true, state.CmdAudit: true, state.CmdAdoptStore: true, state.CmdSetCloudPrices: true}
	var n uint64
	for c := state.CommandType(1); c < state.IgnoreUnknownFlag; c++ {
		name := c.String()
		if leaders[c] || strings.HasPrefix(name, "command(") {
			continue
		}
		var m dto.Metric
		if err := srv.metrics.applySeconds.WithLabelValues(name).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// TestJobNetworkAndProcessLimit: a process job may name any network
// (bridge, the default; none; host, which a member gets only where the
// billing project allows it, refused with 403 before Raft otherwise) and
// a process limit, bounded at submit, which pass through to the job.
func TestJobNetworkAndProcessLimit(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	ann := tc.user("ann", "lab").Token()
	job := func(network string, maxProcs int) string {
		return fmt.Sprintf(`{"billing_project": "lab", "jobs": [{"job_id": 1, "command": ["true"], "network": %q, "max_processes": %d}]}`, network, maxProcs)
	}
	before := requestCommands(t, tc.srv)
	code, msg := tc.raw("POST", "/api/v1/batches", ann, job("host", 0))
	if code != 403 || !strings.Contains(msg, `billing project lab does not allow network "host"`) {
		t.Fatalf("a member's host-network job: %d %q", code, msg)
	}
	if requestCommands(t, tc.srv) != before {
		t.Fatal("the refused request reached the log")
	}
	code, body := tc.raw("POST", "/api/v1/batches", ann, job("none", 64))
	if code != 201 {
		t.Fatalf("network none: %d %s", code, body)
	}
	var b struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatal(err)
	}
	j, err := tc.admin.GetJob(ctx, b.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if j.Network != api.NetworkNone || j.MaxProcesses != 64 {
		t.Fatalf("job network %q, max_processes %d; want none, 64", j.Network, j.MaxProcesses)
	}
	if code, msg := tc.raw("POST", fmt.Sprintf("/api/v1/batches/%d/updates", b.ID), ann, `{"jobs": [{"job_id": 1, "command": ["true"], "network": "host"}]}`); code != 403 {
		t.Fatalf("a member's update with a host-network job: %d %q", code, msg)
	}
	for _, c := range []struct {
		body string
		want string
	}{
		{job("bridged", 0), `network is "bridged"; it is "bridge"`},
		{job("bridge", -1), "max_processes is -1; it must be between 1 and 65536"},
		{job("bridge", 1<<20), "max_processes is 1048576"},
	} {
		if code, msg := tc.raw("POST", "/api/v1/batches", ann, c.body); code != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %q, want 400 naming %q", c.body, code, msg, c.want)
		}
	}
	// The default network is the bridge, kept as the empty string.
	code, body = tc.raw("POST", "/api/v1/batches", ann, job("bridge", 0))
	if code != 201 {
		t.Fatalf("network bridge: %d %s", code, body)
	}
	if code, body := tc.raw("POST", "/api/v1/batches", tc.admin.Token(), job("host", 0)); code != 201 {
		t.Fatalf("an admin's host-network job: %d %s", code, body)
	}
}
