package ui

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// fakeSLOAPI answers whoami and the SLO report, remembering the window
// it was asked for.
type fakeSLOAPI struct{ asked *string }

func (f fakeSLOAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/whoami":
		_ = json.NewEncoder(w).Encode(api.User{Name: "root", Admin: true})
	case "/api/v1/queue-slo":
		*f.asked = r.URL.Query().Get("days")
		_ = json.NewEncoder(w).Encode(api.QueueSLOReport{Days: 7, Threshold: 0.9,
			Tiers: []api.QueueSLO{{Queue: "tier1", Runs: 40, Met: 38, SuccessRatio: 0.95, CoreHours: 12.5, UsageCapacity: 0.8,
				Workflows: 4, SuccessfulWorkflows: 3, WorkflowSuccessRatio: 0.75}},
			Workflows: []api.WorkflowSLO{{BillingProject: "genomics", Workflow: "nightly-align", Tier: "tier1", Runs: 10, Met: 8, Cancelled: 2, SuccessRatio: 0.8},
				{BillingProject: "genomics", Workflow: "only-cancelled", Tier: "tier1", Cancelled: 1}},
			Queues: []api.QueueSLO{{Queue: "research/genomics/tier1", Runs: 40, Met: 38, SuccessRatio: 0.95, CoreHours: 12.5, UsageCapacity: 0.8}, {Queue: "research/physics"}}})
	case "/api/v1/queue-report":
		_ = json.NewEncoder(w).Encode(api.QueueReport{Days: 7, By: "cluster", Clusters: []api.ClusterUsage{{Cluster: "east",
			Capacity: api.UsageHours{InstanceHours: 40, VcoreHours: 640, MemoryGiBHours: 2560},
			All:      api.ClusterUse{Used: api.UsageHours{InstanceHours: 35, VcoreHours: 560}, UsageCapacity: 0.875, Dominant: "vcore"},
			Tiers:    []api.ClusterUse{{Name: "tier3", Used: api.UsageHours{InstanceHours: 15, VcoreHours: 240}, UsageCapacity: 0.375, Dominant: "vcore"}}}}})
	default:
		http.NotFound(w, r)
	}
}

// TestSLOPage: the SLO page shows each tier's and queue's runs, those
// met, the success ratio and a bar of met against missed, for the window
// chosen (one the page offers; anything else is 30 days).
func TestSLOPage(t *testing.T) {
	var asked string
	u, err := New(Deps{API: fakeSLOAPI{&asked}, Access: func(string) string { return "user" }, Changes: func() <-chan struct{} { return nil },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: "acc.tok"})
		rec := httptest.NewRecorder()
		u.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d\n%s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	body := get("/ui/slo?days=7")
	if asked != "7" {
		t.Fatalf("the page asked the API for %q days, want 7", asked)
	}
	for _, want := range []string{`data-cluster="east"`, `data-cluster-use="east/tier3"`, "87.5%", "37.5%", `data-slo-tier="tier1"`, "75.0%", `data-slo-workflow="genomics/nightly-align"`, "at least 90.0% of its runs", `data-slo="research/genomics/tier1"`, "95.0%", "38 of 40 runs met their SLO", `<option value="7" selected>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the SLO page lacks %q", want)
		}
	}
	// A queue without runs with an SLO has no ratio, not 0%.
	row := body[strings.Index(body, `data-slo="research/physics"`):]
	row = row[:strings.Index(row, "</tr>")]
	if strings.Contains(row, "0.0%") || !strings.Contains(row, "—") {
		t.Errorf("a queue with no SLO runs reads: %s", row)
	}
	// A workflow below the threshold says so; one with only cancelled
	// batches has no run, not a ratio of 0%.
	wf := body[strings.Index(body, `data-slo-workflow="genomics/nightly-align"`):]
	wf = wf[:strings.Index(wf, "</tr>")]
	if !strings.Contains(wf, "80.0%") || !strings.Contains(wf, "<strong>no</strong>") {
		t.Errorf("a workflow below the threshold reads: %s", wf)
	}
	wf = body[strings.Index(body, `data-slo-workflow="genomics/only-cancelled"`):]
	wf = wf[:strings.Index(wf, "</tr>")]
	if strings.Contains(wf, "0.0%") || !strings.Contains(wf, "no run") {
		t.Errorf("a workflow with only cancelled batches reads: %s", wf)
	}
	get("/ui/slo?days=100000")
	if asked != "30" {
		t.Fatalf("a window the page does not offer asked the API for %q days, want 30", asked)
	}
}
