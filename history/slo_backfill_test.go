package history_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
)

// sloBatch is a complete batch with an SLO it met.
func sloBatch(id int64, completed time.Time) history.Batch {
	met := true
	return history.Batch{Version: 5, Batch: api.Batch{ID: id, Name: "nightly", User: "alice", BillingProject: "genomics", State: api.BatchComplete,
		Queue: "org/gen/tier1", SLOSeconds: 3600, SLOMet: &met, TimeCreated: completed.Add(-time.Minute), TimeCompleted: &completed}}
}

func checkBackfilled(t *testing.T, s history.Store, completed time.Time) {
	t.Helper()
	runs, _, err := s.SLORuns(context.Background(), history.SLOQuery{From: completed.Unix(), To: completed.Unix() + 1}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Batch != 7 || runs[0].Workflow != "nightly" || !runs[0].Met {
		t.Fatalf("runs after the backfill: %+v, want batch 7's", runs)
	}
}

// TestMySQLBackfillsSLORuns: a store written before it kept SLO runs
// (their table empty, no mark of a backfill) has its batches' runs once
// it is opened again.
func TestMySQLBackfillsSLORuns(t *testing.T) {
	ctx := context.Background()
	dsn := newDatabase(t)
	s, err := history.OpenMySQL(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	completed := time.Unix(1_800_000_000, 0)
	if _, err := s.PutBatch(ctx, sloBatch(7, completed), nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"DELETE FROM slo_runs", "DELETE FROM store_meta WHERE name = 'slo_runs_backfilled'"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	s, err = history.OpenMySQL(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkBackfilled(t, s, completed)
}

// TestEmbeddedBackfillsSLORuns: the same for the embedded store.
func TestEmbeddedBackfillsSLORuns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := history.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	completed := time.Unix(1_800_000_000, 0)
	if _, err := s.PutBatch(ctx, sloBatch(7, completed), nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(filepath.Join(dir, history.EmbeddedFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{"slo-runs", "slo-runs-by-batch"} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Delete([]byte("slo-runs-backfilled"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err = history.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkBackfilled(t, s, completed)
}
