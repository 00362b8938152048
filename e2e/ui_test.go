package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// The web UI in a real Chromium (Debian's, installed by
// scripts/test-deps.sh), driven with chromedp against a dev agent: live
// progress and log tails, costs equal to the API's, the roles of the API
// deciding what each user sees and may do, CSRF and cross-origin POSTs
// refused, hostile names inert, every form control labelled and every
// control reachable by keyboard. Screenshots of every page go to
// $DROVER_SCREENSHOT_DIR (make screenshots: docs/screenshots), else to the
// test's own directory.

// browser is one Chromium with one tab, and what it reported.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	dir  string // screenshots

	mu         sync.Mutex
	dialogs    []string
	exceptions []string
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("no Chromium, and not root to have scripts/test-deps.sh install it")
	}
	t.Fatal("no Chromium: scripts/test-deps.sh (make deps) installs Debian's chromium")
	return ""
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base}
	b.dir = os.Getenv("DROVER_SCREENSHOT_DIR")
	if b.dir == "" {
		b.dir = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The tab must exist before its events can be subscribed to; the
	// first action starts the browser, and must not run under a context
	// that ends before the browser should.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	exceptions := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.exceptions = append(b.exceptions, ev.ExceptionDetails.Text)
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs actions with a deadline.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a script (awaiting a promise it returns).
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: evaluate %.60q: %v", js, err)
	}
	return v
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+path), chromedp.WaitReady(chromedp.CSS("main h1")))
}

func (b *browser) location() string {
	return eval[string](b, "location.pathname + location.search + location.hash")
}

func (b *browser) exists(sel string) bool {
	return eval[int](b, fmt.Sprintf("document.querySelectorAll(%q).length", sel)) > 0
}

func (b *browser) text(sel string) string {
	return eval[string](b, fmt.Sprintf("(document.querySelector(%q) || {}).textContent || ''", sel))
}

// waitText waits until the element's text satisfies cond.
func (b *browser) waitText(what, sel string, limit time.Duration, cond func(string) bool) string {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		s := b.text(sel)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: %s still reads %q after %s", what, sel, s, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// login logs in with the one-click link (the token in the fragment).
func (b *browser) login(token string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base+"/ui/login#token="+url.QueryEscape(token)), chromedp.WaitReady(chromedp.CSS("nav[aria-label=Main]")))
	if loc := b.location(); loc != "/ui/" {
		b.t.Fatalf("after the login link the browser is at %q, want /ui/ (the token must leave the address bar)", loc)
	}
}

// logout logs out with the page's button.
func (b *browser) logout() {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS("form.who button")), chromedp.WaitReady(chromedp.CSS("#token")))
}

// cookie is the session cookie, checked for its flags.
func (b *browser) cookie() string {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "drover_session" {
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Path != "/ui/" {
				b.t.Fatalf("session cookie: HttpOnly %v, SameSite %q, path %q: want HttpOnly, Strict, /ui/", c.HTTPOnly, c.SameSite, c.Path)
			}
			return c.Value
		}
	}
	return ""
}

