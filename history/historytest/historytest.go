// Package historytest is the conformance suite every history.Store passes:
// the same batches, jobs and ledger rows written, then read back through
// every listing, filter and page, compared field by field.
package historytest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/efficiency"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/money"
)

// Run runs the suite; open returns an empty store (each subtest gets its
// own) and arranges for it to be closed.
func Run(t *testing.T, open func(t *testing.T) history.Store) {
	t.Run("Empty", func(t *testing.T) { testEmpty(t, open(t)) })
	t.Run("BatchRoundTrip", func(t *testing.T) { testBatchRoundTrip(t, open(t)) })
	t.Run("JobPagesAndFilters", func(t *testing.T) { testJobs(t, open(t)) })
	t.Run("ExportIsIdempotent", func(t *testing.T) { testIdempotent(t, open(t)) })
	t.Run("BatchPagesAndVisibility", func(t *testing.T) { testBatchList(t, open(t)) })
	t.Run("Ledger", func(t *testing.T) { testLedger(t, open(t)) })
	t.Run("Efficiency", func(t *testing.T) { testEfficiency(t, open(t)) })
	t.Run("QueueUsage", func(t *testing.T) { testQueueUsage(t, open(t)) })
	t.Run("SLORuns", func(t *testing.T) { testSLORuns(t, open(t)) })
	t.Run("PruneQueueUsage", func(t *testing.T) { testPruneQueueUsage(t, open(t)) })
	t.Run("TimelinesAndDiscard", func(t *testing.T) { testTimelines(t, open(t)) })
}

// testTimelines: versions compare within a timeline only, a discard
// leaves nothing of a batch (no orphan job of a larger one under its
// ID), and the store has one identity.
func testTimelines(t *testing.T, s history.Store) {
	id1, err := s.Identity(ctx)
	must(t, err)
	id2, err := s.Identity(ctx)
	must(t, err)
	if id1 == "" || id1 != id2 {
		t.Fatalf("identity %q, then %q: want one, not empty", id1, id2)
	}
	old := makeBatch(3, "genomics", "alice", 5, 900)
	old.batch.Timeline = 11
	if !export(t, s, old) {
		t.Fatal("the first export wrote nothing")
	}
	if v, _ := s.Stored(ctx, 3); v != (history.Stored{Version: 900, Timeline: 11}) {
		t.Fatalf("stored at %+v, want version 900 of timeline 11", v)
	}
	// Another timeline's batch 3, at a lower version, is written over it.
	other := makeBatch(3, "physics", "bob", 1, 40)
	other.batch.Timeline = 12
	must(t, s.Discard(ctx, 3))
	if v, _ := s.Stored(ctx, 3); v != (history.Stored{}) {
		t.Fatalf("a discarded batch is stored at %+v", v)
	}
	if jobs, _ := allJobs(t, s, 3, ""); len(jobs) != 0 {
		t.Fatalf("a discarded batch kept %d jobs", len(jobs))
	}
	if led, _ := s.Ledger(ctx, "genomics", -1<<30, 1<<30); len(led) != 0 {
		t.Fatalf("a discarded batch kept its ledger rows: %v", led)
	}
	if eff, _, _ := s.Efficiency(ctx, history.EfficiencyQuery{BillingProject: "genomics", From: -1 << 30, To: 1 << 30}, 100); len(eff) != 0 {
		t.Fatalf("a discarded batch kept its efficiency rows: %v", eff)
	}
	if eff, _, _ := s.Efficiency(ctx, history.EfficiencyQuery{User: "alice", From: -1 << 30, To: 1 << 30}, 100); len(eff) != 0 {
		t.Fatalf("a discarded batch kept its efficiency rows by user: %v", eff)
	}
	if !export(t, s, other) {
		t.Fatal("the other timeline's batch was not written")
	}
	got, _, _ := s.Batch(ctx, 3)
	same(t, "batch of the other timeline", got, other.batch)
	jobs, _ := allJobs(t, s, 3, "")
	same(t, "jobs of the other timeline", jobs, other.full)
	// Without a discard, PutBatch still replaces a row of another
	// timeline whatever its version.
	back := makeBatch(3, "physics", "bob", 1, 30)
	back.batch.Timeline = 13
	if w, err := s.PutBatch(ctx, back.batch, back.ledger, back.eff); err != nil || !w {
		t.Fatalf("a lower version from another timeline: written %v, %v", w, err)
	}
	if m, err := s.MaxBatch(ctx); err != nil || m != 3 {
		t.Fatalf("highest batch: %d, %v", m, err)
	}
}

