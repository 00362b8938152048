package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/drover-sched/drover/api"
)

// The web UI on a phone and in the dark: every page (each the
// navigation links to, a batch complete, cancelled and running, its
// cancel confirmation, jobs with and without a preempted attempt, the
// login page, a 404) at 390×844, an iPhone's viewport, fits its width (a
// wide table scrolls inside its own box, never the page), splits no
// name, code, ID or time across lines, keeps its tables tables in the
// accessibility tree, draws every state in a colour of its own, and
// passes axe-core (https://github.com/dequelabs/axe-core, installed into
// .tools/axe by scripts/test-deps.sh) with no serious or critical
// violation, in the light scheme and in prefers-color-scheme: dark,
// where axe's color-contrast checks every text again. The billing
// chart's last day, today, is on screen. Screenshots of each page in both
// schemes go where TestWebUI's go (phone-NAME.png, phone-NAME-dark.png).

// axeSource is axe-core's script, as scripts/test-deps.sh installs it.
func axeSource(t *testing.T) string {
	t.Helper()
	path := filepath.Join("..", ".tools", "axe", "node_modules", "axe-core", "axe.min.js")
	src, err := os.ReadFile(path)
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("no axe-core (%v), and not root to have scripts/test-deps.sh install it", err)
		}
		t.Fatalf("no axe-core: scripts/test-deps.sh (make deps) installs it: %v", err)
	}
	return string(src)
}

// axeViolation is one rule axe found broken, and where.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

type axeResult struct {
	Violations []axeViolation `json:"violations"`
	// Contrast: how many elements axe's color-contrast checked and found
	// readable, and how many it could not decide (text over an image, a
	// gradient, or hidden behind another element).
	ContrastPassed     int      `json:"contrastPassed"`
	ContrastIncomplete []string `json:"contrastIncomplete"`
}

// axe runs axe-core on the page. The script is injected through the
// DevTools protocol, which the page's Content-Security-Policy does not
// govern (the page itself may run no script but its own).
func (b *browser) axe(src string) axeResult {
	b.t.Helper()
	if !eval[bool](b, `typeof window.axe === 'object'`) {
		ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](src+"\n;undefined")); err != nil {
			b.t.Fatalf("inject axe-core: %v", err)
		}
	}
	return eval[axeResult](b, `(async () => {
	  const r = await axe.run(document, {resultTypes: ['violations', 'incomplete']});
	  const where = n => n.target.join(' ') + ': ' + (n.failureSummary || '').replace(/\s+/g, ' ').slice(0, 240);
	  const cc = r.passes.find(p => p.id === 'color-contrast');
	  const ci = r.incomplete.find(p => p.id === 'color-contrast');
	  return {
	    violations: r.violations.map(v => ({id: v.id, impact: v.impact || '', help: v.help, nodes: v.nodes.slice(0, 8).map(where)})),
	    contrastPassed: cc ? cc.nodes.length : 0,
	    contrastIncomplete: ci ? ci.nodes.map(n => n.target.join(' ') + ': ' + (n.any.map(c => c.message).join('; '))) : [],
	  };
	})()`)
}

// colorScheme sets prefers-color-scheme ("": the browser's own).
func (b *browser) colorScheme(scheme string) {
	b.t.Helper()
	var features []*emulation.MediaFeature
	if scheme != "" {
		features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features}); err != nil {
		b.t.Fatal(err)
	}
}

// phoneWidth is the viewport's width on the phone (an iPhone 12 to 15's).
const phoneWidth, phoneHeight = 390, 844

