package ui_test

import (
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-sched/drover/server/ui"
)

// loginWithNext posts the login form as the login page sends it, with
// next, and returns where the server sends the browser.
func (w *webServer) loginWithNext(next string) string {
	w.t.Helper()
	resp, body := w.do("POST", "/ui/login", "", url.Values{"token": {w.token}, "next": {next}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != http.StatusSeeOther {
		w.t.Fatalf("login with next %q: HTTP %d\n%s", next, resp.StatusCode, body)
	}
	return resp.Header.Get("Location")
}

// formNext is the next the login page's form carries.
func formNext(t *testing.T, body string) string {
	t.Helper()
	const mark = `name="next" value="`
	i := strings.Index(body, mark)
	if i < 0 {
		t.Fatalf("the login form carries no next:\n%s", body)
	}
	rest := body[i+len(mark):]
	return html.UnescapeString(rest[:strings.IndexByte(rest, '"')])
}

// TestDeepLinksSurviveLogin: a logged-out request for a page goes to the
// login page with the page as next, the login form carries it, and the
// login lands there; a next that would leave the UI (another site, a
// path a browser resolves out of /ui/, encoded or not) lands on /ui/.
func TestDeepLinksSurviveLogin(t *testing.T) {
	w := startWeb(t)
	const deep = "/ui/batches/12?state=running"
	resp, _ := w.do("GET", deep, "", nil, nil)
	login := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || login != "/ui/login?next=%2Fui%2Fbatches%2F12%3Fstate%3Drunning" {
		t.Fatalf("a logged-out deep link: HTTP %d to %q", resp.StatusCode, login)
	}
	resp, body := w.do("GET", login, "", nil, nil)
	if resp.StatusCode != http.StatusOK || formNext(t, body) != deep {
		t.Fatalf("the login page: HTTP %d, its form's next %q, want %q", resp.StatusCode, formNext(t, body), deep)
	}
	if to := w.loginWithNext(deep); to != deep {
		t.Fatalf("after login: to %q, want %q", to, deep)
	}
	for _, next := range []string{
		"//evil.example/ui/",
		"https://evil.example/ui/",
		"/\\evil.example/ui/",
		"/ui/../evil",
		"/ui/batches/../../evil",
		"/ui/%2e%2e/evil",
		"/ui/%2E%2E/%2e%2e/evil",
		"/ui/.%2e/evil",
		"/ui//evil.example",
		"/ui/%2f%2fevil.example",
		"/ui/\\evil.example",
		"/ui/%5cevil.example",
		"/ui/\t/evil.example",
		"/ui/x\r\nLocation: //evil.example",
		"javascript:alert(1)//ui/",
		"/ui/" + strings.Repeat("a", 3000),
	} {
		if to := w.loginWithNext(next); to != ui.Prefix {
			t.Errorf("login with next %q: to %q, want %q", next, to, ui.Prefix)
		}
		if _, body := w.do("GET", "/ui/login?next="+url.QueryEscape(next), "", nil, nil); formNext(t, body) != ui.Prefix {
			t.Errorf("the login page with next %q carries %q", next, formNext(t, body))
		}
	}
	// The UI's own pages, with their queries, are kept.
	for _, next := range []string{"/ui/audit?user=alice&before=2026-01-02T03%3A04%3A05.123Z", "/ui/batches/3/jobs/4", "/ui/queues"} {
		if to := w.loginWithNext(next); to != next {
			t.Errorf("login with next %q: to %q", next, to)
		}
	}
}

// TestSessionEndedSaysWhy: after ui.MaxSessions more logins the first
// session is revoked; its page then sends the browser to a login page
// that says in words why the session ended (and back to the page after),
// and its live stream is refused with a 401 in the same words. A
// browser that never logged in is not told its session ended.
func TestSessionEndedSaysWhy(t *testing.T) {
	w := startWeb(t)
	first := w.login(w.token).Value
	for range ui.MaxSessions {
		w.login(w.token)
	}
	id := itoa(w.batch("ended"))
	resp, _ := w.do("GET", "/ui/batches/"+id, first, nil, nil)
	login := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || login != "/ui/login?ended=1&next=%2Fui%2Fbatches%2F"+id {
		t.Fatalf("a page of the oldest session after %d more logins: HTTP %d to %q, want the login page saying it ended", ui.MaxSessions, resp.StatusCode, login)
	}
	words := []string{"Your session ended", "keeps " + strconv.Itoa(ui.MaxSessions) + " sessions per user", "ends the oldest", "expires", "log out", "Log in again"}
	_, body := w.do("GET", login, "", nil, nil)
	for _, s := range words {
		if !strings.Contains(body, s) {
			t.Errorf("the login page does not say %q:\n%s", s, body)
		}
	}
	if strings.Contains(body, "invalid token") || formNext(t, body) != "/ui/batches/"+id {
		t.Errorf("the login page shows the API's words, or does not lead back (next %q):\n%s", formNext(t, body), body)
	}
	resp, body = w.do("GET", "/ui/batches/"+id+"/jobs/1/log/live", first, nil, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Your session ended") || !strings.Contains(body, "sessions per user") {
		t.Errorf("the live stream of the ended session: HTTP %d\n%s", resp.StatusCode, body)
	}
	// Never logged in: nothing ended.
	resp, _ = w.do("GET", "/ui/batches/"+id, "", nil, nil)
	if strings.Contains(resp.Header.Get("Location"), "ended") {
		t.Errorf("without a session cookie: to %q", resp.Header.Get("Location"))
	}
	if _, body := w.do("GET", "/ui/login", "", nil, nil); strings.Contains(body, "Your session ended") {
		t.Error("the plain login page says a session ended")
	}
}

// TestNotFoundHasTheNavigation: an unknown page of the UI is a 404 page
// with the navigation for a logged-in user, and a plain 404 (no login
// asked) for anyone else, a cookie that no longer works included.
func TestNotFoundHasTheNavigation(t *testing.T) {
	w := startWeb(t)
	cookie := w.login(w.token).Value
	resp, body := w.do("GET", "/ui/no-such-page", cookie, nil, nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `<nav aria-label="Main">`) || !strings.Contains(body, "no such page") ||
		!strings.Contains(body, "Log out") {
		t.Fatalf("an unknown page, logged in: HTTP %d\n%s", resp.StatusCode, body)
	}
	for name, c := range map[string]string{"no cookie": "", "a bad cookie": "x.y", "not a session": "garbage"} {
		resp, body := w.do("GET", "/ui/no-such-page", c, nil, nil)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(body, `<nav aria-label="Main">`) {
			t.Errorf("an unknown page with %s: HTTP %d to %q\n%s", name, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
}