// testSLORuns: a complete batch with an SLO is one run, by completion
// time; a batch without one, or incomplete, is none; an export again
// replaces the run (a batch retried completes later); a discard removes
// it; a limit and Hide bound what comes back.
func testSLORuns(t *testing.T, s history.Store) {
	at := func(f fixture, completed time.Time, slo float64, met, cancelled bool, queue, workflow string) fixture {
		f.batch.TimeCompleted = &completed
		f.batch.SLOSeconds, f.batch.Queue, f.batch.Cancelled = slo, queue, cancelled
		if slo > 0 {
			f.batch.SLOMet = &met
		}
		if workflow != "" {
			f.batch.Attributes = map[string]string{api.WorkflowAttribute: workflow}
		}
		return f
	}
	base := time.Unix(1_800_000_000, 0).UTC()
	export(t, s, at(makeBatch(1, "genomics", "alice", 2, 10), base, 3600, true, false, "org/gen/tier1", "nightly"))
	export(t, s, at(makeBatch(2, "genomics", "alice", 2, 10), base.Add(time.Hour), 3600, false, false, "org/gen/tier1", "nightly"))
	export(t, s, at(makeBatch(3, "genomics", "bob", 2, 10), base.Add(2*time.Hour), 3600, true, true, "org/gen/tier2", ""))
	export(t, s, at(makeBatch(4, "physics", "carol", 2, 10), base.Add(30*time.Minute), 0, false, false, "org/phy/tier1", "")) // no SLO
	running := at(makeBatch(5, "physics", "carol", 2, 10), base, 600, true, false, "org/phy/tier1", "")
	running.batch.State, running.batch.TimeCompleted, running.batch.SLOMet = api.BatchRunning, nil, nil
	export(t, s, running)

	all := func(q history.SLOQuery, limit int) ([]history.SLORun, bool) {
		t.Helper()
		runs, more, err := s.SLORuns(ctx, q, limit)
		must(t, err)
		return runs, more
	}
	runs, more := all(history.SLOQuery{From: base.Unix(), To: base.Add(3 * time.Hour).Unix()}, 100)
	var got []string
	for _, r := range runs {
		got = append(got, fmt.Sprintf("%d %s/%s %s %d met=%t cancelled=%t", r.Batch, r.Project, r.Workflow, r.Queue, r.Completed-base.Unix(), r.Met, r.Cancelled))
	}
	want := []string{
		"1 genomics/nightly org/gen/tier1 0 met=true cancelled=false",
		"2 genomics/nightly org/gen/tier1 3600 met=false cancelled=false",
		"3 genomics/batch-3 org/gen/tier2 7200 met=true cancelled=true",
	}
	if more || !reflect.DeepEqual(got, want) {
		t.Fatalf("runs (more %t):\n%q\nwant\n%q", more, got, want)
	}
	// The window is [From, To).
	if runs, _ := all(history.SLOQuery{From: base.Add(time.Second).Unix(), To: base.Add(2 * time.Hour).Unix()}, 100); len(runs) != 1 || runs[0].Batch != 2 {
		t.Fatalf("runs in [1s, 2h): %+v, want batch 2 alone", runs)
	}
	if runs, more := all(history.SLOQuery{From: base.Unix(), To: base.Add(3 * time.Hour).Unix()}, 2); !more || len(runs) != 2 {
		t.Fatalf("limit 2: %d runs, more %t", len(runs), more)
	}
	hide := func(b uint64) bool { return b == 1 }
	if runs, more := all(history.SLOQuery{From: base.Unix(), To: base.Add(3 * time.Hour).Unix(), Hide: hide}, 2); more || len(runs) != 2 || runs[0].Batch != 2 {
		t.Fatalf("hiding batch 1 with limit 2: %+v, more %t", runs, more)
	}
	// Batch 1 retried: it completes again a day later, and misses.
	again := at(makeBatch(1, "genomics", "alice", 2, 20), base.Add(24*time.Hour), 3600, false, false, "org/gen/tier1", "nightly")
	export(t, s, again)
	if runs, _ := all(history.SLOQuery{From: base.Unix(), To: base.Add(48 * time.Hour).Unix()}, 100); len(runs) != 3 || runs[2].Batch != 1 || runs[2].Met {
		t.Fatalf("after batch 1's export again: %+v, want it once, last, missed", runs)
	}
	must(t, s.Discard(ctx, 1))
	if runs, _ := all(history.SLOQuery{From: base.Unix(), To: base.Add(48 * time.Hour).Unix()}, 100); len(runs) != 2 {
		t.Fatalf("after batch 1's discard: %+v", runs)
	}
}

