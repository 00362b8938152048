// Package ui is drover's web UI, served by every server under /ui/: pages
// rendered with html/template from assets embedded in the binary, reading
// and changing the cluster only through the server's own HTTP API, called
// in-process with the session's token. What a user may see or do is
// therefore decided where the API decides it (its route table and its
// handlers' role checks), never by a template.
//
// A session is a token of its own, made at login from the token the user
// typed (its child: it expires no later, and dies with it), carried in an
// HttpOnly, SameSite=Strict cookie (Secure under TLS). Every form carries
// a CSRF token derived from the session token, and every request that
// changes something must also pass net/http's cross-origin protection
// (Sec-Fetch-Site, Origin). Pages send a Content-Security-Policy that
// allows scripts and styles from /ui/static/ only: no inline script runs.
package ui

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the UI is served.
const Prefix = "/ui/"

// Session settings.
const (
	// CookieName is the session cookie's name.
	CookieName = "drover_session"
	// SessionTTL is how long a session lives at most (less when the
	// token it was made from expires sooner).
	SessionTTL = 12 * time.Hour
	// SessionTokenName names the tokens sessions are made of.
	SessionTokenName = "ui-session"
	// MaxSessions bounds the sessions one user keeps: a login beyond it
	// revokes the oldest (tokens are bounded per user, and a user must
	// keep room for the CLI's).
	MaxSessions = 8
)

// Deps is what the UI is built from.
type Deps struct {
	// API is the server's API handler; the UI calls it in-process.
	API http.Handler
	// Access says who may call an API route ("public", "user", "admin"),
	// from the API's route table: the UI shows a form only to those the
	// route would let through.
	Access func(pattern string) string
	// Changes returns a channel closed the next time the server applies
	// log entries: live pages wait on it.
	Changes func() <-chan struct{}
	// TLS: the server serves HTTPS (session cookies are then Secure).
	TLS bool
	Log *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// StreamLife is how long a live stream lasts before the browser
	// reconnects to it (0: 10 minutes).
	StreamLife time.Duration
}

// UI serves the web pages.
type UI struct {
	d      Deps
	pages  map[string]*template.Template
	origin *http.CrossOriginProtection
	now    func() time.Time
	closed chan struct{} // closed when the server shuts down: streams end

	mu      sync.Mutex
	streams int            // live streams open now
	byUser  map[string]int // of them, each user's
	closing sync.Once
}

// The live streams (server-sent events) one server holds open at once,
// and one user.
const (
	maxStreams        = 1000
	maxStreamsPerUser = 32
)

// Close ends the live streams (the server is shutting down: an open
// stream would hold its graceful shutdown until the deadline).
func (u *UI) Close() { u.closing.Do(func() { close(u.closed) }) }

// New builds the UI.
func New(d Deps) (*UI, error) {
	if d.API == nil || d.Access == nil || d.Changes == nil || d.Log == nil {
		return nil, errors.New("ui: API, Access, Changes and Log are required")
	}
	u := &UI{d: d, now: d.Now, origin: http.NewCrossOriginProtection(), closed: make(chan struct{}), byUser: map[string]int{}}
	if u.now == nil {
		u.now = time.Now
	}
	u.origin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.fail(w, r, nil, &api.Error{StatusCode: http.StatusForbidden, Message: "cross-origin request refused: a form of this UI must be sent from its own pages"})
	}))
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	u.pages = pages
	return u, nil
}

// parseTemplates parses each page with the layout and the shared
// fragments.
func parseTemplates() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	base := template.New("").Funcs(funcs)
	var shared []string
	var pages []string
	for _, n := range names {
		if strings.HasPrefix(n, "templates/_") {
			shared = append(shared, n)
		} else {
			pages = append(pages, n)
		}
	}
	base, err = base.ParseFS(templateFS, shared...)
	if err != nil {
		return nil, fmt.Errorf("ui: parse templates: %w", err)
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, p)
		if err != nil {
			return nil, fmt.Errorf("ui: parse %s: %w", p, err)
		}
		out[strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")] = t
	}
	return out, nil
}

