package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
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
