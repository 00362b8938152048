package worker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/testkit/testimage"
	"github.com/drover-sched/drover/testkit/testlog"
)

// env is a real server and a real worker running real processes, in one
// test process.
type env struct {
	t       *testing.T
	client  *api.Client
	worker  *Worker
	dir     string // the worker's data dir
	jobsDir string
}

func start(t *testing.T, tweak func(*Config)) *env {
	t.Helper()
	log := testlog.New(t)
	srv, token, err := server.StartReady(server.TestConfig(t.TempDir(), log))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	url := "http://" + srv.HTTPAddr()
	cfg := DefaultConfig()
	cfg.Servers = []string{url}
	cfg.Name = "test-worker"
	cfg.CPU = 4
	cfg.Memory = 8 << 30
	cfg.DataDir = t.TempDir()
	cfg.JobsDir = sharedDir(t, 0o711)
	cfg.Secret = "test-secret"
	cfg.SyncWait = 2 * time.Second
	cfg.LogFlushInterval = 100 * time.Millisecond
	cfg.KillGrace = time.Second
	cfg.Logger = log
	if tweak != nil {
		tweak(cfg)
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	})
	return &env{t: t, client: api.NewClient(url, token), worker: w, dir: cfg.DataDir, jobsDir: cfg.JobsDir}
}

// sharedDir is a temporary directory that jobs, which run as users of
// their own when the tests run as root, can reach: mode 0711 to pass
// through, 0777 to write in.
// writable lets isolated jobs write dirs, which are otherwise read-only
// to them like the rest of the host.
func writable(dirs ...string) func(*Config) {
	return func(c *Config) { c.JobWritableDirs = append(c.JobWritableDirs, dirs...) }
}

