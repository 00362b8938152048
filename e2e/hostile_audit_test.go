package e2e

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// dirBytes is the size of the files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file that went while walking
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHostileAnonymousFlood: a stranger without a token sends 1,000
// requests with 1 MB paths to a dev agent (50 of them grew raft.db from
// 256 KB to 83 MB before); the data dir grows by under 1 MB, the agent
// answers the admin throughout, and what users did stays in the audit log.
func TestHostileAnonymousFlood(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "0")
	ctx := context.Background()
	if _, err := a.client().CreateUser(ctx, &api.CreateUserRequest{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the audit entry of that is committed in its group
	before := dirBytes(t, a.dataDir)

	path := a.addr + "/api/v1/batches/" + strings.Repeat("9", 1<<20-64) + "/cancel"
	codes := map[int]int{}
	client := &http.Client{Timeout: 30 * time.Second}
	for range 1000 {
		resp, err := client.Post(path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	t.Logf("answers: %v", codes)
	if codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != 1000 {
		t.Fatalf("1,000 requests without a token were answered %v, want 401 or 429 each", codes)
	}
	if codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("1,000 requests without a token from one address as fast as it could: none was held back (429)")
	}
	if _, err := a.client().Whoami(ctx); err != nil {
		t.Fatalf("the admin after the flood: %v", err)
	}
	time.Sleep(2 * time.Second) // what the flood committed, it has committed
	after := dirBytes(t, a.dataDir)
	t.Logf("data dir %d KB before, %d KB after", before>>10, after>>10)
	if after-before >= 1<<20 {
		t.Fatalf("1,000 anonymous requests with 1 MB paths grew the data dir by %d KB", (after-before)>>10)
	}
	log, err := a.client().Audit(ctx, "1h", "", 10000)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range log {
		found = found || (e.User == "root" && e.Route == "POST /api/v1/users" && e.Status == http.StatusCreated)
	}
	if !found {
		t.Fatalf("the admin's creation of alice is not in the audit log (%d entries)", len(log))
	}
}
