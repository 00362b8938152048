package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/simworker"
)

// TestCompletionCallbacks: a complete batch is POSTed, as the API shows
// it, to its callback once (a 5xx is tried again, a redirect is not
// followed and counts as a failure, and the last attempt's failure is
// recorded); a callback outside the allowed destinations is refused at
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
