package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// logBytes is the size of the Raft log entries after index from.
func logBytes(t *testing.T, tc *testCluster, from uint64) (n int, entries int) {
	t.Helper()
	last, err := tc.srv.raft.boltLog.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := from + 1; i <= last; i++ {
		var l raft.Log
		if err := tc.srv.raft.boltLog.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		n += len(l.Data)
		entries++
	}
	return n, entries
}

// TestAnonymousRequestsReachTheLogCounted: requests without a token, with
// paths of a megabyte, reach the Raft log as one count per address,
// route, status and minute, cut to the audit log's field sizes: a few
// hundred bytes, not the megabytes they sent (each was a log entry of
// its own, with its whole path, before).
func TestAnonymousRequestsReachTheLogCounted(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	if err := tc.srv.api.WaitAudit(ctx); err != nil {
		t.Fatal(err)
	}
	from := tc.srv.raft.raft.LastIndex()
	const n = 100
	path := "/api/v1/batches/" + strings.Repeat("9", 1<<20-64) + "/cancel"
	for i := range n {
		code, msg := tc.raw(http.MethodPost, path, "", "")
		if code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d %s", i, code, msg)
		}
	}
	if err := tc.srv.api.WaitAudit(ctx); err != nil {
		t.Fatal(err)
	}
	bytes, entries := logBytes(t, tc, from)
	t.Logf("%d requests of %d KB each: %d Raft entries, %d bytes", n, len(path)>>10, entries, bytes)
	if bytes > 4096 {
		t.Errorf("%d anonymous requests of 1 MB paths put %d bytes in the Raft log", n, bytes)
	}
	log, err := tc.admin.Audit(ctx, "1h", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, e := range log {
		if e.User == "" && e.Route == "POST /api/v1/batches/{id}/cancel" {
			count += e.Count
			if len(e.Path) > 256 || e.Status != http.StatusUnauthorized || e.Remote != "127.0.0.1" {
				t.Errorf("an anonymous entry: %d-byte path, status %d, remote %q", len(e.Path), e.Status, e.Remote)
			}
		}
	}
	if count != n {
		t.Errorf("the audit log counts %d anonymous cancels, want %d", count, n)
	}
}

// TestAnonymousRateLimit: past its rate, an address without a valid
// token gets 429 with Retry-After naming the setting; a valid token from
// the same address is not held back by it.
func TestAnonymousRateLimit(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.AnonymousRequestsPerSecond = 5 })
	ctx := context.Background()
	var unauthorized, limited int
	for range 40 {
		code, msg := tc.raw(http.MethodPost, "/api/v1/batches/1/cancel", "not-a-token", "")
		switch code {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			limited++
			if !strings.Contains(msg, "max_anonymous_requests_per_second") {
				t.Fatalf("429 without the setting's name: %s", msg)
			}
		default:
			t.Fatalf("%d %s", code, msg)
		}
	}
	// A bucket holds two seconds' worth; the loop takes well under a
	// second more than that.
	if unauthorized > 20 || limited == 0 {
		t.Fatalf("40 requests without a valid token at 5/s: %d answered 401, %d 429", unauthorized, limited)
	}
	if _, err := tc.admin.Whoami(ctx); err != nil {
		t.Fatalf("the admin from the same address: %v", err)
	}
	t.Logf("%d answered 401, %d 429", unauthorized, limited)
}
