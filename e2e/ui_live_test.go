package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestWebUILiveModel keeps pages open in Chromium while what they show
// changes, and checks after every change that no two parts of a page
// disagree: a batch page opened at submission and followed to its end
// (the summary's counts, the jobs table's states and the chart's bars
// agree at every look, and the batch reaches success on all three), a
// job page opened before its job starts (it follows the job to its end),
// the batches list (a batch submitted after it opened appears), and a log
// followed for longer than the server's stream lifetime (made 3 s here):
// the browser reconnects, resumes from the last byte it got, and no line
// shows twice.
func TestWebUILiveModel(t *testing.T) {
	a := startAgent(t, "", "", "-clusters", "us-east1/a:1x4,us-west1/b:1x4", "-worker-memory", "2GiB", "-ui-stream-life", "3s")
	admin := a.client()
	ctx := context.Background()
	b := newBrowser(t, a.addr)
	b.login(a.token)

	// The batches list is open before the batch exists.
	b.open("/ui/batches")
	eval[bool](b, `window.__noReload = true`)

	// 40 jobs of different lengths on 8 cores; job 41 waits on job 1 and
	// writes a line every 50 ms for 9 s (three stream lifetimes).
	var jobs []api.JobSpec
	for i := 1; i <= 40; i++ {
		jobs = append(jobs, api.JobSpec{JobID: int64(i), Name: fmt.Sprintf("step-%d", i), Command: []string{"sh", "-c", fmt.Sprintf("sleep %d.%d", i%3, i%10)}, CPU: 1, Memory: 32 << 20})
	}
	jobs = append(jobs, api.JobSpec{JobID: 41, Name: "ticker", ParentIDs: []int64{1},
		Command: []string{"sh", "-c", `i=1; while [ $i -le 180 ]; do echo "tick $i"; i=$((i+1)); sleep 0.05; done`}, CPU: 0.25, Memory: 32 << 20})
	resp, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "live model", BillingProject: "default", Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.ID

	// The list shows the new batch without a reload.
	waitFor(t, "the new batch on the open batches list", 20*time.Second, func() bool {
		return b.exists(fmt.Sprintf(`a[href="/ui/batches/%d"]`, id))
	})
	if !eval[bool](b, `window.__noReload === true`) {
		t.Fatal("the batches list reloaded instead of updating in place")
	}

	// The batch page, from submission to completion.
	b.open(fmt.Sprintf("/ui/batches/%d", id))
	eval[bool](b, `window.__noReload = true`)
	type look struct {
		Counts  map[string]int `json:"counts"`
		Rows    map[string]int `json:"rows"`
		Bars    map[string]int `json:"bars"`
		Done    string         `json:"done"`
		State   string         `json:"state"`
		Index   string         `json:"index"`
		NRows   int            `json:"nrows"`
		Running int            `json:"running"`
	}
	read := func() look {
		return eval[look](b, `(() => {
		  const counts = {};
		  for (const td of document.querySelectorAll('#counts td[data-count]')) counts[td.getAttribute('data-count')] = parseInt(td.textContent, 10);
		  const rows = {};
		  let nrows = 0;
		  for (const tr of document.querySelectorAll('#jobs tbody tr[data-state]')) { const s = tr.getAttribute('data-state'); rows[s] = (rows[s] || 0) + 1; nrows++; }
		  const bars = {};
		  for (const r of document.querySelectorAll('#jobs-region svg rect')) { const c = r.getAttribute('class') || ''; bars[c] = (bars[c] || 0) + 1; }
		  return {counts, rows, bars, nrows, done: (document.querySelector('#batch-done') || {}).textContent || '',
		    state: (document.querySelector('#batch-state') || {}).textContent || '', index: document.querySelector('main').getAttribute('data-index') || ''};
		})()`)
	}
	// A keyboard user reading the table keeps their place as it changes.
	eval[bool](b, `(() => { const a = document.querySelector('#jobs a[href$="/jobs/3"]'); a.focus(); return document.activeElement === a; })()`)
	looks, changes := 0, 0
	var last look
	deadline := time.Now().Add(3 * time.Minute)
	for {
		l := read()
		looks++
		if l.Index != last.Index || l.Done != last.Done {
			changes++
		}
		last = l
		if l.NRows != 41 {
			t.Fatalf("look %d: the table shows %d jobs of 41", looks, l.NRows)
		}
		// The summary and the table are of one moment.
		for _, p := range [][2]string{{"pending", "pending"}, {"ready", "ready"}, {"succeeded", "success"}, {"failed", "failed"}, {"error", "error"}, {"cancelled", "cancelled"}} {
			if l.Counts[p[0]] != l.Rows[p[1]] {
				t.Fatalf("look %d (index %s): the summary says %d %s, the table shows %d: %+v", looks, l.Index, l.Counts[p[0]], p[0], l.Rows[p[1]], l)
			}
		}
		if running := l.Rows["running"] + l.Rows["creating"]; l.Counts["running"] != running {
			t.Fatalf("look %d (index %s): the summary says %d running, the table shows %d: %+v", looks, l.Index, l.Counts["running"], running, l)
		}
		// The chart is of the same moment: one bar per attempt, each
		// coloured by its state (every job here has one attempt).
		if l.Bars["st-running"] != l.Rows["running"] || l.Bars["st-success"] != l.Rows["success"] {
			t.Fatalf("look %d (index %s): the chart draws %d running and %d succeeded attempts, the table shows %d and %d: %+v",
				looks, l.Index, l.Bars["st-running"], l.Bars["st-success"], l.Rows["running"], l.Rows["success"], l)
		}
		want := fmt.Sprintf("%d of 41 jobs done", l.Rows["success"]+l.Rows["failed"]+l.Rows["error"]+l.Rows["cancelled"])
		if l.Done != want {
			t.Fatalf("look %d (index %s): the summary reads %q, the table adds up to %q", looks, l.Index, l.Done, want)
		}
		if l.State == "success" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch page still reads %+v after 3 minutes", l)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !eval[bool](b, `window.__noReload === true`) {
		t.Fatal("the batch page reloaded instead of updating in place")
	}
	if changes < 5 {
		t.Fatalf("the batch page changed %d times in %d looks: it did not follow the batch", changes, looks)
	}
	if focus := eval[string](b, `(document.activeElement && document.activeElement.isConnected && document.activeElement.getAttribute('href')) || ''`); !strings.HasSuffix(focus, "/jobs/3") {
		t.Errorf("after the table changed %d times, the keyboard's focus is on %q, not job 3's link where it was", changes, focus)
	}
	if st := b.text("#live-status"); !strings.Contains(st, "no longer changes") {
		t.Errorf("the completed batch's page says %q", st)
	}
	t.Logf("batch page: %d looks, %d changes, all agreeing", looks, changes)

	// A job page opened before its job starts follows it to its end, and
	// its log, followed across several stream lifetimes, has every line
	// once, in order.
	id2, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "late", BillingProject: "default", Jobs: []api.JobSpec{
		{JobID: 1, Command: []string{"sleep", "2"}, CPU: 0.25, Memory: 32 << 20},
		{JobID: 2, ParentIDs: []int64{1}, Command: []string{"sh", "-c", `i=1; while [ $i -le 180 ]; do echo "tick $i"; i=$((i+1)); sleep 0.05; done`}, CPU: 0.25, Memory: 32 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b.open(fmt.Sprintf("/ui/batches/%d/jobs/2", id2.ID))
	eval[bool](b, `window.__noReload = true`)
	if st := b.text("#job-state"); st != "pending" {
		t.Fatalf("job 2 reads %q when opened; want pending (it waits on job 1)", st)
	}
	b.waitText("job 2's end", "#job-state", 90*time.Second, func(s string) bool { return s == "success" })
	b.waitText("job 2's log's end", "#log-status", 30*time.Second, func(s string) bool { return strings.Contains(s, "ended") })
	if !eval[bool](b, `window.__noReload === true`) {
		t.Fatal("the job page reloaded instead of updating in place")
	}
	logText := b.text("#log")
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logText), "\n") {
		if strings.HasPrefix(l, "tick ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 180 {
		t.Fatalf("the followed log has %d tick lines, want 180 each once:\n%s", len(lines), logText)
	}
	for i, l := range lines {
		if l != fmt.Sprintf("tick %d", i+1) {
			t.Fatalf("line %d of the followed log is %q, want \"tick %d\" (a line repeated or lost across a reconnection)", i+1, l, i+1)
		}
	}
	if st := b.text("#log-status"); !strings.Contains(st, "success") {
		t.Errorf("the log's status reads %q beside a job that succeeded", st)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.exceptions) > 0 {
		t.Fatalf("a script failed: %q", b.exceptions)
	}
}