// testQueueUsage: samples come back by queue, then time, within the
// window asked; a sample written again replaces the earlier one.
func testQueueUsage(t *testing.T, s history.Store) {
	must(t, s.PutQueueUsage(ctx, []history.QueueSample{
		{Queue: "org/t1", At: 120, Seconds: 60, CPUMilli: 4000, Memory: 1 << 30, Jobs: 4},
		{Queue: "org/t1", At: 60, Seconds: 60, CPUMilli: 2000, Jobs: 2},
		{Queue: "org", At: 60, Seconds: 60, CPUMilli: 9000, Jobs: 9},
		{Queue: "org/t1", At: 180, Seconds: 60, CPUMilli: 1},
		// Of one cluster: a queue's there, and the cluster's capacity.
		{Queue: "org/t1", Cluster: "east", At: 60, Seconds: 60, CPUMilli: 1500, Memory: 3 << 30},
		{Queue: "org/t1", Cluster: "west", At: 60, Seconds: 60, CPUMilli: 500},
		{Cluster: "east", At: 60, Seconds: 60, CPUMilli: 64000, Memory: 256 << 30, Jobs: 4},
	}))
	must(t, s.PutQueueUsage(ctx, []history.QueueSample{{Queue: "org", At: 60, Seconds: 60, CPUMilli: 8000, Jobs: 8}}))
	got, err := s.QueueUsage(ctx, 60, 180)
	must(t, err)
	same(t, "queue usage", got, []history.QueueSample{
		{Cluster: "east", At: 60, Seconds: 60, CPUMilli: 64000, Memory: 256 << 30, Jobs: 4},
		{Queue: "org", At: 60, Seconds: 60, CPUMilli: 8000, Jobs: 8},
		{Queue: "org/t1", At: 60, Seconds: 60, CPUMilli: 2000, Jobs: 2},
		{Queue: "org/t1", At: 120, Seconds: 60, CPUMilli: 4000, Memory: 1 << 30, Jobs: 4},
		{Queue: "org/t1", Cluster: "east", At: 60, Seconds: 60, CPUMilli: 1500, Memory: 3 << 30},
		{Queue: "org/t1", Cluster: "west", At: 60, Seconds: 60, CPUMilli: 500},
	})
	if got, err := s.QueueUsage(ctx, 1000, 2000); err != nil || len(got) != 0 {
		t.Fatalf("an empty window: %v %v", got, err)
	}
}

// testPruneQueueUsage: a prune deletes every sample before its time,
// over more than one chunk, and none at or after it; a second prune
// finds nothing.
func testPruneQueueUsage(t *testing.T, s history.Store) {
	const cutoff = 1_000_000
	old := 2*history.PruneChunk + 7
	var samples []history.QueueSample
	for i := range old {
		// The last is a second before the cutoff.
		samples = append(samples, history.QueueSample{Queue: fmt.Sprintf("org/q%d", i%3), At: cutoff - int64(old) + int64(i), Seconds: 1, CPUMilli: 1000, Jobs: 1})
	}
	kept := []history.QueueSample{
		{Queue: "org/q0", At: cutoff, Seconds: 60, CPUMilli: 2000, Jobs: 2},
		{Queue: "org/q0", At: cutoff + 60, Seconds: 60, CPUMilli: 3000, Jobs: 3},
		{Queue: "org/q1", At: cutoff + 60, Seconds: 60, CPUMilli: 4000, Jobs: 4},
	}
	must(t, s.PutQueueUsage(ctx, append(samples, kept...)))
	if n, err := s.PruneQueueUsage(ctx, 0); err != nil || n != 0 {
		t.Fatalf("a prune before every sample deleted %d, %v", n, err)
	}
	n, err := s.PruneQueueUsage(ctx, cutoff)
	must(t, err)
	if n != int64(old) {
		t.Fatalf("the prune deleted %d samples, want the %d before the cutoff", n, old)
	}
	got, err := s.QueueUsage(ctx, 0, cutoff+1000)
	must(t, err)
	same(t, "queue usage after the prune", got, kept)
	if n, err := s.PruneQueueUsage(ctx, cutoff); err != nil || n != 0 {
		t.Fatalf("a second prune deleted %d, %v", n, err)
	}
}

var ctx = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// same compares through JSON, as the API shows them (times in UTC).
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// fixture is a finished batch: an array "align" of nArray jobs (every
// seventh failed, then retried), and three distinct jobs.
type fixture struct {
	batch  history.Batch
	groups []history.Group
	jobs   []history.Job
	full   []api.Job // what the API shows, by ID - 1
	ledger []history.LedgerRow
	eff    []history.EfficiencyRow
}

