package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/testkit/testlog"
)

// TestBillingProjectPrints: `billing-project set-limit` prints the limit
// in dollars ("$0.50", "none" for 0), and `billing-project show` and
// `billing-project storage list` print their tables aligned with real
// tabs, never a literal `\t` (safeln escapes its values: a table row's
// tabs belong in the format).
func TestBillingProjectPrints(t *testing.T) {
	cfg := server.TestConfig(t.TempDir(), testlog.New(t))
	srv, tok, err := server.StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	c := api.NewClient("http://"+srv.HTTPAddr(), tok)
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errOut, Client: func() *api.Client { return c }}
		if code := m.exitCode(m.Run(context.Background(), args)); code != 0 {
			t.Fatalf("drover %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		if strings.Contains(out.String(), `\t`) {
			t.Errorf("drover %s printed a literal \\t:\n%s", strings.Join(args, " "), out.String())
		}
		return out.String()
	}
	run("billing-project", "create", "capped")
	if out := run("billing-project", "set-limit", "capped", "0.50"); out != "Billing project capped: spend limit $0.50\n" {
		t.Errorf("set-limit 0.50 printed %q", out)
	}
	show := run("billing-project", "show", "capped")
	if !regexp.MustCompile(`(?m)^Spend limit +\$0\.50$`).MatchString(show) {
		t.Errorf("show prints no spend limit of $0.50:\n%s", show)
	}
	if out := run("billing-project", "set-limit", "capped", "0"); out != "Billing project capped: spend limit none\n" {
		t.Errorf("set-limit 0 printed %q", out)
	}
	show = run("billing-project", "show", "capped")
	if !regexp.MustCompile(`(?m)^Storage +none: its jobs can name no input or output URL$`).MatchString(show) {
		t.Errorf("show prints no Storage row of none:\n%s", show)
	}
	aligned(t, show)
	run("billing-project", "storage", "add", "capped", "gs://bucket/capped/")
	show = run("billing-project", "show", "capped")
	if !regexp.MustCompile(`(?m)^Storage +gs://bucket/capped \(`).MatchString(show) {
		t.Errorf("show prints no Storage row of the prefix:\n%s", show)
	}
	aligned(t, show)
	list := run("billing-project", "storage", "list", "capped")
	if !regexp.MustCompile(`^PREFIX +CREDENTIALS +S3 +ADDED BY +ADDED\n`).MatchString(list) {
		t.Errorf("storage list has no header row:\n%s", list)
	}
}

// aligned checks that every row of a two-column table starts its value in
// the same column.
func aligned(t *testing.T, table string) {
	t.Helper()
	col := -1
	for _, line := range strings.Split(strings.TrimSuffix(table, "\n"), "\n") {
		i := strings.Index(line, "  ")
		if i < 0 {
			t.Errorf("a row without two columns: %q in\n%s", line, table)
			continue
		}
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if col < 0 {
			col = i
		} else if i != col {
			t.Errorf("row %q starts its value at column %d, the first at %d:\n%s", line, i, col, table)
		}
	}
}
