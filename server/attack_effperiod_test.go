package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/ui"
)

// atkJob is one job spec of a batch an attack runs: count jobs named
// name asking cpu cores and memory bytes.
type atkJob struct {
	name   string
	count  int64
	cpu    float64
	memory int64
}

// atkRun submits a batch of specs as c in project, has w run every job
// to success reporting usage (from the assignment) and returns its ID.
// Usage may be nil for the default: a millisecond of CPU and 100 MiB.
func atkRun(t *testing.T, c *api.Client, w *simWorker, project string, specs []atkJob, usage func(api.Assignment) *api.Usage) int64 {
	t.Helper()
	ctx := context.Background()
	var jobs []api.JobSpec
	var total int64
	for _, s := range specs {
		jobs = append(jobs, api.JobSpec{JobID: total + 1, Name: s.name, Count: s.count, Command: []string{"true"}, CPU: s.cpu, Memory: s.memory})
		total += max(s.count, 1)
	}
	b, err := c.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: project, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	var assigned []api.Assignment
	for deadline := time.Now().Add(20 * time.Second); int64(len(assigned)) < total; {
		if time.Now().After(deadline) {
			t.Fatalf("assigned %d of %d jobs of batch %d", len(assigned), total, b.ID)
		}
		res := w.sync(2 * time.Second)
		for _, a := range res.Assign {
			if a.AttemptRef.BatchID == b.ID {
				assigned = append(assigned, a)
			}
		}
	}
	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	for lo := 0; lo < len(assigned); lo += 200 {
		end := time.Now()
		for _, a := range assigned[lo:min(lo+200, len(assigned))] {
			u := &api.Usage{CPUSeconds: 0.001, PeakMemory: 100 << 20}
			if usage != nil {
				u = usage(a)
			}
			w.events = append(w.events, api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventStarted, StartTime: start},
				api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: start, EndTime: end, Usage: u})
		}
		w.sync(0)
	}
	return b.ID
}

// atkWaitExported waits until n batches were stored in the history and
// none waits.
func atkWaitExported(t *testing.T, tc *testCluster, n int64) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d batches to be stored in the history", n), 30*time.Second, func() bool {
		_, waiting := tc.srv.State().ExportQueue(1)
		return waiting == 0 && tc.srv.history.Status().ExportedBatches >= n
	})
}

