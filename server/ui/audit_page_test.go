package ui

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// fakeAuditAPI answers whoami (an admin) and the audit log as the API
// does (before and after exclusive; limit the newest of the window, or
// with after the oldest, newest first) over a fixed log, oldest first.
type fakeAuditAPI struct{ log []api.AuditEntry }

func (f fakeAuditAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/api/v1/whoami":
		_ = json.NewEncoder(w).Encode(api.User{Name: "root", Admin: true})
		return
	case "/api/v1/audit":
	default:
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	var before, after time.Time
	if v := q.Get("before"); v != "" {
		before, _ = time.Parse(time.RFC3339Nano, v)
	}
	if v := q.Get("after"); v != "" {
		after, _ = time.Parse(time.RFC3339Nano, v)
	}
	var window []api.AuditEntry // newest first
	for i := len(f.log) - 1; i >= 0; i-- {
		e := f.log[i]
		if (before.IsZero() || e.Time.Before(before)) && (after.IsZero() || e.Time.After(after)) {
			window = append(window, e)
		}
	}
	if !after.IsZero() {
		window = window[max(len(window)-limit, 0):]
	} else {
		window = window[:min(len(window), limit)]
	}
	_ = json.NewEncoder(w).Encode(window)
}

// TestAuditPagesNeverSplitATime: the audit page's cursors are times, so
// a page must not end inside a run of entries of one time: paging Older
// through a log whose entries come in runs of 7 equal times, page
// boundaries falling inside runs, shows every entry once, newest first,
// and Newer shows the same pages back.
func TestAuditPagesNeverSplitATime(t *testing.T) {
	base := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	fake := fakeAuditAPI{}
	const n = 250
	for i := range n {
		fake.log = append(fake.log, api.AuditEntry{Time: base.Add(time.Duration(i/7) * time.Nanosecond), User: "root", Method: "POST",
			Path: fmt.Sprintf("/e/%d", i), Status: 200, Count: 1})
	}
	u, err := New(Deps{API: fake, Access: func(string) string { return "admin" }, Changes: func() <-chan struct{} { return nil },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := u.Handler()
	rowRE := regexp.MustCompile(`<code>POST /e/(\d+)</code>`)
	linkRE := regexp.MustCompile(`<a href="([^"]*)"[^>]*>(Newer|Older)</a>`)
	get := func(path string) ([]int, map[string]string) {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: "acc.tok"})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d\n%s", path, rec.Code, rec.Body)
		}
		var ids []int
		for _, m := range rowRE.FindAllStringSubmatch(rec.Body.String(), -1) {
			id, _ := strconv.Atoi(m[1])
			ids = append(ids, id)
		}
		links := map[string]string{}
		for _, m := range linkRE.FindAllStringSubmatch(rec.Body.String(), -1) {
			links[m[2]] = html.UnescapeString(m[1])
		}
		return ids, links
	}
	var pages [][]int
	var seen []int
	ids, links := get("/ui/audit")
	for {
		if len(ids) == 0 || len(ids) > auditPageSize {
			t.Fatalf("a page of %d entries", len(ids))
		}
		pages, seen = append(pages, ids), append(seen, ids...)
		if links["Older"] == "" {
			break
		}
		if len(pages) > 10 {
			t.Fatal("Older never ends")
		}
		ids, links = get(links["Older"])
	}
	for i, id := range seen {
		if id != n-1-i {
			t.Fatalf("row %d is entry %d, want %d: pages %v", i, id, n-1-i, pages)
		}
	}
	if len(seen) != n || len(pages) < 3 {
		t.Fatalf("%d entries in %d pages", len(seen), len(pages))
	}
	for i := len(pages) - 1; i > 0; i-- {
		if ids, links = get(links["Newer"]); !slices.Equal(ids, pages[i-1]) {
			t.Fatalf("Newer from page %d: %v\nwant %v", i, ids, pages[i-1])
		}
	}
	if links["Newer"] != "" {
		t.Fatalf("the newest page, reached by Newer, links to a newer one: %v", links)
	}
}
