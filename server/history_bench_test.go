package server

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/testkit/mariadbtest"
)

// finishedState builds a state holding one complete batch of n jobs (an
// array of `true`, each run once on one of 100 instances with usage
// reported, priced at set rates), applying the commands a cluster would.
func finishedState(tb testing.TB, n int) (*state.State, uint64) {
	st := state.New()
	idx := uint64(0)
	apply := func(c state.Command) any {
		idx++
		res := st.Apply(idx, c)
		if err, ok := res.(*state.ApplyError); ok {
			tb.Fatalf("%T: %v", c, err)
		}
		return res
	}
	now := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC).UnixNano()
	apply(&state.Bootstrap{Now: now, Admin: "root", TokenHash: "h", DefaultProject: "default"})
	apply(&state.SetRates{Now: now, Rates: []state.RateEntry{{Resource: "compute", Price: 40_000_000, ValidFrom: now}, {Resource: "memory", Price: 5_000_000, ValidFrom: now}}})
	var insts []uint32
	for i := 0; i < 100; i++ {
		res := apply(&state.Activate{Now: now, Name: "w" + strconv.Itoa(i), NodeID: "n" + strconv.Itoa(i), CPUMilli: 1_000_000 * 1000, Memory: 1 << 50, TokenHash: "t" + strconv.Itoa(i)})
		insts = append(insts, res.(*state.ActivateResult).Instance)
	}
	res := apply(&state.CreateBatch{Now: now, User: "root", BillingProject: "default", Name: "export", Attributes: map[string]string{"set": "bench"},
		Jobs: []state.JobEntry{{First: 1, Count: uint32(n), Spec: &state.Spec{Name: "align", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}}}})
	batch := res.(*state.UpdateResult).Batch
	per := (n + len(insts) - 1) / len(insts)
	var pl []state.Placement
	for i, in := range insts {
		lo := i*per + 1
		if lo > n {
			break
		}
		pl = append(pl, state.Placement{Batch: batch, First: uint32(lo), Count: uint32(min(per, n-lo+1)), Attempt: 1, Instance: in})
	}
	apply(&state.Plan{Now: now, Placements: pl})
	var evs []state.Event
	for _, p := range pl {
		for j := p.First; j < p.First+p.Count; j++ {
			start := now + int64(j)*1e6
			evs = append(evs, state.Event{Instance: p.Instance, Batch: batch, Job: j, Attempt: 1, Outcome: state.OutcomeSuccess,
				Start: start, End: start + 90e9, Usage: &state.Usage{CPUMillis: 85_000, PeakMemory: 300 << 20}})
			if len(evs) == 8192 {
				apply(&state.Events{Now: now, Events: evs})
				evs = evs[:0]
			}
		}
	}
	if len(evs) > 0 {
		apply(&state.Events{Now: now, Events: evs})
	}
	return st, batch
}

// exportServer is just what exportBatch uses.
func exportServer(st *state.State, store history.Store) *Server {
	return &Server{state: st, history: &historyBook{kind: store.Kind(), store: store}, log: slog.Default(),
		metrics: newMetrics(st, func() raftStats { return nil }, false)}
}

// BenchmarkHistoryExport measures exporting a complete batch of
// DROVER_BENCH_EXPORT_JOBS jobs (default 1,000,000) from the state into a
// real MariaDB, and then reading pages of 50 of its jobs back at random
// places: `make bench-history`.
func BenchmarkHistoryExport(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("DROVER_BENCH_EXPORT_JOBS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	db, err := mariadbtest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Stop()
	built := time.Now()
	st, batch := finishedState(b, n)
	b.Logf("built a state with a complete batch of %d jobs in %s", n, time.Since(built).Round(time.Millisecond))
	items, _ := st.ExportQueue(1)
	if len(items) != 1 {
		b.Fatalf("export queue %+v", items)
	}
	ctx := context.Background()
	var store *history.MySQL
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dsn, err := db.CreateDatabase(fmt.Sprintf("bench_%d", i))
		if err != nil {
			b.Fatal(err)
		}
		if store, err = history.OpenMySQL(ctx, dsn, nil); err != nil {
			b.Fatal(err)
		}
		srv := exportServer(st, store)
		b.StartTimer()
		start := time.Now()
		lin := st.Lineage()
		ok, err := srv.exportBatch(ctx, store, items[0], newExportPacer(func() bool { return false }), &lin)
		took := time.Since(start)
		if err != nil || !ok {
			b.Fatalf("export: %v, %v", ok, err)
		}
		b.ReportMetric(took.Seconds(), "s/export")
		b.ReportMetric(float64(n)/took.Seconds(), "jobs/s")
		b.StopTimer()
		if i < b.N-1 {
			store.Close()
		}
		b.StartTimer()
	}
	b.StopTimer()
	defer store.Close()
	var rows int
	if err := store.DB().QueryRow("SELECT COUNT(*) FROM jobs WHERE batch_id = ?", batch).Scan(&rows); err != nil || rows != n {
		b.Fatalf("%d job rows stored, want %d (%v)", rows, n, err)
	}
	// Pages of 50 at random places, as `drover job list` reads them.
	rng := rand.New(rand.NewPCG(1, 2))
	var times []time.Duration
	for i := 0; i < 200; i++ {
		last := uint32(rng.IntN(n - 50))
		start := time.Now()
		page, err := store.ListJobs(ctx, batch, nil, last)
		times = append(times, time.Since(start))
		if err != nil || len(page.Jobs) != 50 || page.Jobs[0].JobID != int64(last)+1 {
			b.Fatalf("page after %d: %d jobs, %v", last, len(page.Jobs), err)
		}
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms/page-p50")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "ms/page-p99")
}
