package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/drover-sched/drover/api"
)

// losingProxy passes requests to a server and, for the first request to
// each path in lose, drops the answer (the connection closes after the
// server applied the request), as a network partition or a timeout would.
func losingProxy(t *testing.T, target string, lose ...string) *httptest.Server {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	pending := map[string]bool{}
	for _, p := range lose {
		pending[p] = true
	}
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String()+r.URL.RequestURI(), r.Body)
		if err != nil {
			t.Error(err)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		mu.Lock()
		drop := r.Method == http.MethodPost && pending[r.URL.Path]
		delete(pending, r.URL.Path)
		mu.Unlock()
		if drop {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
	}))
	t.Cleanup(p.Close)
	return p
}

// TestRetriedWritesReturnTheFirstResult: each mutating call whose answer is
// lost is retried by the client and answered with what the first try did,
// without an explicit key. Before, a retried CreateBatch made a second
// batch, and a retried user create got 409 and lost the token shown once.
func TestRetriedWritesReturnTheFirstResult(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	proxy := losingProxy(t, tc.url, "/api/v1/users", "/api/v1/batches", "/api/v1/billing-projects", "/api/v1/workers/activate", "/api/v1/users/alice/token")
	c := api.NewClient(proxy.URL, tc.admin.Token())

	u, err := c.CreateUser(ctx, &api.CreateUserRequest{Name: "alice"})
	if err != nil {
		t.Fatalf("create user through a lost answer: %v", err)
	}
	if me, err := api.NewClient(tc.url, u.Token).Whoami(ctx); err != nil || me.Name != "alice" {
		t.Fatalf("the token the retry returned: %v %+v", err, me)
	}
	b, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "once", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}}}})
	if err != nil {
		t.Fatalf("create batch through a lost answer: %v", err)
	}
	list, err := tc.admin.ListBatches(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Batches) != 1 || list.Batches[0].ID != b.ID {
		t.Fatalf("batches after a retried create: %+v", list.Batches)
	}
	if _, err := c.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "lab", Members: []string{"alice"}}); err != nil {
		t.Fatalf("create billing project through a lost answer: %v", err)
	}
	act, err := c.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", NodeID: "n1", CPU: 1, Memory: 1 << 30, Secret: tc.srv.cfg.WorkerSecret, Token: api.NewToken()})
	if err != nil {
		t.Fatalf("activate through a lost answer: %v", err)
	}
	insts, err := tc.admin.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || !insts[0].Active || insts[0].ID != act.InstanceID {
		t.Fatalf("instances after a retried activation: %+v", insts)
	}
	// The admin recovers a lost token by rotating it; the old one stops
	// working.
	rot, err := c.RotateToken(ctx, "alice")
	if err != nil {
		t.Fatalf("rotate token through a lost answer: %v", err)
	}
	if _, err := api.NewClient(tc.url, rot.Token).Whoami(ctx); err != nil {
		t.Fatalf("the rotated token: %v", err)
	}
	if _, err := api.NewClient(tc.url, u.Token).Whoami(ctx); !api.IsStatus(err, 401) {
		t.Fatalf("the old token after rotation: %v", err)
	}
	// A different request for an existing name is still a conflict.
	if _, err := tc.admin.CreateUser(ctx, &api.CreateUserRequest{Name: "alice"}); !api.IsStatus(err, 409) || !strings.Contains(err.Error(), "rotate-token") {
		t.Fatalf("a second create of alice: %v", err)
	}
}

// TestIdempotencyKeyReusedWithAnotherBody: a request that reuses an
// idempotency key with other contents gets 409 naming the key, instead of
// the first request's batch; the same request again gets that batch.
func TestIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	create := func(cmd string) (*api.CreateBatchResponse, error) {
		return tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "b", IdempotencyKey: "key-1", Jobs: []api.JobSpec{
			{JobID: 1, Command: []string{cmd}, CPU: 0.1, Memory: 1 << 20}}})
	}
	first, err := create("true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create("false"); !api.IsStatus(err, 409) || !strings.Contains(err.Error(), `idempotency key "key-1"`) {
		t.Fatalf("the key reused with another command: %v", err)
	}
	again, err := create("true")
	if err != nil || again.Batch.ID != first.Batch.ID {
		t.Fatalf("a retry: %+v, %v; want batch %d", again, err, first.Batch.ID)
	}
	update := func(n int64) (*api.UpdateResponse, error) {
		return tc.admin.CreateUpdate(ctx, first.Batch.ID, &api.CreateUpdateRequest{IdempotencyKey: "upd-1", NJobs: n})
	}
	u, err := update(5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := update(6); !api.IsStatus(err, 409) || !strings.Contains(err.Error(), `idempotency key "upd-1"`) {
		t.Fatalf("an update key reused with another size: %v", err)
	}
	if u2, err := update(5); err != nil || u2.UpdateID != u.UpdateID {
		t.Fatalf("an update retry: %+v, %v; want update %d", u2, err, u.UpdateID)
	}
}