// atkGet is a raw GET of the API with c's token: status and body.
func atkGet(t *testing.T, tc *testCluster, c *api.Client, pathAndQuery string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, tc.url+pathAndQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAttackEffPeriodCrossTenant: mallory, in physics only, tries every
// combination of parameters to read genomics' report, or alice's (who is
// in genomics only): the project she is in with alice's name, repeated
// parameters in both orders, NUL bytes, prefixes, case and spaces in
// names, parameter names in another case. She gets 403 or 404, or her
// own project's (or her own) rows, and never a byte of genomics'
// "secret-align". A member removed from genomics loses its report and
// keeps his own.
func TestAttackEffPeriodCrossTenant(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "genomics", "physics")
	mallory := tc.user("mallory", "physics")
	tc.user("al", "physics")
	w := newSimWorker(t, tc, "sim-atk", 16)
	atkRun(t, alice, w, "genomics", []atkJob{{"secret-align", 2, 2, 4 << 30}}, nil)
	atkRun(t, bob, w, "genomics", []atkJob{{"secret-call", 1, 2, 4 << 30}}, nil)
	atkRun(t, bob, w, "physics", []atkJob{{"bob-sim", 1, 1, 1 << 30}}, nil)
	atkRun(t, mallory, w, "physics", []atkJob{{"mallory-sim", 1, 1, 1 << 30}}, nil)
	atkWaitExported(t, tc, 4)

	type want struct {
		status int
		groups []string // the names of the groups in a 200's report
	}
	physics := []string{"bob-sim", "mallory-sim"}
	for q, w := range map[string]want{
		"billing_project=genomics":              {http.StatusForbidden, nil},
		"billing_project=genomics&user=mallory": {http.StatusForbidden, nil},
		"billing_project=genomics&user=alice":   {http.StatusForbidden, nil},
		"user=alice":                            {http.StatusForbidden, nil},
		"user=bob":                              {http.StatusForbidden, nil},
		"user=al":                               {http.StatusForbidden, nil},
		"user=alice%00":                         {http.StatusForbidden, nil},
		"user=ALICE":                            {http.StatusForbidden, nil},
		"user=+alice":                           {http.StatusForbidden, nil},
		"billing_project=physics&user=alice":    {http.StatusOK, nil},
		"billing_project=physics&user=bob":      {http.StatusOK, []string{"bob-sim"}},
		"billing_project=physics":               {http.StatusOK, physics},
		"billing_project=physics&billing_project=genomics":   {http.StatusOK, physics},
		"billing_project=genomics&billing_project=physics":   {http.StatusForbidden, nil},
		"user=mallory&user=alice":                            {http.StatusOK, []string{"mallory-sim"}},
		"user=alice&user=mallory":                            {http.StatusForbidden, nil},
		"billing_project=physics&user=alice&user=bob":        {http.StatusOK, nil},
		"billing_project=genomics%00":                        {http.StatusNotFound, nil},
		"billing_project=genomics%00physics":                 {http.StatusNotFound, nil},
		"billing_project=genomic":                            {http.StatusNotFound, nil},
		"billing_project=GENOMICS":                           {http.StatusNotFound, nil},
		"billing_project=%20genomics":                        {http.StatusNotFound, nil},
		"billing_project=genomics%2F..%2Fphysics":            {http.StatusNotFound, nil},
		"Billing_Project=genomics":                           {http.StatusOK, []string{"mallory-sim"}},
		"User=alice":                                         {http.StatusOK, []string{"mallory-sim"}},
		"billing_project=&user=alice":                        {http.StatusForbidden, nil},
		"billing_project=&user=":                             {http.StatusOK, []string{"mallory-sim"}},
		"user=mallory&from=1970-01-01&to=1970-12-31":         {http.StatusOK, nil},
		"billing_project=physics;billing_project=genomics":   {http.StatusOK, []string{"mallory-sim"}}, // the pair with ';' is dropped
		"billing_project=physics%26billing_project=genomics": {http.StatusNotFound, nil},
	} {
		status, body := atkGet(t, tc, mallory, "/api/v1/efficiency?"+q)
		if strings.Contains(body, "secret-") {
			t.Errorf("?%s: HTTP %d shows genomics or alice: %s", q, status, body)
		}
		if status != w.status {
			t.Errorf("?%s: HTTP %d, want %d: %s", q, status, w.status, body)
			continue
		}
		if status != http.StatusOK {
			continue
		}
		var rep api.EfficiencyPeriod
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			t.Fatalf("?%s: %v: %s", q, err, body)
		}
		var names []string
		for _, g := range rep.Groups {
			names = append(names, g.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, w.groups) {
			t.Errorf("?%s: groups %q, want %q", q, names, w.groups)
		}
	}

	// Bob leaves genomics: its report is closed to him; his own report
	// still has his batches there.
	if err := tc.admin.RemoveMember(ctx, "genomics", "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.PeriodEfficiency(ctx, api.EfficiencyQuery{BillingProject: "genomics"}); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("genomics' report read by a former member: %v", err)
	}
	if _, err := bob.PeriodEfficiency(ctx, api.EfficiencyQuery{BillingProject: "genomics", User: "bob"}); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("his own jobs in genomics, read through the project by a former member: %v", err)
	}
	own, err := bob.PeriodEfficiency(ctx, api.EfficiencyQuery{})
	if err != nil || own.Total.Attempts != 2 || len(own.Projects) != 2 {
		t.Fatalf("bob's own report: %+v %v", own, err)
	}
	// The admin sees alice's, and a user name with a NUL in it matches
	// no one (and is no error of the store).
	if rep, err := tc.admin.PeriodEfficiency(ctx, api.EfficiencyQuery{User: "alice"}); err != nil || rep.Total.Attempts != 2 {
		t.Fatalf("alice's report read by the admin: %+v %v", rep, err)
	}
	for _, u := range []string{"alice\x00", "alice\x00\x80", "alice\x00\x80\x00\x4e", "al"} {
		if rep, err := tc.admin.PeriodEfficiency(ctx, api.EfficiencyQuery{User: u}); err != nil || rep.Total.Attempts != 0 {
			t.Errorf("user %q read by the admin: %+v %v", u, rep, err)
		}
	}
}

