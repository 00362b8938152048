package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/server/ui"
)

// benchServer starts a server without request rate limits for a
// benchmark, and stops it when the benchmark ends.
func benchServer(b *testing.B) (base, tok string) {
	cfg := server.TestConfig(b.TempDir(), slog.New(slog.DiscardHandler))
	cfg.UserRequestsPerSecond = 0
	cfg.MaxBatchesPerUser = 0
	srv, tok, err := server.StartReady(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return "http://" + srv.HTTPAddr(), tok
}

// benchLogin logs in and returns the session cookie's value.
func benchLogin(b *testing.B, base, tok string) string {
	resp, err := noRedirect.PostForm(base+"/ui/login", url.Values{"token": {tok}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == ui.CookieName {
			return ck.Value
		}
	}
	b.Fatalf("login: HTTP %d, no session", resp.StatusCode)
	return ""
}

// BenchmarkUIPages: the batches page over 10,000 batches and the page of
// a batch of 1,000,000 distinct jobs, each loaded 100 times through a
// real server (its HTTP listener, the session, the in-process API
// reads); it reports the p50 and p99 of each page's time to the last
// byte on loopback, an upper bound of the server's time. The pages
// read the API's own read models: a page of 50 batches, a batch's
// counts, the first 50 of its jobs and its first stages (a bounded
// number of job entries), never every job.
//
//	go test -run '^$' -bench BenchmarkUIPages -benchtime 1x -timeout 20m ./server/ui/
func BenchmarkUIPages(b *testing.B) {
	ctx := context.Background()
	base, tok := benchServer(b)
	c := api.NewClient(base, tok)

	start := time.Now()
	big, err := c.Submit(ctx, &api.CreateBatchRequest{Name: "million", BillingProject: "default"}, api.GeneratedJobs{N: 1_000_000, Make: func(i int) api.JobSpec {
		return api.JobSpec{JobID: int64(i + 1), Name: fmt.Sprintf("shard-%d", i%7), Command: []string{"true", fmt.Sprint(i)}, CPU: 1, Memory: 1 << 30}
	}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("a batch of 1,000,000 jobs submitted in %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	sem := make(chan struct{}, 16)
	errs := make(chan error, 16)
	for i := range 10_000 {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: fmt.Sprintf("b%d", i), BillingProject: "default",
				Attributes: map[string]string{"n": fmt.Sprint(i % 10)}, Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.Logf("10,000 more batches created in %s", time.Since(start).Round(time.Millisecond))
	if l, err := c.ListBatches(ctx, "", 0); err != nil || len(l.Batches) != 50 || l.Batches[0].ID != big.ID+10_000 {
		b.Fatalf("the newest batches: %v %+v", err, l)
	}
	if bt, err := c.GetBatch(ctx, big.ID); err != nil || bt.NJobs != 1_000_000 {
		b.Fatalf("the big batch: %v %+v", err, bt)
	}

	cookie := benchLogin(b, base, tok)
	load := func(path string) time.Duration {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: cookie})
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "</html>") {
			b.Fatalf("%s: HTTP %d\n%.500s", path, resp.StatusCode, body)
		}
		return d
	}
	for _, page := range []struct{ name, path string }{
		{"batches", "/ui/batches"},
		{"batches-filtered", "/ui/batches?attrs=n%3D3&state=running"},
		{"batch-1M", fmt.Sprintf("/ui/batches/%d", big.ID)},
		{"batch-1M-jobs-page", fmt.Sprintf("/ui/batches/%d?last_id=500000", big.ID)},
	} {
		load(page.path) // warm
		var ds []time.Duration
		for range 100 {
			ds = append(ds, load(page.path))
		}
		slices.Sort(ds)
		p50, p99 := ds[49], ds[98]
		b.ReportMetric(float64(p50.Microseconds())/1000, page.name+"-p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, page.name+"-p99-ms")
	}
}

// BenchmarkLivePages: 30 browsers keep the page of one batch of 10,000
// waiting jobs open (30 live streams, each following the change stream
// in-process); the batch gains a job 20 times, 0.7 s apart (past the
// streams' 0.5 s gap, so none waits for it). It reports, from the
// moment the update is committed to the moment each stream's event with
// the page's new regions has arrived on loopback, the p50 and p99 over
// the 600 events: what a change costs to reach every open page.
//
//	go test -run '^$' -bench BenchmarkLivePages -benchtime 1x ./server/ui/
func BenchmarkLivePages(b *testing.B) {
	ctx := context.Background()
	base, tok := benchServer(b)
	c := api.NewClient(base, tok)
	bt, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "live", BillingProject: "default",
		Jobs: []api.JobSpec{{JobID: 1, Count: 10_000, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		b.Fatal(err)
	}
	cookie := benchLogin(b, base, tok)
	const streams, updates = 30, 20
	type arrival struct {
		stream int
		at     time.Time
		body   string
	}
	arrivals := make(chan arrival, streams*(updates+2))
	for i := range streams {
		req, _ := http.NewRequest("GET", base+"/ui/live?page="+url.QueryEscape(fmt.Sprintf("/ui/batches/%d", bt.ID)), nil)
		req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: cookie})
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("stream %d: %v %v", i, err, resp)
		}
		defer resp.Body.Close()
		go func() {
			buf := make([]byte, 1<<20)
			var ev strings.Builder
			for {
				n, err := resp.Body.Read(buf)
				ev.Write(buf[:n])
				for {
					s := ev.String()
					k := strings.Index(s, "\n\n")
					if k < 0 {
						break
					}
					if strings.HasPrefix(s, "event: page") {
						arrivals <- arrival{i, time.Now(), s[:k]}
					}
					ev.Reset()
					ev.WriteString(s[k+2:])
				}
				if err != nil {
					return
				}
			}
		}()
	}
	for range streams { // each stream's first page
		<-arrivals
	}
	var lat []time.Duration
	for u := range updates {
		time.Sleep(700 * time.Millisecond)
		if _, err := c.CreateUpdate(ctx, bt.ID, &api.CreateUpdateRequest{Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}}); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		want := fmt.Sprintf("of %d jobs done", 10_000+u+1)
		for got := 0; got < streams; {
			select {
			case a := <-arrivals:
				if strings.Contains(a.body, want) {
					lat = append(lat, a.at.Sub(committed))
					got++
				}
			case <-time.After(30 * time.Second):
				b.Fatalf("update %d: %d of %d streams told in 30 s", u+1, got, streams)
			}
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "change-to-page-p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "change-to-page-p99-ms")
}
