package history_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/money"
)

// TestMySQLMigratesFloatMoney: a MySQL history written by the drover that
// kept money in float64 (testdata/float-money.sql: ledger costs in a
// DOUBLE column, batch documents with float costs) is migrated on open:
// the column becomes DECIMAL, each cost is the float rounded once to the
// nearest nano-dollar (as money.FromDollars rounds it), the batch
// documents read as the same amounts, and what is written after is exact.
func TestMySQLMigratesFloatMoney(t *testing.T) {
	ctx := context.Background()
	dsn := newDatabase(t)
	dump, err := os.ReadFile("testdata/float-money.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, string(dump)); err != nil {
		t.Fatal(err)
	}
	column := func() string {
		var typ string
		if err := db.QueryRowContext(ctx, `SELECT DATA_TYPE FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'ledger' AND COLUMN_NAME = 'cost'`).Scan(&typ); err != nil {
			t.Fatal(err)
		}
		return typ
	}
	if typ := column(); typ != "double" {
		t.Fatalf("the fixture's ledger cost is %s, want the old double", typ)
	}

	s, err := history.OpenMySQL(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if typ := column(); typ != "decimal" {
		t.Fatalf("after the migration the ledger cost is %s, want decimal", typ)
	}
	var version int
	if err := db.QueryRowContext(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&version); err != nil || version != history.SchemaVersion {
		t.Fatalf("schema version %d (%v), want %d", version, err, history.SchemaVersion)
	}
	day := int32(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).Unix() / 86400)
	rows, err := s.Ledger(ctx, "genomics", day, day+1)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		day   int32
		batch uint64
	}
	want := map[key]float64{
		{day, 1}: 0.1, {day + 1, 1}: 0.2, {day, 2}: 20.031234, {day, 3}: 5.208040061265903e-06 * 3,
		{day, 4}: 0.00000000004, {day + 1, 4}: 123456.78901234568,
	}
	if len(rows) != len(want) {
		t.Fatalf("ledger %+v, want %d rows", rows, len(want))
	}
	for _, r := range rows {
		f, ok := want[key{r.Day, r.Batch}]
		if !ok || r.Cost != money.FromDollars(f) {
			t.Errorf("ledger row %+v: want %v rounded once, %s", r, f, money.FromDollars(f))
		}
	}
	if got := rows[len(rows)-1].Cost; got != 123_456_789_012_346 {
		t.Errorf("the largest cost reads %d nano-dollars, want 123456789012346", got)
	}
	for id, f := range map[uint64]float64{2: 20.031234, 3: 5.208040061265903e-06 * 3, 4: 123456.78901234568} {
		b, ok, err := s.Batch(ctx, id)
		if err != nil || !ok || b.Cost != money.FromDollars(f) {
			t.Errorf("batch %d: %v %v %v, want cost %s", id, b.Cost, ok, err, money.FromDollars(f))
		}
	}

	// Written now: exact to the nano-dollar, and a second open finds
	// nothing to migrate.
	end := time.Unix(0, 0).UTC()
	nb := history.Batch{Version: 1, Batch: api.Batch{ID: 5, User: "carol", BillingProject: "genomics", State: api.BatchComplete,
		TimeCompleted: &end, Cost: 9_223_372_036_854_775_807}}
	if _, err := s.PutBatch(ctx, nb, []history.LedgerRow{{BillingProject: "genomics", Day: day, User: "carol", Batch: 5, Cost: 1}, {BillingProject: "genomics", Day: day + 1, User: "carol", Batch: 5, Cost: money.MaxAmount}}, nil); err != nil {
		t.Fatal(err)
	}
	again, err := history.OpenMySQL(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	rows, err = again.Ledger(ctx, "genomics", day, day+1)
	if err != nil {
		t.Fatal(err)
	}
	var got []money.Amount
	for _, r := range rows {
		if r.Batch == 5 {
			got = append(got, r.Cost)
		}
	}
	if len(got) != 2 || got[0] != 1 || got[1] != money.MaxAmount {
		t.Fatalf("batch 5's ledger reads %v, want a nano-dollar and the largest amount", got)
	}
	if b, _, err := again.Batch(ctx, 5); err != nil || b.Cost != money.MaxAmount {
		t.Fatalf("batch 5 reads %v %v", b.Cost, err)
	}
}
