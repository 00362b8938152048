package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/server/ui"
)

// The web UI's boundaries, against a real server: sessions, CSRF and
// cross-origin refusals, escaping, logout. The browser test (e2e
// TestWebUI) drives the same in Chromium.

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type webServer struct {
	t     *testing.T
	srv   *server.Server
	base  string
	token string
	admin *api.Client
	logs  *lockedBuffer
}

func startWeb(t *testing.T, configure ...func(*server.Config)) *webServer {
	t.Helper()
	logs := &lockedBuffer{}
	cfg := server.TestConfig(t.TempDir(), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	for _, f := range configure {
		f(cfg)
	}
	srv, tok, err := server.StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	base := "http://" + srv.HTTPAddr()
	return &webServer{t: t, srv: srv, base: base, token: tok, admin: api.NewClient(base, tok), logs: logs}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends a request with the session cookie (and form, for a POST).
func (w *webServer) do(method, path, cookie string, form url.Values, header map[string]string) (*http.Response, string) {
	w.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, w.base+path, body)
	if err != nil {
		w.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: cookie})
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login logs in with a token and returns the session cookie's value.
func (w *webServer) login(token string) *http.Cookie {
	w.t.Helper()
	resp, body := w.do("POST", "/ui/login", "", url.Values{"token": {token}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != http.StatusSeeOther {
		w.t.Fatalf("login: HTTP %d %s", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == ui.CookieName {
			return c
		}
	}
	w.t.Fatal("login set no session cookie")
	return nil
}

// csrf is the CSRF token the pages of a session carry.
func (w *webServer) csrf(cookie string) string {
	w.t.Helper()
	_, body := w.do("GET", "/ui/batches", cookie, nil, nil)
	const mark = `name="csrf" value="`
	i := strings.Index(body, mark)
	if i < 0 {
		w.t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	rest := body[i+len(mark):]
	return rest[:strings.IndexByte(rest, '"')]
}

func (w *webServer) batch(name string) int64 {
	w.t.Helper()
	resp, err := w.admin.CreateBatch(context.Background(), &api.CreateBatchRequest{Name: name, BillingProject: "default",
		Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		w.t.Fatal(err)
	}
	return resp.ID
}

func (w *webServer) cancelled(id int64) bool {
	b, err := w.admin.GetBatch(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return b.Cancelled
}

// TestFormsNeedTheirTokenAndTheirOrigin: a POST of the UI's own form
// with the session's CSRF token, from its own origin, cancels; the same
// POST without the token, or sent by another site, does not.
func TestFormsNeedTheirTokenAndTheirOrigin(t *testing.T) {
	w := startWeb(t)
	cookie := w.login(w.token).Value
	csrf := w.csrf(cookie)
	id := w.batch("victim")
	path := "/ui/batches/" + itoa(id) + "/cancel"
	for name, c := range map[string]struct {
		form   url.Values
		header map[string]string
	}{
		"no CSRF token":      {url.Values{"confirm": {"yes"}}, map[string]string{"Sec-Fetch-Site": "same-origin"}},
		"a wrong CSRF token": {url.Values{"csrf": {strings.Repeat("0", 64)}, "confirm": {"yes"}}, map[string]string{"Sec-Fetch-Site": "same-origin"}},
		"another site":       {url.Values{"csrf": {csrf}, "confirm": {"yes"}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		"another origin":     {url.Values{"csrf": {csrf}, "confirm": {"yes"}}, map[string]string{"Origin": "http://evil.example"}},
	} {
		resp, body := w.do("POST", path, cookie, c.form, c.header)
		if resp.StatusCode != http.StatusForbidden || w.cancelled(id) {
			t.Fatalf("%s: HTTP %d (cancelled: %v), want 403 and nothing done\n%s", name, resp.StatusCode, w.cancelled(id), body)
		}
	}
	// Without the confirmation step's answer, the form leads to the
	// question and cancels nothing.
	resp, body := w.do("POST", path, cookie, url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": w.base})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != path || w.cancelled(id) {
		t.Fatalf("a cancel without confirmation: HTTP %d to %q (cancelled: %v), want 303 to the question\n%s", resp.StatusCode, resp.Header.Get("Location"), w.cancelled(id), body)
	}
	// The question names what stops, and its form cancels.
	resp, body = w.do("GET", path, cookie, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Cancel batch "+itoa(id)+" (victim)") || !strings.Contains(body, "1 job that waits") ||
		!strings.Contains(body, `name="confirm" value="yes"`) || !strings.Contains(body, `value="`+csrf+`"`) || w.cancelled(id) {
		t.Fatalf("the question: HTTP %d (cancelled: %v)\n%s", resp.StatusCode, w.cancelled(id), body)
	}
	resp, body = w.do("POST", path, cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}}, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": w.base})
	if resp.StatusCode != http.StatusSeeOther || !w.cancelled(id) {
		t.Fatalf("the UI's own form, confirmed: HTTP %d (cancelled: %v)\n%s", resp.StatusCode, w.cancelled(id), body)
	}
	// A cross-site login (login CSRF) is refused too.
	resp, _ = w.do("POST", "/ui/login", "", url.Values{"token": {w.token}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site login: HTTP %d, want 403", resp.StatusCode)
	}
}

// TestSessions: a session is a token of its own, a child of the one typed
// (it ends with it), in a cookie scripts cannot read; logout revokes it;
// a user keeps at most ui.MaxSessions; the token typed appears in no log.
func TestSessions(t *testing.T) {
	w := startWeb(t)
	ctx := context.Background()
	c := w.login(w.token)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != ui.Prefix || strings.Contains(c.Value, w.token) {
		t.Fatalf("session cookie %+v", c)
	}
	resp, body := w.do("GET", "/ui/batches", c.Value, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Log out") {
		t.Fatalf("a page with the session: HTTP %d", resp.StatusCode)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("Content-Security-Policy %q", csp)
	}

	// Logout revokes the session's token.
	csrf := w.csrf(c.Value)
	resp, _ = w.do("POST", "/ui/logout", c.Value, url.Values{"csrf": {csrf}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("logout: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := w.do("GET", "/ui/batches", c.Value, nil, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?ended=1&next=%2Fui%2Fbatches" {
		t.Fatalf("the logged-out cookie: HTTP %d to %q, want the login page saying the session ended", resp.StatusCode, resp.Header.Get("Location"))
	}

	// A session made from a short-lived token ends with it, and when it
	// is revoked.
	short, err := w.admin.CreateToken(ctx, &api.CreateTokenRequest{Name: "short", TTL: "2m"})
	if err != nil {
		t.Fatal(err)
	}
	sc := w.login(short.Token)
	if sc.MaxAge <= 0 || sc.MaxAge > 120 {
		t.Fatalf("a session of a 2-minute token lives %d s", sc.MaxAge)
	}
	if err := w.admin.RevokeToken(ctx, short.Accessor); err != nil {
		t.Fatal(err)
	}
	if resp, _ := w.do("GET", "/ui/batches", sc.Value, nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a session of a revoked token: HTTP %d, want a redirect to log in", resp.StatusCode)
	}

	// Sessions are bounded per user.
	for range ui.MaxSessions + 3 {
		w.login(w.token)
	}
	toks, err := w.admin.ListTokens(ctx, "", false)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tk := range toks {
		if tk.Name == ui.SessionTokenName && !tk.Expired {
			n++
		}
	}
	if n > ui.MaxSessions {
		t.Fatalf("%d live sessions, at most %d", n, ui.MaxSessions)
	}
	if strings.Contains(w.logs.String(), w.token) {
		t.Fatal("the token typed at login is in the server's log")
	}
	// A bad token is refused with the API's reason, as a page.
	resp, body = w.do("POST", "/ui/login", "", url.Values{"token": {"nope"}}, nil)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "invalid token") {
		t.Fatalf("a bad token: HTTP %d\n%s", resp.StatusCode, body)
	}
}

// TestHostileNamesAreText: names a tenant chose render escaped, with
// terminal escapes shown as symbols.
func TestHostileNamesAreText(t *testing.T) {
	w := startWeb(t)
	cookie := w.login(w.token).Value
	id := w.batch("<script>alert(1)</script>\x1b]0;owned\x07")
	for _, path := range []string{"/ui/batches", "/ui/batches/" + itoa(id)} {
		resp, body := w.do("GET", path, cookie, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d", path, resp.StatusCode)
		}
		if strings.Contains(body, "<script>alert") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.ContainsAny(body, "\x1b\x07") {
			t.Fatalf("%s: the name is not escaped:\n%s", path, body)
		}
	}
}

// TestPagesWithoutSession go to the login page; unknown pages are 404
// pages; the server's root leads to the UI.
func TestPagesWithoutSession(t *testing.T) {
	w := startWeb(t)
	for path, login := range map[string]string{"/ui/": "/ui/login", "/ui/batches": "/ui/login?next=%2Fui%2Fbatches",
		"/ui/billing": "/ui/login?next=%2Fui%2Fbilling", "/ui/audit": "/ui/login?next=%2Fui%2Faudit"} {
		if resp, _ := w.do("GET", path, "", nil, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != login {
			t.Errorf("%s without a session: HTTP %d to %q, want %q", path, resp.StatusCode, resp.Header.Get("Location"), login)
		}
	}
	if resp, _ := w.do("GET", "/", "", nil, nil); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != ui.Prefix {
		t.Errorf("/: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookie := w.login(w.token).Value
	if resp, _ := w.do("GET", "/ui/nothing", cookie, nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown page: HTTP %d", resp.StatusCode)
	}
	if resp, _ := w.do("GET", "/ui/batches/999", cookie, nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown batch: HTTP %d", resp.StatusCode)
	}
	// The API is where it was.
	if _, err := w.admin.Whoami(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestLiveStreams: a batch page's stream sends the page's regions again
// when the batch changes (here, cancelled through the API), the summary
// and the jobs table of one moment in one event, with the change
// stream's index as its id, and ends once the batch is complete; a user
// holds a bounded number of streams; the server's shutdown ends them
// instead of waiting for them.
func TestLiveStreams(t *testing.T) {
	w := startWeb(t)
	cookie := w.login(w.token).Value
	id := w.batch("live") // no worker: it waits
	open := func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", w.base+"/ui/live?page="+url.QueryEscape("/ui/batches/"+itoa(id)), nil)
		req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: cookie})
		return http.DefaultClient.Do(req)
	}
	resp, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := make(chan string, 16)
	go func() {
		defer close(events)
		var ev strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			ev.Write(buf[:n])
			for {
				s := ev.String()
				i := strings.Index(s, "\n\n")
				if i < 0 {
					break
				}
				events <- s[:i]
				ev.Reset()
				ev.WriteString(s[i+2:])
			}
			if err != nil {
				return
			}
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			return e
		case <-time.After(20 * time.Second):
			t.Fatal("no event in 20 s")
		}
		return ""
	}
	type pageEvent struct {
		ID      uint64
		Regions map[string]string
		Done    bool
	}
	page := func() pageEvent {
		t.Helper()
		e := next()
		var pe pageEvent
		var data string
		for _, line := range strings.Split(e, "\n") {
			switch {
			case strings.HasPrefix(line, "id: "):
				pe.ID, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			case line == "event: page", strings.HasPrefix(line, "event:"):
				if line != "event: page" {
					t.Fatalf("want a page event:\n%s", e)
				}
			}
		}
		if err := json.Unmarshal([]byte(data), &pe); err != nil {
			t.Fatalf("page event %q: %v", data, err)
		}
		return pe
	}
	first := page()
	if first.ID == 0 || !strings.Contains(first.Regions["summary"], "0 of 1 jobs done") || !strings.Contains(first.Regions["summary"], ">running<") ||
		!strings.Contains(first.Regions["jobs"], `data-state="ready"`) || first.Done {
		t.Fatalf("first event: %+v", first)
	}
	if err := w.admin.CancelBatch(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	last := page()
	if !strings.Contains(last.Regions["summary"], ">cancelled<") || !strings.Contains(last.Regions["jobs"], `data-state="cancelled"`) ||
		strings.Contains(last.Regions["jobs"], `data-state="ready"`) || !last.Done || last.ID <= first.ID {
		t.Fatalf("after the cancel, one event with the summary and the table both cancelled, done, at a later index than %d: %+v", first.ID, last)
	}
	if _, ok := <-events; ok {
		t.Fatal("the stream goes on after the batch completed")
	}

	// Streams held by one user are bounded (a waiting batch keeps them
	// open).
	id = w.batch("waiting")
	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	for {
		r, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode != http.StatusOK {
			r.Body.Close()
			if r.StatusCode != http.StatusTooManyRequests || len(held) != 32 {
				t.Fatalf("stream %d: HTTP %d, want 429 after 32", len(held)+1, r.StatusCode)
			}
			break
		}
		held = append(held, r)
		if len(held) > 100 {
			t.Fatal("no bound on one user's live streams")
		}
	}
	// Shutdown ends them rather than waiting for its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with live streams open: %v", err)
	}
	if _, err := io.ReadAll(held[0].Body); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Logf("stream ended with %v", err)
	}
}
