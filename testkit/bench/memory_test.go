package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestSaveSnapshotReadsItsHeader: the size of a snapshot's state and the
// audit log's share of it come from the one snapshot (its header), not
// from a later reading, and the header itself is not counted.
func TestSaveSnapshotReadsItsHeader(t *testing.T) {
	const state = "0123456789abcdef" // 16 bytes of state
	file := "DROVER-SNAPSHOT 1\n" + `{"index":42,"term":2,"server":"s0","time":"2026-11-25T14:00:00Z","audit_bytes":6}` + "\n" + state
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/operator/snapshot" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(file))
	}))
	defer srv.Close()
	dir := t.TempDir()
	got, err := saveSnapshot(context.Background(), api.NewClient(srv.URL, "t"), dir, "s0.snapshot-idle")
	if err != nil {
		t.Fatal(err)
	}
	if got != (snapshotSize{state: int64(len(state)), audit: 6, index: 42}) {
		t.Fatalf("read %+v, want 16 bytes of state, 6 of them audit, at index 42", got)
	}
	if kept, err := os.ReadFile(filepath.Join(dir, "s0.snapshot-idle")); err != nil || string(kept) != file {
		t.Fatalf("kept %q, %v", kept, err)
	}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("no header")) })
	if _, err := saveSnapshot(context.Background(), api.NewClient(srv.URL, "t"), "", ""); err == nil || !strings.Contains(err.Error(), "no header") {
		t.Fatalf("a snapshot without a header: %v", err)
	}
}
