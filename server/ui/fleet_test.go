package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/autoscaler/provider/sim"
	"github.com/drover-sched/drover/server"
)

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// row is the table row of a page whose attribute (data-worker="3") is
// given.
func row(t *testing.T, body, attr string) string {
	t.Helper()
	i := strings.Index(body, attr)
	if i < 0 {
		t.Fatalf("no row %s in the page:\n%s", attr, body)
	}
	rest := body[i:]
	if j := strings.Index(rest, "</tr>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestWorkersPage: an admin sees each worker with its place, labels,
// capacity and use of cores, memory and GPUs, jobs and when it was last
// heard, and the count by state; a user who is no admin sees no Workers
// link, and the page answers the API's 403.
func TestWorkersPage(t *testing.T) {
	w := startWeb(t)
	ctx := context.Background()
	if err := w.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "east-a", Region: "east"}}}); err != nil {
		t.Fatal(err)
	}
	act, err := api.NewClient(w.base, "").Workers().Activate(ctx, &api.ActivateRequest{Name: "gpu-box", NodeID: "n1", CPU: 8, Memory: 32 << 30,
		Secret: "test-secret", Region: "east", Cluster: "east-a", Pool: "big", Labels: map[string]string{"rack": "r7", "disk": "ssd"}, GPUs: 2, GPUType: "a100"})
	if err != nil {
		t.Fatal(err)
	}
	cookie := w.login(w.token).Value
	resp, body := w.do("GET", "/ui/workers", cookie, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="/ui/workers" aria-current="page"`) {
		t.Fatalf("workers page: HTTP %d\n%s", resp.StatusCode, body)
	}
	r := row(t, body, `data-worker="`+itoa(act.InstanceID)+`"`)
	for _, s := range []string{"gpu-box", "east / east-a", "big", "disk=ssd, rack=r7", "0 of 8", "0B of 32GiB", "0 of 2 a100", "data-ago"} {
		if !strings.Contains(r, s) {
			t.Errorf("the worker's row lacks %q:\n%s", s, r)
		}
	}
	if !regexp.MustCompile(`st-active">active</span></td><td class="num">1<`).MatchString(body) {
		t.Errorf("no count of 1 active worker:\n%s", body)
	}
	// A user who is no admin.
	u, err := w.admin.CreateUser(ctx, &api.CreateUserRequest{Name: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	vc := w.login(u.Token).Value
	if _, body := w.do("GET", "/ui/batches", vc, nil, nil); strings.Contains(body, `href="/ui/workers"`) || !strings.Contains(body, `href="/ui/machines"`) {
		t.Errorf("a user's navigation: the workers link shown, or the machines link not:\n%s", body)
	}
	if resp, _ := w.do("GET", "/ui/workers", vc, nil, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the workers page for a user: HTTP %d, want the API's 403", resp.StatusCode)
	}
	// The empty pages: no autoscaler, no queue.
	for path, want := range map[string]string{"/ui/machines": "No machines", "/ui/queues": "No queues"} {
		if resp, body := w.do("GET", path, vc, nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s with nothing to show: HTTP %d\n%s", path, resp.StatusCode, body)
		}
	}
}

// TestMachinesPage: the machines the autoscaler made, with their config,
// cluster, state, price and the job a private machine is for, and the
// count by state.
func TestMachinesPage(t *testing.T) {
	w := startWeb(t, func(cfg *server.Config) {
		cfg.Autoscale = server.DefaultAutoscaleConfig()
		cfg.Autoscale.Provider = sim.New(sim.Options{Clock: wallClock{}, BootDelay: time.Hour}) // no machine boots: they stay launching
		cfg.Autoscale.Interval = 100 * time.Millisecond
	})
	ctx := context.Background()
	if err := w.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true, MaxNodes: 2, BootTimeout: "1h"},
		LaunchConfigs: []api.LaunchConfig{{Name: "c4", Cluster: "a", MachineType: "n4", Zone: "z", CPU: 4, Memory: 16 << 30, PricePerHour: 200_000_000}}}); err != nil {
		t.Fatal(err)
	}
	b, err := w.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "own", BillingProject: "default",
		Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 2, Memory: 1 << 30, MachineType: "n4"}}})
	if err != nil {
		t.Fatal(err)
	}
	var m api.Machine
	deadline := time.Now().Add(20 * time.Second)
	for m.ID == "" {
		if time.Now().After(deadline) {
			t.Fatal("the autoscaler made no machine for the job in 20 s")
		}
		st, err := w.admin.AutoscalerStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, mc := range st.Machines {
			if mc.ForBatch == b.ID {
				m = mc
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if m.ForJob != 1 {
		t.Fatalf("the machine made for job 1: %+v", m)
	}
	cookie := w.login(w.token).Value
	resp, body := w.do("GET", "/ui/machines", cookie, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `href="/ui/machines" aria-current="page"`) {
		t.Fatalf("machines page: HTTP %d\n%s", resp.StatusCode, body)
	}
	r := row(t, body, `data-machine="`+m.ID+`"`)
	for _, s := range []string{"c4", "a", `class="state st-`, "$0.2", `href="/ui/batches/` + itoa(b.ID) + `/jobs/1"`, "job 1 of batch " + itoa(b.ID)} {
		if !strings.Contains(r, s) {
			t.Errorf("the machine's row lacks %q:\n%s", s, r)
		}
	}
	if !regexp.MustCompile(`st-(requested|launching)">(requested|launching)</span></td><td class="num">1<`).MatchString(body) {
		t.Errorf("no count of the machine by its state:\n%s", body)
	}
	// A user of another project sees the machine, not whose job it is.
	u, err := w.admin.CreateUser(ctx, &api.CreateUserRequest{Name: "stranger"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "elsewhere", Members: []string{"stranger"}}); err != nil {
		t.Fatal(err)
	}
	st, err := api.NewClient(w.base, u.Token).AutoscalerStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, mc := range st.Machines {
		if mc.ID == m.ID && (mc.ForBatch != 0 || mc.ForJob != 0 || strings.Contains(mc.Reason, "job "+itoa(b.ID)+"/")) {
			t.Errorf("a stranger reads whose job the machine is for: %+v", mc)
		}
	}
	for _, d := range st.Decisions {
		if strings.Contains(d.Text, "job "+itoa(b.ID)+"/1") {
			t.Errorf("a stranger reads the job in a decision: %q", d.Text)
		}
	}
}

// TestQueuesPageShowsEveryResourceAndWaiting: the queues page shows
// each queue's use of cores, memory and each GPU type against its
// guarantee, and what its Ready jobs wait for (the API's queue list
// carries it, the parent counting its child's).
func TestQueuesPageShowsEveryResourceAndWaiting(t *testing.T) {
	w := startWeb(t)
	ctx := context.Background()
	if err := w.admin.ApplyPlacement(ctx, &api.PlacementConfig{Queues: []api.Queue{
		{Path: "research", Guarantee: api.Quota{CPU: 4, Memory: 8 << 30, GPUs: map[string]int{"a100": 1}}},
		{Path: "research/lab", BillingProjects: []string{"default"}},
	}}); err != nil {
		t.Fatal(err)
	}
	w.batch("waits") // 1 core, 1 MiB; no worker: it waits
	if _, err := w.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "more", BillingProject: "default",
		Jobs: []api.JobSpec{{JobID: 1, Count: 3, Command: []string{"true"}, CPU: 2, Memory: 1 << 30}}}); err != nil {
		t.Fatal(err)
	}
	queues, err := w.admin.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if q.WaitingJobs != 4 || q.Waiting.CPU != 7 || q.Waiting.Memory != 3<<30+1<<20 {
			t.Errorf("queue %s waits for %d jobs, %+v; want 4 jobs, 7 cores, 3 GiB and 1 MiB", q.Path, q.WaitingJobs, q.Waiting)
		}
	}
	cookie := w.login(w.token).Value
	resp, body := w.do("GET", "/ui/queues", cookie, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("queues page: HTTP %d\n%s", resp.StatusCode, body)
	}
	for _, s := range []string{">cores used<", ">memory used<", ">GPUs a100 used<"} {
		if !strings.Contains(body, s) {
			t.Errorf("no column %q:\n%s", s, body)
		}
	}
	r := row(t, body, `data-queue="research"`)
	for _, s := range []string{`data-resource="cores"`, "0 of 4", `data-resource="memory"`, "0B of 8GiB", `data-resource="GPUs a100"`, "0 of 1",
		"4 jobs: 7 cores, 3.0GiB"} {
		if !strings.Contains(r, s) {
			t.Errorf("the research row lacks %q:\n%s", s, r)
		}
	}
	if r := row(t, body, `data-queue="research/lab"`); !strings.Contains(r, "4 jobs: 7 cores") {
		t.Errorf("the leaf's row lacks its waiting jobs:\n%s", r)
	}
}

