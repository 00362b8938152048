package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/simworker"
)

// TestCompletionCallbacks: a complete batch is POSTed, as the API shows
// it, to its callback once (a 5xx is tried again, a redirect is not
// followed and counts as a failure, and the last attempt's failure is
// recorded); a callback outside the allowed destinations, or with a path
// a receiver could resolve elsewhere (api.ParseCallback), is refused at
// submission with a 400 that says why.
func TestCompletionCallbacks(t *testing.T) {
	var mu sync.Mutex
	posts := map[string][]api.Batch{}
	evilHits := 0
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		evilHits++
		mu.Unlock()
	}))
	defer evil.Close()
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b api.Batch
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &b); err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %v (%s)", r.Method, r.URL.Path, err, body)
		}
		mu.Lock()
		posts[r.URL.Path] = append(posts[r.URL.Path], b)
		n := len(posts[r.URL.Path])
		mu.Unlock()
		switch {
		case r.URL.Path == "/hook/flaky" && n == 1:
			w.WriteHeader(http.StatusInternalServerError)
		case r.URL.Path == "/hook/redirect":
			http.Redirect(w, r, evil.URL+"/stolen", http.StatusFound)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer hooks.Close()

	cfg := TestConfig(t.TempDir(), testLogger(t))
	cfg.CallbackAllow = []string{hooks.URL + "/hook/"}
	cfg.CallbackRetry = 20 * time.Millisecond
	cfg.CallbackAttempts = 3
	srv, tok, err := StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	ctx := context.Background()
	admin := api.NewClient("http://"+srv.HTTPAddr(), tok)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	dist, _ := simworker.ParseDist("10ms")
	go func() {
		_ = simworker.Run(wctx, simworker.Config{Servers: "http://" + srv.HTTPAddr(), Secret: "test-secret", Name: "w",
			Cores: 4, Memory: 16 << 30, Duration: dist, SyncWait: 100 * time.Millisecond, Rec: simworker.NewRecorder()})
	}()
	submit := func(callback string) (int64, error) {
		res, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Callback: callback, Jobs: []api.JobSpec{
			{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 30}, {JobID: 2, Command: []string{"true"}, CPU: 1, Memory: 1 << 30}}})
		if err != nil {
			return 0, err
		}
		return res.ID, nil
	}
	for _, bad := range []struct{ url, want string }{
		{evil.URL + "/hook/x", "is not under a destination the servers allow"},
		{hooks.URL + "/other", "is not under a destination the servers allow"},
		{hooks.URL + "/hook/../admin", `has a ".." path segment`},
		{hooks.URL + "/hook/..;/admin", `has a ";" in its path`},
		{hooks.URL + `/hook\..\admin`, "has a backslash in its path"},
		{hooks.URL + "/hook/%2e%2e/admin", `has an encoded "." (%2E) in its path`},
		{hooks.URL + "/hook/x%2fy", `has an encoded "/" (%2F) in its path`},
		{"http://169.254.169.254/computeMetadata/v1/", "is not under a destination the servers allow"},
	} {
		_, err := submit(bad.url)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || !strings.Contains(ae.Message, bad.want) {
			t.Errorf("callback %s: %v, want a 400 saying %q", bad.url, err, bad.want)
		}
	}
	ids := map[string]int64{}
	for _, path := range []string{"/hook/ok", "/hook/flaky", "/hook/redirect"} {
		id, err := submit(hooks.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		ids[path] = id
	}
	want := map[string]string{"/hook/ok": "HTTP 204", "/hook/flaky": "HTTP 204", "/hook/redirect": "given up after 3 attempts: HTTP 302"}
	deadline := time.Now().Add(30 * time.Second)
	for path, id := range ids {
		for {
			b, err := admin.GetBatch(ctx, id)
			if err == nil && b.CallbackResult != "" {
				if b.CallbackResult != want[path] || b.Callback != hooks.URL+path {
					t.Errorf("%s: callback %q, result %q; want %q", path, b.Callback, b.CallbackResult, want[path])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no callback result: %+v, %v", path, b, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Reported: nothing more is sent (two more polls of the leader).
	time.Sleep(2*callbackPoll + 200*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for path, n := range map[string]int{"/hook/ok": 1, "/hook/flaky": 2, "/hook/redirect": 3} {
		if len(posts[path]) != n {
			t.Errorf("%s was POSTed %d times, want %d", path, len(posts[path]), n)
		}
	}
	if b := posts["/hook/ok"][0]; b.ID != ids["/hook/ok"] || b.State != api.BatchComplete || b.NSucceeded != 2 {
		t.Errorf("the POSTed batch: %+v", b)
	}
	if evilHits != 0 {
		t.Errorf("a redirect was followed to a destination nobody allowed (%d requests)", evilHits)
	}
}

// TestCallbacksFairBetweenProjects: project A's 16 one-job batches name a
// receiver that answers 404 (slowly, so its POSTs overlap); project B's
// batch, completed after them, is still reported within 10 s of its
// completion, while A's are retrying: a failed POST waits for its retry
// without a delivery slot, A never has more than callbacksPerProject
// POSTs in flight, and B's turn comes with the next free slot. A's
// retries come CallbackRetry or more after their first attempt.
func TestCallbacksFairBetweenProjects(t *testing.T) {
	const nA = 16
	type hit struct {
		path string
		at   time.Time
	}
	var (
		mu            sync.Mutex
		hits          []hit
		inA, maxInA   int
		bReceived     = make(chan time.Time, 1)
		bReceivedOnce sync.Once
	)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		hits = append(hits, hit{r.URL.Path, time.Now()})
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/hooks/b/") {
			bReceivedOnce.Do(func() { bReceived <- time.Now() })
			w.WriteHeader(http.StatusOK)
			return
		}
		mu.Lock()
		inA++
		maxInA = max(maxInA, inA)
		mu.Unlock()
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		inA--
		mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
	}))
	defer hooks.Close()

	cfg := TestConfig(t.TempDir(), testLogger(t))
	cfg.CallbackAllow = []string{hooks.URL + "/hooks/"}
	// A's reports fail for 1+2+4+8+16 = 31 s before A gives up: while they
	// held their slots through the backoff (8 at a time, oldest first), B's
	// waited for two rounds of them.
	cfg.CallbackRetry = time.Second
	cfg.CallbackAttempts = 6
	srv, tok, err := StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	ctx := context.Background()
	admin := api.NewClient("http://"+srv.HTTPAddr(), tok)
	for _, p := range []string{"a", "b"} {
		if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: p}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	dist, _ := simworker.ParseDist("10ms")
	go func() {
		_ = simworker.Run(wctx, simworker.Config{Servers: "http://" + srv.HTTPAddr(), Secret: "test-secret", Name: "w",
			Cores: 16, Memory: 64 << 30, Duration: dist, SyncWait: 100 * time.Millisecond, Rec: simworker.NewRecorder()})
	}()
	submit := func(project, path string) int64 {
		t.Helper()
		res, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: project, Callback: hooks.URL + path,
			Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 30}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	complete := func(id int64) *api.Batch {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			b, err := admin.GetBatch(ctx, id)
			if err == nil && b.State == api.BatchComplete && b.TimeCompleted != nil {
				return b
			}
			if time.Now().After(deadline) {
				t.Fatalf("batch %d did not complete: %+v, %v", id, b, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var as []int64
	for i := range nA {
		as = append(as, submit("a", fmt.Sprintf("/hooks/a/%d", i)))
	}
	for _, id := range as {
		complete(id)
	}
	// A's reports are being made (and failing) before B's batch exists.
	for deadline := time.Now().Add(30 * time.Second); ; {
		mu.Lock()
		n := len(hits)
		mu.Unlock()
		if n >= callbacksPerProject {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's receiver saw %d POSTs", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := complete(submit("b", "/hooks/b/1"))
	select {
	case at := <-bReceived:
		d := at.Sub(*b.TimeCompleted)
		t.Logf("B's callback came %v after its batch completed", d)
		if d > 10*time.Second {
			t.Errorf("B's callback came %v after its batch completed; want within 10s", d)
		}
	case <-time.After(time.Until(b.TimeCompleted.Add(10 * time.Second))):
		mu.Lock()
		t.Fatalf("B's callback did not come within 10s of its batch completing (%v ago); A's receiver saw %d POSTs", time.Since(*b.TimeCompleted), len(hits))
	}
	for _, id := range as {
		if got, err := admin.GetBatch(ctx, id); err != nil || got.CallbackResult != "" {
			t.Fatalf("A's batch %d is no longer retrying when B's is reported: %q, %v", id, got.CallbackResult, err)
		}
	}
	// Recorded through Raft just after the POST.
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := admin.GetBatch(ctx, b.ID)
		if err == nil && got.CallbackResult != "" {
			if got.CallbackResult != "HTTP 200" {
				t.Errorf("B's callback result %q", got.CallbackResult)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's callback result was not recorded: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every one of A's is tried again, CallbackRetry or more after its
	// first attempt.
	first, retried := map[string]time.Time{}, map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); ; {
		mu.Lock()
		for _, h := range hits {
			if f, ok := first[h.path]; !ok {
				first[h.path] = h.at
			} else if !retried[h.path] {
				retried[h.path] = true
				if gap := h.at.Sub(f); gap < cfg.CallbackRetry {
					t.Errorf("%s was tried again %v after its first attempt; want %v or more", h.path, gap, cfg.CallbackRetry)
				}
			}
		}
		hits = hits[:0]
		over := maxInA
		mu.Unlock()
		if over > callbacksPerProject {
			t.Fatalf("project A had %d POSTs in flight at once; the cap is %d", over, callbacksPerProject)
		}
		if len(retried) == nA {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of A's %d reports were tried again", len(retried), nA)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