func sharedDir(t testing.TB, mode os.FileMode) string {
	t.Helper()
	// Not under /tmp: an isolated job has a /tmp of its own.
	dir, err := testimage.MkdirForJobs("drover-test-")
	if err == nil {
		err = os.Chmod(dir, mode)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (e *env) run(jobs ...api.JobSpec) *api.Batch {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := e.client.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: jobs})
	if err != nil {
		e.t.Fatal(err)
	}
	done, err := e.client.WaitBatch(ctx, b.ID, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return done
}

func (e *env) job(b, j int64) *api.Job {
	e.t.Helper()
	job, err := e.client.GetJob(context.Background(), b, j)
	if err != nil {
		e.t.Fatal(err)
	}
	return job
}

func (e *env) log(b, j int64) string {
	e.t.Helper()
	data, err := e.client.JobLog(context.Background(), b, j, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

func sh(id int64, script string) api.JobSpec {
	return api.JobSpec{JobID: id, Command: []string{"sh", "-c", script}, CPU: 1, Memory: 64 << 20}
}

func TestJobEnvironmentAndLogs(t *testing.T) {
	e := start(t, nil)
	arr := sh(1, `echo "batch=$DROVER_BATCH_ID job=$DROVER_JOB_ID index=$DROVER_INDEX attempt=$DROVER_ATTEMPT custom=$CUSTOM"; echo to-stderr >&2; pwd; touch mine; ls`)
	arr.Count = 3
	arr.Env = map[string]string{"CUSTOM": "yes"}
	b := e.run(arr)
	if b.NSucceeded != 3 {
		t.Fatalf("batch %+v", b)
	}
	var dirs []string
	for j := int64(1); j <= 3; j++ {
		out := e.log(b.ID, j)
		want := fmt.Sprintf("batch=%d job=%d index=%d attempt=1 custom=yes\nto-stderr\n", b.ID, j, j-1)
		if !strings.HasPrefix(out, want) {
			t.Fatalf("job %d log %q, want prefix %q", j, out, want)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		dirs = append(dirs, lines[2])
		if len(lines) != 4 || lines[3] != "mine" {
			t.Fatalf("job %d: working directory not private and fresh: %q", j, out)
		}
	}
	if !strings.HasPrefix(dirs[0], e.jobsDir+"/") {
		t.Fatalf("working directories %v", dirs)
	}
	// Emptied for the next job (made and removed for each job, they were
	// a tenth of the machine's time).
	if entries, err := os.ReadDir(dirs[0]); err == nil && len(entries) > 0 {
		t.Fatalf("working directory %s left with %v", dirs[0], entries)
	}
}

func TestOutcomes(t *testing.T) {
	e := start(t, nil)
	b := e.run(
		sh(1, "exit 7"),
		api.JobSpec{JobID: 2, Command: []string{"definitely-not-a-program-xyz"}, CPU: 1, Memory: 1 << 20},
		sh(3, "kill -9 $$"),
		sh(4, "true"),
	)
	if b.NFailed != 2 || b.NError != 1 || b.NSucceeded != 1 {
		t.Fatalf("batch %+v", b)
	}
	if j := e.job(b.ID, 1); j.State != api.JobFailed || *j.ExitCode != 7 {
		t.Fatalf("exit 7: %+v", j)
	}
	if j := e.job(b.ID, 2); j.State != api.JobError || !strings.Contains(j.Message, "executable file not found") {
		t.Fatalf("missing program: %+v", j)
	}
	if log := e.log(b.ID, 2); !strings.Contains(log, "definitely-not-a-program-xyz") {
		t.Fatalf("missing program log %q", log)
	}
	if j := e.job(b.ID, 3); j.State != api.JobFailed || *j.ExitCode != 137 || !strings.Contains(j.Message, "killed") {
		t.Fatalf("killed by signal: %+v", j)
	}
}

func TestTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	dir := sharedDir(t, 0o777)
	e := start(t, writable(dir))
	pidFile := filepath.Join(dir, "child.pid")
	spec := sh(1, fmt.Sprintf("sleep 60 & echo $! > %s; sleep 60", pidFile))
	spec.TimeoutSeconds = 0.5
	start := time.Now()
	b := e.run(spec)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("timeout took %s", took)
	}
	j := e.job(b.ID, 1)
	if j.State != api.JobFailed || !strings.Contains(j.Message, "timed out after 500ms") {
		t.Fatalf("job %+v", j)
	}
	if !waitGone(readPID(t, pidFile), 5*time.Second) {
		t.Fatal("a child of the timed-out job kept running")
	}
}

func TestCancelKillsRunningJobs(t *testing.T) {
	dir := sharedDir(t, 0o777)
	e := start(t, writable(dir))
	ctx := context.Background()
	marker := filepath.Join(dir, "finished")
	spec := sh(1, fmt.Sprintf("echo started; sleep 30; touch %s", marker))
	spec.Count = 2
	b, err := e.client.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{spec}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(e.worker.Running()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("jobs did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The log of a running job is readable while it runs.
	for !strings.Contains(e.log(b.ID, 1), "started") {
		if time.Now().After(deadline) {
			t.Fatal("no live log")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancelled := time.Now()
	if err := e.client.CancelBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done, err := e.client.WaitBatch(wctx, b.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(cancelled); took > 5*time.Second {
		t.Fatalf("cancellation took %s", took)
	}
	if done.NCancelled != 2 {
		t.Fatalf("batch %+v", done)
	}
	if len(e.worker.Running()) != 0 {
		t.Fatalf("worker still runs %v", e.worker.Running())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a cancelled job ran to the end")
	}
}

func TestLogIsCapped(t *testing.T) {
	e := start(t, func(c *Config) { c.MaxLogBytes = 1000 })
	b := e.run(sh(1, "yes drover | head -c 100000"))
	log := e.log(b.ID, 1)
	if len(log) > 1100 || !strings.HasSuffix(log, "drover: log truncated after 1000 bytes\n") {
		t.Fatalf("log of %d bytes ending %q", len(log), log[max(0, len(log)-60):])
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	err := cfg.Validate()
	for _, want := range []string{"Servers", "Name", "CPU", "Memory", "DataDir", "Secret", "JoinToken"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
	// A join token joins one machine, and is the worker's only credential.
	cfg = DefaultConfig()
	cfg.Servers, cfg.Name, cfg.CPU, cfg.Memory, cfg.DataDir = []string{"http://s"}, "w", 1, 1<<30, t.TempDir()
	for _, c := range []struct {
		secret, join, machine, want string
	}{
		{"", "tok", "", "needs Machine"},
		{"s", "tok", "m", "exclude each other"},
		{"", "tok", "m", ""},
		{"s", "", "", ""},
	} {
		cfg.Secret, cfg.JoinToken, cfg.Machine = c.secret, c.join, c.machine
		err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("secret %q, join token %q, machine %q: Validate() = %v, want %q", c.secret, c.join, c.machine, err, c.want)
		}
	}
}

func TestBackgroundChildDoesNotHoldTheJob(t *testing.T) {
	dir := sharedDir(t, 0o777)
	e := start(t, writable(dir))
	pidFile := filepath.Join(dir, "child.pid")
	begin := time.Now()
	b := e.run(sh(1, fmt.Sprintf("sleep 60 & echo $! > %s; echo main done", pidFile)))
	// Held open, the job would last as long as its child's 60 s; how much
	// less a loaded machine takes to run it is not drover's (2.1 s once).
	if took := time.Since(begin); took > 30*time.Second {
		t.Fatalf("the job took %s: a background child held it open", took)
	}
	if b.NSucceeded != 1 || e.log(b.ID, 1) != "main done\n" {
		t.Fatalf("batch %+v log %q", b, e.log(b.ID, 1))
	}
	if !waitGone(readPID(t, pidFile), 5*time.Second) {
		t.Fatal("the job's leftover child kept running after the job ended")
	}
}