// TestRestartAJobFromItsPage: a running job's page links to a question
// that names the attempt and the grace; a POST without the answer leads
// back to it and stops nothing; the confirmed form tells the worker to
// stop the attempt, restarted by the user.
func TestRestartAJobFromItsPage(t *testing.T) {
	w := startWeb(t)
	ctx := context.Background()
	act, err := api.NewClient(w.base, "").Workers().Activate(ctx, &api.ActivateRequest{Name: "box", NodeID: "n-restart", CPU: 4, Memory: 8 << 30, Secret: "test-secret"})
	if err != nil {
		t.Fatal(err)
	}
	worker := api.NewClient(w.base, act.Token).Workers()
	b, err := w.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "stuck", Jobs: []api.JobSpec{{JobID: 1, Name: "hang", Command: []string{"sleep", "1000"}, CPU: 1, PreemptionGraceSeconds: 7}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := worker.Sync(ctx, &api.SyncRequest{WaitMillis: 5000})
	if err != nil || len(res.Assign) != 1 {
		t.Fatalf("assigned %+v %v", res, err)
	}
	a := res.Assign[0].AttemptRef
	if _, err := worker.Sync(ctx, &api.SyncRequest{Known: []api.AttemptRef{a}, Events: []api.AttemptEvent{{AttemptRef: a, Kind: api.EventStarted, StartTime: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	cookie := w.login(w.token).Value
	csrf := w.csrf(cookie)
	page := fmt.Sprintf("/ui/batches/%d/jobs/1", b.ID)
	if _, body := w.do("GET", page, cookie, nil, nil); !strings.Contains(body, `href="`+page+`/restart"`) {
		t.Fatalf("a running job's page has no restart link:\n%s", body)
	}
	same := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": w.base}
	told := func() []api.Preemption {
		res, err := worker.Sync(ctx, &api.SyncRequest{Known: []api.AttemptRef{a}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Preempt
	}
	resp, _ := w.do("POST", page+"/restart", cookie, url.Values{"csrf": {csrf}}, same)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page+"/restart" || len(told()) != 0 {
		t.Fatalf("a restart without the answer: HTTP %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := w.do("GET", page+"/restart", cookie, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Restart job 1 (hang)") || !strings.Contains(body, "attempt 1 on box") || !strings.Contains(body, "after 7 s") {
		t.Fatalf("the question: HTTP %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := w.do("POST", page+"/restart", cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}}, same); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the confirmed restart: HTTP %d", resp.StatusCode)
	}
	if p := told(); len(p) != 1 || p[0].AttemptRef != a || !strings.Contains(p[0].Reason, "restarted by root") {
		t.Fatalf("the worker was told %+v", p)
	}
}

// TestRetryFailedJobsFromTheBatchPage: a complete batch with a failed job
// offers its owner a retry; the question counts what runs again, and the
// confirmed form runs it (the worker is handed attempt 2).
func TestRetryFailedJobsFromTheBatchPage(t *testing.T) {
	w := startWeb(t)
	ctx := context.Background()
	act, err := api.NewClient(w.base, "").Workers().Activate(ctx, &api.ActivateRequest{Name: "box", NodeID: "n-retry", CPU: 4, Memory: 8 << 30, Secret: "test-secret"})
	if err != nil {
		t.Fatal(err)
	}
	worker := api.NewClient(w.base, act.Token).Workers()
	b, err := w.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "flaky", Jobs: []api.JobSpec{{JobID: 1, Name: "flake", Command: []string{"false"}, CPU: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := worker.Sync(ctx, &api.SyncRequest{WaitMillis: 5000})
	if err != nil || len(res.Assign) != 1 {
		t.Fatalf("assigned %+v %v", res, err)
	}
	a := res.Assign[0].AttemptRef
	now := time.Now()
	if _, err := worker.Sync(ctx, &api.SyncRequest{Events: []api.AttemptEvent{{AttemptRef: a, Kind: api.EventStarted, StartTime: now},
		{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomeFailed, ExitCode: 1, StartTime: now, EndTime: time.Now(),
			Usage: &api.Usage{PeakMemory: 10 << 20}}}}); err != nil {
		t.Fatal(err)
	}
	cookie := w.login(w.token).Value
	csrf := w.csrf(cookie)
	page := fmt.Sprintf("/ui/batches/%d", b.ID)
	if _, body := w.do("GET", page, cookie, nil, nil); !strings.Contains(body, `href="`+page+`/retry"`) {
		t.Fatalf("a batch with a failed job offers no retry:\n%s", body)
	}
	if resp, body := w.do("GET", page+"/efficiency", cookie, nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-group="flake"`) ||
		!strings.Contains(body, "0.25 cores, 256MiB") {
		t.Fatalf("the efficiency page: HTTP %d\n%s", resp.StatusCode, body)
	}
	resp, body := w.do("GET", page+"/retry", cookie, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Run the 1 job that failed of batch") {
		t.Fatalf("the question: HTTP %d\n%s", resp.StatusCode, body)
	}
	same := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": w.base}
	if resp, _ := w.do("POST", page+"/retry", cookie, url.Values{"csrf": {csrf}, "confirm": {"yes"}}, same); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the confirmed retry: HTTP %d", resp.StatusCode)
	}
	res, err = worker.Sync(ctx, &api.SyncRequest{WaitMillis: 5000})
	if err != nil || len(res.Assign) != 1 || res.Assign[0].Attempt != 2 {
		t.Fatalf("after the retry the worker is handed %+v %v; want attempt 2", res, err)
	}
}

// TestEfficiencyOverAPeriodPage: once a batch is stored in the history,
// the period's report of its project shows its group with the suggested
// size, the billing page links to it, and a report the API refuses shows
// why instead of a page of nothing.
func TestEfficiencyOverAPeriodPage(t *testing.T) {
	w := startWeb(t)
	ctx := context.Background()
	act, err := api.NewClient(w.base, "").Workers().Activate(ctx, &api.ActivateRequest{Name: "box", NodeID: "n-eff", CPU: 4, Memory: 8 << 30, Secret: "test-secret"})
	if err != nil {
		t.Fatal(err)
	}
	worker := api.NewClient(w.base, act.Token).Workers()
	if _, err := w.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "lean", Jobs: []api.JobSpec{{JobID: 1, Name: "lean", Command: []string{"true"}, CPU: 2, Memory: 2 << 30}}}); err != nil {
		t.Fatal(err)
	}
	res, err := worker.Sync(ctx, &api.SyncRequest{WaitMillis: 5000})
	if err != nil || len(res.Assign) != 1 {
		t.Fatalf("assigned %+v %v", res, err)
	}
	a := res.Assign[0].AttemptRef
	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	if _, err := worker.Sync(ctx, &api.SyncRequest{Events: []api.AttemptEvent{{AttemptRef: a, Kind: api.EventStarted, StartTime: start},
		{AttemptRef: a, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: start, EndTime: time.Now(),
			Usage: &api.Usage{CPUSeconds: 0.001, PeakMemory: 100 << 20}}}}); err != nil {
		t.Fatal(err)
	}
	cookie := w.login(w.token).Value
	if _, body := w.do("GET", "/ui/billing", cookie, nil, nil); !strings.Contains(body, `href="/ui/efficiency?billing_project=default"`) {
		t.Fatalf("the billing page does not link to the project's efficiency:\n%s", body)
	}
	var body string
	for deadline := time.Now().Add(time.Minute); ; {
		var resp *http.Response
		resp, body = w.do("GET", "/ui/efficiency?billing_project=default", cookie, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the period's efficiency page: HTTP %d\n%s", resp.StatusCode, body)
		}
		if strings.Contains(body, `data-group="lean"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stored batch never showed:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Little of 2 cores used: 0.25; 100 MiB × 1.2 rounds up to 256 MiB.
	if !strings.Contains(body, "0.25 cores, 256MiB") || !strings.Contains(body, `data-user="root"`) {
		t.Fatalf("the group's suggestion:\n%s", body)
	}
	if _, body := w.do("GET", "/ui/efficiency?from=2020-01-01&to=2026-01-01", cookie, nil, nil); !strings.Contains(body, "at most 366") || !strings.Contains(body, `role="alert"`) {
		t.Fatalf("a period too long:\n%s", body)
	}
}
