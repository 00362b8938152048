package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestAttack46QueueSLOAndHistoryPrintEscaped: the workflow names of the
// SLO report are a tenant's text (a batch attribute or name); queue
// history's notes and names are the server's. `drover queue slo` and
// `drover queue history` print them with no control character, and a
// tab or newline in a name does not forge a row.
func TestAttack46QueueSLOAndHistoryPrintEscaped(t *testing.T) {
	const evil = "\x1b[2J\x1b]0;pwned\x07wf\n99\tforged\r\u202e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/queue-slo":
			_ = json.NewEncoder(w).Encode(api.QueueSLOReport{Days: 1, Threshold: 0.9, Truncated: true,
				Tiers:     []api.QueueSLO{{Queue: evil, Runs: 1, Workflows: 1}},
				Workflows: []api.WorkflowSLO{{BillingProject: evil, Workflow: evil + strings.Repeat("x", 1024), Tier: evil, Runs: 1, Met: 1, SuccessRatio: 1, SLOSuccessful: true}},
				Queues:    []api.QueueSLO{{Queue: evil, Runs: 1}}})
		case "/api/v1/queue-history":
			now := time.Now()
			_ = json.NewEncoder(w).Encode(api.QueueHistory{Tree: evil, LastRun: &now, Versions: []api.QueueVersion{{Version: 1, Tree: evil, Time: now, By: evil, Kind: evil, Note: evil,
				Changes: []api.QueueSettingChange{{Path: evil, Weight: 2}}}}})
		case "/api/v1/queue-auto-apply", "/api/v1/queue-rollback":
			_ = json.NewEncoder(w).Encode(api.QueueVersion{Version: 2, Tree: evil, Kind: evil, Note: evil, Changes: []api.QueueSettingChange{{Path: evil}}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := api.NewClient(srv.URL, "tok")
	for _, args := range [][]string{{"queue", "slo"}, {"queue", "history"}, {"queue", "history", "org"}, {"queue", "auto-apply", "org"}, {"queue", "rollback", "org", "1"}} {
		var out, errOut bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errOut, Client: func() *api.Client { return c }}
		m.exitCode(m.Run(context.Background(), args))
		all := out.String() + errOut.String()
		if strings.ContainsAny(all, "\x1b\x07\r\u202e") {
			t.Errorf("drover %s printed a control character: %q", strings.Join(args, " "), all)
		}
		if strings.Contains(all, "\n99\tforged") || strings.Contains(all, "\n99 ") {
			t.Errorf("drover %s let a name forge a line: %q", strings.Join(args, " "), all)
		}
		if args[1] != "rollback" && !strings.Contains(all, `\x1b[2J`) {
			t.Errorf("drover %s did not show the name escaped: %q", strings.Join(args, " "), all)
		}
	}
}