// Handler serves everything under Prefix.
func (u *UI) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticFiles(http.FileServerFS(static))))
	mux.HandleFunc("GET /ui/login", u.loginPage)
	mux.Handle("POST /ui/login", u.origin.Handler(http.HandlerFunc(u.login)))
	mux.HandleFunc("POST /ui/logout", u.session(u.logout))
	mux.HandleFunc("GET /ui/{$}", u.session(u.batchesPage))
	mux.HandleFunc("GET /ui/batches", u.session(u.batchesPage))
	mux.HandleFunc("GET /ui/batches/{id}", u.session(u.page("batch", (*UI).batchData)))
	mux.HandleFunc("GET /ui/batches/{id}/cancel", u.session(u.cancelConfirm))
	mux.HandleFunc("POST /ui/batches/{id}/cancel", u.session(u.cancelBatch))
	mux.HandleFunc("GET /ui/batches/{id}/groups/{group}/cancel", u.session(u.cancelGroupConfirm))
	mux.HandleFunc("POST /ui/batches/{id}/groups/{group}/cancel", u.session(u.cancelGroup))
	mux.HandleFunc("GET /ui/batches/{id}/efficiency", u.session(u.efficiencyPage))
	mux.HandleFunc("GET /ui/batches/{id}/retry", u.session(u.retryConfirm))
	mux.HandleFunc("POST /ui/batches/{id}/retry", u.session(u.retryBatch))
	mux.HandleFunc("GET /ui/batches/{id}/jobs/{job}/restart", u.session(u.restartConfirm))
	mux.HandleFunc("POST /ui/batches/{id}/jobs/{job}/restart", u.session(u.restartJob))
	mux.HandleFunc("GET /ui/live", u.session(u.livePageStream))
	mux.HandleFunc("GET /ui/batches/{id}/jobs/{job}", u.session(u.jobPage))
	mux.HandleFunc("GET /ui/batches/{id}/jobs/{job}/log", u.session(u.jobLog))
	mux.HandleFunc("GET /ui/batches/{id}/jobs/{job}/log/live", u.session(u.jobLogLive))
	mux.HandleFunc("GET /ui/billing", u.session(u.page("billing", (*UI).billingData)))
	mux.HandleFunc("GET /ui/efficiency", u.session(u.page("period-efficiency", (*UI).periodEfficiencyData)))
	mux.HandleFunc("GET /ui/clusters", u.session(u.page("clusters", (*UI).clustersData)))
	mux.HandleFunc("POST /ui/clusters/{name}/{op}", u.session(u.clusterState))
	mux.HandleFunc("POST /ui/clusters/{op}", u.session(u.clusterState))
	mux.HandleFunc("GET /ui/queues", u.session(u.page("queues", (*UI).queuesData)))
	mux.HandleFunc("GET /ui/slo", u.session(u.sloPage))
	mux.HandleFunc("GET /ui/autoscaler", u.session(u.page("autoscaler", (*UI).autoscalerData)))
	mux.HandleFunc("GET /ui/audit", u.session(u.auditPage))
	mux.HandleFunc("GET /ui/workers", u.session(u.page("workers", (*UI).workersData)))
	mux.HandleFunc("GET /ui/machines", u.session(u.page("machines", (*UI).machinesData)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		if _, pattern := mux.Handler(r); pattern == "" {
			// A logged-in user gets the page with the navigation; no
			// one is sent to log in for a page that does not exist.
			w.Header().Set("Cache-Control", "no-store")
			u.fail(w, r, u.quietSession(r), &api.Error{StatusCode: http.StatusNotFound, Message: "no such page: " + r.URL.Path})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// csp allows scripts, styles and images from the UI's own origin only:
// no inline script or style, no other site, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// staticFiles lets the embedded assets be cached for a while (they change
// only with the binary).
func staticFiles(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// session is who a request comes from: the session token, the client
// that calls the API with it, and the user.
type session struct {
	token    string
	accessor string // the session token's accessor (logout revokes it)
	client   *api.Client
	me       *api.User
	csrf     string
}

type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session)

// cookieSession is the session a request's cookie names, not yet
// authenticated: nil when there is no cookie, or (bad) one that is no
// session of this UI.
func cookieSession(r *http.Request) (s *session, bad bool) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil, false
	}
	accessor, tok, ok := strings.Cut(c.Value, ".")
	if !ok || tok == "" || len(c.Value) > 2*maxTokenBytes {
		return nil, true
	}
	return &session{token: tok, accessor: accessor, csrf: csrfToken(tok)}, false
}

// authenticate asks the API whose session it is.
func (u *UI) authenticate(r *http.Request, s *session) error {
	s.client = u.client(s.token)
	me, err := s.client.Whoami(withRemote(r.Context(), r))
	if err != nil {
		return err
	}
	s.me = me
	return nil
}

// quietSession is the request's session if its cookie names a live one,
// else nil: for pages anyone may see (a 404), which show the navigation
// to a logged-in user and send no one to log in.
func (u *UI) quietSession(r *http.Request) *session {
	s, _ := cookieSession(r)
	if s == nil || u.authenticate(r, s) != nil {
		return nil
	}
	return s
}

// session authenticates a page's request with its cookie (through the
// API: an expired or revoked session token is refused there) and, for a
// request that changes something, checks the CSRF token and the origin.
func (u *UI) session(h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s, bad := cookieSession(r)
		if s == nil {
			if bad {
				clearCookie(w, u.d.TLS)
			}
			u.toLogin(w, r, bad)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := u.origin.Check(r); err != nil {
				u.fail(w, r, nil, &api.Error{StatusCode: http.StatusForbidden, Message: "cross-origin request refused: " + err.Error()})
				return
			}
			if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) {
				u.fail(w, r, nil, &api.Error{StatusCode: http.StatusForbidden, Message: "the form's CSRF token is missing or wrong: reload the page and send it again"})
				return
			}
		}
		if err := u.authenticate(r, s); err != nil {
			if api.IsStatus(err, http.StatusUnauthorized) {
				clearCookie(w, u.d.TLS)
				u.toLogin(w, r, true)
				return
			}
			u.fail(w, r, nil, err)
			return
		}
		h(w, r, s)
	}
}