func makeBatch(id uint64, project, user string, nArray int, version uint64) fixture {
	var f fixture
	n := nArray + 3
	end := t0.Add(time.Hour)
	f.batch = history.Batch{Version: version, Batch: api.Batch{
		ID: int64(id), Name: fmt.Sprintf("batch-%d", id), User: user, BillingProject: project,
		Attributes: map[string]string{"set": fmt.Sprintf("s%d", id%3)}, State: api.BatchComplete,
		NJobs: int64(n), NCompleted: int64(n), NUpdates: 1, TimeCreated: t0, TimeCompleted: &end, Cost: money.FromDollars(1.25),
	}}
	array := api.Job{Name: "align", Command: []string{"sh", "-c", "echo $DROVER_INDEX"}, CPU: 1, Memory: 1 << 30,
		Retries: 1, Attributes: map[string]string{"step": "align"}, Regions: []string{"us-east1"}}
	f.groups = append(f.groups, history.GroupOf(1, uint32(nArray), true, "align", &array))
	for i, name := range []string{"merge", "report", "cleanup"} {
		spec := api.Job{Name: name, Command: []string{"true"}, CPU: 0.5, Memory: 512 << 20, AlwaysRun: name == "cleanup",
			Attributes: map[string]string{"step": name}, Parents: []api.IDRange{{1, int64(nArray)}}}
		f.groups = append(f.groups, history.GroupOf(uint32(nArray+1+i), 1, false, name, &spec))
	}
	for id := uint32(1); id <= uint32(n); id++ {
		start := t0.Add(time.Duration(id) * time.Second)
		stop := start.Add(time.Minute)
		att := api.Attempt{Attempt: 1, Instance: "w1", Cluster: "c1", Region: "us-east1", StartTime: ptr(start), EndTime: ptr(stop),
			State: api.OutcomeSuccess, ExitCode: ptr(0), Cost: ptr(money.FromDollars(0.01)), PricePerHour: money.RateFromDollars(0.6),
			Usage:     &api.Usage{CPUSeconds: 30, PeakMemory: 1 << 20},
			CostLines: []api.CostLine{{Resource: "compute/standard/1", Rate: "compute/standard/1", Version: 1, Units: 1, PricePerHour: money.RateFromDollars(0.6)}}}
		j := history.Job{ID: id, State: api.JobSuccess, ExitCode: ptr(0), Attempts: []api.Attempt{att}}
		switch {
		case id <= uint32(nArray) && id%7 == 0:
			failed := att
			failed.State, failed.ExitCode = api.OutcomeFailed, ptr(1)
			retry := att
			retry.Attempt, retry.State, retry.ExitCode = 2, api.OutcomeFailed, ptr(2)
			j.State, j.ExitCode, j.Attempts = api.JobFailed, ptr(2), []api.Attempt{failed, retry}
			f.batch.NFailed++
		case id == uint32(nArray+2):
			j.State, j.ExitCode, j.Message, j.Attempts = api.JobCancelled, nil, "a parent job did not succeed", nil
			f.batch.NCancelled++
		default:
			f.batch.NSucceeded++
		}
		f.jobs = append(f.jobs, j)
	}
	for i := range f.jobs {
		g := &f.groups[len(f.groups)-1]
		for k := range f.groups {
			if f.jobs[i].ID >= f.groups[k].First && f.jobs[i].ID < f.groups[k].First+f.groups[k].Count {
				g = &f.groups[k]
			}
		}
		f.full = append(f.full, history.JobOf(id, g, &f.jobs[i]))
	}
	day := int32(t0.Unix() / 86400)
	f.ledger = []history.LedgerRow{
		{BillingProject: project, Day: day, User: user, Batch: id, Cost: money.FromDollars(1)},
		{BillingProject: project, Day: day + 1, User: user, Batch: id, Cost: money.FromDollars(0.25)},
	}
	f.eff = []history.EfficiencyRow{
		effRow(id, project, user, day, "align", 2),
		effRow(id, project, user, day+1, "merge", 1),
	}
	return f
}

// effRow is an efficiency row of n attempts of group name, each of one
// hour on 4 cores and 8 GiB that used one core and a GiB at most.
func effRow(id uint64, project, user string, day int32, name string, n int) history.EfficiencyRow {
	var z efficiency.Summarizer
	for range n {
		z.Add(efficiency.Attempt{Day: day, Group: name, JobGroup: "stage/" + name, CPU: 4, Memory: 8 << 30, Seconds: 3600, CPUSeconds: 3600,
			PeakMemory: 1 << 30, Cost: money.FromDollars(0.24), Lines: []api.CostLine{{Resource: "compute/default", Units: 4, PricePerHour: money.RateFromDollars(0.06)}}})
	}
	return history.EfficiencyRow{BillingProject: project, Day: day, User: user, Batch: id, Summary: z.Summaries()[0].Summary}
}

// export writes a fixture as the exporter does: groups, jobs in chunks,
// then the batch.
func export(t *testing.T, s history.Store, f fixture) bool {
	t.Helper()
	id := uint64(f.batch.ID)
	must(t, s.PutGroups(ctx, id, f.groups))
	for lo := 0; lo < len(f.jobs); lo += 40 {
		must(t, s.PutJobs(ctx, id, f.jobs[lo:min(lo+40, len(f.jobs))]))
	}
	written, err := s.PutBatch(ctx, f.batch, f.ledger, f.eff)
	must(t, err)
	return written
}

