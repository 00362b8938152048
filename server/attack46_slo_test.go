package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
)

// Attacks on the SLO report (GET /api/v1/queue-slo), its runs (memory
// and the history store) and the leader's SLO metrics.

// atkFinish ends every attempt the worker is given with outcome(job),
// after waiting wait from their start.
func atkFinish(t *testing.T, w *simWorker, wait time.Duration, outcome func(job int64) string) int {
	t.Helper()
	res := w.sync(5 * time.Second)
	w.known, w.events = nil, nil
	start := time.Now()
	time.Sleep(wait)
	for _, as := range res.Assign {
		o := outcome(as.JobID)
		code := 0
		if o == api.OutcomeFailed {
			code = 1
		}
		w.events = append(w.events, api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventStarted, StartTime: start},
			api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventCompleted, Outcome: o, ExitCode: code, StartTime: start, EndTime: time.Now()})
	}
	w.sync(0)
	return len(res.Assign)
}

func atkWorkflow(t *testing.T, c *api.Client, project, workflow string) (api.WorkflowSLO, bool) {
	t.Helper()
	rep, err := c.QueueSLO(context.Background(), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rep.Workflows {
		if w.BillingProject == project && w.Workflow == workflow {
			return w, true
		}
	}
	return api.WorkflowSLO{}, false
}

func atkWaitComplete(t *testing.T, c *api.Client, id int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := c.GetBatch(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if b.State == api.BatchComplete {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %d did not complete: %+v", id, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAttack46SLOCancelAfterCompletionErasesRun: a member's batch misses
// its SLO and completes. Cancelling a complete batch is accepted (it
// only marks it cancelled and re-exports it), and SLORunOf then counts
// it as cancelled, no run: a tenant erases its workflow's misses after
// the fact and the workflow (and its tier) reads as SLO-successful.
func TestAttack46SLOCancelAfterCompletionErasesRun(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "physics")
	w := newSimWorker(t, tc, "w", 4)
	submit := func(wf string) int64 {
		b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "physics", Name: "run", SLOSeconds: 1,
			Attributes: map[string]string{api.WorkflowAttribute: wf},
			Jobs:       []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
		if err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	missed := submit("nightly")
	atkFinish(t, w, 1500*time.Millisecond, func(int64) string { return api.OutcomeSuccess }) // past its 1 s SLO
	atkWaitComplete(t, alice, missed)
	met := submit("nightly")
	atkFinish(t, w, 0, func(int64) string { return api.OutcomeSuccess })
	atkWaitComplete(t, alice, met)
	before, ok := atkWorkflow(t, alice, "physics", "nightly")
	if !ok || before.Runs != 2 || before.Met != 1 || before.SLOSuccessful {
		t.Fatalf("before: %+v, want 2 runs, 1 met, not SLO-successful", before)
	}
	// The miss is cancelled after it completed.
	if err := alice.CancelBatch(ctx, missed); err != nil {
		t.Logf("cancelling the complete batch: %v", err)
	}
	after, _ := atkWorkflow(t, alice, "physics", "nightly")
	if after.Runs != 2 || after.Met != 1 || after.SLOSuccessful {
		t.Fatalf("after its owner cancelled the complete, missed run: %+v; want it still 2 runs, 1 met, not SLO-successful", after)
	}
}

// TestAttack46SLOExportedBatchCountedOnce: a complete batch exported to
// the history store while still in memory, a stale copy of it in the
// store, and a batch retried after it completed (its exported run hidden
// while it runs again, then replaced) are each one run, as memory has
// them now.
func TestAttack46SLOExportedBatchCountedOnce(t *testing.T) {
	tc := startServer(t, "", nil) // exports every 100 ms
	ctx := context.Background()
	alice := tc.user("alice", "physics")
	w := newSimWorker(t, tc, "w", 4)
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "physics", Name: "etl", SLOSeconds: 3600,
		Jobs: []api.JobSpec{{JobID: 1, Command: []string{"false"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	atkFinish(t, w, 0, func(int64) string { return api.OutcomeFailed })
	atkWaitComplete(t, alice, b.ID)
	exported := func() bool {
		_, ok, err := st.Batch(ctx, uint64(b.ID))
		return err == nil && ok
	}
	for deadline := time.Now().Add(20 * time.Second); !exported(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the batch was not exported")
		}
	}
	if wf, _ := atkWorkflow(t, alice, "physics", "etl"); wf.Runs != 1 || wf.Met != 1 {
		t.Fatalf("in memory and exported: %+v, want 1 run, met", wf)
	}
	// A stale copy in the store that says it missed: memory wins.
	done, no := time.Now().Add(-time.Minute), false
	if _, err := st.PutBatch(ctx, history.Batch{Version: 1, Batch: api.Batch{ID: b.ID, Name: "etl", User: "alice", BillingProject: "physics",
		State: api.BatchComplete, SLOSeconds: 3600, SLOMet: &no, TimeCreated: done.Add(-time.Hour), TimeCompleted: &done}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if wf, _ := atkWorkflow(t, alice, "physics", "etl"); wf.Runs != 1 || wf.Met != 1 {
		t.Fatalf("with a stale copy in the store: %+v, want 1 run, met", wf)
	}
	// Retried after completion: while it runs it is no run; once done
	// again, one.
	if _, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{}); err != nil {
		t.Fatal(err)
	}
	if wf, ok := atkWorkflow(t, alice, "physics", "etl"); ok && (wf.Runs != 0 || wf.Cancelled != 0) {
		t.Fatalf("while it runs again: %+v", wf)
	}
	atkFinish(t, w, 0, func(int64) string { return api.OutcomeSuccess })
	atkWaitComplete(t, alice, b.ID)
	time.Sleep(300 * time.Millisecond) // exported again
	if wf, _ := atkWorkflow(t, alice, "physics", "etl"); wf.Runs != 1 || wf.Met != 1 {
		t.Fatalf("after the retry: %+v, want 1 run", wf)
	}
}

// atkSecretRuns gives project "genomics" (bob's) a run in memory
// (cancelled before it ran) and one the history store alone holds, both
// of workflows named "bob-secret-...".
func atkSecretRuns(t *testing.T, tc *testCluster, bob *api.Client) {
	t.Helper()
	ctx := context.Background()
	b, err := bob.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Name: "x", SLOSeconds: 60,
		Attributes: map[string]string{api.WorkflowAttribute: "bob-secret-memory"},
		Jobs:       []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bob.CancelBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	done, met := time.Now().Add(-time.Hour), true
	if _, err := st.PutBatch(ctx, history.Batch{Version: 1, Batch: api.Batch{ID: 9000, Name: "bob-secret-store", User: "bob", BillingProject: "genomics",
		State: api.BatchComplete, SLOSeconds: 60, SLOMet: &met, TimeCreated: done.Add(-time.Minute), TimeCompleted: &done}}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// TestAttack46SLOReportHidesOtherProjects: alice (physics) and carol (no
// project) read the SLO report, raw, and the queue history: no workflow
// of bob's project appears, from memory or from the store; an admin
// sees both.
func TestAttack46SLOReportHidesOtherProjects(t *testing.T) {
	tc := startServer(t, "", nil)
	alice := tc.user("alice", "physics")
	bob := tc.user("bob", "genomics")
	carol := tc.user("carol")
	atkSecretRuns(t, tc, bob)
	for _, c := range []*api.Client{alice, carol} {
		tok := userToken(t, c)
		for _, path := range []string{"/api/v1/queue-slo", "/api/v1/queue-slo?days=1&threshold=0.01", "/api/v1/queue-history", "/api/v1/queues"} {
			code, body := tc.raw("GET", path, tok, "")
			if code != 200 {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			if strings.Contains(body, "bob-secret") {
				t.Errorf("%s shows another project's workflow: %s", path, body)
			}
		}
		if code, _ := tc.raw("GET", "/api/v1/audit", tok, ""); code != http.StatusForbidden {
			t.Errorf("a non-admin reads the audit log: %d", code)
		}
	}
	if w, ok := atkWorkflow(t, bob, "genomics", "bob-secret-memory"); !ok || w.Cancelled != 1 {
		t.Errorf("bob does not see his own workflow: %+v", w)
	}
	code, body := tc.raw("GET", "/api/v1/queue-slo?days=1", userToken(t, tc.admin), "")
	if code != 200 || !strings.Contains(body, "bob-secret-memory") || !strings.Contains(body, "bob-secret-store") {
		t.Errorf("the admin's report lacks bob's workflows: %d %s", code, body)
	}
}

// TestAttack46SLOMetricsDiscloseWorkflowsToStrangers: without
// -metrics-token (the default), /metrics is open to anyone who reaches
// the API; the leader writes every project's workflow names (tenant
// text) and billing project names into drover_workflow_slo_ratio there,
// which the SLO report itself shows only to the projects' members.
func TestAttack46SLOMetricsDiscloseWorkflowsToStrangers(t *testing.T) {
	tc := startServer(t, "", nil)
	bob := tc.user("bob", "genomics")
	atkSecretRuns(t, tc, bob)
	if err := tc.srv.sloMetricsOnce(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(tc.url + "/metrics") // no token
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.Contains(line, "bob-secret") || strings.Contains(line, `project="genomics"`) {
			t.Errorf("a caller without a token reads another project's workflow: %s", line)
		}
	}
}

// TestAttack46SLOParameterBounds: threshold and days that are not
// numbers, out of range, NaN, infinite or huge are refused with a 400 and
// a bounded message.
func TestAttack46SLOParameterBounds(t *testing.T) {
	tc := startServer(t, "", nil)
	tok := userToken(t, tc.user("alice", "physics"))
	for _, q := range []string{
		"threshold=NaN", "threshold=nan", "threshold=Inf", "threshold=-Inf", "threshold=0", "threshold=-0", "threshold=-0.5",
		"threshold=1.0000001", "threshold=1e309", "threshold=" + strings.Repeat("9", 5000), "threshold=0.9%00",
		"days=0", "days=-1", "days=366", "days=400", "days=1e2", "days=1.5", "days=99999999999999999999", "days=%20", "days=" + strings.Repeat("1", 5000),
	} {
		code, msg := tc.raw("GET", "/api/v1/queue-slo?"+q, tok, "")
		if code != http.StatusBadRequest {
			t.Errorf("%.60s: %d %.200s, want 400", q, code, msg)
		}
		if len(msg) > 400 {
			t.Errorf("%.60s: a %d-byte message", q, len(msg))
		}
	}
	for _, q := range []string{"threshold=1", "threshold=1e-300", "threshold=0x1p-1", "days=1", "days=365", "days=%2B7"} {
		if code, msg := tc.raw("GET", "/api/v1/queue-slo?"+q, tok, ""); code != 200 {
			t.Errorf("%s: %d %s", q, code, msg)
		}
	}
}