// shot saves a screenshot of the whole page.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// checkPage checks the page's accessibility rules: a label for every form
// control, text for every button, and a tab order that reaches every
// control; and that no script raised an exception or a dialog.
func (b *browser) checkPage(name string) {
	b.t.Helper()
	type result struct {
		Unlabelled []string `json:"unlabelled"`
		N          int      `json:"n"`
	}
	res := eval[result](b, `(() => {
	  const unlabelled = [];
	  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
	    if (!(el.labels && el.labels.length) && !el.getAttribute('aria-label')) unlabelled.push(el.outerHTML.slice(0, 100));
	  }
	  for (const el of document.querySelectorAll('button')) {
	    if (!el.textContent.trim() && !el.getAttribute('aria-label')) unlabelled.push(el.outerHTML.slice(0, 100));
	  }
	  // Controls are named by what they are, not marked: a live page may
	  // swap a region (and its controls) while the Tab key walks it.
	  window.__controls = () => [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"])')]
	    .filter(e => !e.disabled && e.getClientRects().length > 0);
	  const sig = e => [e.tagName, e.id, e.getAttribute('href'), e.getAttribute('name'), e.getAttribute('aria-label'), e.textContent.trim().slice(0, 40)].join('|');
	  window.__controlName = e => { const same = window.__controls().filter(x => sig(x) === sig(e)); return sig(e) + '#' + same.indexOf(e); };
	  const all = window.__controls();
	  if (document.activeElement) document.activeElement.blur();
	  window.scrollTo(0, 0);
	  return {unlabelled, n: all.length};
	})()`)
	if len(res.Unlabelled) > 0 {
		b.t.Errorf("page %s: form controls without a label: %v", name, res.Unlabelled)
	}
	reached := map[string]bool{}
	for i := 0; i < res.N+2 && len(reached) < res.N; i++ {
		b.do(chromedp.KeyEvent(kb.Tab))
		at := eval[string](b, `(document.activeElement && document.activeElement !== document.body && window.__controls().includes(document.activeElement)) ? window.__controlName(document.activeElement) : ''`)
		if at != "" {
			reached[at] = true
		}
	}
	if len(reached) < res.N {
		names := eval[[]string](b, `window.__controls().map(e => window.__controlName(e))`)
		var left []string
		for _, n := range names {
			if !reached[n] {
				left = append(left, n)
			}
		}
		b.t.Errorf("page %s: the Tab key reached %d of %d controls; not: %v", name, len(reached), res.N, left)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) > 0 || len(b.exceptions) > 0 {
		b.t.Fatalf("page %s: a dialog opened (%q) or a script failed (%q)", name, b.dialogs, b.exceptions)
	}
}

