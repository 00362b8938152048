package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
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
		m, err := tc.admin.Memory(ctx)
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
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(conn)
	if took := time.Since(start); err != nil || took > 3*time.Second {
		t.Fatalf("a stalled body held the connection for %s (%v)", took, err)
	}
}

// TestOversizedInputsAreRefused posts each input beyond a limit and checks
// the 4xx names the limit, that nothing reached the Raft log (the last
// index does not move) and that the heap did not grow with the input.
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
		{"activation body", "POST", "/api/v1/workers/activate", `{"name": "` + big(70<<10) + `"}`, 413, "larger than 64 KiB"},
		{"worker name", "POST", "/api/v1/workers/activate", `{"name": "` + big(api.MaxWorkerName+1) + `", "cpu": 1, "memory": 1, "secret": "` + tc.srv.cfg.WorkerSecret + `"}`, 400, "name is at most 256 bytes"},
		{"user token", "POST", "/api/v1/users", `{"name": "bob", "token": "short"}`, 400, "token must be 64 hex digits"},
	}
	status := func() (uint64, uint64) {
		runtime.GC()
		m, err := tc.admin.Memory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l, err := tc.admin.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m.HeapAlloc, l.LastIndex
	}
	heap0, index0 := status()
	for _, c := range cases {
		code, msg := tc.raw(c.method, c.path, tok, c.body)
		if code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %.200q, want %d naming %q", c.name, code, msg, c.code, c.want)
		}
	}
	heap1, index1 := status()
	if index1 != index0 {
		t.Errorf("refused requests reached the Raft log: last index %d → %d", index0, index1)
	}
	if grown := int64(heap1) - int64(heap0); grown > 8<<20 {
		t.Errorf("the heap grew by %d KiB while refusing", grown>>10)
	}

	// A worker's log beyond the server's per-attempt limit is refused.
	w := api.NewClient(tc.url, "")
	act, err := w.Activate(ctx, &api.ActivateRequest{Name: "w", NodeID: "n", CPU: 1, Memory: 1 << 30, Secret: tc.srv.cfg.WorkerSecret})
	if err != nil {
		t.Fatal(err)
	}
	w.SetToken(act.Token)
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, Memory: 1 << 20}}}); err != nil {
		t.Fatal(err)
	}
	var ref api.AttemptRef
	for ref.Attempt == 0 {
		res, err := w.Sync(ctx, &api.SyncRequest{WaitMillis: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Assign) > 0 {
			ref = res.Assign[0].AttemptRef
		}
	}
	if err := w.UploadLogChunk(ctx, ref, 0, []byte(big(60))); err != nil {
		t.Fatal(err)
	}
	if err := w.UploadLogChunk(ctx, ref, 0, []byte(big(70))); err != nil {
		t.Fatalf("a retried chunk replaces itself: %v", err)
	}
	if err := w.UploadLogChunk(ctx, ref, 1, []byte(big(31))); !api.IsStatus(err, 413) || !strings.Contains(err.Error(), "would hold 101 bytes; the limit is 100 (server setting max_log_bytes_per_attempt)") {
		t.Fatalf("a chunk past the log limit: %v", err)
	}
}