// checkPhone checks the page as a phone shows it: no sideways scrolling
// of the page, no word of a name, code, ID, link or heading split across
// lines, and every table still a table in the accessibility tree.
func (b *browser) checkPhone(name string) {
	b.t.Helper()
	type fit struct {
		ScrollWidth int      `json:"scrollWidth"`
		InnerWidth  int      `json:"innerWidth"`
		Wide        []string `json:"wide"`
		Split       []string `json:"split"`
		Tables      int      `json:"tables"`
	}
	f := eval[fit](b, `(() => {
	  const desc = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.classList.length ? '.' + [...e.classList].join('.') : '');
	  const vw = document.documentElement.clientWidth;
	  // The elements that reach past the viewport, outermost first, less
	  // those inside a box that scrolls (they are meant to).
	  const clipped = e => { for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) { const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; } return false; };
	  const wide = [];
	  for (const e of document.body.querySelectorAll('*')) {
	    if (wide.length >= 10) break;
	    const r = e.getBoundingClientRect();
	    if (r.width > 0 && r.right > vw + 0.5 && !clipped(e) && !wide.some(w => w.el.contains(e))) wide.push({el: e, s: desc(e) + ' right at ' + Math.round(r.right)});
	  }
	  // Words (runs of non-space) the browser drew on more than one line:
	  // none of a name, code, ID, place, time, amount or link (a table
	  // cell holds one); prose (headings, a table's last column, notes)
	  // may break after a hyphen or a slash, never inside a word.
	  const split = new Set();
	  const strict = '.name, code:not(.cmd), a, .state, time, .nowrap, th, dt';
	  const prose = 'h1, h2, h3, td:last-child, td.muted, td .muted, .reason, tr.lines td';
	  const lines = (n, from, to) => {
	    const r = document.createRange();
	    r.setStart(n, from); r.setEnd(n, to);
	    return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size;
	  };
	  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	  for (let n; (n = walk.nextNode());) {
	    const el = n.parentElement;
	    if (!el.closest('main, header') || el.closest('.visually-hidden, pre, code.cmd, svg')) continue;
	    const mode = el.closest(strict) ? 'strict' : el.closest(prose) ? 'prose' : el.closest('td') ? 'strict' : '';
	    if (!mode) continue;
	    for (const m of n.data.matchAll(/\S+/g)) {
	      if (lines(n, m.index, m.index + m[0].length) < 2) continue;
	      const pieces = mode === 'prose' ? m[0].match(/[^-/]*[-/]*/g).filter(p => p) : [m[0]];
	      let at = m.index;
	      for (const p of pieces) {
	        if (lines(n, at, at + p.length) > 1) split.add(desc(el) + ' "' + m[0] + '"');
	        at += p.length;
	      }
	    }
	  }
	  return {scrollWidth: document.documentElement.scrollWidth, innerWidth: vw, wide: wide.map(w => w.s), split: [...split].slice(0, 20),
	    tables: document.querySelectorAll('table').length};
	})()`)
	if f.InnerWidth != phoneWidth {
		b.t.Errorf("page %s: the viewport is %d px wide, want %d (the page zoomed out to fit something wider?)", name, f.InnerWidth, phoneWidth)
	}
	if f.ScrollWidth > phoneWidth {
		b.t.Errorf("page %s at %d px: the document is %d px wide; too wide: %v", name, phoneWidth, f.ScrollWidth, f.Wide)
	}
	if len(f.Split) > 0 {
		b.t.Errorf("page %s at %d px: words split across lines: %v", name, phoneWidth, f.Split)
	}
	// The tables a screen reader finds: Chromium drops a table's role when
	// CSS changes its display in some ways; these tables keep theirs.
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		b.t.Fatal(err)
	}
	tables, headers := 0, 0
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		switch strings.Trim(string(n.Role.Value), `"`) {
		case "table":
			tables++
		case "columnheader":
			headers++
		}
	}
	if tables != f.Tables || (f.Tables > 0 && headers == 0) {
		b.t.Errorf("page %s: %d tables, of which the accessibility tree has %d as tables (with %d column headers)", name, f.Tables, tables, headers)
	}
}

// checkStates checks that every state the page draws has a colour of its
// own: no mark of a chart left black (the browser's default fill) and no
// two swatches of a legend alike.
func (b *browser) checkStates(name string) {
	b.t.Helper()
	bad := eval[[]string](b, `(() => {
	  const bad = [];
	  for (const e of document.querySelectorAll('svg [class*="st-"], svg [class*="use-"], svg .cost, svg .spend, svg .over')) {
	    const f = getComputedStyle(e).fill;
	    if (e.tagName !== 'path' && (f === 'rgb(0, 0, 0)' || f === 'none')) bad.push(e.getAttribute('class') + ' is drawn ' + f);
	  }
	  const seen = {};
	  for (const e of document.querySelectorAll('.swatch')) {
	    const c = getComputedStyle(e).backgroundColor;
	    if (c === 'rgba(0, 0, 0, 0)' || seen[c]) bad.push(e.className + ' has the colour of ' + (seen[c] || 'nothing'));
	    seen[c] = e.className;
	  }
	  return bad;
	})()`)
	if len(bad) > 0 {
		b.t.Errorf("page %s: states without a colour of their own: %v", name, bad)
	}
}

