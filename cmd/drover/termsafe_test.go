package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/testkit/testlog"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"align":                "align",
		"naïve 日本":             "naïve 日本",
		"\x1b[2J\x1b[H":        `\x1b[2J\x1b[H`,
		"a\nb\tc\r":            `a\nb\tc\r`,
		"\u202eevil":           `\u202eevil`,
		"bad\xffutf8":          `bad\xffutf8`,
		"c1 \u009b31m del\x7f": `c1 \u009b31m del\x7f`,
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHostileNamesPrintEscaped: a tenant names a batch with a terminal
// escape sequence and a newline that would forge a row; `batch list` and
// `batch status` print them escaped.
func TestHostileNamesPrintEscaped(t *testing.T) {
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
	const name = "\x1b[2J\x1b[31mowned\n99\trunning\tfake"
	_, err = c.CreateBatch(context.Background(), &api.CreateBatchRequest{Name: name, Attributes: map[string]string{"k\x1b]0;title\x07": "v\r"}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string) {
		var out, errOut bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errOut, Client: func() *api.Client { return c }}
		m.exitCode(m.Run(context.Background(), args))
		return out.String(), errOut.String()
	}
	for _, args := range [][]string{{"batch", "list"}, {"batch", "status", "1"}} {
		out, errOut := run(args...)
		all := out + errOut
		if strings.ContainsAny(all, "\x1b\x07\r") {
			t.Errorf("drover %s printed a control character: %q", strings.Join(args, " "), all)
		}
		if args[1] == "list" && args[0] == "batch" {
			if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[1], `\x1b[2J\x1b[31mowned\n99\trunning\tfake`) {
				t.Errorf("batch list of one batch printed %d lines: %q", len(lines), out)
			}
		}
	}
}
