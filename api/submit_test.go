package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/testkit/testlog"
)

// counted is a real server behind a proxy that counts requests by method
// and path shape ("POST /batches/{id}/updates/{u}/jobs").
type counted struct {
	mu     sync.Mutex
	counts map[string]int
	url    string
	token  string
}

func startCounted(t *testing.T) *counted {
	t.Helper()
	log := testlog.New(t)
	srv, token, err := server.StartReady(server.TestConfig(t.TempDir(), log))
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("http://" + srv.HTTPAddr())
	c := &counted{counts: map[string]int{}, token: token}
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v1"), "/")
		for i, p := range parts {
			if p != "" && strings.Trim(p, "0123456789") == "" {
				parts[i] = "{n}"
			}
		}
		c.mu.Lock()
		c.counts[r.Method+" "+strings.Join(parts, "/")]++
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	c.url = front.URL
	t.Cleanup(func() {
		front.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return c
}

func (c *counted) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

func TestSubmitSmallBatchIsOneRequest(t *testing.T) {
	srv := startCounted(t)
	cl := api.NewClient(srv.url, srv.token)
	jobs := api.Jobs{
		{JobID: 1, Name: "split", Command: []string{"true"}},
		{JobID: 2, Name: "align", Count: 10, Command: []string{"true"}, ParentIDs: []int64{1}},
	}
	b, err := cl.Submit(context.Background(), &api.CreateBatchRequest{Name: "small"}, jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.NJobs != 11 || b.NReady != 1 || b.NPending != 10 {
		t.Fatalf("batch %+v", b)
	}
	if got := srv.take(); len(got) != 1 || got["POST /batches"] != 1 {
		t.Fatalf("requests %v, want one create", got)
	}
}

func distinct(n int) api.GeneratedJobs {
	return api.GeneratedJobs{N: n, Make: func(i int) api.JobSpec {
		return api.JobSpec{JobID: int64(i + 1), Name: fmt.Sprint("j", i+1), Command: []string{"true"}, Memory: 1 << 20}
	}}
}

func TestSubmitLargeBatchInBunches(t *testing.T) {
	srv := startCounted(t)
	cl := api.NewClient(srv.url, srv.token)
	ctx := context.Background()
	opts := &api.SubmitOptions{InlineEntries: 100, BunchSize: 300, Concurrency: 3}
	req := &api.CreateBatchRequest{Name: "large"}
	b, err := cl.Submit(ctx, req, distinct(2500), opts)
	if err != nil {
		t.Fatal(err)
	}
	if b.NJobs != 2500 || b.NReady != 2500 || req.IdempotencyKey == "" {
		t.Fatalf("batch %+v, key %q", b, req.IdempotencyKey)
	}
	got := srv.take()
	if got["POST /batches"] != 1 || got["POST /batches/{n}/updates/{n}/jobs"] != 9 || got["POST /batches/{n}/updates/{n}/commit"] != 1 {
		t.Fatalf("requests %v, want a create, 9 bunches of 300 entries and a commit", got)
	}
	j, err := cl.GetJob(ctx, b.ID, 2500)
	if err != nil || j.Name != "j2500" {
		t.Fatalf("last job %+v %v", j, err)
	}
	// The whole submission again with the same key: the same batch, no
	// second one, nothing added to it.
	again, err := cl.Submit(ctx, req, distinct(2500), opts)
	if err != nil || again.ID != b.ID || again.NJobs != 2500 {
		t.Fatalf("retried submission: %+v %v", again, err)
	}
	if list, _ := cl.ListBatches(ctx, "", 0); len(list.Batches) != 1 {
		t.Fatalf("%d batches after a retried submission", len(list.Batches))
	}
}

func TestSubmitRefusedBunchCancelsTheBatch(t *testing.T) {
	srv := startCounted(t)
	cl := api.NewClient(srv.url, srv.token)
	ctx := context.Background()
	jobs := distinct(1000)
	bad := jobs.Make
	jobs.Make = func(i int) api.JobSpec {
		s := bad(i)
		if i == 777 {
			s.Retries = 1000
		}
		return s
	}
	_, err := cl.Submit(ctx, &api.CreateBatchRequest{Name: "bad"}, jobs, &api.SubmitOptions{InlineEntries: 10, BunchSize: 100, Concurrency: 2})
	if err == nil || !strings.Contains(err.Error(), `jobs[777] (job_id 778, "j778"): retries is 1000`) {
		t.Fatalf("error %v", err)
	}
	list, err := cl.ListBatches(ctx, "", 0)
	if err != nil || len(list.Batches) != 1 || !list.Batches[0].Cancelled || !list.Batches[0].Complete() {
		t.Fatalf("the half-submitted batch is not cancelled: %+v %v", list, err)
	}
	// Refused by the server (not by the client's own check): a parent
	// outside the update.
	_, err = cl.Submit(ctx, &api.CreateBatchRequest{Name: "bad-parent"}, api.Jobs{
		{JobID: 1, Command: []string{"true"}, ParentIDs: []int64{7}},
	}, nil)
	if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "parent") {
		t.Fatalf("error %v", err)
	}
}
