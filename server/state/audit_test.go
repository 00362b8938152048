package state

import (
	"slices"
	"testing"
	"time"
)

// TestAuditPages: paging with Before from the newest page reads every
// entry (users' and anonymous counts merged) once, newest first; After
// from the oldest page reads them back in the same pages; a user's pages
// hold only theirs.
func TestAuditPages(t *testing.T) {
	h := newHarness(t)
	var entries []AuditEntry
	for i := range 25 {
		e := AuditEntry{Time: int64(1000 + 10*i), User: "root", Route: "POST /api/v1/batches", Status: 201}
		switch i % 3 {
		case 1:
			e.User = ""
			e.Status, e.Count = 401, 2
		case 2:
			e.User = "alice"
		}
		entries = append(entries, e)
	}
	h.Must(&Audit{Entries: entries})
	at := func(ns int64) time.Time { return time.Unix(0, ns) }
	times := func(es []AuditEntry) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.Time)
		}
		return out
	}
	const limit = 10
	var pages [][]int64
	page := h.S.AuditPage(AuditQuery{Limit: limit})
	for len(page) > 0 {
		if len(page) > limit {
			t.Fatalf("a page of %d entries, limit %d", len(page), limit)
		}
		pages = append(pages, times(page))
		page = h.S.AuditPage(AuditQuery{Before: at(page[len(page)-1].Time), Limit: limit})
	}
	var all []int64
	for _, p := range pages {
		all = append(all, p...)
	}
	var want []int64
	for i := range entries {
		want = append(want, entries[len(entries)-1-i].Time)
	}
	if !slices.Equal(all, want) {
		t.Fatalf("paging older:\n%v\nwant every entry once, newest first:\n%v", all, want)
	}
	if len(pages) != 3 || len(pages[2]) != 5 {
		t.Fatalf("pages %v, want 10, 10 and 5 entries", pages)
	}
	// Back with After, from the oldest page: the page just newer, not the
	// newest entries.
	for i := len(pages) - 1; i > 0; i-- {
		top := pages[i][0]
		got := times(h.S.AuditPage(AuditQuery{After: at(top), Limit: limit}))
		if !slices.Equal(got, pages[i-1]) {
			t.Fatalf("after %d: %v, want the page before it %v", top, got, pages[i-1])
		}
	}
	if got := h.S.AuditPage(AuditQuery{After: at(pages[0][0]), Limit: limit}); len(got) != 0 {
		t.Fatalf("after the newest entry: %v", times(got))
	}
	// Since still bounds the window, and a user's pages are theirs.
	if got := h.S.AuditPage(AuditQuery{Since: at(1200), Before: at(1230), Limit: limit}); !slices.Equal(times(got), []int64{1220, 1210, 1200}) {
		t.Fatalf("since 1200 before 1230: %v", times(got))
	}
	got := h.S.AuditPage(AuditQuery{User: "alice", Before: at(1200), Limit: 3})
	if !slices.Equal(times(got), []int64{1170, 1140, 1110}) {
		t.Fatalf("alice's entries before 1200: %v", times(got))
	}
}
