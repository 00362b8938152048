package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testimage"
)

// The container tests run real jobs: real runc, real cgroups, job users of
// their own, an in-process registry serving an image built here from a
// static Go program (jobtool). They need root, as a worker that isolates
// jobs does.

// jobtoolImage returns jobtool on this machine, the registry serving its
// image (for the rest of the test binary) and the image's reference.
func jobtoolImage(t *testing.T) (binary string, reg *testimage.Registry, ref string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("container jobs need a worker running as root (runc, cgroups, job users); run the tests as root, as make test does")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is not installed: make test installs it (scripts/test-deps.sh), or apt-get install runc")
	}
	f, err := testimage.Shared()
	if err != nil {
		t.Fatal(err)
	}
	return f.Binary, f.Registry, f.Ref
}

// worker is a `drover worker` process the test started.
type workerProc struct {
	name    string
	dataDir string
	cmd     *exec.Cmd
	log     string
	done    chan struct{}
}

// startWorker starts a worker for the agent (which runs none of its own).
func (a *agent) startWorker(t *testing.T, name string, cores int, args ...string) *workerProc {
	t.Helper()
	dataDir := t.TempDir()
	// The test registry is on the host's loopback, which pulls may
	// reach only where the operator allows it.
	_, reg, _ := jobtoolImage(t)
	args = append([]string{"-registry-allow", reg.Host}, args...)
	w := spawnWorker(t, name, dataDir, append([]string{"worker", "-servers", a.addr, "-name", name, "-cores", strconv.Itoa(cores), "-memory", fmt.Sprintf("%dGiB", 2*cores),
		"-data-dir", dataDir, "-worker-secret-file", filepath.Join(a.dataDir, "worker.secret"), "-sync-wait", "2s", "-log-level", "info"}, args...))
	waitFor(t, "worker "+name+" to activate", 30*time.Second, func() bool {
		insts, err := a.client().ListInstances(context.Background())
		if err != nil {
			return false
		}
		for _, in := range insts {
			if in.Name == name && in.Active {
				return true
			}
		}
		return false
	})
	return w
}

// spawnWorker starts `drover ARGS` (a worker on dataDir), its output in a
// log file that a failed test shows; it is stopped when the test ends.
func spawnWorker(t *testing.T, name, dataDir string, args []string) *workerProc {
	t.Helper()
	logFile, err := os.CreateTemp(t.TempDir(), "worker-*.log")
	if err != nil {
		t.Fatal(err)
	}
	w := &workerProc{name: name, dataDir: dataDir, log: logFile.Name(), done: make(chan struct{})}
	w.cmd = exec.Command(droverBin, args...)
	w.cmd.Stdout, w.cmd.Stderr = logFile, logFile
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); logFile.Close(); close(w.done) }()
	t.Cleanup(func() {
		w.stop()
		if t.Failed() {
			data, _ := os.ReadFile(w.log)
			t.Logf("worker %s output:\n%s", name, data)
		}
	})
	return w
}

// stop sends SIGTERM and waits for the worker to leave.
func (w *workerProc) stop() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

func waitDone(t *testing.T, c *api.Client, id int64, limit time.Duration) *api.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	b, err := c.WaitBatch(ctx, id, nil)
	if err != nil {
		t.Fatalf("batch %d: %v", id, err)
	}
	return b
}

