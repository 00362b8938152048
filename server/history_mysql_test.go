package server

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/testkit/mariadbtest"
	"github.com/drover-sched/drover/testkit/simworker"
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
//
// The export is ordered against the outage through Config.ExportHook (an
// exportTap), not by polling the store: on a loaded machine a poll missed
// the half-written moment, and the exporter's backoff outlasted the wait.
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
	tap := newExportTap()
	c, err := NewTestCluster(ctx, t.TempDir(), 3, ClusterOptions{Logger: testLogger(t), Configure: func(i int, cfg *Config) {
		cfg.HistoryDSN = dsn
		cfg.Retention = 200 * time.Millisecond
		cfg.MaxQueuedJobsPerUser = 0
		cfg.ExportHook = tap.hook(i)
		// Raft's defaults, not the test config's 200 ms: with -race on a
		// loaded machine (load average 30) the short timeouts moved
		// leadership about once a second, and each move starts the
		// export of a batch over, so the catch-up never finished.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	defer tap.releaseAll() // a failed test must not leave an exporter held
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
	waitUntil(t, "the first batches to leave memory", 3*time.Minute, func() bool {
		for _, id := range early {
			if !gone(id) {
				return false
			}
		}
		return true
	})

	// Phase 2: big batches. From now on the exporter stops at every
	// batch whose jobs are stored and whose batch row is not: mariadbd
	// is killed while the first of them is held there, half written.
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
	tap.holdStored()
	var late []int64
	for i := 0; i < 3; i++ {
		late = append(late, submit(bigBatch))
	}
	half := tap.waitHalf(t, 5*time.Minute, func() string {
		var b strings.Builder
		for _, id := range late {
			got, err := admin.GetBatch(ctx, id)
			fmt.Fprintf(&b, "batch %d: %+v %v; ", id, got, err)
		}
		if l := c.Leader(); l != nil {
			fmt.Fprintf(&b, "leader %s history %+v", l.ID(), l.history.Status())
		}
		return b.String()
	})
	cut := int64(half.batch)
	t.Logf("%s server %d holds batch %d half written", time.Now().Format(time.TimeOnly), half.server, cut)
	if sizes[cut] != bigBatch {
		t.Fatalf("batch %d (not one of the big batches %v) was exported after the first ones left memory", cut, late)
	}
	var jobs, batches int64
	if err := probe.QueryRow("SELECT (SELECT COUNT(*) FROM jobs WHERE batch_id = ?), (SELECT COUNT(*) FROM batches WHERE id = ?)", cut, cut).Scan(&jobs, &batches); err != nil {
		t.Fatal(err)
	}
	if jobs != sizes[cut] || batches != 0 {
		t.Fatalf("batch %d held half written is stored as %d job rows and %d batch rows, want %d and 0", cut, jobs, batches, sizes[cut])
	}
	// Rounds after this one wait until every batch is complete, so the
	// next round sees them all waiting.
	tap.holdRounds()
	db.Kill()
	t.Logf("killed mariadbd while batch %d was half written (%d job rows, no batch row)", cut, jobs)
	mark := tap.mark()
	tap.releaseStored()
	failed := tap.waitRoundEnd(t, "the round that held the half-written batch to end", 2*time.Minute, func(e roundEnd) bool {
		return e.server == half.server && e.seq >= mark
	})
	if failed.err == nil {
		t.Fatalf("the round that held batch %d half written ended without an error after mariadbd was killed", cut)
	}
	more := submit(300) // submitted and run while MariaDB is down
	waitUntil(t, "every batch to complete while MariaDB is down", 3*time.Minute, func() bool {
		for _, id := range append(late, more) {
			b, err := admin.GetBatch(ctx, id)
			if err != nil || b.State != api.BatchComplete {
				return false
			}
		}
		return true
	})
	t.Logf("%s every batch is complete", time.Now().Format(time.TimeOnly))
	gen := tap.releaseRounds()
	down := tap.waitRoundEnd(t, "a round that saw every batch complete", 2*time.Minute, func(e roundEnd) bool {
		return e.gen == gen && !errors.Is(e.err, context.Canceled)
	})
	if down.err == nil {
		t.Fatal("an export round succeeded while mariadbd was down")
	}
	exporter := c.Servers[down.server]
	if st := exporter.history.Status(); st.Up || st.Error == "" || st.DownSince == nil || st.WaitingBatches < 2 {
		t.Fatalf("history status after a failed round during the outage: %+v", st)
	}
	if got := metricValue(t, exporter, "drover_history_up"); got != 0 {
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
	// (A loaded machine can move it on its own first: transfer from
	// whichever server leads.)
	var old *Server
	waitUntil(t, "a leadership transfer", time.Minute, func() bool {
		l := c.Leader()
		if l == nil || l.raft.raft.LeadershipTransfer().Error() != nil {
			return false
		}
		old = l
		return true
	})
	waitUntil(t, "a new leader", time.Minute, func() bool { l := c.Leader(); return l != nil && l != old })
	t.Logf("%s leadership moved from %s", time.Now().Format(time.TimeOnly), old.ID())
	// The new leader runs rounds during the outage (the batches' retention
	// has long passed): they fail, and nothing leaves memory.
	mark = tap.mark()
	next := tap.waitRoundEnd(t, "the new leader's round during the outage", 2*time.Minute, func(e roundEnd) bool {
		return e.seq >= mark && c.Servers[e.server] != old && !errors.Is(e.err, context.Canceled)
	})
	if next.err == nil {
		t.Fatalf("server %d's export round succeeded while mariadbd was down", next.server)
	}
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
	restarted := time.Now()
	t.Logf("%s mariadbd is back", restarted.Format(time.TimeOnly))
	all := append(append(early, late...), more)
	reported := false // where the catch-up stands, once, if it is about to time out
	waitUntil(t, "every batch to leave memory after MariaDB came back", 5*time.Minute, func() bool {
		for _, id := range all {
			if !gone(id) {
				if !reported && time.Since(restarted) > 290*time.Second {
					reported = true
					for i, s := range c.Servers {
						t.Logf("server %d leads %v, holds batch %d: %v, history %+v", i, s.IsLeader(), id, s.State().HasBatch(uint64(id)), s.history.Status())
					}
				}
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
		page, err := cl.ListJobs(ctx, cut, "", bigBatch-10)
		if err != nil || len(page.Jobs) != 10 || page.Jobs[9].JobID != bigBatch || page.Jobs[9].State != api.JobSuccess {
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
	// A round that started after every batch left memory finds none
	// waiting.
	mark = tap.mark()
	after := tap.waitRoundEnd(t, "a round that started after the catch-up", 2*time.Minute, func(e roundEnd) bool {
		return e.after >= mark && e.err == nil
	})
	if st := c.Servers[after.server].history.Status(); !st.Up || st.WaitingBatches != 0 {
		t.Fatalf("history status after the catch-up: %+v", st)
	}
}

// bigBatch is the size of the batches exported around the outage: each
// is more than one export piece (exportChunk), and small enough that a
// loaded machine under -race exports them in minutes.
const bigBatch = 6000

// exportTap is the test's end of Config.ExportHook: it holds the
// exporters of every server at the stages the test names and records
// the rounds they end, so the test orders the outage against the export.
type exportTap struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every event
	// storedGate, when not nil, holds every exporter that has stored a
	// batch's jobs until it is closed; half is the first batch held.
	storedGate chan struct{}
	half       *halfWritten
	// roundGate holds exporters at the start of a round until it is
	// closed; gen counts the gates, and each round remembers the gen it
	// started under.
	roundGate chan struct{}
	gen       int
	started   map[int][2]int // server → the gen its round started under, and len(ends) then
	ends      []roundEnd
}

// halfWritten is a batch an exporter holds half written.
type halfWritten struct {
	server int
	batch  uint64
}

// roundEnd is an export round that ended: on which server, under which
// gate generation it started, how many rounds had ended when it started,
// its place among all round ends, and its error.
type roundEnd struct {
	server, gen, after, seq int
	err                     error
}

func newExportTap() *exportTap {
	open := make(chan struct{})
	close(open)
	return &exportTap{changed: make(chan struct{}), roundGate: open, started: map[int][2]int{}}
}

// notify wakes the waiters; the caller holds mu.
func (p *exportTap) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// hook is server i's Config.ExportHook.
func (p *exportTap) hook(i int) func(context.Context, ExportEvent) {
	return func(ctx context.Context, ev ExportEvent) {
		switch ev.Stage {
		case ExportRoundStart:
			p.mu.Lock()
			gate, gen := p.roundGate, p.gen
			p.mu.Unlock()
			select {
			case <-gate:
			case <-ctx.Done():
			}
			p.mu.Lock()
			p.started[i] = [2]int{gen, len(p.ends)}
			p.mu.Unlock()
		case ExportJobsStored:
			p.mu.Lock()
			gate := p.storedGate
			if gate != nil && p.half == nil {
				p.half = &halfWritten{server: i, batch: ev.Batch}
				p.notify()
			}
			p.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
				}
			}
		case ExportRoundDone:
			p.mu.Lock()
			st := p.started[i]
			p.ends = append(p.ends, roundEnd{server: i, gen: st[0], after: st[1], seq: len(p.ends), err: ev.Err})
			p.notify()
			p.mu.Unlock()
		}
	}
}

// holdStored makes exporters stop once they have stored a batch's jobs.
func (p *exportTap) holdStored() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.storedGate = make(chan struct{})
}

// releaseStored lets held exporters write their batch rows, and lets
// later batches pass.
func (p *exportTap) releaseStored() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.storedGate != nil {
		close(p.storedGate)
		p.storedGate = nil
	}
}

// holdRounds makes rounds wait at their start from now on.
func (p *exportTap) holdRounds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.roundGate = make(chan struct{})
	p.gen++
}

// mark is the seq the next round end gets.
func (p *exportTap) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ends)
}

