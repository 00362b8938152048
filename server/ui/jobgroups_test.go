package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestJobGroupsOnTheBatchPage: the batch page shows its job groups as a
// tree (each under its parent) with their counts, filters its jobs by
// group, and cancels a group only through the question that says what
// stops, with the session's token; the rest of the batch runs on.
func TestJobGroupsOnTheBatchPage(t *testing.T) {
	w := startWeb(t)
	ctx := context.Background()
	res, err := w.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "grouped", BillingProject: "default",
		JobGroups: []api.JobGroupSpec{{Path: "align"}, {Path: "align/chr1"}, {Path: "merge"}},
		Jobs: []api.JobSpec{
			{JobID: 1, Name: "chr1", Count: 3, Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "align/chr1"},
			{JobID: 4, Name: "merge", Command: []string{"true"}, CPU: 1, Memory: 1 << 20, JobGroup: "merge", ParentRanges: []api.IDRange{{1, 3}}},
			{JobID: 5, Name: "free", Command: []string{"true"}, CPU: 1, Memory: 1 << 20},
		}})
	if err != nil {
		t.Fatal(err)
	}
	id := itoa(res.ID)
	cookie := w.login(w.token).Value
	csrf := w.csrf(cookie)
	resp, body := w.do("GET", "/ui/batches/"+id, cookie, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="job-groups"`) ||
		!strings.Contains(body, `<tr data-group="align/chr1">`) || !strings.Contains(body, `class="name depth-1"`) ||
		!strings.Contains(body, `href="/ui/batches/`+id+`/groups/1/cancel"`) {
		t.Fatalf("the batch page: HTTP %d\n%s", resp.StatusCode, body)
	}
	// Filtered by a group: its jobs and its subgroups', no others.
	_, body = w.do("GET", "/ui/batches/"+id+"?group=align", cookie, nil, nil)
	if !strings.Contains(body, `data-job="1"`) || !strings.Contains(body, `data-job="3"`) || strings.Contains(body, `data-job="4"`) || strings.Contains(body, `data-job="5"`) {
		t.Fatalf("jobs of group align:\n%s", body)
	}
	path := "/ui/batches/" + id + "/groups/1/cancel"
	same := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": w.base}
	groupCancelled := func() bool {
		g, err := w.admin.JobGroup(ctx, res.ID, "align")
		if err != nil {
			t.Fatal(err)
		}
		return g.Cancelled
	}
	if resp, _ := w.do("POST", path, cookie, url.Values{"confirm": {"yes"}}, same); resp.StatusCode != http.StatusForbidden || groupCancelled() {
		t.Fatalf("a cancel without the CSRF token: HTTP %d", resp.StatusCode)
	}
	if resp, _ := w.do("POST", path, cookie, url.Values{"csrf": {csrf}}, same); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path || groupCancelled() {
		t.Fatalf("a cancel without confirmation: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = w.do("GET", path, cookie, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Cancel job group align of batch "+id+", and the groups below it?") ||
		!strings.Contains(body, "nor do the jobs of other groups that wait for them") {
		t.Fatalf("the question: HTTP %d\n%s", resp.StatusCode, body)
	}
	if resp, body := w.do("POST", path, cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}}, same); resp.StatusCode != http.StatusSeeOther || !groupCancelled() {
		t.Fatalf("the confirmed cancel: HTTP %d\n%s", resp.StatusCode, body)
	}
	if w.cancelled(res.ID) {
		t.Fatal("a group's cancel cancelled its batch")
	}
	_, body = w.do("GET", "/ui/batches/"+id, cookie, nil, nil)
	if strings.Contains(body, `href="/ui/batches/`+id+`/groups/1/cancel"`) || !strings.Contains(body, `st-cancelled`) {
		t.Fatalf("the batch page after the cancel still offers it, or shows no cancelled group:\n%s", body)
	}
}
