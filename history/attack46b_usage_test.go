package history_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/drover-sched/drover/history"
)

// Attacks (helper 46b) on queue samples by cluster in both stores:
// whole, by-cluster and capacity samples of one queue and minute kept
// apart; an old embedded store's keys and an old MySQL table's rows
// (before migration 12) read as whole samples.

func atkUsageSamples() []history.QueueSample {
	long := strings.Repeat("q", 64)
	path := strings.Join([]string{long, long, long, long, long, long, long, long}, "/") // 8 × 64 + 7: the longest path
	return []history.QueueSample{
		{Queue: "org/a", At: 1000, Seconds: 60, CPUMilli: 3000, Memory: 3 << 30, Jobs: 3},
		{Queue: "org/a", Cluster: "east", At: 1000, Seconds: 60, CPUMilli: 2000, Memory: 2 << 30},
		{Queue: "org/a", Cluster: "west", At: 1000, Seconds: 60, CPUMilli: 1000, Memory: 1 << 30},
		{Cluster: "east", At: 1000, Seconds: 60, CPUMilli: 64_000, Memory: 256 << 30, Jobs: 4},
		{Cluster: strings.Repeat("c", 64), At: 1000, Seconds: 60, CPUMilli: 1, Memory: 1, Jobs: 1},
		{Queue: path, Cluster: strings.Repeat("c", 64), At: 1000, Seconds: 60, CPUMilli: 1, Memory: 1},
		{Queue: "org/a", At: 1060, Seconds: 60, CPUMilli: 3000, Memory: 3 << 30, Jobs: 3},
	}
}

func atkCheckUsage(t *testing.T, s history.Store) {
	t.Helper()
	ctx := context.Background()
	want := atkUsageSamples()
	if err := s.PutQueueUsage(ctx, want); err != nil {
		t.Fatal(err)
	}
	// Stored again with new values: each replaces its own only.
	again := slices.Clone(want[1:2])
	again[0].CPUMilli = 2500
	if err := s.PutQueueUsage(ctx, again); err != nil {
		t.Fatal(err)
	}
	want[1].CPUMilli = 2500
	got, err := s.QueueUsage(ctx, 0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	key := func(u history.QueueSample) string { return u.Queue + "|" + u.Cluster + "|" + string(rune(u.At)) }
	slices.SortFunc(got, func(a, b history.QueueSample) int { return strings.Compare(key(a), key(b)) })
	slices.SortFunc(want, func(a, b history.QueueSample) int { return strings.Compare(key(a), key(b)) })
	if !slices.Equal(got, want) {
		t.Fatalf("read back:\n%+v\nwant\n%+v", got, want)
	}
	whole := 0
	for _, u := range got {
		if u.Whole() {
			whole++
		}
	}
	if whole != 2 {
		t.Fatalf("%d whole samples, want 2", whole)
	}
	// Pruned by time, all kinds.
	if _, err := s.PruneQueueUsage(ctx, 1060); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.QueueUsage(ctx, 0, 2000); len(got) != 1 || got[0].At != 1060 {
		t.Fatalf("after the prune: %+v", got)
	}
}

func TestAttack46bEmbeddedUsageByCluster(t *testing.T) {
	s, err := history.OpenEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	atkCheckUsage(t, s)
}

func TestAttack46bMySQLUsageByCluster(t *testing.T) {
	s, err := history.OpenMySQL(context.Background(), newDatabase(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	atkCheckUsage(t, s)
}

// TestAttack46bEmbeddedOldKeys: keys an old binary wrote (at, queue;
// no cluster) read as whole samples beside new ones.
func TestAttack46bEmbeddedOldKeys(t *testing.T) {
	dir := t.TempDir()
	s, err := history.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(filepath.Join(dir, history.EmbeddedFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		k := append(binary.BigEndian.AppendUint64(nil, 1000), "org/a"...)
		return tx.Bucket([]byte("queue-usage")).Put(k, []byte(`{"Seconds":60,"CPUMilli":3000,"Memory":7,"Jobs":3}`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err = history.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.PutQueueUsage(ctx, []history.QueueSample{{Queue: "org/a", Cluster: "east", At: 1000, Seconds: 60, CPUMilli: 1000}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.QueueUsage(ctx, 0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Whole() || got[0].CPUMilli != 3000 || got[0].Memory != 7 || got[1].Cluster != "east" {
		t.Fatalf("old key beside a new one: %+v", got)
	}
}

// TestAttack46bMySQLRowsBeforeMigration12: a queue_usage table as
// migration 11 left it, with rows; opened by this binary, migration 12
// adds the cluster column (” for the old rows: whole samples) and the
// new key, and by-cluster samples of the same queue and minute are
// stored beside the old rows.
func TestAttack46bMySQLRowsBeforeMigration12(t *testing.T) {
	ctx := context.Background()
	dsn := newDatabase(t)
	s, err := history.OpenMySQL(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"ALTER TABLE queue_usage DROP PRIMARY KEY, DROP COLUMN cluster, ADD PRIMARY KEY (queue, at)",
		"DELETE FROM schema_migrations WHERE version = 12",
		"INSERT INTO queue_usage (queue, at, seconds, cpu_milli, memory, jobs) VALUES ('org/a', 1000, 60, 3000, 7, 3), ('org', 1000, 60, 3000, 7, 3)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err = history.OpenMySQL(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutQueueUsage(ctx, []history.QueueSample{
		{Queue: "org/a", Cluster: "east", At: 1000, Seconds: 60, CPUMilli: 1000},
		{Cluster: "east", At: 1000, Seconds: 60, CPUMilli: 64_000, Jobs: 4},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.QueueUsage(ctx, 0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	var whole, byCluster int
	for _, u := range got {
		if u.Whole() {
			whole++
			if u.CPUMilli != 3000 || u.Memory != 7 || u.Jobs != 3 {
				t.Errorf("old row %+v", u)
			}
		} else {
			byCluster++
		}
	}
	if whole != 2 || byCluster != 2 {
		t.Fatalf("after migration 12: %+v", got)
	}
}
