package ui_test

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

var (
	auditRow  = regexp.MustCompile(`<code>POST /api/v1/batches/(\d+)/cancel</code>`)
	auditLink = regexp.MustCompile(`<a href="([^"]*)"[^>]*>(Newest|Newer|Older)</a>`)
)

// auditPage reads a page of the audit page: the batch IDs of its cancel
// requests, in the order shown, and its paging links by name.
func (w *webServer) auditPage(cookie, path string) ([]int, map[string]string) {
	w.t.Helper()
	resp, body := w.do("GET", path, cookie, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "newest first") {
		w.t.Fatalf("%s: HTTP %d\n%s", path, resp.StatusCode, body)
	}
	var ids []int
	for _, m := range auditRow.FindAllStringSubmatch(body, -1) {
		id, _ := strconv.Atoi(m[1])
		ids = append(ids, id)
	}
	links := map[string]string{}
	for _, m := range auditLink.FindAllStringSubmatch(body, -1) {
		links[m[2]] = html.UnescapeString(m[1])
	}
	return ids, links
}

// TestAuditNewestFirstWithPages: with more entries than a page (250
// refused cancels, each audited), the audit page's first row is the
// newest request; Older pages go back through every entry once, newest
// first, and Newer comes back the same way; the API refuses a cursor
// that is no time.
func TestAuditNewestFirstWithPages(t *testing.T) {
	w := startWeb(t)
	ctx := context.Background()
	const n = 250
	for i := range n {
		if err := w.admin.CancelBatch(ctx, int64(100000+i)); !api.IsStatus(err, http.StatusNotFound) {
			t.Fatalf("cancel of a batch that does not exist: %v", err)
		}
	}
	// The log, newest first, as the API keeps it (a request the client
	// sent again, after a 429, is there twice).
	var want []int
	deadline := time.Now().Add(20 * time.Second)
	for {
		log, err := w.admin.Audit(ctx, "1h", "", 10000)
		if err != nil {
			t.Fatal(err)
		}
		if len(log) > 0 && log[0].Path == "/api/v1/batches/"+itoa(100000+n-1)+"/cancel" {
			for _, e := range log {
				if m := auditRow.FindStringSubmatch("<code>" + e.Method + " " + e.Path + "</code>"); m != nil {
					id, _ := strconv.Atoi(m[1])
					want = append(want, id)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last cancel is not the newest audit entry after 20 s (%d entries)", len(log))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cookie := w.login(w.token).Value
	first, links := w.auditPage(cookie, "/ui/audit")
	if len(first) == 0 || first[0] != 100000+n-1 {
		t.Fatalf("the audit page's first row is batch %v's cancel, want the newest, %d's", first[:min(len(first), 1)], 100000+n-1)
	}
	if links["Older"] == "" || links["Newer"] != "" {
		t.Fatalf("the newest page's links %v: want Older only", links)
	}
	// Older, to the end: every cancel once, newest first.
	pages := [][]int{first}
	var seen []int
	seen = append(seen, first...)
	for links["Older"] != "" {
		var ids []int
		ids, links = w.auditPage(cookie, links["Older"])
		pages = append(pages, ids)
		seen = append(seen, ids...)
		if len(pages) > 10 {
			t.Fatal("Older never ends")
		}
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("the pages show\n%v\nwant every entry once, newest first, as the API keeps them:\n%v", pages, want)
	}
	if len(want) < n || len(pages) < 3 {
		t.Fatalf("%d cancels in %d pages: want at least %d, in 3 pages at least", len(want), len(pages), n)
	}
	// Newer, back from the oldest page: the same pages.
	for i := len(pages) - 1; i > 0; i-- {
		if links["Newer"] == "" {
			t.Fatalf("page %d has no Newer link: %v", i, links)
		}
		var ids []int
		ids, links = w.auditPage(cookie, links["Newer"])
		if !slices.Equal(ids, pages[i-1]) {
			t.Fatalf("Newer from page %d shows %v\nwant page %d: %v", i, ids, i-1, pages[i-1])
		}
	}
	// The API's cursors are times.
	if err := w.admin.Do(ctx, http.MethodGet, "/api/v1/audit?before=yesterday", nil, nil); !api.IsStatus(err, http.StatusBadRequest) {
		t.Errorf("before=yesterday: %v, want 400", err)
	}
}
