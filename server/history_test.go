package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/testkit/simworker"
)

func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s differs once in the history store:\n got %s\nwant %s", what, g, w)
	}
}

// TestFinishedBatchesMoveToHistory: on a single server with the embedded
// store, complete batches are exported and, once the retention window has
// passed, leave the state; their status, jobs (every page, filters) and
// single jobs read the same as they did from memory; listings merge them
// with the batches in memory; they can be read but not changed; a batch
// still running stays; the store survives a restart.
func TestFinishedBatchesMoveToHistory(t *testing.T) {
	dir := t.TempDir()
	cfg := TestConfig(dir, testLogger(t))
	cfg.Retention = time.Hour // until the test has read them from memory
	srv, tok, err := StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(context.Background()) }()
	ctx := context.Background()
	admin := api.NewClient("http://"+srv.HTTPAddr(), tok)
	if _, err := admin.SetRates(ctx, []api.NewRate{{Resource: "compute", PricePerHour: 36 * money.DollarPerHour}}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	dist, _ := simworker.ParseDist("20ms")
	go func() {
		_ = simworker.Run(wctx, simworker.Config{Servers: "http://" + srv.HTTPAddr(), Secret: "test-secret", Name: "w",
			Cores: 8, Memory: 32 << 30, Duration: dist, SyncWait: 100 * time.Millisecond, Rec: simworker.NewRecorder()})
	}()
	submit := func(name string, jobs []api.JobSpec) int64 {
		res, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: name, Attributes: map[string]string{"run": name}, Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	a := submit("array", []api.JobSpec{
		{JobID: 1, Name: "align", Count: 120, Command: []string{"true"}, CPU: 0.5, Attributes: map[string]string{"step": "align"}},
		{JobID: 121, Name: "merge", Command: []string{"true"}, ParentRanges: []api.IDRange{{1, 120}}},
	})
	b := submit("small", []api.JobSpec{{JobID: 1, Name: "one", Command: []string{"true"}, Count: 5}})
	// A job no worker will run: in a region none is in (one larger than
	// every machine is refused at submit once the worker has joined).
	stuck := submit("stuck", []api.JobSpec{{JobID: 1, Name: "elsewhere", Command: []string{"true"}, Regions: []string{"nowhere"}}})

	// Read the finished batches from memory, as the API shows them.
	var liveA, liveB *api.Batch
	waitUntil(t, "both batches to complete", 30*time.Second, func() bool {
		liveA, _ = admin.GetBatch(ctx, a)
		liveB, _ = admin.GetBatch(ctx, b)
		return liveA != nil && liveB != nil && liveA.State == api.BatchComplete && liveB.State == api.BatchComplete
	})
	jobsA, err := admin.AllJobs(ctx, a, "")
	if err != nil || len(jobsA) != 121 {
		t.Fatalf("batch %d from memory: %d jobs, %v", a, len(jobsA), err)
	}
	if liveA.Cost <= 0 || jobsA[0].Attempts[0].Cost == nil {
		t.Fatalf("the batch cost %v; its first attempt %+v", liveA.Cost, jobsA[0].Attempts)
	}
	failedLive, _ := admin.AllJobs(ctx, a, "name=merge")
	listLive, _ := admin.ListBatches(ctx, "", 0)
	reports := map[string]*api.ProjectCost{}
	for _, by := range []string{api.CostByDay, api.CostByUser, api.CostByBatch} {
		if reports[by], err = admin.ProjectCost(ctx, "default", api.CostQuery{By: by}); err != nil {
			t.Fatal(err)
		}
	}
	if r := reports[api.CostByBatch]; len(r.Rows) != 2 || r.Rows[0].Batch != a || r.Rows[0].Cost != liveA.Cost ||
		r.Rows[1].Batch != b || r.Rows[1].Cost != liveB.Cost || r.Total != liveA.Cost+liveB.Cost {
		t.Fatalf("cost by batch from memory: %+v; batch %d cost %v, batch %d %v", r, a, liveA.Cost, b, liveB.Cost)
	}
	waitUntil(t, "both batches to be exported", 30*time.Second, func() bool {
		_, waiting := srv.State().ExportQueue(1)
		return waiting == 0
	})
	if !srv.State().HasBatch(uint64(a)) || !srv.State().HasBatch(uint64(b)) {
		t.Fatal("batches left memory before their retention window passed")
	}
	srv.retention.Store(int64(200 * time.Millisecond))

	waitUntil(t, "the finished batches to leave memory", 30*time.Second, func() bool {
		return !srv.State().HasBatch(uint64(a)) && !srv.State().HasBatch(uint64(b))
	})
	if !srv.State().HasBatch(uint64(stuck)) {
		t.Fatal("a running batch left memory")
	}
	check := func(c *api.Client, where string) {
		t.Helper()
		got, err := c.GetBatch(ctx, a)
		if err != nil {
			t.Fatalf("%s: batch %d: %v", where, a, err)
		}
		sameJSON(t, where+": batch status", got, liveA)
		jobs, err := c.AllJobs(ctx, a, "")
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, where+": every job", jobs, jobsA)
		page, err := c.ListJobs(ctx, a, "", 0)
		if err != nil || len(page.Jobs) != 50 || page.LastID != 50 {
			t.Fatalf("%s: first page: %d jobs, last %d, %v", where, len(page.Jobs), page.LastID, err)
		}
		merge, _ := c.AllJobs(ctx, a, "name=merge")
		sameJSON(t, where+": jobs named merge", merge, failedLive)
		j, err := c.GetJob(ctx, a, 7)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, where+": job 7", j, jobsA[6])
		if _, err := c.GetJob(ctx, a, 500); !api.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("%s: a job the batch never had: %v", where, err)
		}
		list, err := c.ListBatches(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, where+": batch list", list.Batches, listLive.Batches)
		complete, _ := c.ListBatches(ctx, "state=complete attr:run=small", 0)
		if len(complete.Batches) != 1 || complete.Batches[0].ID != b {
			t.Fatalf("%s: complete batches of run small: %+v", where, complete.Batches)
		}
		// The cost reports read the batches gone from the ledger.
		for by, want := range reports {
			got, err := c.ProjectCost(ctx, "default", api.CostQuery{By: by})
			if err != nil {
				t.Fatal(err)
			}
			if got.Partial != "" || len(got.Rows) != len(want.Rows) || got.Total != want.Total || got.Cost != want.Cost {
				t.Fatalf("%s: cost by %s: %+v; from memory %+v", where, by, got, want)
			}
			for i := range got.Rows {
				g, w := got.Rows[i], want.Rows[i]
				if g.Day != w.Day || g.User != w.User || g.Batch != w.Batch || g.Cost != w.Cost {
					t.Fatalf("%s: cost by %s, row %d: %+v; from memory %+v", where, by, i, g, w)
				}
			}
		}
		one, err := c.ProjectCost(ctx, "default", api.CostQuery{By: api.CostByBatch, Limit: 1})
		if err != nil || len(one.Rows) != 1 || one.Omitted != 1 || one.OmittedCost != liveB.Cost {
			t.Fatalf("%s: the costliest batch: %+v, %v", where, one, err)
		}
	}
	check(admin, "from the history store")

	// Finished and gone from memory: readable, not changeable.
	if err := admin.CancelBatch(ctx, a); !api.IsStatus(err, http.StatusConflict) {
		t.Fatalf("cancelling a batch in the history store: %v", err)
	}
	if _, err := admin.CreateUpdate(ctx, a, &api.CreateUpdateRequest{NJobs: 1}); !api.IsStatus(err, http.StatusConflict) {
		t.Fatalf("adding to a batch in the history store: %v", err)
	}
	if _, err := admin.GetBatch(ctx, 999); !api.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("a batch that never was: %v", err)
	}
	// Someone outside the project sees nothing of it.
	eveUser, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: "eve"})
	if err != nil {
		t.Fatal(err)
	}
	eve := api.NewClient("http://"+srv.HTTPAddr(), eveUser.Token)
	if _, err := eve.GetBatch(ctx, a); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("a stranger reading an archived batch: %v", err)
	}
	if l, err := eve.ListBatches(ctx, "", 0); err != nil || len(l.Batches) != 0 {
		t.Fatalf("a stranger lists %+v, %v", l, err)
	}
	if _, err := eve.ProjectCost(ctx, "default", api.CostQuery{By: api.CostByBatch}); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("a stranger reading the project's cost: %v", err)
	}
	for _, q := range []api.CostQuery{{From: "2025-01-01", To: "2026-01-02"}, {From: "2026-01-02", To: "2026-01-01"}, {By: "week"}, {By: "batch", Limit: api.MaxCostRows + 1}, {From: "yesterday"}} {
		if _, err := admin.ProjectCost(ctx, "default", q); !api.IsStatus(err, http.StatusBadRequest) {
			t.Fatalf("cost report %+v: %v; want 400", q, err)
		}
	}

	st, err := admin.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h := st.History; h == nil || h.Store != "embedded" || !h.Up || h.ExportedBatches < 2 || h.ForgottenBatches < 2 || h.WaitingBatches != 0 {
		t.Fatalf("history status %+v", st.History)
	}

	// The store is on disk: a restarted server reads it.
	stop()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := srv.WaitReady(wctx2); err != nil {
		t.Fatal(err)
	}
	if srv.State().HasBatch(uint64(a)) {
		t.Fatal("a forgotten batch came back to memory after a restart")
	}
	check(api.NewClient("http://"+srv.HTTPAddr(), tok), "after a restart")
}