// TestAttackEffPeriodDays: the days a report may cover, at the ends of
// what a date can say: year 1 and year 9999 are days like any other (no
// attempt there), the day before 1970 is not 1970-01-01, exactly 366
// days pass and 367 do not, and days that are not days are refused.
func TestAttackEffPeriodDays(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-days", 8)
	atkRun(t, alice, w, "genomics", []atkJob{{"align", 1, 1, 1 << 30}}, nil)
	atkWaitExported(t, tc, 1)
	today := time.Now().UTC()
	for _, c := range []struct {
		from, to string
		status   int
		attempts int64
	}{
		{"0001-01-01", "0001-12-31", http.StatusOK, 0},
		{"0000-01-01", "0000-12-31", http.StatusOK, 0},
		{"9999-01-01", "9999-12-31", http.StatusOK, 0},
		{"1969-12-31", "1969-12-31", http.StatusOK, 0},
		{"1969-01-01", "1970-01-01", http.StatusOK, 0},
		{today.AddDate(0, 0, -365).Format(time.DateOnly), today.Format(time.DateOnly), http.StatusOK, 1},
		{today.Format(time.DateOnly), today.Format(time.DateOnly), http.StatusOK, 1},
		{today.AddDate(0, 0, 1).Format(time.DateOnly), today.AddDate(0, 0, 1).Format(time.DateOnly), http.StatusOK, 0},
		{today.AddDate(0, 0, -366).Format(time.DateOnly), today.Format(time.DateOnly), http.StatusBadRequest, 0},
		{"0001-01-01", "9999-12-31", http.StatusBadRequest, 0},
		{"2026-02-30", "", http.StatusBadRequest, 0},
		{"2026-1-1", "", http.StatusBadRequest, 0},
		{"-0001-01-01", "", http.StatusBadRequest, 0},
		{"10000-01-01", "", http.StatusBadRequest, 0},
		{"2026-01-01T00:00:00Z", "", http.StatusBadRequest, 0},
		{"2026-01-02", "2026-01-01", http.StatusBadRequest, 0},
	} {
		rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{From: c.from, To: c.to})
		switch {
		case c.status != http.StatusOK && !api.IsStatus(err, c.status):
			t.Errorf("%s..%s: %+v %v, want HTTP %d", c.from, c.to, rep, err, c.status)
		case c.status == http.StatusOK && (err != nil || rep.Total.Attempts != c.attempts):
			t.Errorf("%s..%s: %+v %v, want %d attempts", c.from, c.to, rep, err, c.attempts)
		case c.status == http.StatusOK && (rep.From != c.from || rep.To != c.to):
			t.Errorf("%s..%s: the report says %s..%s", c.from, c.to, rep.From, rep.To)
		}
	}
}

// TestAttackEffPeriodHostileJobNamesInTheUI: a member names her jobs
// with markup, quotes and terminal controls; another member's
// /ui/efficiency page of the project shows them as text: no tag, no
// attribute broken out of, controls and bidi overrides made inert in the
// text (the data-group attribute carries the name as is, escaped, as the
// batch's efficiency page does: harmless there).
func TestAttackEffPeriodHostileJobNamesInTheUI(t *testing.T) {
	tc := startServer(t, "", nil)
	mallory := tc.user("mallory", "genomics")
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-ui", 8)
	names := []string{
		`<script>alert(1)</script>`,
		`"><img src=x onerror=alert(2)>`,
		`' onmouseover='alert(3)`,
		"\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07",
		"\u202egnp.exe",
		`{{.Report}}`,
	}
	var specs []atkJob
	for _, n := range names {
		specs = append(specs, atkJob{n, 1, 1, 1 << 30})
	}
	atkRun(t, mallory, w, "genomics", specs, nil)
	atkWaitExported(t, tc, 1)

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodPost, tc.url+"/ui/login", strings.NewReader(url.Values{"token": {alice.Token()}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == ui.CookieName {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatalf("login: HTTP %d, no session", resp.StatusCode)
	}
	page := func(q string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, tc.url+"/ui/efficiency?"+q, nil)
		req.AddCookie(&http.Cookie{Name: ui.CookieName, Value: cookie.Value})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/ui/efficiency?%s: HTTP %d\n%s", q, resp.StatusCode, b)
		}
		return string(b)
	}
	body := page("billing_project=genomics")
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatalf("mallory's jobs are not on the page:\n%s", body)
	}
	text := regexp.MustCompile(`data-group="[^"<>]*"`).ReplaceAllString(body, "")
	for _, bad := range []string{"<script>alert", "<img src=x", "' onmouseover='", "onerror=alert(2)>", "\x1b", "\u202e", "\x07"} {
		if strings.Contains(text, bad) {
			t.Errorf("the page carries %q as is", bad)
		}
	}
	// Reflected parameters: a user name and days are shown back in the
	// form and the error.
	body = page(`billing_project=genomics&user=%22%3E%3Cscript%3Ealert(4)%3C/script%3E&from=%22%3E%3Cb%3E&to=x`)
	if strings.Contains(body, "<script>alert(4)") || strings.Contains(body, `"><b>`) {
		t.Errorf("the page reflects a parameter as markup:\n%s", body)
	}
	body = page(`user=%3Cscript%3Ealert(5)%3C/script%3E`)
	if strings.Contains(body, "<script>alert(5)") || !strings.Contains(body, `role="alert"`) {
		t.Errorf("another user's report, asked by name with markup:\n%s", body)
	}
}