func testEmpty(t *testing.T, s history.Store) {
	v, err := s.Stored(ctx, 1)
	must(t, err)
	if v != (history.Stored{}) {
		t.Fatalf("a batch never stored is stored at %+v", v)
	}
	if m, err := s.MaxBatch(ctx); err != nil || m != 0 {
		t.Fatalf("highest batch of an empty store: %d, %v", m, err)
	}
	if _, ok, err := s.Batch(ctx, 1); ok || err != nil {
		t.Fatalf("batch never stored: found %v, %v", ok, err)
	}
	if _, ok, err := s.Job(ctx, 1, 1); ok || err != nil {
		t.Fatalf("job never stored: found %v, %v", ok, err)
	}
	bl, err := s.ListBatches(ctx, nil, nil, 0)
	must(t, err)
	jl, err := s.ListJobs(ctx, 1, nil, 0)
	must(t, err)
	led, err := s.Ledger(ctx, "p", -1<<30, 1<<30)
	must(t, err)
	if len(bl.Batches) != 0 || bl.Batches == nil || len(jl.Jobs) != 0 || jl.Jobs == nil || len(led) != 0 || led == nil {
		t.Fatalf("empty store lists %v, %v, %v (each must be an empty list, not null)", bl, jl, led)
	}
	must(t, s.Ping(ctx))
}

func testBatchRoundTrip(t *testing.T, s history.Store) {
	f := makeBatch(7, "genomics", "alice", 20, 100)
	if !export(t, s, f) {
		t.Fatal("the first export of a batch wrote nothing")
	}
	v, err := s.Stored(ctx, 7)
	must(t, err)
	if v != (history.Stored{Version: 100}) {
		t.Fatalf("stored at %+v, want version 100", v)
	}
	got, ok, err := s.Batch(ctx, 7)
	must(t, err)
	if !ok {
		t.Fatal("stored batch not found")
	}
	same(t, "batch", got, f.batch)
	for _, id := range []uint32{1, 7, 20, 21, 22, 23} {
		j, ok, err := s.Job(ctx, 7, id)
		must(t, err)
		if !ok {
			t.Fatalf("job %d not found", id)
		}
		same(t, fmt.Sprintf("job %d", id), j, f.full[id-1])
	}
	if j, _, _ := s.Job(ctx, 7, 3); j.Name != "align[2]" || j.ArrayIndex != 2 {
		t.Fatalf("array job 3 is %q index %d, want align[2] index 2", j.Name, j.ArrayIndex)
	}
	if _, ok, err := s.Job(ctx, 7, 24); ok || err != nil {
		t.Fatalf("job 24 of a 23-job batch: found %v, %v", ok, err)
	}
	if _, ok, err := s.Job(ctx, 8, 1); ok || err != nil {
		t.Fatalf("job of another batch: found %v, %v", ok, err)
	}
}

// allJobs pages through a listing.
func allJobs(t *testing.T, s history.Store, batch uint64, q string) (jobs []api.Job, pages int) {
	t.Helper()
	jq, err := api.ParseJobQuery(q)
	must(t, err)
	var last uint32
	for {
		page, err := s.ListJobs(ctx, batch, jq, last)
		must(t, err)
		pages++
		if len(page.Jobs) > history.PageSize {
			t.Fatalf("a page of %d jobs", len(page.Jobs))
		}
		jobs = append(jobs, page.Jobs...)
		if page.LastID == 0 {
			return jobs, pages
		}
		if uint32(page.LastID) <= last {
			t.Fatalf("LastID went from %d to %d", last, page.LastID)
		}
		last = uint32(page.LastID)
	}
}