func TestWebUI(t *testing.T) {
	a := startAgent(t, "", "", "-clusters", "us-east1/a:1x4,us-west1/b:1x4", "-worker-memory", "2GiB")
	admin := a.client()
	ctx := context.Background()

	// A project with a manager, a viewer and a member.
	tokens := map[string]string{}
	for _, name := range []string{"mia", "vic", "mem"} {
		u, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		tokens[name] = u.Token
	}
	if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "lab", Members: []string{"mia", "vic", "mem"}}); err != nil {
		t.Fatal(err)
	}
	for user, role := range map[string]string{"mia": "manager", "vic": "viewer"} {
		if err := admin.SetRole(ctx, "lab", user, role); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.PutQueue(ctx, &api.Queue{Path: "research", Guarantee: api.Quota{CPU: 6}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutQueue(ctx, &api.Queue{Path: "research/lab", Guarantee: api.Quota{CPU: 4}, BillingProjects: []string{"lab"}}); err != nil {
		t.Fatal(err)
	}
	client := func(user string) *api.Client { return api.NewClient(a.addr, tokens[user]) }
	submit := func(c *api.Client, name string, jobs ...api.JobSpec) int64 {
		t.Helper()
		for i := range jobs {
			jobs[i].JobID = int64(i + 1)
		}
		resp, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: name, BillingProject: "lab", Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	sh := func(script string, cpu float64) api.JobSpec {
		return api.JobSpec{Command: []string{"sh", "-c", script}, CPU: cpu, Memory: 64 << 20}
	}

	// A job whose log grows for ten seconds, and a batch that progresses
	// for about as long (each of its jobs takes most of a worker).
	logBatch := submit(client("mem"), "log tail", sh(`for i in $(seq 1 40); do echo "line-$i"; sleep 0.25; done`, 0.25))
	var steps []api.JobSpec
	for range 10 {
		steps = append(steps, sh("sleep 1", 3.5))
	}
	progress := submit(client("mem"), "progress", steps...)

	b := newBrowser(t, a.addr)
	b.do(chromedp.Navigate(a.addr+"/ui/login"), chromedp.WaitReady(chromedp.CSS("#token")))
	b.shot("login")
	b.checkPage("login")
	b.login(a.token)
	sessionCookie := b.cookie()
	if sessionCookie == "" || strings.Contains(sessionCookie, a.token) {
		t.Fatal("the session cookie must hold a session token of its own, not the token typed")
	}

	// Live progress: the counts change on screen, and the page is never
	// reloaded (a marker set in it survives).
	b.open(fmt.Sprintf("/ui/batches/%d", progress))
	eval[bool](b, `window.__noReload = true`)
	first := b.text("#batch-done")
	b.waitText("batch progress", "#batch-done", 30*time.Second, func(s string) bool { return s != "" && s != first })
	if !eval[bool](b, `window.__noReload === true`) {
		t.Fatal("the batch page reloaded instead of updating in place")
	}
	b.waitText("batch completion", "#batch-state", 60*time.Second, func(s string) bool { return s == "success" })
	b.shot("batch")
	b.checkPage("batch")
	// The same page on a phone, in the dark (TestWebUIPhoneAndDark checks
	// every page so).
	b.colorScheme("dark")
	b.do(chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
	b.shot("batch-phone-dark")
	b.colorScheme("")
	b.do(chromedp.EmulateViewport(1280, 900))

	// The log tail follows the running job.
	waitFor(t, "the log job to run", 30*time.Second, func() bool {
		j, err := admin.GetJob(ctx, logBatch, 1)
		return err == nil && j.State == api.JobRunning
	})
	b.open(fmt.Sprintf("/ui/batches/%d/jobs/1", logBatch))
	eval[bool](b, `window.__noReload = true`)
	b.waitText("log tail", "#log", 30*time.Second, func(s string) bool { return strings.Contains(s, "line-40") })
	if !eval[bool](b, `window.__noReload === true`) {
		t.Fatal("the job page reloaded instead of following the log")
	}
	b.waitText("job end", "#log-status", 30*time.Second, func(s string) bool { return strings.Contains(s, "ended") })
	b.shot("job")
	b.checkPage("job")

	// A hostile name renders as text; no script of it runs.
	hostile := `<img src=x onerror=alert(1)>`
	xss := submit(client("mem"), hostile, api.JobSpec{Name: "\x1b[31mred\x1b[0m<script>alert(2)</script>", Command: []string{"echo", "\x1b]0;pwned\x07"}, CPU: 0.25, Memory: 64 << 20,
		Attributes: map[string]string{"note": `"><script>alert(3)</script>`}})
	if _, err := admin.WaitBatch(ctx, xss, nil); err != nil {
		t.Fatal(err)
	}
	for path, text := range map[string]string{
		"/ui/batches": hostile, fmt.Sprintf("/ui/batches/%d", xss): hostile,
		fmt.Sprintf("/ui/batches/%d/jobs/1", xss): "<script>alert(2)</script>",
	} {
		b.open(path)
		if !eval[bool](b, fmt.Sprintf(`document.body.textContent.includes(%q) && document.querySelectorAll('main img, main script').length === 0`, text)) {
			t.Errorf("%s: %q is not shown as text, or an element of it was made", path, text)
		}
	}
	b.open(fmt.Sprintf("/ui/batches/%d/jobs/1", xss))
	if s := b.text("main"); strings.Contains(s, "\x1b") || strings.Contains(s, "\x07") {
		t.Error("terminal escapes of a job reach the page as they are")
	}
	b.mu.Lock()
	if len(b.dialogs) > 0 {
		t.Errorf("a script of a hostile name ran: dialogs %q", b.dialogs)
	}
	b.mu.Unlock()

	// Billing: the chart's amount for the last day is the API's, to the cent.
	for _, id := range []int64{logBatch, progress} {
		if _, err := admin.WaitBatch(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	b.open("/ui/billing")
	day := eval[string](b, `(() => { const d = [...document.querySelectorAll('section[data-project=lab] g.day')].pop(); return d ? d.getAttribute('data-day') : ''; })()`)
	shown := eval[string](b, `(() => { const d = [...document.querySelectorAll('section[data-project=lab] g.day')].pop(); return d ? d.getAttribute('data-cost') : ''; })()`)
	cost, err := admin.ProjectCost(ctx, "lab", api.CostQuery{From: day, To: day, By: api.CostByDay})
	if err != nil {
		t.Fatal(err)
	}
	var want money.Amount
	for _, r := range cost.Rows {
		want = want.Add(r.Cost).Add(r.Running)
	}
	if want == 0 {
		t.Fatal("the project cost nothing: the dev agent's example rates are not set")
	}
	if shown != want.Display() {
		t.Fatalf("billing chart shows %s for %s; the API says %s (%s)", shown, day, want, want.Display())
	}
	b.shot("billing")
	b.checkPage("billing")

	// Pages an admin sees.
	b.open("/ui/batches")
	b.shot("batches")
	b.checkPage("batches")
	b.open("/ui/queues")
	if !b.exists(`tr[data-queue="research/lab"]`) {
		t.Error("the queues page does not show research/lab")
	}
	b.shot("queues")
	b.checkPage("queues")
	b.open("/ui/autoscaler")
	b.checkPage("autoscaler")
	b.open("/ui/workers")
	if !b.exists(`tr[data-worker]`) {
		t.Error("the workers page lists no worker")
	}
	b.shot("workers")
	b.checkPage("workers")
	b.open("/ui/slo")
	b.shot("slo")
	b.checkPage("slo")
	b.open("/ui/audit")
	if !strings.Contains(b.text("main"), "/api/v1/billing-projects") {
		t.Error("the audit page does not show the admin's requests")
	}
	b.shot("audit")
	b.checkPage("audit")

	// The admin takes cluster b out of service from the UI, with a reason.
	b.open("/ui/clusters")
	b.shot("clusters")
	b.checkPage("clusters")
	// Disabling asks first, naming what will stop; the question's answer
	// is keyboard-reachable.
	b.do(chromedp.SetValue(chromedp.CSS("#disable-cluster"), "b"), chromedp.SendKeys(chromedp.CSS("#disable-reason"), "ui maintenance"),
		chromedp.Click(chromedp.CSS("#disable")), chromedp.WaitReady(chromedp.CSS("#confirm")))
	if q := b.text("main"); !strings.Contains(q, "Take cluster b of region us-west1 out of service?") || !strings.Contains(q, "run to the end") {
		t.Errorf("the question before disabling names not what happens:\n%s", q)
	}
	if out := a.drover(a.token, "cluster", "list").must(t, 0); strings.Contains(out.stdout, "ui maintenance") {
		t.Fatal("the cluster was disabled before the question was answered")
	}
	b.shot("confirm")
	b.checkPage("confirm")
	b.do(chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitReady(chromedp.CSS(`#enable-cluster option[value="b"]`)))
	out := a.drover(a.token, "cluster", "list").must(t, 0)
	if !strings.Contains(out.stdout, "ui maintenance") {
		t.Fatalf("drover cluster list does not show the reason given in the UI:\n%s", out.stdout)
	}
	b.do(chromedp.SetValue(chromedp.CSS("#enable-cluster"), "b"), chromedp.Click(chromedp.CSS("#enable")), chromedp.WaitReady(chromedp.CSS(`#disable-cluster option[value="b"]`)))

	// A POST without the CSRF token, or from another site, is refused
	// even with a valid session; the same POST from the UI's own page
	// with its token goes through.
	long := submit(client("mem"), "long", sh("sleep 300", 0.25))
	cancelPost := func(cookie, csrf string, header map[string]string) int {
		t.Helper()
		form := url.Values{"confirm": {"yes"}}
		if csrf != "" {
			form.Set("csrf", csrf)
		}
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/ui/batches/%d/cancel", a.addr, long), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "drover_session", Value: cookie})
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	csrf := eval[string](b, `document.querySelector('form.who input[name=csrf]').value`)
	if code := cancelPost(sessionCookie, "", nil); code != http.StatusForbidden {
		t.Errorf("a POST without the CSRF token: HTTP %d, want 403", code)
	}
	if code := cancelPost(sessionCookie, csrf, map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("a POST from another origin: HTTP %d, want 403", code)
	}
	if bt, _ := admin.GetBatch(ctx, long); bt.Cancelled {
		t.Fatal("a refused POST cancelled the batch")
	}
	b.logout()
	resp, err := http.Get(a.addr + "/ui/batches") // no cookie: to the login page
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := cancelPost(sessionCookie, csrf, nil); code != http.StatusUnauthorized {
		t.Errorf("a POST with the logged-out session: HTTP %d, want 401 (logout revokes the session's token)", code)
	}
	if bt, _ := admin.GetBatch(ctx, long); bt.Cancelled {
		t.Fatal("a logged-out session cancelled the batch")
	}

	// The viewer sees no Cancel, and its forged POST (its own session,
	// a valid CSRF token) is refused by the API's rule: 403.
	b.login(tokens["vic"])
	b.open(fmt.Sprintf("/ui/batches/%d", long))
	if b.exists("#cancel") {
		t.Error("a viewer sees the Cancel button")
	}
	status := eval[int](b, fmt.Sprintf(`(async () => {
	  const csrf = document.querySelector('form.who input[name=csrf]').value;
	  const r = await fetch('/ui/batches/%d/cancel', {method: 'POST', body: new URLSearchParams({csrf, confirm: 'yes'}), redirect: 'manual'});
	  return r.status;
	})()`, long))
	if status != http.StatusForbidden {
		t.Errorf("the viewer's forged cancel: HTTP %d, want 403", status)
	}
	if b.exists(`a[href="/ui/audit"]`) {
		t.Error("a viewer sees the audit page's link")
	}
	b.logout()

	// A member sees no cluster form.
	b.login(tokens["mem"])
	b.open("/ui/clusters")
	if b.exists(`form[action$="/disable"]`) || b.exists(`form[action$="/enable"]`) {
		t.Error("a member sees the form that disables clusters")
	}
	b.logout()

	// The manager sees Cancel and uses it.
	b.login(tokens["mia"])
	waitFor(t, "the long job to run", 30*time.Second, func() bool {
		j, err := admin.GetJob(ctx, long, 1)
		return err == nil && j.State == api.JobRunning
	})
	b.open(fmt.Sprintf("/ui/batches/%d", long))
	b.do(chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitReady(chromedp.CSS("#confirm")))
	if q := b.text("main"); !strings.Contains(q, "1 running job is stopped now") {
		t.Errorf("the question before cancelling does not say what stops:\n%s", q)
	}
	if bt, _ := admin.GetBatch(ctx, long); bt.Cancelled {
		t.Fatal("the batch was cancelled before the question was answered")
	}
	// Answered from the keyboard: the answer has the focus.
	b.do(chromedp.KeyEvent(kb.Enter), chromedp.WaitReady(chromedp.CSS("main h1")))
	waitFor(t, "the manager's cancel", 10*time.Second, func() bool {
		bt, err := admin.GetBatch(ctx, long)
		return err == nil && bt.Cancelled
	})
	// The form's answer is a new page: wait for it (the old one may
	// still be there, or none, while it loads).
	b.waitText("the page after Cancel", "#batch-state", 10*time.Second, func(s string) bool { return strings.Contains(s, "cancelled") })

	// The autoscaler's page on an agent that autoscales: machines by
	// state and what they cost against the cap.
	as := startAgent(t, "", "", "-autoscale", "-clusters", "us-east1/a:2x2", "-idle-timeout", "30s")
	if _, err := as.client().CreateBatch(ctx, &api.CreateBatchRequest{Name: "grow", BillingProject: "default",
		Jobs: []api.JobSpec{{JobID: 1, Count: 4, Command: []string{"sleep", "2"}, CPU: 1, Memory: 64 << 20}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "autoscaled machines", 60*time.Second, func() bool {
		st, err := as.client().AutoscalerStatus(ctx)
		return err == nil && st.Nodes > 0 && st.SpendPerHour > 0
	})
	b.base = as.addr
	b.login(as.token)
	b.open("/ui/autoscaler")
	if s := b.text("#spend-now"); s == "" || s == "$0.0000/h" {
		t.Errorf("the autoscaler page shows spend %q with machines running", s)
	}
	if !strings.Contains(b.text("main"), "active") && !strings.Contains(b.text("main"), "launching") {
		t.Error("the autoscaler page shows no machine by state")
	}
	b.shot("autoscaler")
	b.checkPage("autoscaler")
	b.open("/ui/machines")
	if !b.exists(`tr[data-machine]`) {
		t.Error("the machines page lists no machine on an agent that autoscaled")
	}
	b.shot("machines")
	b.checkPage("machines")
	t.Logf("screenshots in %s", b.dir)
}