// TestAttackEffPeriodManyJobNames: a batch of 1,003 jobs each of its own
// name is kept as 1,000 groups and one "(other jobs)" of the 3 past the
// cap; every attempt counts once.
func TestAttackEffPeriodManyJobNames(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-many", 512)
	var specs []atkJob
	for i := range 1003 {
		specs = append(specs, atkJob{fmt.Sprintf("n%04d", i), 1, 0.25, 16 << 20})
	}
	atkRun(t, alice, w, "genomics", specs, nil)
	atkWaitExported(t, tc, 1)
	rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var other int64
	for _, g := range rep.Groups {
		if g.Name == "(other jobs)" {
			other = g.Attempts
		}
	}
	if len(rep.Groups) != 1001 || other != 3 || rep.Total.Attempts != 1003 {
		t.Fatalf("%d groups, (other jobs) of %d attempts, %d attempts in all; want 1001, 3, 1003", len(rep.Groups), other, rep.Total.Attempts)
	}
}

// TestAttackEffPeriodReexportReplaces: a finished batch whose failed job
// is retried finishes again and is stored again: the period's report
// counts its two attempts once each, in one batch, not the first
// export's rows as well.
func TestAttackEffPeriodReexportReplaces(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-retry", 8)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "flaky", Command: []string{"false"}, CPU: 1, Memory: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	finish := func(outcome string) {
		t.Helper()
		var as *api.Assignment
		for deadline := time.Now().Add(20 * time.Second); as == nil; {
			if time.Now().After(deadline) {
				t.Fatal("never assigned")
			}
			for _, a := range w.sync(2 * time.Second).Assign {
				if a.AttemptRef.BatchID == b.ID {
					as = &a
				}
			}
		}
		start := time.Now()
		time.Sleep(20 * time.Millisecond)
		w.events = append(w.events, api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventStarted, StartTime: start},
			api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventCompleted, Outcome: outcome, ExitCode: 1, StartTime: start, EndTime: time.Now(),
				Usage: &api.Usage{CPUSeconds: 0.001, PeakMemory: 100 << 20}})
		w.sync(0)
	}
	finish(api.OutcomeFailed)
	atkWaitExported(t, tc, 1)
	if rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{}); err != nil || rep.Total.Attempts != 1 {
		t.Fatalf("after the first run: %+v %v", rep, err)
	}
	if _, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{}); err != nil {
		t.Fatal(err)
	}
	finish(api.OutcomeSuccess)
	waitUntil(t, "the batch to be stored again", 30*time.Second, func() bool {
		rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{})
		return err == nil && rep.Total.Attempts >= 2
	})
	time.Sleep(200 * time.Millisecond)
	rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{})
	if err != nil || rep.Total.Attempts != 2 || rep.Batches != 1 || len(rep.Groups) != 1 {
		t.Fatalf("after the retry: %+v %v; want 2 attempts of 1 batch", rep, err)
	}
}

