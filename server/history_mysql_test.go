package server

import (
	"bufio"
	"context"
	"database/sql"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/mariadbtest"
	"github.com/drover-sched/drover/internal/simworker"
	"github.com/drover-sched/drover/money"
	"github.com/go-sql-driver/mysql"
)

// testDriverLog hands what go-sql-driver/mysql logs to the test's log.
type testDriverLog struct{ t *testing.T }

func (l testDriverLog) Print(v ...any) { l.t.Log(append([]any{"mysql driver:"}, v...)...) }

// TestMySQLExportSurvivesOutage: three servers export finished batches
// to a real MariaDB. mariadbd is killed (SIGKILL) while a batch is half
// written and leadership moves while it is down: scheduling goes on, the
// outage shows in the status, nothing leaves memory. Once mariadbd is back
// the new leader catches up, and every batch ends up stored exactly once
// (one batch row, each job once, one write of each batch over all the
// servers) and readable through every server after it left memory.
func TestMySQLExportSurvivesOutage(t *testing.T) {
	db, err := mariadbtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Stop()
	dsn, err := db.CreateDatabase("drover")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := NewTestCluster(ctx, t.TempDir(), 3, ClusterOptions{Logger: testLogger(t), Configure: func(_ int, cfg *Config) {
		cfg.HistoryDSN = dsn
		cfg.Retention = 200 * time.Millisecond
		cfg.MaxQueuedJobsPerUser = 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	admin := api.NewClient(c.HTTPAddrs(), c.Token)
	// The highest price, so even instant jobs cost something.
	if _, err := admin.SetRates(ctx, []api.NewRate{{Resource: "compute", PricePerHour: 1e6 * money.DollarPerHour}}); err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	defer stopWorker()
	dist, _ := simworker.ParseDist("0s")
	go func() {
		_ = simworker.Run(wctx, simworker.Config{Servers: c.HTTPAddrs(), Secret: "test-secret", Name: "w",
			Cores: 64, Memory: 256 << 30, Duration: dist, SyncWait: 100 * time.Millisecond, Rec: simworker.NewRecorder()})
	}()
	sizes := map[int64]int64{}
	submit := func(n int) int64 {
		res, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{
			{JobID: 1, Name: "j", Count: int64(n), Command: []string{"true"}, CPU: 0.125, Memory: 64 << 20}}})
		if err != nil {
			t.Fatal(err)
		}
		sizes[res.ID] = int64(n)
		return res.ID
	}
	gone := func(id int64) bool {
		for _, s := range c.Servers {
			if s.State().HasBatch(uint64(id)) {
				return false
			}
		}
		return true
	}
	// Phase 1: MariaDB up. Batches are exported and leave memory.
	var early []int64
	for i := 0; i < 5; i++ {
		early = append(early, submit(500))
	}
	waitUntil(t, "the first batches to leave memory", 60*time.Second, func() bool {
		for _, id := range early {
			if !gone(id) {
				return false
			}
		}
		return true
	})

	// Phase 2: big batches; kill mariadbd once one of them is half
	// written (job rows stored, the batch row not yet).
	probeCfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Its pooled connections break with mariadbd: the driver says so in
	// the test's log, not on stderr.
	probeCfg.Logger = mysql.Logger(testDriverLog{t})
	probeConn, err := mysql.NewConnector(probeCfg)
	if err != nil {
		t.Fatal(err)
	}
	probe := sql.OpenDB(probeConn)
	defer probe.Close()
	var late []int64
	for i := 0; i < 3; i++ {
		late = append(late, submit(40000))
	}
	halfWritten := func() (int64, bool) {
		for _, id := range late {
			var jobs, batches int
			if err := probe.QueryRow("SELECT (SELECT COUNT(*) FROM jobs WHERE batch_id = ?), (SELECT COUNT(*) FROM batches WHERE id = ?)", id, id).Scan(&jobs, &batches); err != nil {
				t.Fatal(err)
			}
			if jobs > 0 && batches == 0 {
				return id, true
			}
		}
		return 0, false
	}
	var cut int64
	waitUntil(t, "an export to be half written", 60*time.Second, func() bool {
		var ok bool
		cut, ok = halfWritten()
		return ok
	})
	db.Kill()
	t.Logf("killed mariadbd while batch %d was half written", cut)
	more := submit(300) // submitted and run while MariaDB is down
	waitUntil(t, "every batch to complete while MariaDB is down", 60*time.Second, func() bool {
		for _, id := range append(late, more) {
			b, err := admin.GetBatch(ctx, id)
			if err != nil || b.State != api.BatchComplete {
				return false
			}
		}
		return true
	})
	old := c.Leader()
	waitUntil(t, "the outage to show in the status", 30*time.Second, func() bool {
		st, err := api.NewClient("http://"+old.HTTPAddr(), c.Token).Leader(ctx)
		return err == nil && st.History != nil && !st.History.Up && st.History.Error != "" && st.History.DownSince != nil && st.History.WaitingBatches >= 2
	})
	if got := metricValue(t, old, "drover_history_up"); got != 0 {
		t.Fatalf("drover_history_up is %v during the outage", got)
	}
	// A report by batch says what it lacks; by day it is whole.
	if r, err := admin.ProjectCost(ctx, "default", api.CostQuery{By: api.CostByBatch}); err != nil || r.Partial == "" {
		t.Fatalf("cost by batch while MariaDB is down: %+v, %v", r, err)
	}
	if r, err := admin.ProjectCost(ctx, "default", api.CostQuery{}); err != nil || r.Partial != "" || r.Total <= 0 {
		t.Fatalf("cost by day while MariaDB is down: %+v, %v", r, err)
	}
	// Move leadership while MariaDB is down: the next leader finishes.
	if err := old.raft.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a new leader", 20*time.Second, func() bool { l := c.Leader(); return l != nil && l != old })
	time.Sleep(500 * time.Millisecond) // two retention windows: nothing may go
	for _, id := range append(late, more) {
		for _, s := range c.Servers {
			if !s.State().HasBatch(uint64(id)) {
				t.Fatalf("batch %d left server %s's memory while MariaDB was down", id, s.ID())
			}
		}
	}

	if err := db.Start(); err != nil {
		t.Fatal(err)
	}
	all := append(append(early, late...), more)
	waitUntil(t, "every batch to leave memory after MariaDB came back", 120*time.Second, func() bool {
		for _, id := range all {
			if !gone(id) {
				return false
			}
		}
		return true
	})
	var written int64
	for _, s := range c.Servers {
		written += s.history.Status().ExportedBatches
	}
	if written != int64(len(all)) {
		t.Fatalf("%d batch writes over all servers for %d batches", written, len(all))
	}
	for _, id := range all {
		var batches, jobs, distinct int64
		if err := probe.QueryRow("SELECT (SELECT COUNT(*) FROM batches WHERE id = ?), (SELECT COUNT(*) FROM jobs WHERE batch_id = ?), (SELECT COUNT(DISTINCT job_id) FROM jobs WHERE batch_id = ?)",
			id, id, id).Scan(&batches, &jobs, &distinct); err != nil {
			t.Fatal(err)
		}
		if batches != 1 || jobs != sizes[id] || distinct != jobs {
			t.Fatalf("batch %d stored as %d batch rows and %d job rows (%d distinct), want 1 and %d", id, batches, jobs, distinct, sizes[id])
		}
	}
	// Every server reads them now, from MariaDB.
	for i, s := range c.Servers {
		cl := api.NewClient("http://"+s.HTTPAddr(), c.Token)
		b, err := cl.GetBatch(ctx, cut)
		if err != nil || b.NSucceeded != sizes[cut] || b.State != api.BatchComplete {
			t.Fatalf("server %d: batch %d: %+v, %v", i, cut, b, err)
		}
		page, err := cl.ListJobs(ctx, cut, "", 39990)
		if err != nil || len(page.Jobs) != 10 || page.Jobs[9].JobID != 40000 || page.Jobs[9].State != api.JobSuccess {
			t.Fatalf("server %d: the last jobs of batch %d: %+v, %v", i, cut, page, err)
		}
		list, err := cl.ListBatches(ctx, "", 0)
		if err != nil || len(list.Batches) != len(all) {
			t.Fatalf("server %d lists %d batches, want %d (%v)", i, len(list.Batches), len(all), err)
		}
		// The ledger holds what each batch cost: by batch (all from
		// MariaDB now) it adds up to the days' totals the state keeps.
		byDay, err := cl.ProjectCost(ctx, "default", api.CostQuery{})
		if err != nil {
			t.Fatal(err)
		}
		byBatch, err := cl.ProjectCost(ctx, "default", api.CostQuery{By: api.CostByBatch})
		if err != nil || byBatch.Partial != "" || len(byBatch.Rows) == 0 || len(byBatch.Rows) > len(all) ||
			byDay.Total <= 0 || byBatch.Total != byDay.Total {
			t.Fatalf("server %d: cost by batch %+v (%v) against by day %+v", i, byBatch, err, byDay)
		}
	}
	if st, _ := api.NewClient("http://"+c.Leader().HTTPAddr(), c.Token).Leader(ctx); st.History == nil || !st.History.Up || st.History.WaitingBatches != 0 {
		t.Fatalf("history status after the catch-up: %+v", st.History)
	}
}

// metricValue reads an unlabelled metric from a server's /metrics.
func metricValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
