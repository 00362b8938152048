package server

import (
	"bytes"
	"context"
	"database/sql"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/mariadbtest"
)

// TestRestoreKeepsHistoryWhole restores snapshots against a real MariaDB
// history store. Against the store the cluster went on exporting to after
// the snapshot, no batch ID is handed out twice (a new batch never lands
// on the discarded timeline's rows, as a 1-job batch once kept the 4
// other job rows of the 5-job batch it overwrote), and the discarded
// batches are not shown. Into a fresh store, batches the snapshot marked
// exported (to the old store) are exported to the new one before they
// leave memory, instead of turning into 404s.
func TestRestoreKeepsHistoryWhole(t *testing.T) {
	db, err := mariadbtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Stop()
	ctx := context.Background()

	t.Run("SameStore", func(t *testing.T) {
		dsn, err := db.CreateDatabase("restore_same")
		if err != nil {
			t.Fatal(err)
		}
		tc := startServer(t, "", func(cfg *Config) {
			cfg.HistoryDSN = dsn
			cfg.Retention = 100 * time.Millisecond
		})
		w := newSimWorker(t, tc, "w", 64)
		run := func(n int64) int64 {
			t.Helper()
			id := runBatch(t, tc, w, n)
			waitFor(t, "the batch to leave memory for the store", func() bool { return !tc.srv.State().HasBatch(uint64(id)) })
			return id
		}
		b1 := run(2)
		var snap bytes.Buffer
		if _, err := tc.admin.Operator().SnapshotSave(ctx, &snap); err != nil {
			t.Fatal(err)
		}
		discarded := []int64{run(5), run(3)} // the timeline the restore throws away
		res, err := tc.admin.Operator().SnapshotRestore(ctx, snap.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if res.DiscardedFromBatchID != uint64(discarded[0]) || res.ResumeBatchID != uint64(discarded[1]+1) || res.Timeline == 0 {
			t.Fatalf("the restore says batch IDs from %d to %d were discarded and go on at %d (timeline %d); want %d, %d, %d",
				res.DiscardedFromBatchID, res.ResumeBatchID-1, res.ResumeBatchID, res.Timeline, discarded[0], discarded[1], discarded[1]+1)
		}
		b4 := run(1)
		if slices.Contains(discarded, b4) || b4 <= discarded[1] {
			t.Fatalf("a batch submitted after the restore got ID %d; the discarded timeline used %v", b4, discarded)
		}
		if jobs, err := tc.admin.ListJobs(ctx, b4, "", 0); err != nil || len(jobs.Jobs) != 1 {
			t.Fatalf("batch %d (1 job) read from the store: %v, %v", b4, jobs, err)
		}
		for _, id := range discarded {
			_, err := tc.admin.GetBatch(ctx, id)
			if ae, ok := err.(*api.Error); !ok || ae.StatusCode != http.StatusNotFound {
				t.Fatalf("batch %d of the discarded timeline: %v, want a 404", id, err)
			}
		}
		list, err := tc.admin.ListBatches(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, b := range list.Batches {
			ids = append(ids, b.ID)
		}
		if !slices.Equal(ids, []int64{b4, b1}) {
			t.Fatalf("batch list after the restore: %v, want [%d %d]", ids, b4, b1)
		}
		if b, err := tc.admin.GetBatch(ctx, b1); err != nil || b.NJobs != 2 {
			t.Fatalf("batch %d from before the snapshot: %+v, %v", b1, b, err)
		}
	})

	t.Run("FreshStore", func(t *testing.T) {
		dsnA, err := db.CreateDatabase("restore_a")
		if err != nil {
			t.Fatal(err)
		}
		dsnB, err := db.CreateDatabase("restore_b")
		if err != nil {
			t.Fatal(err)
		}
		src := startServer(t, "", func(cfg *Config) {
			cfg.HistoryDSN = dsnA
			cfg.Retention = time.Hour // stays in memory, marked exported
		})
		id := runBatch(t, src, newSimWorker(t, src, "w", 64), 3)
		waitFor(t, "the batch to be exported", func() bool { return src.srv.history.Status().ExportedBatches == 1 })
		var snap bytes.Buffer
		if _, err := src.admin.Operator().SnapshotSave(ctx, &snap); err != nil {
			t.Fatal(err)
		}
		src.stop()

		dst := startServer(t, "", func(cfg *Config) {
			cfg.HistoryDSN = dsnB
			cfg.Retention = 100 * time.Millisecond
		})
		waitFor(t, "the new server to reach its store", func() bool { return dst.srv.history.Status().Up })
		if _, err := dst.admin.Operator().SnapshotRestore(ctx, snap.Bytes()); err != nil {
			t.Fatal(err)
		}
		admin := api.NewClient(dst.url, src.admin.Token())
		waitFor(t, "the restored batch to leave memory", func() bool { return !dst.srv.State().HasBatch(uint64(id)) })
		b, err := admin.GetBatch(ctx, id)
		if err != nil || b.NJobs != 3 || b.State != "complete" {
			t.Fatalf("batch %d after it left the restored server's memory: %+v, %v", id, b, err)
		}
		if jobs, err := admin.ListJobs(ctx, id, "", 0); err != nil || len(jobs.Jobs) != 3 {
			t.Fatalf("jobs of batch %d from the new store: %v, %v", id, jobs, err)
		}
		// The new store holds it, from the restored timeline.
		raw, err := sql.Open("mysql", dsnB)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		var n int
		if err := raw.QueryRow("SELECT COUNT(*) FROM jobs WHERE batch_id = ?", id).Scan(&n); err != nil || n != 3 {
			t.Fatalf("job rows of batch %d in the new store: %d, %v", id, n, err)
		}
	})

	// The store is restored from a backup older than an export: the
	// batch is marked exported but its rows are gone. A recheck writes
	// it again before it leaves memory.
	t.Run("StoreRestoredFromBackup", func(t *testing.T) {
		dsn, err := db.CreateDatabase("restore_backup")
		if err != nil {
			t.Fatal(err)
		}
		tc := startServer(t, "", func(cfg *Config) {
			cfg.HistoryDSN = dsn
			cfg.Retention = time.Hour
		})
		id := runBatch(t, tc, newSimWorker(t, tc, "w", 64), 2)
		waitFor(t, "the batch to be exported", func() bool { return tc.srv.history.Status().ExportedBatches == 1 })
		raw, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		for _, q := range []string{"DELETE FROM jobs", "DELETE FROM job_groups", "DELETE FROM ledger", "DELETE FROM batches"} {
			if _, err := raw.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		rc, err := tc.admin.Operator().HistoryRecheck(ctx)
		if err != nil || rc.Batches != 1 {
			t.Fatalf("recheck: %+v, %v; want 1 batch", rc, err)
		}
		tc.srv.retention.Store(int64(100 * time.Millisecond))
		waitFor(t, "the batch to leave memory", func() bool { return !tc.srv.State().HasBatch(uint64(id)) })
		if jobs, err := tc.admin.ListJobs(ctx, id, "", 0); err != nil || len(jobs.Jobs) != 2 {
			t.Fatalf("jobs of batch %d after the recheck: %v, %v", id, jobs, err)
		}
	})
}

// runBatch submits a batch of n jobs of "true" and runs it to completion
// on w.
func runBatch(t *testing.T, tc *testCluster, w *simWorker, n int64) int64 {
	t.Helper()
	res, err := tc.admin.CreateBatch(context.Background(), &api.CreateBatchRequest{Jobs: []api.JobSpec{
		{JobID: 1, Name: "j", Count: n, Command: []string{"true"}, CPU: 0.5, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	w.runUntil(20*time.Second, func() bool {
		b, err := tc.admin.GetBatch(context.Background(), res.ID)
		return err == nil && b.State == "complete"
	})
	return res.ID
}