// TestAttackEffPeriodHugeWorkerMemory: a worker may not activate with
// more memory than api.MaxMemory (64 TiB), and one at that bound reports
// a job's peak up to it. A job asking 4 GiB whose worker says it peaked
// at 64 TiB must not be reported as peaking at a negative size and told
// to ask for 256 MiB (with savings): the peak's histogram bound and peak
// × 1.2 must not wrap as int64, in the period's report nor in the batch's
// own.
func TestAttackEffPeriodHugeWorkerMemory(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	_, err := api.NewClient(tc.url, "").Workers().Activate(ctx, &api.ActivateRequest{Name: "sim-too-big", CPU: 8, Memory: math.MaxInt64, Secret: "test-secret"})
	if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), "the limit is 70368744177664 (64 TiB)") {
		t.Fatalf("a worker of 2^63-1 bytes: %v, want a 400 naming the limit", err)
	}
	w := activateSimWorker(t, tc, &api.ActivateRequest{Name: "sim-huge", CPU: 8, Memory: api.MaxMemory})
	id := atkRun(t, alice, w, "genomics", []atkJob{{"hog", 1, 2, 4 << 30}}, func(api.Assignment) *api.Usage {
		return &api.Usage{CPUSeconds: 0.001, PeakMemory: api.MaxMemory}
	})
	atkWaitExported(t, tc, 1)
	rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{})
	if err != nil || len(rep.Groups) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	if g := rep.Groups[0]; g.PeakMemoryP95 < 4<<30 || g.SuggestedMemory != 4<<30 {
		t.Errorf("the period's report of a job asking 4 GiB said to peak at 64 TiB: p95 %d, suggested %d; want a p95 at least 4 GiB and the 4 GiB it asked", g.PeakMemoryP95, g.SuggestedMemory)
	}
	exact, err := alice.BatchEfficiency(ctx, id)
	if err != nil || len(exact.Groups) != 1 {
		t.Fatalf("%+v %v", exact, err)
	}
	if g := exact.Groups[0]; g.SuggestedMemory != 4<<30 {
		t.Errorf("the batch's report of a job asking 4 GiB said to peak at 64 TiB: p95 %d, suggested %d; want the 4 GiB it asked", g.PeakMemoryP95, g.SuggestedMemory)
	}
}

// TestAttackEffPeriodEndTimeWraps: a worker says an attempt ended 2^64 ns
// (584 years) before now, plus a day. That is before now, so
// apiview.Event lets it through, but time.Time.UnixNano wraps it to a
// day from now: the attempt ends tomorrow, lasts a day, is billed a day
// of its price (endCharge bills start..end), and the period's report
// counts it on tomorrow. An attempt must not end after the server heard
// it end.
func TestAttackEffPeriodEndTimeWraps(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-wrap", 8)
	// A dollar a core-hour: the attempt's cost shows its length.
	if _, err := tc.admin.SetRates(ctx, []api.NewRate{{Resource: "compute", PricePerHour: money.DollarPerHour}}); err != nil {
		t.Fatal(err)
	}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "victim", Command: []string{"true"}, CPU: 4, Memory: 4 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	res := w.sync(5 * time.Second)
	if len(res.Assign) != 1 {
		t.Fatalf("assigned %+v", res.Assign)
	}
	a := res.Assign[0].AttemptRef
	start := time.Now()
	// now - 2^64 ns + 24 h: UnixNano of it is now + 24 h.
	end := start.Add(math.MinInt64).Add(math.MinInt64).Add(24 * time.Hour)
	if end.After(start) || end.UnixNano() <= start.UnixNano() {
		t.Fatalf("end %s (UnixNano %d) start %d", end, end.UnixNano(), start.UnixNano())
	}
	w.events = []api.AttemptEvent{{AttemptRef: a, Kind: api.EventStarted, StartTime: start},
		{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: start, EndTime: end, Usage: &api.Usage{CPUSeconds: 1, PeakMemory: 100 << 20}}}
	w.sync(0)
	heard := time.Now()
	job, err := alice.GetJob(ctx, b.ID, 1)
	if err != nil || len(job.Attempts) != 1 || job.Attempts[0].EndTime == nil {
		t.Fatalf("%+v %v", job, err)
	}
	at := job.Attempts[0]
	if at.EndTime.After(heard.Add(time.Second)) || at.Cost == nil || *at.Cost > money.FromDollars(1) {
		t.Errorf("the attempt ends at %s, after the server heard it end (%s): it costs %v (4 cores at $1 a core-hour)", at.EndTime.UTC(), heard.UTC(), at.Cost)
	}
	atkWaitExported(t, tc, 1)
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	if rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{From: tomorrow, To: tomorrow}); err != nil || rep.Total.Attempts != 0 {
		t.Errorf("tomorrow's report already counts %d attempts (%.1f core-hours reserved): %v", rep.Total.Attempts, rep.Total.CoreHoursReserved, err)
	}
}

// atkStore is a history store whose efficiency rows are rows.
type atkStore struct {
	history.Store
	rows []history.EfficiencyRow
}