// checkAxe runs axe and fails on serious and critical violations; and on
// a contrast axe could not check anywhere (then the scheme went unchecked).
func (b *browser) checkAxe(name, src string) {
	b.t.Helper()
	r := b.axe(src)
	for _, v := range r.Violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			b.t.Errorf("page %s: axe %s (%s): %s:\n\t%s", name, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
		} else {
			b.t.Logf("page %s: axe %s (%s, not failing the test): %s: %v", name, v.ID, v.Impact, v.Help, v.Nodes)
		}
	}
	if r.ContrastPassed == 0 {
		b.t.Errorf("page %s: axe checked the contrast of no text", name)
	}
	if len(r.ContrastIncomplete) > 0 {
		// Text in a box scrolled off a phone's screen, or drawn in a
		// chart: axe checks the same colours where it can decide.
		b.t.Logf("page %s: axe could not decide the contrast of %d elements (e.g. %.120s)", name, len(r.ContrastIncomplete), r.ContrastIncomplete[0])
	}
}

func TestWebUIPhoneAndDark(t *testing.T) {
	axeJS := axeSource(t)
	a := startAgent(t, "", "", "-clusters", "us-east1/a:1x4,us-west1/b:1x4", "-worker-memory", "2GiB")
	admin := a.client()
	ctx := context.Background()
	if _, err := admin.PutQueue(ctx, &api.Queue{Path: "research", Guarantee: api.Quota{CPU: 6}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutQueue(ctx, &api.Queue{Path: "research/genomics-pipelines", Guarantee: api.Quota{CPU: 2}, BillingProjects: []string{"default"}}); err != nil {
		t.Fatal(err)
	}

	// A DAG of long-named jobs (an array among them), one of which fails;
	// a batch cancelled while its jobs run; and one still running, whose
	// job was preempted by the evacuation of its cluster: the states the
	// pages show, a disabled cluster with its reason among them.
	sh := func(name, script string) api.JobSpec {
		return api.JobSpec{Name: name, Command: []string{"sh", "-c", script}, CPU: 0.25, Memory: 64 << 20}
	}
	align := sh("align", `echo "aligning $DROVER_JOB_ID against GRCh38"`)
	align.Count = 3
	align.ParentIDs = []int64{1}
	merge := sh("merge-diamond-alignments-into-one-cohort-vcf", "echo merged")
	merge.ParentRanges = []api.IDRange{{2, 4}}
	jobs := []api.JobSpec{sh("diamond", "echo prepared"), align, merge, sh("check-contamination", "echo contaminated >&2; exit 3")}
	jobs[0].JobID, jobs[1].JobID, jobs[2].JobID, jobs[3].JobID = 1, 2, 5, 6
	dag, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "whole-genome-alignment-diamond-cohort-2024", BillingProject: "default", Jobs: jobs,
		Attributes: map[string]string{"pipeline": "gs://drover-example-bucket/pipelines/alignment/v2.3.1/main.wdl"}})
	if err != nil {
		t.Fatal(err)
	}
	long, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "long", BillingProject: "default",
		Jobs: []api.JobSpec{{JobID: 1, Count: 2, Command: []string{"sleep", "300"}, CPU: 0.25, Memory: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	running, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "still-running", BillingProject: "default",
		Jobs: []api.JobSpec{{JobID: 1, Name: "sleeps", Command: []string{"sleep", "300"}, CPU: 0.25, Memory: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.WaitBatch(ctx, dag.ID, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the long batches' jobs to run", 30*time.Second, func() bool {
		bl, err := admin.GetBatch(ctx, long.ID)
		br, err2 := admin.GetBatch(ctx, running.ID)
		return err == nil && err2 == nil && bl.NRunning == 2 && br.NRunning == 1
	})
	if err := admin.CancelBatch(ctx, long.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.WaitBatch(ctx, long.ID, nil); err != nil {
		t.Fatal(err)
	}
	// The running job's cluster is evacuated: its first attempt ends
	// preempted, and a second runs in the other cluster.
	j, err := admin.GetJob(ctx, running.ID, 1)
	if err != nil || len(j.Attempts) != 1 {
		t.Fatalf("the running job: %v, %+v", err, j)
	}
	if _, err := admin.DisableCluster(ctx, j.Attempts[0].Cluster, &api.ClusterStateRequest{Reason: "kernel upgrade on every host of the cluster, back tomorrow", Evacuate: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the evacuated job to run again", 30*time.Second, func() bool {
		j, err := admin.GetJob(ctx, running.ID, 1)
		return err == nil && len(j.Attempts) == 2 && j.Attempts[0].State == api.OutcomePreempted && j.State == api.JobRunning
	})

	b := newBrowser(t, a.addr)
	b.do(chromedp.EmulateViewport(phoneWidth, phoneHeight, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
	check := func(name string) {
		t.Helper()
		b.checkPhone(name)
		b.checkStates(name)
		b.checkAxe(name, axeJS)
		b.shot("phone-" + name)
		light := eval[string](b, `getComputedStyle(document.body).backgroundColor + ' ' + getComputedStyle(document.body).color`)
		b.colorScheme("dark")
		if dark := eval[string](b, `getComputedStyle(document.body).backgroundColor + ' ' + getComputedStyle(document.body).color`); dark == light {
			t.Errorf("page %s: prefers-color-scheme: dark changes nothing (%s)", name, dark)
		}
		b.checkStates(name + " (dark)")
		b.checkAxe(name+" (dark)", axeJS)
		b.shot("phone-" + name + "-dark")
		b.colorScheme("")
	}

	b.do(chromedp.Navigate(a.addr+"/ui/login"), chromedp.WaitReady(chromedp.CSS("#token")))
	check("login")
	b.login(a.token)
	type page struct{ name, path string }
	pages := []page{
		{"batches", "/ui/batches"},
		{"batch", fmt.Sprintf("/ui/batches/%d", dag.ID)},
		{"batch-cancelled", fmt.Sprintf("/ui/batches/%d", long.ID)},
		{"batch-running", fmt.Sprintf("/ui/batches/%d", running.ID)},
		{"cancel-confirm", fmt.Sprintf("/ui/batches/%d/cancel", running.ID)},
		{"job", fmt.Sprintf("/ui/batches/%d/jobs/2", dag.ID)},
		{"job-failed", fmt.Sprintf("/ui/batches/%d/jobs/6", dag.ID)},
		{"job-running", fmt.Sprintf("/ui/batches/%d/jobs/1", running.ID)},
		{"restart-confirm", fmt.Sprintf("/ui/batches/%d/jobs/1/restart", running.ID)},
		{"retry-confirm", fmt.Sprintf("/ui/batches/%d/retry", dag.ID)},
		{"efficiency", fmt.Sprintf("/ui/batches/%d/efficiency", dag.ID)},
		{"billing", "/ui/billing"},
		{"period-efficiency", "/ui/efficiency?billing_project=default"},
		{"clusters", "/ui/clusters"},
		{"queues", "/ui/queues"},
		{"autoscaler", "/ui/autoscaler"},
		{"audit", "/ui/audit"},
		{"404", "/ui/no-such-page"},
	}
	// And every page the navigation links to.
	b.open("/ui/batches")
	for _, href := range eval[[]string](b, `[...document.querySelectorAll('header nav a[href]')].map(a => a.getAttribute('href'))`) {
		if !slices.ContainsFunc(pages, func(p page) bool { return p.path == href }) {
			pages = append(pages, page{strings.TrimPrefix(href, "/ui/"), href})
		}
	}
	for _, p := range pages {
		b.open(p.path)
		check(p.name)
		if p.name == "billing" {
			// Today, the chart's last bar, is on screen.
			if right := eval[float64](b, `(() => { const d = [...document.querySelectorAll('g.day rect')].pop(); return d ? d.getBoundingClientRect().right : -1; })()`); right < 0 || right > phoneWidth {
				t.Errorf("the billing chart's last day ends at x=%.0f, off a %d px screen", right, phoneWidth)
			}
		}
	}

	t.Logf("screenshots in %s", b.dir)
}