func testJobs(t *testing.T, s history.Store) {
	f := makeBatch(3, "genomics", "alice", 120, 50)
	other := makeBatch(4, "genomics", "alice", 10, 51)
	export(t, s, f)
	export(t, s, other)

	all, pages := allJobs(t, s, 3, "")
	if pages != 3 {
		t.Fatalf("123 jobs came in %d pages, want 3 (50, 50, 23)", pages)
	}
	same(t, "every job", all, f.full)

	cases := []struct {
		q    string
		want func(j *api.Job) bool
	}{
		{"state=failed", func(j *api.Job) bool { return j.State == api.JobFailed }},
		{"state=bad", func(j *api.Job) bool { return j.State == api.JobFailed || j.State == api.JobCancelled }},
		{"state=done", func(*api.Job) bool { return true }},
		{"state=running", func(*api.Job) bool { return false }},
		{"state=success state=failed", func(*api.Job) bool { return false }},
		{"name=align", func(j *api.Job) bool { return j.JobID <= 120 }},
		{"name=align[42]", func(j *api.Job) bool { return j.JobID == 43 }},
		{"name=report", func(j *api.Job) bool { return j.Name == "report" }},
		{"attr:step=merge", func(j *api.Job) bool { return j.Name == "merge" }},
		{"attr:step", func(*api.Job) bool { return true }},
		{"attr:nope", func(*api.Job) bool { return false }},
		{"state=success attr:step=align", func(j *api.Job) bool { return j.JobID <= 120 && j.State == api.JobSuccess }},
	}
	for _, c := range cases {
		got, _ := allJobs(t, s, 3, c.q)
		var want []api.Job
		for i := range f.full {
			if c.want(&f.full[i]) {
				want = append(want, f.full[i])
			}
		}
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		same(t, "jobs matching "+c.q, got, want)
	}
	if got, _ := allJobs(t, s, 4, ""); len(got) != 13 || got[0].BatchID != 4 {
		t.Fatalf("the other batch has %d jobs", len(got))
	}
	if got, _ := allJobs(t, s, 5, ""); len(got) != 0 {
		t.Fatalf("a batch never stored lists %d jobs", len(got))
	}
	page, err := s.ListJobs(ctx, 3, nil, 100)
	must(t, err)
	if len(page.Jobs) != 23 || page.Jobs[0].JobID != 101 || page.LastID != 0 {
		t.Fatalf("from job 100: %d jobs from %d, last %d", len(page.Jobs), page.Jobs[0].JobID, page.LastID)
	}
}

func testIdempotent(t *testing.T, s history.Store) {
	f := makeBatch(9, "genomics", "bob", 30, 200)
	if !export(t, s, f) {
		t.Fatal("the first export wrote nothing")
	}
	// A retry (a new leader, or an export cut short) at the same version.
	if export(t, s, f) {
		t.Fatal("a second export at the same version wrote the batch again")
	}
	// An older version never overwrites a newer one.
	old := f
	old.batch.Version, old.batch.Name = 150, "stale"
	if written, err := s.PutBatch(ctx, old.batch, nil, nil); err != nil || written {
		t.Fatalf("an older version: written %v, %v", written, err)
	}
	got, _, _ := s.Batch(ctx, 9)
	same(t, "batch after retries", got, f.batch)
	jobs, _ := allJobs(t, s, 9, "")
	same(t, "jobs after retries", jobs, f.full)
	led, err := s.Ledger(ctx, "genomics", -1<<30, 1<<30)
	must(t, err)
	same(t, "ledger after retries", led, f.ledger)

	// The batch was reopened (an update), ran more jobs and completed
	// again: a newer version replaces it, its jobs and its ledger rows.
	newer := makeBatch(9, "genomics", "bob", 40, 300)
	newer.ledger = newer.ledger[:1]
	newer.ledger[0].Cost = 3
	if !export(t, s, newer) {
		t.Fatal("a newer version was not written")
	}
	got, _, _ = s.Batch(ctx, 9)
	same(t, "batch at the newer version", got, newer.batch)
	jobs, _ = allJobs(t, s, 9, "")
	same(t, "jobs at the newer version", jobs, newer.full)
	led, err = s.Ledger(ctx, "genomics", -1<<30, 1<<30)
	must(t, err)
	same(t, "ledger at the newer version", led, newer.ledger)
}

func allBatches(t *testing.T, s history.Store, q string, projects []string) []int64 {
	t.Helper()
	bq, err := api.ParseBatchQuery(q)
	must(t, err)
	var ids []int64
	var last uint64
	for {
		page, err := s.ListBatches(ctx, bq, projects, last)
		must(t, err)
		if len(page.Batches) > history.PageSize {
			t.Fatalf("a page of %d batches", len(page.Batches))
		}
		for _, b := range page.Batches {
			ids = append(ids, b.ID)
		}
		if page.LastID == 0 {
			return ids
		}
		if last != 0 && uint64(page.LastID) >= last {
			t.Fatalf("LastID went from %d to %d", last, page.LastID)
		}
		last = uint64(page.LastID)
	}
}