func (s atkStore) Efficiency(_ context.Context, q history.EfficiencyQuery, limit int) ([]history.EfficiencyRow, bool, error) {
	var out []history.EfficiencyRow
	for _, r := range s.rows {
		if q.Hide != nil && q.Hide(r.Batch) {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, r)
	}
	return out, false, nil
}

// TestAttackEffPeriodDiscardedRowsDoNotEatTheLimit: after a restore, the
// rows of the discarded timeline's batches stay in the store (no batch
// ID of theirs is handed out again, so nothing replaces them). A report
// reads at most a limit of rows and visibleHistory drops the discarded
// ones after the limit: rows the cluster still has past them are never
// read, and with every row read discarded the handler is left with no
// rows and no Partial (it says partial only when rows remain), a report
// of nothing that looks complete.
func TestAttackEffPeriodDiscardedRowsDoNotEatTheLimit(t *testing.T) {
	var rows []history.EfficiencyRow
	for i := range 10 {
		rows = append(rows, history.EfficiencyRow{BillingProject: "p", User: "u", Day: 100, Batch: uint64(10 + i)})
	}
	rows = append(rows, history.EfficiencyRow{BillingProject: "p", User: "u", Day: 101, Batch: 30})
	v := visibleHistory{Store: atkStore{rows: rows}, lineage: func() state.Lineage {
		return state.Lineage{Timeline: 2, Forks: []state.Fork{{Timeline: 1, Below: 10, Resume: 20}}}
	}}
	got, more, err := v.Efficiency(context.Background(), history.EfficiencyQuery{User: "u", From: 0, To: 200}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Batch != 30 || more {
		t.Errorf("read with a limit of 5 past 10 discarded rows: %d rows %+v, more %v; want batch 30's row", len(got), got, more)
	}
}

// TestAttackEffPeriodRestoreHidesTheDiscardedTimeline: batches run after
// a snapshot, then thrown away by restoring it, stay in the embedded
// history store with their efficiency rows; the period's reports (by
// user and by project) must not count them, and count the batches run
// before the snapshot and after the restore.
func TestAttackEffPeriodRestoreHidesTheDiscardedTimeline(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	w := newSimWorker(t, tc, "sim-restore", 16)
	atkRun(t, alice, w, "genomics", []atkJob{{"before", 1, 1, 1 << 30}}, nil)
	atkWaitExported(t, tc, 1)
	var snap bytes.Buffer
	if _, err := tc.admin.Operator().SnapshotSave(ctx, &snap); err != nil {
		t.Fatal(err)
	}
	atkRun(t, alice, w, "genomics", []atkJob{{"discarded", 3, 1, 1 << 30}}, nil)
	atkWaitExported(t, tc, 2)
	if rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{}); err != nil || rep.Total.Attempts != 4 {
		t.Fatalf("before the restore: %+v %v", rep, err)
	}
	if _, err := tc.admin.Operator().SnapshotRestore(ctx, snap.Bytes()); err != nil {
		t.Fatal(err)
	}
	w = newSimWorker(t, tc, "sim-restore-2", 16)
	atkRun(t, alice, w, "genomics", []atkJob{{"after", 2, 1, 1 << 30}}, nil)
	waitUntil(t, "the batch after the restore to be stored", 30*time.Second, func() bool {
		rep, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{})
		return err == nil && slices.ContainsFunc(rep.Groups, func(g api.EfficiencyGroup) bool { return g.Name == "after" })
	})
	// The store itself still holds the discarded batch's row: only the
	// lineage hides it.
	raw, err := tc.srv.history.raw()
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := raw.Efficiency(ctx, history.EfficiencyQuery{User: "alice", From: 0, To: math.MaxInt32}, 100)
	if err != nil || len(rows) != 3 {
		t.Fatalf("the store's rows of alice: %+v %v; want before's, discarded's and after's", rows, err)
	}
	for _, q := range []api.EfficiencyQuery{{}, {BillingProject: "genomics"}, {BillingProject: "genomics", User: "alice"}} {
		rep, err := alice.PeriodEfficiency(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, g := range rep.Groups {
			names = append(names, g.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"after", "before"}) || rep.Total.Attempts != 3 || rep.Batches != 2 {
			t.Errorf("%+v after the restore: groups %q, %d attempts of %d batches; want after and before, 3 attempts of 2 batches", q, names, rep.Total.Attempts, rep.Batches)
		}
	}
}