// toLogin sends a browser to the login page, which brings it back to the
// page it asked for (next) and, when its session cookie was refused
// (ended), says why in words. A live stream, or a form sent, gets a 401
// with the same words.
func (u *UI) toLogin(w http.ResponseWriter, r *http.Request, ended bool) {
	if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/live") {
		http.Redirect(w, r, loginURL(r.URL.RequestURI(), ended), http.StatusSeeOther)
		return
	}
	msg := "Not logged in: log in first."
	if ended {
		msg = sessionEnded
	}
	u.fail(w, r, nil, &api.Error{StatusCode: http.StatusUnauthorized, Message: msg})
}

// loginURL is the login page that leads to next, saying the session
// ended when it did.
func loginURL(next string, ended bool) string {
	v := url.Values{}
	if ended {
		v.Set("ended", "1")
	}
	if next = safeNext(next); next != Prefix {
		v.Set("next", next)
	}
	if len(v) == 0 {
		return "/ui/login"
	}
	return "/ui/login?" + v.Encode()
}

// sessionEnded says why a session cookie was refused: the API only knows
// the token is no longer valid, and these are the ways it stops being.
var sessionEnded = fmt.Sprintf("Your session ended. drover keeps %d sessions per user and ends the oldest when you, or someone with your token, "+
	"log in once more; a session also ends when it expires (after %d hours, or sooner with the token it was made from), when you log out, "+
	"or when the token you logged in with is revoked. Log in again.", MaxSessions, int(SessionTTL.Hours()))

var errorsAs = errors.As

