package server

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server/state"
)

// floatMoneyFixture is what the server that wrote testdata/float-money
// answered before it stopped (expected.json): its JSON of float dollars,
// read here by today's types (each amount rounded once to the nearest
// nano-dollar).
type floatMoneyFixture struct {
	Batch1, Batch2, Batch3 struct {
		Batch api.Batch `json:"batch"`
		Jobs  []api.Job `json:"jobs"`
	}
	CostByDay api.ProjectCost      `json:"cost_by_day"`
	Projects  []api.BillingProject `json:"projects"`
	Rates     []api.Rate           `json:"rates"`
}

func readFloatMoneyFixture(t *testing.T) floatMoneyFixture {
	t.Helper()
	data, err := os.ReadFile("testdata/float-money/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var f floatMoneyFixture
	for k, v := range map[string]any{"batch1": &f.Batch1, "batch2": &f.Batch2, "batch3": &f.Batch3,
		"cost_by_day": &f.CostByDay, "projects": &f.Projects, "rates": &f.Rates} {
		if err := json.Unmarshal(raw[k], v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	return f
}

// TestOpensDataDirWithFloatMoney opens a data dir written by the drover
// that kept money in float64 (testdata/float-money, README.md there): a
// Raft snapshot whose state holds float rates, a float spend limit, float
// accrued and daily costs and two attempts running at a float price, and
// log entries after it (a float rate, a float spend limit, a batch that
// ran and ended). The new server reports the same rates, limit and costs
// as the old one did, each rounded once to the nano-dollar; it reads the
// same state twice and after a snapshot round trip to the same integers;
// the old operator snapshot restores to the same costs; and the old
// embedded history store's ledger and batches read as the same amounts.
func TestOpensDataDirWithFloatMoney(t *testing.T) {
	ctx := context.Background()
	want := readFloatMoneyFixture(t)
	dir := copyDir(t, "testdata/float-money/datadir")
	// The old server ran with -node-id fixture (it wrote no node-id file).
	tc := startServer(t, dir, func(c *Config) { c.NodeID = "fixture" })

	// Rates, from the snapshot (version 1) and the log (compute's
	// version 2): the decimals they were given.
	rates, err := tc.admin.Rates(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(rates, want.Rates, func(a, b api.Rate) bool {
		return a.Resource == b.Resource && a.Version == b.Version && a.PricePerHour == b.PricePerHour && a.ValidFrom.Equal(b.ValidFrom)
	}) {
		t.Fatalf("rates %+v, want %+v", rates, want.Rates)
	}
	if rates[0].PricePerHour != 47_500_000 || rates[1].PricePerHour != 51_200_000 || rates[3].PricePerHour != 123_000 {
		t.Fatalf("rates %+v: want compute $0.0475 then $0.0512, memory $0.000123", rates)
	}
	// The spend limit the log set after the snapshot.
	p, ok := tc.srv.state.BillingProject("genomics")
	if !ok || p.SpendLimit != 1_234_567_890_000 {
		t.Fatalf("genomics %+v: want its limit of $1234.56789", p)
	}

	// The ended batches cost what the old server said: batch 1 from the
	// snapshot's float (rounded once), batch 3 recomputed from the log by
	// the new server, exactly.
	for _, c := range []struct {
		id   int64
		want api.Batch
		jobs []api.Job
	}{{1, want.Batch1.Batch, want.Batch1.Jobs}, {3, want.Batch3.Batch, want.Batch3.Jobs}} {
		b, err := tc.admin.GetBatch(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if b.Cost != c.want.Cost || b.Cost == 0 {
			t.Errorf("batch %d costs %s, the old server said %s", c.id, b.Cost, c.want.Cost)
		}
		jobs, err := tc.admin.AllJobs(ctx, c.id, "")
		if err != nil {
			t.Fatal(err)
		}
		for i, j := range jobs {
			got, old := j.Attempts[0], c.jobs[i].Attempts[0]
			if got.Cost == nil || *got.Cost != *old.Cost || got.PricePerHour != old.PricePerHour {
				t.Errorf("batch %d job %d: attempt costs %v at %s an hour, the old server said %s at %s", c.id, j.JobID, got.Cost, got.PricePerHour, *old.Cost, old.PricePerHour)
			}
		}
	}
	// The running batch: its attempts' price is the old one, and its
	// cost at any time is that price × the time since each started.
	jobs, err := tc.admin.AllJobs(ctx, 2, "")
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	for i, j := range jobs {
		a, old := j.Attempts[0], want.Batch2.Jobs[i].Attempts[0]
		if j.State != api.JobRunning || a.PricePerHour != old.PricePerHour || a.PricePerHour != 86_434_500 {
			t.Fatalf("batch 2 job %d: %s at %s an hour, the old server said %s", j.JobID, j.State, a.PricePerHour, old.PricePerHour)
		}
		starts = append(starts, *a.StartTime)
	}
	at := starts[0].Add(time.Hour)
	wantRunning := 0.0
	for _, s := range starts {
		wantRunning += 0.0864345 * at.Sub(s).Hours()
	}
	day := int32(want.Batch1.Batch.TimeCreated.Unix() / 86400)
	spends, _ := tc.srv.state.BatchSpends("genomics", day, day+1, at)
	byBatch := map[uint64]money.Amount{}
	for _, sp := range spends {
		byBatch[sp.Batch] = sp.Running
	}
	if math.Abs(byBatch[2].Dollars()-wantRunning) > 2e-9 {
		t.Fatalf("batch 2's running cost an hour on: %s, want $%.9f", byBatch[2], wantRunning)
	}
	// The project: its days and its total, as the old server said, to
	// the nano-dollar (its accrued float was rounded once, batch 3's cost
	// was computed exactly and added).
	days := tc.srv.state.CostByDay("genomics", day-1, day+1)
	if len(days) != 1 || len(want.CostByDay.Rows) != 1 || abs(days[0].Cost-want.CostByDay.Rows[0].Cost) > 1 {
		t.Fatalf("cost by day %+v, the old server said %+v", days, want.CostByDay.Rows)
	}
	total, running := tc.srv.state.ProjectCosts("genomics", at)
	if total != days[0].Cost+running || running != byBatch[2] {
		t.Fatalf("project cost %s (running %s): want the day's %s and batch 2's %s", total, running, days[0].Cost, byBatch[2])
	}

	// The same state read twice, and after a snapshot round trip, gives
	// the same integers; the round trip writes the same bytes.
	restored := restoreSameBytes(t, tc.srv.state)
	for _, s := range []*state.State{tc.srv.state, tc.srv.state, restored} {
		if tot, run := s.ProjectCosts("genomics", at); tot != total || run != running {
			t.Fatalf("read again: %s (running %s), want %s (%s)", tot, run, total, running)
		}
	}
	if err := restored.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	// The old operator snapshot restores to the same costs (its batch 3
	// was a float too: within a nano-dollar).
	fresh := startServer(t, "", nil)
	op, err := os.ReadFile("testdata/float-money/operator.snap")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.admin.Operator().SnapshotRestore(ctx, op); err != nil {
		t.Fatal(err)
	}
	if tot, run := fresh.srv.state.ProjectCosts("genomics", at); abs(tot-total) > 1 || run != running {
		t.Fatalf("the operator snapshot costs %s (running %s), the data dir %s (%s)", tot, run, total, running)
	}
	if p, _ := fresh.srv.state.BillingProject("genomics"); p.SpendLimit != 1_234_567_890_000 {
		t.Fatalf("the operator snapshot's limit: %s", p.SpendLimit)
	}

	// The embedded history store the old server wrote: its ledger of
	// float64 bits and its batches' JSON read as the same amounts.
	tc.stop()
	st, err := history.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ledger, err := st.Ledger(ctx, "genomics", day-1, day+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 2 || ledger[0].Batch != 1 || ledger[0].Cost != want.Batch1.Batch.Cost || ledger[1].Batch != 3 || ledger[1].Cost != want.Batch3.Batch.Cost {
		t.Fatalf("the old ledger reads %+v; want batch 1 at %s and batch 3 at %s", ledger, want.Batch1.Batch.Cost, want.Batch3.Batch.Cost)
	}
	hb, ok, err := st.Batch(ctx, 1)
	if err != nil || !ok || hb.Cost != want.Batch1.Batch.Cost {
		t.Fatalf("the old history's batch 1: %+v %v %v", hb.Batch, ok, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "history.db")); err != nil {
		t.Fatal(err)
	}
}

func abs(a money.Amount) money.Amount {
	if a < 0 {
		return -a
	}
	return a
}

// restoreSameBytes restores a snapshot of s into a new state and checks
// that a snapshot of that is the same bytes: a converted state (from
// float money or prices) is written and read back as it is.
func restoreSameBytes(t *testing.T, s *state.State) *state.State {
	t.Helper()
	snap := state.SnapshotBytes(t, s)
	restored := state.New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if again := state.SnapshotBytes(t, restored); !bytes.Equal(again, snap) {
		t.Fatal("a snapshot of the converted state does not restore to the same bytes")
	}
	return restored
}