func testBatchList(t *testing.T, s history.Store) {
	const n = 260 // more than one read chunk of the stores
	var all []history.Batch
	for id := uint64(1); id <= n; id++ {
		project, user := "genomics", "alice"
		if id%4 == 0 {
			project, user = "imaging", "carol"
		}
		f := makeBatch(id, project, user, 1, 1000+id)
		switch id % 5 {
		case 1:
			f.batch.Cancelled = true
		case 2:
			f.batch.NFailed, f.batch.NSucceeded = 1, f.batch.NSucceeded-1
		case 3:
			f.batch.NCancelled, f.batch.NSucceeded = 0, f.batch.NJobs
		}
		if id == 77 {
			f.batch.Attributes["rare"] = "yes"
		}
		// Batches need not arrive in ID order.
		must(t, s.PutGroups(ctx, id, f.groups))
		must(t, s.PutJobs(ctx, id, f.jobs))
		if _, err := s.PutBatch(ctx, f.batch, nil, nil); err != nil {
			t.Fatal(err)
		}
		all = append(all, f.batch)
	}
	want := func(keep func(b *api.Batch) bool) []int64 {
		var out []int64
		for i := len(all) - 1; i >= 0; i-- {
			if keep(&all[i].Batch) {
				out = append(out, all[i].ID)
			}
		}
		return out
	}
	cases := []struct {
		q        string
		projects []string
		keep     func(b *api.Batch) bool
	}{
		{"", nil, func(*api.Batch) bool { return true }},
		{"", []string{"imaging"}, func(b *api.Batch) bool { return b.BillingProject == "imaging" }},
		{"", []string{"genomics", "imaging"}, func(*api.Batch) bool { return true }},
		{"", []string{}, func(*api.Batch) bool { return false }},
		{"", []string{"nobody"}, func(*api.Batch) bool { return false }},
		{"user=carol", nil, func(b *api.Batch) bool { return b.User == "carol" }},
		{"billing_project=genomics", []string{"imaging"}, func(*api.Batch) bool { return false }},
		{"state=cancelled", nil, func(b *api.Batch) bool { return b.Cancelled }},
		{"state=failure", []string{"genomics"}, func(b *api.Batch) bool { return b.NFailed > 0 && b.BillingProject == "genomics" }},
		{"state=success", nil, func(b *api.Batch) bool { return b.ID%5 == 3 }},
		{"state=running", nil, func(*api.Batch) bool { return false }},
		{"state=complete", nil, func(*api.Batch) bool { return true }},
		{"name=batch-12", nil, func(b *api.Batch) bool { return b.ID == 12 }},
		{"attr:rare=yes", nil, func(b *api.Batch) bool { return b.ID == 77 }},
		{"attr:set=s1 user=alice", nil, func(b *api.Batch) bool { return b.ID%3 == 1 && b.User == "alice" }},
	}
	for _, c := range cases {
		got := allBatches(t, s, c.q, c.projects)
		w := want(c.keep)
		if len(got) == 0 && len(w) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("batches matching %q in %v:\n got %v\nwant %v", c.q, c.projects, got, w)
		}
	}
	page, err := s.ListBatches(ctx, nil, nil, 0)
	must(t, err)
	if len(page.Batches) != history.PageSize || page.Batches[0].ID != n || page.LastID != int64(n-history.PageSize+1) {
		t.Fatalf("first page: %d batches from %d, last %d", len(page.Batches), page.Batches[0].ID, page.LastID)
	}
	same(t, "first batch of the first page", page.Batches[0], all[n-1].Batch)
	page, err = s.ListBatches(ctx, nil, nil, 3)
	must(t, err)
	if len(page.Batches) != 2 || page.LastID != 0 {
		t.Fatalf("below 3: %d batches, last %d", len(page.Batches), page.LastID)
	}
}

func testLedger(t *testing.T, s history.Store) {
	day := int32(t0.Unix() / 86400)
	rows := func(id uint64, project, user string, costs ...float64) []history.LedgerRow {
		var out []history.LedgerRow
		for i, c := range costs {
			out = append(out, history.LedgerRow{BillingProject: project, Day: day + int32(i), User: user, Batch: id, Cost: money.FromDollars(c)})
		}
		return out
	}
	for _, f := range []struct {
		id            uint64
		project, user string
		costs         []float64
	}{
		{2, "genomics", "bob", []float64{1, 2, 3}},
		{1, "genomics", "alice", []float64{0.5, 0.25}},
		{3, "imaging", "alice", []float64{10}},
		{4, "genomics", "alice", []float64{0, 0, 0, 7}},
	} {
		b := makeBatch(f.id, f.project, f.user, 1, 10)
		if _, err := s.PutBatch(ctx, b.batch, rows(f.id, f.project, f.user, f.costs...), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Ledger(ctx, "genomics", day, day+1)
	must(t, err)
	want := []history.LedgerRow{
		{BillingProject: "genomics", Day: day, User: "alice", Batch: 1, Cost: money.FromDollars(0.5)},
		{BillingProject: "genomics", Day: day, User: "bob", Batch: 2, Cost: money.FromDollars(1)},
		{BillingProject: "genomics", Day: day, User: "alice", Batch: 4, Cost: money.FromDollars(0)},
		{BillingProject: "genomics", Day: day + 1, User: "alice", Batch: 1, Cost: money.FromDollars(0.25)},
		{BillingProject: "genomics", Day: day + 1, User: "bob", Batch: 2, Cost: money.FromDollars(2)},
		{BillingProject: "genomics", Day: day + 1, User: "alice", Batch: 4, Cost: money.FromDollars(0)},
	}
	same(t, "genomics, two days", got, want)
	got, err = s.Ledger(ctx, "genomics", day+3, day+3)
	must(t, err)
	same(t, "genomics, day 4", got, []history.LedgerRow{{BillingProject: "genomics", Day: day + 3, User: "alice", Batch: 4, Cost: money.FromDollars(7)}})
	got, err = s.Ledger(ctx, "imaging", day-10, day-1)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("days before any cost: %v", got)
	}
	got, err = s.Ledger(ctx, "genom", -1<<30, 1<<30)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("a project named by a prefix of another: %v", got)
	}
}