// TestContainerJobFiles: a container job reads its input from a file://
// bucket and writes an output that appears in the bucket; its attempt
// records the bytes and time of both copies and what it used; a missing
// input ends a job in error with the URL and the cause.
func TestContainerJobFiles(t *testing.T) {
	_, _, ref := jobtoolImage(t)
	bucket := t.TempDir()
	// Large enough for the copies to take a measurable time.
	reads := []byte(strings.Repeat("reads of sample 0\n", 1<<18))
	if err := os.WriteFile(filepath.Join(bucket, "in-0.txt"), reads, 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, "", "", "-workers", "0")
	a.startWorker(t, "files-1", 2, "-file-url-roots", bucket)
	a.drover(a.token, "billing-project", "storage", "add", "default", "file://"+bucket).must(t, 0)
	spec := writeSpec(t, fmt.Sprintf(`
batch "files" {
  image = %q
  job "copy" {
    count   = 2
    command = ["jobtool", "copy", "/io/in.txt", "/io/out/result.txt"]
    cpu     = 0.5
    memory  = "64MiB"
    input "reads" {
      source = "file://%s/in-$DROVER_INDEX.txt"
      path   = "/io/in.txt"
    }
    output "result" {
      path        = "out/result.txt"
      destination = "file://%s/results/$DROVER_INDEX/result.txt"
    }
  }
}`, ref, bucket, bucket))
	out := a.drover(a.token, "run", "-wait", spec)
	c := a.client()
	b := waitDone(t, c, 1, 2*time.Minute)
	if b.NSucceeded != 1 || b.NError != 1 {
		log, _ := c.JobLog(context.Background(), 1, 1, 0)
		t.Fatalf("batch %+v (run: %s %s); job 1's log:\n%s", b, out.stdout, out.stderr, log)
	}
	got, err := os.ReadFile(filepath.Join(bucket, "results", "0", "result.txt"))
	if err != nil || string(got) != string(reads) {
		t.Fatalf("output in the bucket: %d bytes %v", len(got), err)
	}
	j, err := c.GetJob(context.Background(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	u := j.Attempts[0].Usage
	if u == nil || u.BytesIn != int64(len(reads)) || u.BytesOut != int64(len(reads)) || u.InputSeconds <= 0 || u.OutputSeconds <= 0 || u.ImageSeconds <= 0 || u.PeakMemory <= 0 {
		t.Fatalf("usage of the copy: %+v", u)
	}
	// Member 1 has no input in the bucket.
	j, _ = c.GetJob(context.Background(), 1, 2)
	if j.State != api.JobError || !strings.Contains(j.Message, "in-1.txt") || !strings.Contains(j.Message, "no such object") {
		t.Fatalf("job with a missing input: %s %q", j.State, j.Message)
	}
	st := a.drover(a.token, "job", "status", "1", "1").must(t, 0)
	if !strings.Contains(st.stdout, "4.5MiB in") || !strings.Contains(st.stdout, "Image") {
		t.Fatalf("job status does not show the usage:\n%s", st.stdout)
	}
	if lst := a.drover(a.token, "job", "list", "1").must(t, 0); !strings.Contains(lst.stdout, "PEAK-MEM") {
		t.Fatalf("job list:\n%s", lst.stdout)
	}
}

// TestResourcesAreEnforced: a job that allocates past its memory limit
// ends in error with the out-of-memory message (as a process and in a
// container) and the worker goes on running jobs; one with oom_retry runs
// again with four times the memory and succeeds, each attempt showing
// what it had; a CPU-bound job limited
// to half a core uses at most 0.6 of one over 5 s, and its use is measured.
func TestResourcesAreEnforced(t *testing.T) {
	tool, _, ref := jobtoolImage(t)
	a := startAgent(t, "", "", "-workers", "0")
	a.startWorker(t, "limits-1", 2)
	c := a.client()
	ctx := context.Background()
	res, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "limits", Jobs: []api.JobSpec{
		{JobID: 1, Name: "oom-process", Command: []string{tool, "alloc", "512"}, CPU: 0.1, Memory: 128 << 20},
		{JobID: 2, Name: "oom-container", Image: ref, Command: []string{"jobtool", "alloc", "512"}, CPU: 0.1, Memory: 128 << 20},
		{JobID: 3, Name: "spin", Image: ref, Command: []string{"jobtool", "spin", "5"}, CPU: 0.5, Memory: 64 << 20},
		{JobID: 4, Name: "spin-process", Command: []string{tool, "spin", "5"}, CPU: 0.5, Memory: 64 << 20},
		{JobID: 5, Name: "oom-retry", Command: []string{tool, "alloc", "300"}, CPU: 0.1, Memory: 128 << 20,
			OOMRetry: &api.OOMRetry{Factor: 4, MaxMemory: 1 << 30}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, c, res.ID, 2*time.Minute)
	for id := int64(1); id <= 2; id++ {
		j, _ := c.GetJob(ctx, res.ID, id)
		if j.State != api.JobError || j.Message != "out of memory (limit 128 MiB)" {
			t.Fatalf("%s: %s %q", j.Name, j.State, j.Message)
		}
		if u := j.Attempts[0].Usage; u == nil || u.PeakMemory < 100<<20 || u.PeakMemory > 129<<20 {
			t.Fatalf("%s: peak memory %+v", j.Name, u)
		}
	}
	j, _ := c.GetJob(ctx, res.ID, 5)
	if j.State != api.JobSuccess || len(j.Attempts) != 2 || j.Attempts[0].Memory != 128<<20 || j.Attempts[1].Memory != 512<<20 ||
		!strings.Contains(j.Attempts[0].Message, "out of memory (limit 128 MiB); retrying with 512 MiB") {
		t.Fatalf("oom-retry: %s, attempts %+v", j.State, j.Attempts)
	}
	for id := int64(3); id <= 4; id++ {
		j, _ := c.GetJob(ctx, res.ID, id)
		a0 := j.Attempts[0]
		wall := a0.EndTime.Sub(*a0.StartTime).Seconds()
		if j.State != api.JobSuccess || a0.Usage == nil {
			t.Fatalf("%s: %s %+v", j.Name, j.State, a0)
		}
		cores := a0.Usage.CPUSeconds / wall
		t.Logf("%s: %.2f cpu-s over %.2f s = %.3f cores", j.Name, a0.Usage.CPUSeconds, wall, cores)
		// The limit is drover's to hold; how much of its half core a
		// loaded machine gives the spin is not (a tenth, on a loaded make
		// test run), so below it only that the cgroup measured the spin.
		if cores > 0.6 || a0.Usage.CPUSeconds > 0.6*5.5 {
			t.Fatalf("%s: %.2f cpu-s over %.2f s: not held to half a core", j.Name, a0.Usage.CPUSeconds, wall)
		}
		if a0.Usage.CPUSeconds <= 0 {
			t.Fatalf("%s: no CPU time measured for a job that spun for 5 s", j.Name)
		}
	}
	// The worker lived through it.
	res2, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "after", Jobs: []api.JobSpec{{JobID: 1, Image: ref, Command: []string{"jobtool", "echo", "still here"}, CPU: 0.1, Memory: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if b := waitDone(t, c, res2.ID, time.Minute); b.NSucceeded != 1 {
		t.Fatalf("a job after the out-of-memory ones: %+v", b)
	}
	if insts, _ := c.ListInstances(ctx); len(insts) != 1 || !insts[0].Active {
		t.Fatalf("instances: %+v", insts)
	}
}

// TestJobsCannotReadSecrets: a job runs as a user of its own and cannot
// read the worker's secret, its instance token, the agent's root token,
// the jobs dir or another job's directory; its children die with it,
// even one that left its process group for a session of its own.
func TestJobsCannotReadSecrets(t *testing.T) {
	tool, _, ref := jobtoolImage(t)
	a := startAgent(t, "", "", "-workers", "0")
	// The escaped child would leave its mark where jobs may write.
	marks := jobWritableDir(t)
	w := a.startWorker(t, "iso-1", 2, "-job-writable-dir", marks)
	c := a.client()
	ctx := context.Background()
	marker := filepath.Join(marks, "escaped")
	res, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "iso", Jobs: []api.JobSpec{
		{JobID: 1, Name: "neighbour", Command: []string{"sh", "-c", "echo $HOME; echo private > mine.txt; sleep 30"}, CPU: 0.1, Memory: 64 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var neighbour string
	waitFor(t, "the neighbour to run", 30*time.Second, func() bool {
		log, _ := c.JobLog(ctx, res.ID, 1, 0)
		neighbour = strings.TrimSpace(string(log))
		return strings.HasPrefix(neighbour, "/")
	})
	time.Sleep(300 * time.Millisecond)
	secrets := []string{
		filepath.Join(a.dataDir, "worker.secret"),
		filepath.Join(a.dataDir, "root.token"),
		filepath.Join(w.dataDir, "instance-token"),
		filepath.Join(w.dataDir, "node-id"),
	}
	probe := fmt.Sprintf(`%s probe %s "$HOME/.." %s %s/mine.txt`, tool, strings.Join(secrets, " "), neighbour, neighbour)
	up, err := c.CreateUpdate(ctx, res.ID, &api.CreateUpdateRequest{Jobs: []api.JobSpec{
		{JobID: 1, Name: "probe", Command: []string{"sh", "-c", probe}, CPU: 0.1, Memory: 64 << 20},
		{JobID: 2, Name: "probe-container", Image: ref, Command: append([]string{"jobtool", "probe", "/proc/1/root/etc/shadow"}, secrets...), CPU: 0.1, Memory: 64 << 20},
		{JobID: 3, Name: "escape", Command: []string{tool, "setsid-child", "3", marker}, CPU: 0.1, Memory: 64 << 20},
		{JobID: 4, Name: "whoami", Command: []string{tool, "id"}, CPU: 0.1, Memory: 64 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{up.StartJobID, up.StartJobID + 1, up.StartJobID + 2, up.StartJobID + 3}
	waitFor(t, "the probes to end", time.Minute, func() bool {
		for _, id := range ids {
			j, _ := c.GetJob(ctx, res.ID, id)
			if j.State != api.JobSuccess && j.State != api.JobFailed && j.State != api.JobError {
				return false
			}
		}
		return true
	})
	for _, id := range ids[:3] {
		j, _ := c.GetJob(ctx, res.ID, id)
		log, _ := c.JobLog(ctx, res.ID, id, 0)
		if j.State != api.JobSuccess {
			t.Errorf("%s: %s %q:\n%s", j.Name, j.State, j.Message, log)
		}
		denied := 0
		for _, line := range strings.Split(string(log), "\n") {
			if strings.HasPrefix(line, "denied ") {
				denied++
			}
		}
		if j.Name == "probe" && denied != len(secrets)+3 || j.Name == "probe-container" && denied != len(secrets)+1 {
			t.Errorf("%s log (%d denied):\n%s", j.Name, denied, log)
		}
	}
	idLog, _ := c.JobLog(ctx, res.ID, ids[3], 0)
	if strings.Contains(string(idLog), "uid=0 ") || !strings.Contains(string(idLog), "uid=2") {
		t.Errorf("a job runs as %s", idLog)
	}
	// The escaped child would write the marker after 3 s.
	time.Sleep(4 * time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a child that made a session of its own outlived its job")
	}
	if err := c.CancelBatch(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
}

// TestPreemptedWorkerJobsRunElsewhere: SIGTERM to a worker (a machine
// going away) preempts its running jobs: they run again on the other
// worker, their first attempts are "preempted", and nothing counts as a
// failure or a retry (the jobs have no retries and still succeed).
func TestPreemptedWorkerJobsRunElsewhere(t *testing.T) {
	_, _, ref := jobtoolImage(t)
	a := startAgent(t, "", "", "-workers", "0")
	w1 := a.startWorker(t, "spot-1", 2)
	c := a.client()
	ctx := context.Background()
	res, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "spot", Jobs: []api.JobSpec{
		{JobID: 1, Name: "p", Count: 2, Command: []string{"sleep", "4"}, CPU: 1, Memory: 64 << 20},
		{JobID: 3, Name: "c", Count: 2, Image: ref, Command: []string{"jobtool", "sleep", "4"}, CPU: 0.5, Memory: 64 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two jobs to run on spot-1", 30*time.Second, func() bool {
		b, _ := c.GetBatch(ctx, res.ID)
		return b.NRunning >= 2
	})
	time.Sleep(500 * time.Millisecond)
	a.startWorker(t, "spot-2", 2)
	w1.stop()
	b := waitDone(t, c, res.ID, 2*time.Minute)
	if b.NSucceeded != 4 || b.NFailed != 0 || b.NError != 0 {
		t.Fatalf("batch after the preemption: %+v", b)
	}
	preempted := 0
	for id := int64(1); id <= 4; id++ {
		j, _ := c.GetJob(ctx, res.ID, id)
		for i, at := range j.Attempts {
			if at.State == api.OutcomePreempted {
				preempted++
				if at.Instance != "spot-1" || i == len(j.Attempts)-1 {
					t.Fatalf("job %d: %+v", id, j.Attempts)
				}
			}
		}
		if last := j.Attempts[len(j.Attempts)-1]; last.Instance != "spot-2" && len(j.Attempts) > 1 {
			t.Fatalf("job %d ran again on %s", id, last.Instance)
		}
	}
	if preempted < 2 {
		t.Fatalf("%d preempted attempts, want at least the 2 that were running", preempted)
	}
	data, _ := os.ReadFile(w1.log)
	if !strings.Contains(string(data), "preempted") {
		t.Fatalf("the worker did not report preempting:\n%s", data)
	}
}

// TestManyContainerJobs: 500 container jobs on two workers complete, and
// each worker pulled the image once.
func TestManyContainerJobs(t *testing.T) {
	_, reg, ref := jobtoolImage(t)
	a := startAgent(t, "", "", "-workers", "0")
	a.startWorker(t, "many-1", 4)
	a.startWorker(t, "many-2", 4)
	c := a.client()
	reg.Reset()
	res, err := c.CreateBatch(context.Background(), &api.CreateBatchRequest{Name: "many", Jobs: []api.JobSpec{
		{JobID: 1, Name: "t", Count: 500, Image: ref, Command: []string{"jobtool", "true"}, CPU: 0.25, Memory: 64 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := waitDone(t, c, res.ID, 5*time.Minute)
	t.Logf("500 container jobs in %s", time.Since(start).Round(time.Millisecond))
	if b.NSucceeded != 500 {
		t.Fatalf("batch %+v", b)
	}
	for _, w := range []string{"many-1", "many-2"} {
		manifests := reg.Count(func(r testimage.Request) bool {
			return r.Kind == testimage.KindManifest && r.Method == "GET" && strings.Contains(r.UserAgent, "drover-worker/"+w)
		})
		blobs := reg.Count(func(r testimage.Request) bool {
			return r.Kind == testimage.KindBlob && r.Method == "GET" && strings.Contains(r.UserAgent, "drover-worker/"+w)
		})
		// One manifest, then the config and the one layer.
		if manifests != 1 || blobs != 2 {
			t.Errorf("worker %s: %d manifest GETs and %d blob GETs, want 1 and 2 (pulled once)", w, manifests, blobs)
		}
	}
}
