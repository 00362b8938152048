package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testcluster"
)

const placementHCL = `
cluster "a1" {
  region = "east"
  pool "std" {
    cpu            = 32
    memory         = "64GiB"
    price_per_hour = 1.2
  }
}
cluster "a2" {
  region = "east"
}
cluster "b1" {
  region = "west"
}
cluster "b2" {
  region = "west"
}
team "gen" {
  billing_projects = ["p-gen"]
  quota {
    cpu = 16
  }
}
team "img" {
  billing_projects = ["p-img"]
  strategy         = "spread"
  quota {
    cpu    = 16
    memory = "64GiB"
  }
}
team "ml" {
  billing_projects = ["p-ml"]
  quota {
    cpu = 16
  }
}
`

// TestPlacementAcrossRegions runs three teams with binding quotas on two
// regions of two clusters each, real servers and real worker processes,
// through everything an operator does to clusters: it checks, from the
// API every 100 ms, that no team ever holds more than its quota and how
// evenly spread places each team; then it disables a cluster (no attempt
// goes there afterwards), evacuates another (its attempts are preempted,
// not failed), kills every worker of one region with SIGKILL, and kills
// the leader. Every job still succeeds exactly once, and the servers'
// histories agree.
func TestPlacementAcrossRegions(t *testing.T) {
	c := newCluster(t, 3, "-lost-timeout", "20s")
	workers := map[string]*testcluster.Process{}
	for _, w := range []struct{ name, region, cluster string }{
		{"wa1", "east", "a1"}, {"wa2", "east", "a2"}, {"wb1", "west", "b1"}, {"wb2", "west", "b2"},
	} {
		args := []string{"-region", w.region, "-cluster", w.cluster, "-pool", "std"}
		if w.name == "wb2" {
			args = append(args, "-gpus", "t4:2")
		}
		p, err := c.StartWorker(w.name, 32, "64GiB", args...)
		if err != nil {
			t.Fatal(err)
		}
		workers[w.name] = p
	}
	admin := c.client()
	ctx := context.Background()
	env := []string{"DROVER_ADDR=" + c.HTTPAddrs(), "DROVER_TOKEN=" + c.token()}

	teams := []string{"gen", "img", "ml"}
	users := map[string]*api.Client{}
	for _, team := range teams {
		u, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: "u-" + team})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: "p-" + team, Members: []string{"u-" + team}}); err != nil {
			t.Fatal(err)
		}
		users[team] = api.NewClient(c.HTTPAddrs(), u.Token)
	}
	file := filepath.Join(t.TempDir(), "placement.hcl")
	if err := os.WriteFile(file, []byte(placementHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	runCLI(t, env, "placement", "apply", file).must(t, 0)
	waitWorkers(t, admin, 4)

	// GPU jobs run only where their GPUs are, two at a time on wb2's two.
	gpuBatch, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "gpu", Jobs: []api.JobSpec{
		{JobID: 1, Count: 4, Command: []string{"sleep", "0.2"}, CPU: 1, Memory: 16 << 20, GPUs: 1, GPUType: "t4"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitBatch(t, admin, gpuBatch.ID, time.Minute, "the GPU batch", func(b *api.Batch) bool { return b.State == api.BatchComplete && b.NSucceeded == 4 })
	gjobs, err := admin.AllJobs(ctx, gpuBatch.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range gjobs {
		if a := j.Attempts[len(j.Attempts)-1]; a.Cluster != "b2" || j.GPUType != "t4" || j.GPUs != 1 {
			t.Fatalf("GPU job %d ran in %s: %+v", j.JobID, a.Cluster, j)
		}
	}

	const perTeam = 500
	batches := map[string]int64{}
	for _, team := range teams {
		res, err := users[team].CreateBatch(ctx, &api.CreateBatchRequest{Name: team, BillingProject: "p-" + team, Jobs: []api.JobSpec{
			{JobID: 1, Name: "s", Count: perTeam, Command: []string{"sleep", "1"}, CPU: 0.5, Memory: 16 << 20}}})
		if err != nil {
			t.Fatal(err)
		}
		batches[team] = res.ID
	}
	const total = 3 * perTeam

	// The sampler: quota in use and spread, every 100 ms, from the API.
	s := &sampler{c: admin, batches: batches, enabled: []string{"a1", "a2", "b1", "b2"}, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()

	done := func() int64 {
		var n int64
		for _, id := range batches {
			if b, err := admin.GetBatch(ctx, id); err == nil {
				n += b.NCompleted
			}
		}
		return n
	}
	waitFor := func(frac float64) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for float64(done()) < frac*total {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %.0f%% of the jobs (%d done)", frac*100, done())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// 1. Disable a2 (no evacuation): nothing new goes there.
	waitFor(0.2)
	runCLI(t, env, "cluster", "disable", "a2", "-reason", "maintenance").must(t, 0)
	s.setEnabled("a1", "b1", "b2")
	before := attemptsIn(t, admin, batches, "a2")
	t.Logf("a2 disabled with %d attempts placed there before", len(before))

	// 2. Disable b1 with evacuation: its attempts are preempted.
	waitFor(0.35)
	out := runCLI(t, env, "cluster", "disable", "b1", "-reason", "drain", "-evacuate", "-json").must(t, 0)
	ev := decodeJSON[api.ClusterStateResponse](t, out.stdout)
	if ev.Cluster.Enabled || ev.Cluster.By != "root" {
		t.Fatalf("b1 after disable: %+v", ev.Cluster)
	}
	s.setEnabled("a1", "b2")
	t.Logf("b1 evacuated: %d attempts preempted", ev.Preempted)

	// 3. Kill every worker of the east region.
	waitFor(0.5)
	workers["wa1"].Kill9()
	workers["wa2"].Kill9()
	s.setEnabled("b2")
	// a1 is down once none of its workers has been heard from for 10 s.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cl, err := admin.GetCluster(ctx, "a1")
		if err == nil && cl.Down {
			t.Logf("a1 down: %d workers, %d heard", cl.Workers, cl.Heard)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a1 not reported down 30 s after its workers were killed: %+v %v", cl, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	runCLI(t, env, "cluster", "enable", "b1").must(t, 0)
	s.setEnabled("b1", "b2")

	// 4. Kill the leader, bring it back.
	waitFor(0.65)
	leader := c.waitLeader(30 * time.Second)
	c.Servers[leader].Kill9()
	if next := c.waitLeader(30 * time.Second); next == leader {
		t.Fatal("the killed server still leads")
	}
	c.Servers[leader].Start()

	for _, id := range batches {
		b := waitBatch(t, admin, id, 4*time.Minute, "the batch to complete", func(b *api.Batch) bool { return b.State == api.BatchComplete })
		if b.NSucceeded != perTeam {
			// Say which jobs, and how each attempt ended.
			bad, _ := admin.AllJobs(ctx, id, "state=bad")
			for _, j := range bad {
				t.Logf("job %d: %s, exit %v, %q; attempts %+v", j.JobID, j.State, j.ExitCode, j.Message, j.Attempts)
			}
			t.Fatalf("batch %d: %d of %d succeeded", id, b.NSucceeded, perTeam)
		}
	}
	s.finish()

	// Every job succeeded exactly once, preemptions are not failures,
	// and nothing started in a2 after it was disabled.
	preempted, rerun := 0, 0
	for team, id := range batches {
		jobs, err := admin.AllJobs(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			ok := 0
			for _, a := range j.Attempts {
				switch a.State {
				case api.OutcomeSuccess:
					ok++
				case api.OutcomePreempted:
					preempted++
				case api.OutcomeFailed, api.OutcomeError:
					t.Fatalf("%s job %d has a %s attempt: %+v", team, j.JobID, a.State, a)
				}
				if a.Cluster == "a2" && !before[fmt.Sprintf("%d/%d/%d", id, j.JobID, a.Attempt)] {
					t.Fatalf("%s job %d attempt %d was placed in a2 after it was disabled", team, j.JobID, a.Attempt)
				}
			}
			if ok != 1 {
				t.Fatalf("%s job %d has %d successful attempts: %+v", team, j.JobID, ok, j.Attempts)
			}
			if len(j.Attempts) > 1 {
				rerun++
			}
		}
	}
	if ev.Preempted > 0 && preempted < ev.Preempted {
		t.Fatalf("%d attempts were preempted at the evacuation, %d are recorded as preempted", ev.Preempted, preempted)
	}
	t.Logf("all %d jobs succeeded once; %d ran more than once, %d attempts preempted", total, rerun, preempted)

	s.report(t)
	waitApplied(t, c)
	checkHistories(t, c, 2)
}

func waitWorkers(t *testing.T, c *api.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cl, err := c.ListClusters(context.Background())
		got := 0
		for _, x := range cl {
			got += x.Workers
		}
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workers active: %+v %v", got, n, cl, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// attemptsIn lists the attempts placed in a cluster so far.
func attemptsIn(t *testing.T, c *api.Client, batches map[string]int64, cluster string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, id := range batches {
		jobs, err := c.AllJobs(context.Background(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			for _, a := range j.Attempts {
				if a.Cluster == cluster {
					out[fmt.Sprintf("%d/%d/%d", id, j.JobID, a.Attempt)] = true
				}
			}
		}
	}
	return out
}

// sampler reads the teams from the API every 100 ms: quota in use against
// the quota, and each team's cores per enabled cluster against an even
// split while the team has jobs waiting.
type sampler struct {
	c       *api.Client
	batches map[string]int64
	stop    chan struct{}
	done    chan struct{}

	mu        sync.Mutex
	enabled   []string
	samples   int
	overQuota []string
	devs      []float64 // per team and sample while 4 clusters were enabled
	errs      int
}

func (s *sampler) setEnabled(names ...string) {
	s.mu.Lock()
	s.enabled = names
	s.mu.Unlock()
}

func (s *sampler) run() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		teams, err := s.c.ListQueues(ctx)
		var waiting map[string]bool
		if err == nil {
			waiting = map[string]bool{}
			for _, t := range teams {
				b, berr := s.c.GetBatch(ctx, s.batches[t.Path])
				if berr != nil {
					err = berr
					break
				}
				waiting[t.Path] = b.NJobs-b.NCompleted-b.NRunning > 0
			}
		}
		cancel()
		s.mu.Lock()
		if err != nil {
			s.errs++ // a leader change; the next sample reads again
			s.mu.Unlock()
			continue
		}
		s.samples++
		for _, t := range teams {
			if t.Cap == nil {
				s.overQuota = append(s.overQuota, fmt.Sprintf("team %s became a queue without a cap: %+v", t.Path, t))
				continue
			}
			if t.Used.CPU > t.Cap.CPU+1e-9 {
				s.overQuota = append(s.overQuota, fmt.Sprintf("%s uses %g of %g cores", t.Path, t.Used.CPU, t.Cap.CPU))
			}
			if len(s.enabled) != 4 || !waiting[t.Path] || t.Used.CPU < t.Cap.CPU {
				continue
			}
			even := t.Used.CPU / float64(len(s.enabled))
			dev := 0.0
			for _, name := range s.enabled {
				dev = math.Max(dev, math.Abs(t.UsedByCluster[name]-even)/even)
			}
			s.devs = append(s.devs, dev)
		}
		s.mu.Unlock()
	}
}

func (s *sampler) finish() {
	close(s.stop)
	<-s.done
}

func (s *sampler) report(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.overQuota) > 0 {
		t.Fatalf("quota exceeded in %d samples: %s", len(s.overQuota), strings.Join(s.overQuota, "; "))
	}
	if s.samples < 50 || len(s.devs) < 10 {
		t.Fatalf("only %d samples (%d read errors), %d spread samples", s.samples, s.errs, len(s.devs))
	}
	devs := append([]float64(nil), s.devs...)
	sort.Float64s(devs)
	within := 0
	for _, d := range devs {
		if d <= 0.10+1e-9 {
			within++
		}
	}
	t.Logf("%d samples, quota never exceeded; spread over 4 clusters: deviation from even p50 %.1f%%, max %.1f%%, %d of %d samples within 10%%",
		s.samples, devs[len(devs)/2]*100, devs[len(devs)-1]*100, within, len(devs))
	if float64(within) < 0.9*float64(len(devs)) {
		t.Fatalf("spread kept each team within 10%% of even in only %d of %d samples", within, len(devs))
	}
}

// TestRegionDeadlockAndJobWhy runs the dev agent with two regions of one
// 2-core worker each. Batches restricted to {A}, {B} and {A, B},
// interleaved in one user's queue with room for only part of them, all
// complete (the region deadlock of Hail Batch). Then `drover job why`
// gives the right first reason in six set-ups: a parent not finished, a
// team at its quota, no worker large enough, a disabled cluster, no
// worker with the GPUs, and fair share.
func TestRegionDeadlockAndJobWhy(t *testing.T) {
	a := startAgent(t, "", "", "-clusters", "A/a:1x2,B/b:1x2")
	c := a.client()
	ctx := context.Background()
	waitWorkers(t, c, 2)

	var ids []int64
	for i, regions := range [][]string{{"A"}, {"B"}, {"A", "B"}, {"A"}, {"B"}, {"A", "B"}} {
		res, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: fmt.Sprint("dl", i), Jobs: []api.JobSpec{
			{JobID: 1, Count: 6, Command: []string{"sleep", "0.3"}, CPU: 1, Memory: 64 << 20, Regions: regions}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	for _, id := range ids {
		b := waitBatch(t, c, id, 90*time.Second, "a region-restricted batch to complete", func(b *api.Batch) bool { return b.State == api.BatchComplete })
		if b.NSucceeded != 6 {
			t.Fatalf("batch %d: %+v", id, b)
		}
		jobs, err := c.AllJobs(ctx, id, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			last := j.Attempts[len(j.Attempts)-1]
			if len(j.Regions) == 1 && last.Region != j.Regions[0] {
				t.Fatalf("job %d/%d restricted to %v ran in %s", id, j.JobID, j.Regions, last.Region)
			}
		}
	}

	why := func(b, j int64) api.WhyReason {
		t.Helper()
		r := a.drover(a.token, "job", "why", fmt.Sprint(b), fmt.Sprint(j), "-json").must(t, 0)
		w := decodeJSON[api.JobWhy](t, r.stdout)
		if len(w.Reasons) == 0 {
			t.Fatalf("job %d/%d: no reason", b, j)
		}
		return w.Reasons[0]
	}
	// eventually polls until the job's first reason is the expected one
	// (the reasons come from the leader's next scheduling round).
	eventually := func(what string, b, j int64, reason, contains string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := why(b, j)
			if r.Reason == reason && strings.Contains(r.Message, contains) {
				t.Logf("%s: %s", what, r.Message)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: first reason %q %q, want %q containing %q", what, r.Reason, r.Message, reason, contains)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	submit := func(cl *api.Client, project string, jobs ...api.JobSpec) int64 {
		t.Helper()
		res, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: project, Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	long := func(id int64, regions ...string) api.JobSpec {
		return api.JobSpec{JobID: id, Command: []string{"sleep", "120"}, CPU: 1, Memory: 64 << 20, Regions: regions}
	}

	// 1. A parent not finished.
	child := long(2)
	child.ParentIDs = []int64{1}
	p := submit(c, "default", long(1, "A"), child)
	eventually("parent", p, 2, "parents", "parent 1 not finished")

	// 2. No worker large enough: refused at submit, naming the largest
	// (a job submitted before its machine left still says why it waits:
	// memory_capacity, server's TestBatchAndJobStatusSayWhyJobsWait).
	refusedAtSubmit := func(what string, j api.JobSpec, words string) {
		t.Helper()
		_, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{j}})
		if !api.IsStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), words) {
			t.Fatalf("%s: %v, want a 400 saying %q", what, err, words)
		}
	}
	refusedAtSubmit("too large", api.JobSpec{JobID: 1, Command: []string{"true"}, Memory: 1 << 40}, "memory 1TiB is more than the largest machine offers (4GiB: worker")

	// 3. The only cluster it may use is disabled.
	a.drover(a.token, "cluster", "disable", "b", "-reason", "maintenance").must(t, 0)
	d := submit(c, "default", long(1, "B"))
	eventually("disabled", d, 1, "cluster_disabled", "cluster b disabled (maintenance")
	a.drover(a.token, "cluster", "enable", "b").must(t, 0)
	waitBatch(t, c, d, 20*time.Second, "the job to start once b is enabled", func(b *api.Batch) bool { return b.NRunning == 1 })

	// 4. A queue at its quota (a guarantee it may not borrow beyond).
	a.drover(a.token, "billing-project", "create", "pq", "-member", "root").must(t, 0)
	a.drover(a.token, "queue", "set", "quant", "-project", "pq", "-guarantee-cpu", "1", "-borrow-cpu", "0").must(t, 0)
	q := submit(c, "pq", long(1), long(2), long(3))
	eventually("quota", q, 2, "quota_cpu", "queue quant at its cpu quota (1 of 1 cores)")
	// The round passes one blocked job on to be explained; the next is
	// told from the queue's use.
	eventually("quota, not passed", q, 3, "quota_cpu", "queue quant at its cpu quota (1 of 1 cores)")
	show := decodeJSON[api.Queue](t, a.drover(a.token, "queue", "show", "quant", "-json").must(t, 0).stdout)
	if show.Used.CPU != 1 || show.Cap == nil || show.Cap.CPU != 1 || show.UsedJobs != 1 {
		t.Fatalf("queue show: %+v", show)
	}

	// 5. No machine has the GPUs it needs: refused at submit too.
	refusedAtSubmit("gpu", api.JobSpec{JobID: 1, Command: []string{"true"}, GPUs: 1, GPUType: "a100"}, "gpu_type a100: no machine offers it (GPU types offered: none)")

	// 6. Fair share: another user with fewer cores running comes first,
	// and every core is taken (root holds 3: parent, disabled-then-enabled
	// and quota jobs; alice takes the last one).
	u, err := c.CreateUser(ctx, &api.CreateUserRequest{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddMember(ctx, "default", "alice"); err != nil {
		t.Fatal(err)
	}
	alice := api.NewClient(a.addr, u.Token)
	al := submit(alice, "default", long(1), long(2), long(3))
	waitBatch(t, c, al, 20*time.Second, "alice's first job to run", func(b *api.Batch) bool { return b.NRunning == 1 })
	f := submit(c, "default", long(1))
	eventually("fair share", f, 1, "fair_share", "waiting for fair share behind 1 user")

	// The listings carry the placement too.
	regions := decodeJSON[[]api.Region](t, a.drover(a.token, "region", "list", "-json").must(t, 0).stdout)
	if len(regions) != 2 || regions[0].Name != "A" || regions[0].Workers != 1 || regions[0].FreeCPU != 0 {
		t.Fatalf("region list: %+v", regions)
	}
	out := a.drover(a.token, "cluster", "list").must(t, 0).stdout
	if !strings.Contains(out, "enabled") || !strings.Contains(out, "a ") {
		t.Fatalf("cluster list:\n%s", out)
	}
}
