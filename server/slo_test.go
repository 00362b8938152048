package server

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/testkit/simworker"
)

// TestSLOReportCountsRunsByWorkflow: a batch cancelled before it ran is
// no run (it is counted beside, as cancelled), not a run that met its
// SLO; runs are grouped by workflow (the workflow attribute, else the
// name) within a billing project, each SLO-successful from the
// threshold, and a tier is judged by its share of successful workflows.
// Nothing is exported (the export interval is an hour): the report reads
// the complete batches in memory, and adds what the history store holds
// of batches memory does not. A member sees the workflows of their own
// projects only.
func TestSLOReportCountsRunsByWorkflow(t *testing.T) {
	tc := startServer(t, "", func(c *Config) {
		c.ExportInterval, c.SLOInterval, c.MetricsToken = time.Hour, 50*time.Millisecond, "scrape-secret"
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, q := range []api.Queue{
		{Path: "org", Guarantee: api.Quota{CPU: 2}},
		{Path: "org/tier1", Guarantee: api.Quota{CPU: 2}, BillingProjects: []string{"default"}},
	} {
		if _, err := tc.admin.PutQueue(ctx, &q); err != nil {
			t.Fatal(err)
		}
	}
	alice := tc.user("alice", "physics")
	submit := func(name, workflow string, slo float64, deadline *time.Time) int64 {
		t.Helper()
		req := api.CreateBatchRequest{BillingProject: "default", Name: name, SLOSeconds: slo, Deadline: deadline}
		if workflow != "" {
			req.Attributes = map[string]string{api.WorkflowAttribute: workflow}
		}
		b, err := tc.admin.Submit(ctx, &req, api.Jobs{{JobID: 1, Name: "j", Command: []string{"sleep", "1"}, CPU: 1, Memory: 1 << 30}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	// No worker yet: this one is cancelled before it runs.
	cancelled := submit("nightly-7", "nightly", 600, nil)
	if err := tc.admin.CancelBatch(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(300 * time.Millisecond)
	ids := []int64{
		submit("nightly-8", "nightly", 600, nil), // met
		submit("nightly-9", "nightly", 0, &soon), // missed: it runs a second
		submit("weekly", "", 600, nil),           // met; its workflow is its name
		submit("adhoc", "", 0, nil),              // no SLO: no run
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	dist, _ := simworker.ParseDist("1s")
	go func() {
		_ = simworker.Run(wctx, simworker.Config{Servers: tc.url, Secret: tc.srv.cfg.WorkerSecret, Name: "w",
			Cores: 2, Memory: 16 << 30, Duration: dist, SyncWait: 100 * time.Millisecond, Rec: simworker.NewRecorder()})
	}()
	for _, id := range append(ids, cancelled) {
		for {
			b, err := tc.admin.GetBatch(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if b.State == api.BatchComplete {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("batch %d did not complete", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A run only the history store holds: another project's batch,
	// exported and gone from memory.
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	done, met := time.Now().Add(-time.Hour), false
	if _, err := st.PutBatch(ctx, history.Batch{Version: 1, Batch: api.Batch{ID: 900, Name: "sim", User: "root", BillingProject: "physics",
		State: api.BatchComplete, Queue: "org/tier1", SLOSeconds: 60, SLOMet: &met, TimeCreated: done.Add(-time.Hour), TimeCompleted: &done}}, nil, nil); err != nil {
		t.Fatal(err)
	}

	rep, err := tc.admin.QueueSLO(ctx, 1, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	wf := map[string]api.WorkflowSLO{}
	for _, w := range rep.Workflows {
		wf[w.BillingProject+"/"+w.Workflow] = w
	}
	nightly, weekly, sim := wf["default/nightly"], wf["default/weekly"], wf["physics/sim"]
	if len(wf) != 3 || nightly.Runs != 2 || nightly.Met != 1 || nightly.Cancelled != 1 || nightly.SuccessRatio != 0.5 || nightly.SLOSuccessful || nightly.Tier != "tier1" {
		t.Fatalf("workflows %+v: want nightly with 2 runs, 1 met, 1 cancelled, not SLO-successful", rep.Workflows)
	}
	if weekly.Runs != 1 || weekly.Met != 1 || !weekly.SLOSuccessful || sim.Runs != 1 || sim.Met != 0 || sim.SLOSuccessful {
		t.Fatalf("weekly %+v, sim %+v", weekly, sim)
	}
	var tier api.QueueSLO
	for _, q := range rep.Tiers {
		if q.Queue == "tier1" {
			tier = q
		}
	}
	if tier.Workflows != 3 || tier.SuccessfulWorkflows != 1 || tier.Runs != 4 || tier.Met != 2 || tier.Cancelled != 1 {
		t.Fatalf("tier 1: %+v, want 1 of 3 workflows SLO-successful, 4 runs, 2 met, 1 cancelled", tier)
	}
	// A lower threshold makes nightly (50%) SLO-successful.
	if rep, err := tc.admin.QueueSLO(ctx, 1, 0.5); err != nil || rep.Tiers[0].SuccessfulWorkflows != 2 {
		t.Fatalf("threshold 0.5: %+v, %v", rep, err)
	}
	if _, err := tc.admin.QueueSLO(ctx, 1, 1.5); !api.IsStatus(err, 400) {
		t.Fatalf("threshold 1.5: %v, want a 400", err)
	}
	// alice, of physics alone, sees its workflow, and the tiers whole.
	rep, err = alice.QueueSLO(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Workflows) != 1 || rep.Workflows[0].Workflow != "sim" || rep.Tiers[0].Workflows != 3 {
		t.Fatalf("alice's report: %+v", rep)
	}
	// The leader reads the same report into its metrics (the workflows'
	// behind the metrics token only).
	want := []string{
		`drover_workflow_slo_ratio{project="default",tier="tier1",workflow="nightly"} 0.5`,
		`drover_workflow_slo_ratio{project="default",tier="tier1",workflow="weekly"} 1`,
		`drover_workflow_slo_ratio{project="physics",tier="tier1",workflow="sim"} 0`,
		`drover_tier_slo_successful_ratio{tier="tier1"} 0.3333333333333333`,
	}
	for {
		req, _ := http.NewRequest("GET", tc.url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer scrape-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing := slices.DeleteFunc(slices.Clone(want), func(line string) bool { return strings.Contains(string(body), line+"\n") })
		if len(missing) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the metrics lack %q", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