// testEfficiency: efficiency rows come back by billing project, by user
// and by both, on the days asked, in order, up to a limit; a batch stored
// again replaces its rows, and a project named by a prefix of another has
// none.
func testEfficiency(t *testing.T, s history.Store) {
	day := int32(t0.Unix() / 86400)
	version := uint64(10)
	put := func(id uint64, project, user string, rows ...history.EfficiencyRow) {
		t.Helper()
		version++
		b := makeBatch(id, project, user, 1, version)
		if _, err := s.PutBatch(ctx, b.batch, nil, rows); err != nil {
			t.Fatal(err)
		}
	}
	put(2, "genomics", "bob", effRow(2, "genomics", "bob", day, "align", 3), effRow(2, "genomics", "bob", day+2, "call", 1))
	put(1, "genomics", "alice", effRow(1, "genomics", "alice", day, "align", 1), effRow(1, "genomics", "alice", day+1, "merge", 2))
	put(3, "imaging", "alice", effRow(3, "imaging", "alice", day+1, "segment", 5))
	query := func(q history.EfficiencyQuery, limit int) ([]string, bool) {
		t.Helper()
		rows, more, err := s.Efficiency(ctx, q, limit)
		must(t, err)
		var out []string
		for _, r := range rows {
			if r.Summary.Attempts == 0 || r.Summary.Peaks.Quantile(0.95) != 1<<30 || r.Summary.JobGroup != "stage/"+r.Summary.Name {
				t.Errorf("row %+v lost its sums", r)
			}
			out = append(out, fmt.Sprintf("%s/%s/%d/%d/%s/%d", r.BillingProject, r.User, r.Day-day, r.Batch, r.Summary.Name, r.Summary.Attempts))
		}
		return out, more
	}
	check := func(what string, q history.EfficiencyQuery, limit int, want []string, wantMore bool) {
		t.Helper()
		got, more := query(q, limit)
		if !reflect.DeepEqual(got, want) || more != wantMore {
			t.Errorf("%s: got %q (more %v), want %q (more %v)", what, got, more, want, wantMore)
		}
	}
	all := history.EfficiencyQuery{From: day - 5, To: day + 5}
	p := all
	p.BillingProject = "genomics"
	check("genomics", p, 100, []string{"genomics/alice/0/1/align/1", "genomics/bob/0/2/align/3", "genomics/alice/1/1/merge/2", "genomics/bob/2/2/call/1"}, false)
	check("genomics, 3 rows", p, 3, []string{"genomics/alice/0/1/align/1", "genomics/bob/0/2/align/3", "genomics/alice/1/1/merge/2"}, true)
	u := all
	u.User = "alice"
	check("alice", u, 100, []string{"genomics/alice/0/1/align/1", "genomics/alice/1/1/merge/2", "imaging/alice/1/3/segment/5"}, false)
	pu := p
	pu.User = "alice"
	check("alice in genomics", pu, 100, []string{"genomics/alice/0/1/align/1", "genomics/alice/1/1/merge/2"}, false)
	days := p
	days.From, days.To = day+1, day+2
	check("genomics, days 1..2", days, 100, []string{"genomics/alice/1/1/merge/2", "genomics/bob/2/2/call/1"}, false)
	prefix := all
	prefix.BillingProject = "genom"
	check("a prefix of a project", prefix, 100, nil, false)
	// Stored again (a newer version): its rows replace the old ones.
	put(2, "genomics", "bob", effRow(2, "genomics", "bob", day+3, "align", 7))
	check("genomics after batch 2 was stored again", p, 100, []string{"genomics/alice/0/1/align/1", "genomics/alice/1/1/merge/2", "genomics/bob/3/2/align/7"}, false)
	b := all
	b.User = "bob"
	check("bob after his batch was stored again", b, 100, []string{"genomics/bob/3/2/align/7"}, false)
}
