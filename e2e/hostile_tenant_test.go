package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestHostileTenantTokensNamesKeys: what a tenant can try with its own
// token and its own batches, through the real CLI and API of a dev agent:
// a short-lived token makes a ten-year one (refused), tokens it made
// outlive its revocation (they do not), a batch named with terminal
// escapes and a forged table row (listed escaped), and an idempotency key
// reused to get someone's first request's answer for another request
// (409).
func TestHostileTenantTokensNamesKeys(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "0")
	ctx := context.Background()
	mallory := strings.TrimSpace(a.drover(a.token, "user", "create", "mallory").must(t, 0).stdout)
	a.drover(a.token, "billing-project", "add-member", "default", "mallory").must(t, 0)

	t.Run("a token outlives neither its expiry nor its revocation", func(t *testing.T) {
		short := strings.TrimSpace(a.drover(mallory, "token", "create", "-name", "short", "-ttl", "1m").must(t, 0).stdout)
		r := a.drover(short, "token", "create", "-name", "decade", "-ttl", "87600h").must(t, 1)
		if !strings.Contains(r.stderr, "403") || !strings.Contains(r.stderr, "may not outlive") {
			t.Fatalf("a 10-year token from a 1-minute one: %s", r.stderr)
		}
		child := strings.TrimSpace(a.drover(short, "token", "create", "-name", "child").must(t, 0).stdout)
		list := decodeJSON[[]api.Token](t, a.drover(mallory, "token", "list", "-json").must(t, 0).stdout)
		var shortAcc string
		for _, tk := range list {
			if tk.Name == "short" {
				shortAcc = tk.Accessor
			}
		}
		a.drover(child, "batch", "list").must(t, 0)
		a.drover(mallory, "token", "revoke", shortAcc).must(t, 0)
		if r := a.drover(child, "batch", "list").must(t, 1); !strings.Contains(r.stderr, "401") {
			t.Fatalf("a token made by a revoked one: %s", r.stderr)
		}
	})

	t.Run("names print escaped", func(t *testing.T) {
		c := api.NewClient(a.addr, mallory)
		if _, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "\x1b[2J\x1b]0;pwned\x07x\n1  complete  fake  default  root"}); err != nil {
			t.Fatal(err)
		}
		for _, who := range []string{mallory, a.token} {
			out := a.drover(who, "batch", "list").must(t, 0).stdout
			if strings.ContainsAny(out, "\x1b\x07") {
				t.Fatalf("batch list printed a terminal escape: %q", out)
			}
			if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "ID  STATE") {
				t.Fatalf("batch list of one batch printed %d lines: %q", len(lines), out)
			}
		}
	})

	t.Run("an idempotency key reused with another body", func(t *testing.T) {
		c := api.NewClient(a.addr, mallory)
		first, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "mine", IdempotencyKey: "k1", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "other", IdempotencyKey: "k1", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"false"}}}})
		if !api.IsStatus(err, http.StatusConflict) {
			t.Fatalf("the key of batch %d reused with another body: %v", first.Batch.ID, err)
		}
	})
}