// csrfToken is the CSRF token of a session: a MAC of a fixed message
// under the session token, so any server of the cluster can check it and
// a page of another site, which cannot read the cookie, cannot make it.
func csrfToken(sessionToken string) string {
	m := hmac.New(sha256.New, []byte(sessionToken))
	m.Write([]byte("drover-ui-csrf-v1"))
	return hex.EncodeToString(m.Sum(nil))
}

func setCookie(w http.ResponseWriter, value string, expires time.Time, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: Prefix, Expires: expires, MaxAge: int(time.Until(expires).Seconds()),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

func clearCookie(w http.ResponseWriter, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// client is an API client that calls this server's API handler in-process
// with the session's token.
func (u *UI) client(token string) *api.Client {
	c := api.NewClientHTTP("http://drover-ui.invalid", token, &http.Client{Transport: inProcess{h: u.d.API}})
	c.JSONOnly = true
	c.RetryUnavailable = 3 * time.Second // an election: wait a little, then say so
	c.RetryUnreachable = 0
	c.AttemptTimeout = 15 * time.Second
	return c
}

type remoteKey struct{}

// withRemote carries the browser's address into the API's requests (its
// audit log and rate limits see who called).
func withRemote(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, remoteKey{}, r.RemoteAddr)
}

// inProcess is an http.RoundTripper that serves requests with a handler
// in this process, streaming the response body through a pipe.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr, _ = req.Context().Value(remoteKey{}).(string)
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:0"
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	rw := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				// http.ErrAbortHandler too: the answer is cut short.
				rw.fail(fmt.Errorf("ui: the API's answer was cut short: %v", p))
				return
			}
			rw.start(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(rw, r)
	}()
	select {
	case <-rw.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	if rw.err != nil {
		return nil, rw.err
	}
	return &http.Response{StatusCode: rw.code, Status: http.StatusText(rw.code), Header: rw.sent, Body: pr, Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, ContentLength: -1}, nil
}

// pipeWriter is the ResponseWriter of an in-process request.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	code   int
	err    error
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) start(code int) {
	w.once.Do(func() {
		w.code, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) fail(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
	w.body.CloseWithError(err)
}

func (w *pipeWriter) WriteHeader(code int) { w.start(code) }

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.body.Write(p)
}

// Flush: the pipe has no buffer to flush.
func (w *pipeWriter) Flush() {}

// render writes a page.
func (u *UI) render(w http.ResponseWriter, r *http.Request, s *session, code int, name string, data map[string]any) {
	t := u.pages[name]
	if t == nil {
		u.d.Log.Error("ui: no such template", "name", name)
		http.Error(w, "no such page", http.StatusInternalServerError)
		return
	}
	if data == nil {
		data = map[string]any{}
	}
	u.pageData(data, s, name)
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		u.d.Log.Error("ui: render", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// pageData adds what every page's template reads: the page, the user,
// the session's CSRF token.
func (u *UI) pageData(data map[string]any, s *session, name string) {
	data["Page"] = name
	if s != nil {
		data["Me"] = s.me
		data["CSRF"] = s.csrf
		data["CanAudit"] = u.may(s, "GET /api/v1/audit")
		data["CanWorkers"] = u.may(s, "GET /api/v1/instances")
	}
}

// may reports whether the API's route table lets the session's user call
// a route (the handler may still refuse by a project role).
func (u *UI) may(s *session, pattern string) bool {
	switch u.d.Access(pattern) {
	case "public", "user":
		return s.me != nil
	case "admin":
		return s.me != nil && s.me.Admin
	}
	return false
}

// fail answers an error as a page, with the API's status and message.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	code, msg := http.StatusInternalServerError, err.Error()
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		code, msg = ae.StatusCode, ae.Message
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code, msg = http.StatusServiceUnavailable, "the server did not answer in time: "+err.Error()
	}
	if code >= 500 {
		u.d.Log.Warn("ui: request failed", "path", r.URL.Path, "code", code, "err", err)
	}
	u.render(w, r, s, code, "error", map[string]any{"Title": http.StatusText(code), "Code": code, "Message": msg})
}