// releaseRounds lets rounds start; it returns the generation of the
// rounds it let start.
func (p *exportTap) releaseRounds() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.roundGate)
	return p.gen
}

// releaseAll lets every held exporter go.
func (p *exportTap) releaseAll() {
	p.releaseStored()
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.roundGate:
	default:
		close(p.roundGate)
	}
}

// waitHalf waits until an exporter holds a batch half written; state
// says where things stand if it never does.
func (p *exportTap) waitHalf(t *testing.T, limit time.Duration, state func() string) halfWritten {
	t.Helper()
	var h halfWritten
	p.wait(t, "an exporter to hold a batch half written", limit, state, func() bool {
		if p.half == nil {
			return false
		}
		h = *p.half
		return true
	})
	return h
}

// waitRoundEnd waits for a round end that ok accepts and returns it.
func (p *exportTap) waitRoundEnd(t *testing.T, what string, limit time.Duration, ok func(roundEnd) bool) roundEnd {
	t.Helper()
	var found roundEnd
	p.wait(t, what, limit, nil, func() bool {
		for _, e := range p.ends {
			if ok(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// wait waits until cond (called with mu held) holds, woken by events; the
// limit only bounds a test that went wrong, and state (if not nil) says
// where things stand then.
func (p *exportTap) wait(t *testing.T, what string, limit time.Duration, state func() string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		done := cond()
		changed := p.changed
		p.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			p.mu.Lock()
			rounds := len(p.ends)
			var last roundEnd
			if rounds > 0 {
				last = p.ends[rounds-1]
			}
			p.mu.Unlock()
			where := ""
			if state != nil {
				where = state()
			}
			t.Fatalf("timed out after %s waiting for %s (%d export rounds ended, the last %+v) %s", limit, what, rounds, last, where)
		}
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
