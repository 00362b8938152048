package server

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// copyDir copies a fixture to a temporary directory: opening a data dir
// writes to it.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// dump renders every batch and job a client can see, for comparisons.
func dump(t *testing.T, c *api.Client) string {
	t.Helper()
	ctx := context.Background()
	var sb strings.Builder
	list, err := c.ListBatches(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list.Batches {
		data, _ := json.Marshal(b)
		sb.Write(data)
		sb.WriteByte('\n')
		jobs, err := c.AllJobs(ctx, b.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			data, _ := json.Marshal(j)
			sb.Write(data)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// runUntil completes every attempt the worker is given until done holds.
func (w *simWorker) runUntil(limit time.Duration, done func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(limit)
	for !done() {
		if time.Now().After(deadline) {
			w.t.Fatal("batches did not complete")
		}
		res := w.sync(200 * time.Millisecond)
		now := time.Now()
		w.known = nil
		for _, a := range res.Assign {
			w.known = append(w.known, a.AttemptRef)
			w.events = append(w.events, api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventCompleted,
				Outcome: api.OutcomeSuccess, StartTime: now, EndTime: now})
		}
	}
}

// TestOpensDataDirOfFormatV1 opens a data dir written by an earlier drover
// (testdata/v1: a Raft snapshot with attempts running on a worker, then log
// entries after it) and finishes its batches; and restores that drover's
// operator snapshot into a new server, which must show the same state.
func TestOpensDataDirOfFormatV1(t *testing.T) {
	ctx := context.Background()
	tc := startServer(t, copyDir(t, "testdata/v1/datadir"), nil)
	if tc.srv.ID() != "fixture" {
		t.Fatalf("node id %q, want the fixture's", tc.srv.ID())
	}
	alice := api.NewClient(tc.url, readToken(t, "testdata/v1/alice.token"))
	var who api.User
	if err := alice.Do(ctx, "GET", "/api/v1/whoami", nil, &who); err != nil || who.Name != "alice" {
		t.Fatalf("alice's token: %+v %v", who, err)
	}
	before := dump(t, tc.admin)
	wantNames := "open cancelled bunched scatter-gather"
	list, err := tc.admin.ListBatches(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range list.Batches {
		names = append(names, b.Name)
	}
	if strings.Join(names, " ") != wantNames {
		t.Fatalf("batches %v, want %s", names, wantNames)
	}
	b1, _ := alice.GetBatch(ctx, 1)
	if b1.NSucceeded != 1 || b1.NRunning != 2 || b1.NReady != 2 || b1.NPending != 1 || b1.Attributes["sample"] != "NA12878" {
		t.Fatalf("batch 1 as the fixture left it: %+v", b1)
	}
	if _, err := alice.GetBatch(ctx, 2); !api.IsStatus(err, 403) {
		t.Fatalf("alice sees the admin's batch: %v", err)
	}
	// The idempotency key of batch 2 still names it.
	again, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bunched", NJobs: 12, IdempotencyKey: "fixture-key"})
	if err != nil || again.ID != 2 {
		t.Fatalf("retried create: %+v %v", again, err)
	}

	// The operator snapshot of the same state restores into a new server.
	fresh := startServer(t, "", nil)
	snap, err := os.ReadFile("testdata/v1/operator.snap")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.admin.Operator().SnapshotRestore(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, api.NewClient(fresh.url, tc.admin.Token())); got != before {
		t.Fatalf("restored operator snapshot differs:\n--- restored\n%s\n--- data dir\n%s", got, before)
	}

	// Worker w-old comes back: its earlier incarnation is retired, its two
	// running attempts are lost and re-run, and every batch finishes.
	if err := tc.admin.AddJobs(ctx, 4, 1, []api.JobSpec{{JobID: 2, Name: "posted-late", Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.CommitUpdate(ctx, 4, 1); err != nil {
		t.Fatal(err)
	}
	w := newSimWorker(t, tc, "w-old", 4)
	complete := func(id int64) *api.Batch {
		b, err := tc.admin.GetBatch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	w.runUntil(20*time.Second, func() bool {
		return complete(1).Complete() && complete(2).Complete() && complete(4).Complete()
	})
	for id, want := range map[int64]int64{1: 6, 2: 13, 4: 2} {
		if b := complete(id); b.NSucceeded != want || b.NJobs != want {
			t.Errorf("batch %d: %d of %d succeeded, want %d", id, b.NSucceeded, b.NJobs, want)
		}
	}
	if b := complete(3); !b.Cancelled || !b.Complete() {
		t.Errorf("batch 3: %+v", b)
	}
	j, err := alice.GetJob(ctx, 1, 2)
	if err != nil || len(j.Attempts) != 2 || j.Attempts[0].State != "lost" || j.Attempts[1].State != api.OutcomeSuccess {
		t.Fatalf("align[0] after its worker came back: %+v %v", j, err)
	}
}
