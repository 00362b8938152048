package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// fakeExecutor is an Executor whose commands the test scripts: start
// decides what each Start does.
type fakeExecutor struct {
	start  func(ctx context.Context, spec Spec, out io.Writer) (Handle, error)
	starts chan Spec // every Start call's spec
}

func newFakeExecutor(start func(ctx context.Context, spec Spec, out io.Writer) (Handle, error)) *fakeExecutor {
	return &fakeExecutor{start: start, starts: make(chan Spec, 100)}
}

func (f *fakeExecutor) Start(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
	f.starts <- spec
	return f.start(ctx, spec, out)
}

// waitStart returns the spec of the next Start call.
func (f *fakeExecutor) waitStart(t *testing.T) Spec {
	t.Helper()
	select {
	case spec := <-f.starts:
		return spec
	case <-time.After(20 * time.Second):
		t.Fatal("the executor was not asked to start anything")
		return Spec{}
	}
}

// fakeHandle is a command that runs until the test ends it or it is
// stopped; Stop records its grace and ends the command as SIGTERM would.
type fakeHandle struct {
	once  sync.Once
	ended chan struct{}
	res   Result
	stops chan time.Duration
}

func newFakeHandle() *fakeHandle {
	return &fakeHandle{ended: make(chan struct{}), stops: make(chan time.Duration, 10)}
}

// end makes the command end with r (the first end wins).
func (h *fakeHandle) end(r Result) *fakeHandle {
	h.once.Do(func() {
		h.res = r
		close(h.ended)
	})
	return h
}

func (h *fakeHandle) Wait() (Result, error) {
	<-h.ended
	return h.res, nil
}

func (h *fakeHandle) Done() <-chan struct{} { return h.ended }

func (h *fakeHandle) Stop(grace time.Duration) {
	h.stops <- grace
	h.end(Result{ExitCode: 128 + int(syscall.SIGTERM), Signal: syscall.SIGTERM})
}

// waitStop returns the grace of the first Stop call.
func (h *fakeHandle) waitStop(t *testing.T) time.Duration {
	t.Helper()
	select {
	case grace := <-h.stops:
		return grace
	case <-time.After(20 * time.Second):
		t.Fatal("the command was not stopped")
		return 0
	}
}

func withExecutor(ex Executor, grace time.Duration) func(*Config) {
	return func(c *Config) {
		c.Executor = ex
		c.KillGrace = grace
	}
}

func TestLifecycleSuccess(t *testing.T) {
	dirExisted := make(chan bool, 1)
	fake := newFakeExecutor(func(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
		_, err := os.Stat(spec.Dir)
		dirExisted <- err == nil
		fmt.Fprintln(out, "hello from the fake")
		return newFakeHandle().end(Result{}), nil
	})
	e := start(t, withExecutor(fake, time.Second))
	spec := api.JobSpec{JobID: 1, Command: []string{"prog", "arg"}, Env: map[string]string{"CUSTOM": "yes"}, CPU: 1, Memory: 64 << 20}
	b := e.run(spec)
	if b.NSucceeded != 1 {
		t.Fatalf("batch %+v", b)
	}
	j := e.job(b.ID, 1)
	if j.State != api.JobSuccess || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Fatalf("job %+v", j)
	}
	if len(j.Attempts) != 1 || j.Attempts[0].StartTime == nil {
		t.Fatalf("attempts %+v", j.Attempts)
	}
	if log := e.log(b.ID, 1); log != "hello from the fake\n" {
		t.Fatalf("log %q", log)
	}
	got := fake.waitStart(t)
	want := api.AttemptRef{BatchID: b.ID, JobID: 1, Attempt: 1}
	if got.Ref != want || !slices.Equal(got.Command, spec.Command) {
		t.Fatalf("spec %+v, want ref %v and command %q", got, want, spec.Command)
	}
	for _, kv := range []string{fmt.Sprintf("DROVER_BATCH_ID=%d", b.ID), "DROVER_JOB_ID=1", "DROVER_ATTEMPT=1", "DROVER_INDEX=0", "CUSTOM=yes"} {
		if !slices.Contains(got.Env, kv) {
			t.Errorf("spec env %q lacks %s", got.Env, kv)
		}
	}
	if !strings.HasPrefix(got.Dir, e.jobsDir+"/") {
		t.Fatalf("spec dir %s, want one under the jobs dir %s", got.Dir, e.jobsDir)
	}
	if !<-dirExisted {
		t.Fatalf("working directory %s did not exist when the command started", got.Dir)
	}
	if entries, err := os.ReadDir(got.Dir); err == nil && len(entries) > 0 {
		t.Fatalf("working directory %s left with %v", got.Dir, entries)
	}
}

func TestLifecycleExitStatus(t *testing.T) {
	results := map[int64]Result{
		1: {ExitCode: 3},
		2: {ExitCode: 128 + int(syscall.SIGKILL), Signal: syscall.SIGKILL},
	}
	fake := newFakeExecutor(func(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
		return newFakeHandle().end(results[spec.Ref.JobID]), nil
	})
	e := start(t, withExecutor(fake, time.Second))
	b := e.run(
		api.JobSpec{JobID: 1, Command: []string{"prog"}, CPU: 1, Memory: 1 << 20},
		api.JobSpec{JobID: 2, Command: []string{"prog"}, CPU: 1, Memory: 1 << 20},
	)
	if b.NFailed != 2 {
		t.Fatalf("batch %+v", b)
	}
	for id, want := range map[int64]string{1: "exited with code 3", 2: "killed by signal killed"} {
		j := e.job(b.ID, id)
		if j.State != api.JobFailed || *j.ExitCode != results[id].ExitCode || j.Message != want {
			t.Errorf("job %d: %+v, want exit %d and message %q", id, j, results[id].ExitCode, want)
		}
	}
}

func TestLifecycleStartError(t *testing.T) {
	errs := map[int64]error{
		1: &StartError{Op: "run", Name: "prog", Err: exec.ErrNotFound},
		2: &StartError{Op: "start", Name: "prog", Err: syscall.ENOEXEC},
		3: errors.New("create container: runtime unavailable"),
	}
	fake := newFakeExecutor(func(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
		return nil, errs[spec.Ref.JobID]
	})
	e := start(t, withExecutor(fake, time.Second))
	b := e.run(
		api.JobSpec{JobID: 1, Command: []string{"prog"}, CPU: 1, Memory: 1 << 20},
		api.JobSpec{JobID: 2, Command: []string{"prog"}, CPU: 1, Memory: 1 << 20},
		api.JobSpec{JobID: 3, Command: []string{"prog"}, CPU: 1, Memory: 1 << 20},
	)
	if b.NError != 3 {
		t.Fatalf("batch %+v", b)
	}
	for id, want := range map[int64]string{
		1: `cannot run "prog": executable file not found in $PATH`,
		2: `cannot start "prog": exec format error`,
		3: "create container: runtime unavailable",
	} {
		j := e.job(b.ID, id)
		if j.State != api.JobError || j.Message != want {
			t.Errorf("job %d: %+v, want message %q", id, j, want)
		}
		if log := e.log(b.ID, id); log != "drover: "+want+"\n" {
			t.Errorf("job %d: log %q", id, log)
		}
	}
}

func TestLifecycleTimeoutStops(t *testing.T) {
	h := newFakeHandle()
	fake := newFakeExecutor(func(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
		fmt.Fprintln(out, "running")
		return h, nil
	})
	const grace = 1234 * time.Millisecond
	e := start(t, withExecutor(fake, grace))
	spec := api.JobSpec{JobID: 1, Command: []string{"prog"}, CPU: 1, Memory: 1 << 20, TimeoutSeconds: 0.2}
	b := e.run(spec)
	if got := h.waitStop(t); got != grace {
		t.Fatalf("Stop(%s), want Stop(%s)", got, grace)
	}
	j := e.job(b.ID, 1)
	msg := "timed out after 200ms and was killed"
	if j.State != api.JobFailed || j.Message != msg || *j.ExitCode != 143 {
		t.Fatalf("job %+v", j)
	}
	if log := e.log(b.ID, 1); log != "running\ndrover: "+msg+"\n" {
		t.Fatalf("log %q", log)
	}
}

func TestLifecycleCancelStops(t *testing.T) {
	h := newFakeHandle()
	fake := newFakeExecutor(func(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
		return h, nil
	})
	const grace = 1234 * time.Millisecond
	e := start(t, withExecutor(fake, grace))
	b := startThenCancel(t, e, fake)
	if got := h.waitStop(t); got != grace {
		t.Fatalf("Stop(%s), want Stop(%s)", got, grace)
	}
	done := waitBatch(t, e, b.ID)
	if done.NCancelled != 1 {
		t.Fatalf("batch %+v", done)
	}
	if j := e.job(b.ID, 1); j.State != api.JobCancelled {
		t.Fatalf("job %+v", j)
	}
}

// A kill that comes while the executor is still starting the command (a
// container executor pulling an image, say) abandons the start.
func TestLifecycleCancelDuringStart(t *testing.T) {
	aborted := make(chan error, 1)
	fake := newFakeExecutor(func(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
		<-ctx.Done()
		err := fmt.Errorf("pull image: %w", ctx.Err())
		aborted <- err
		return nil, err
	})
	e := start(t, withExecutor(fake, time.Second))
	b := startThenCancel(t, e, fake)
	select {
	case err := <-aborted:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("start aborted with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the kill did not reach the start in progress")
	}
	done := waitBatch(t, e, b.ID)
	if j := e.job(b.ID, 1); done.NCancelled != 1 || j.State != api.JobCancelled {
		t.Fatalf("batch %+v job %+v", done, j)
	}
	if log := e.log(b.ID, 1); strings.Contains(log, "pull image") {
		t.Fatalf("a cancelled start was logged as an error: %q", log)
	}
}

func TestConfigExecutorDefault(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Servers = []string{"http://127.0.0.1:1"}
	cfg.Name = "n"
	cfg.CPU = 1
	cfg.Memory = 1 << 30
	cfg.DataDir = t.TempDir()
	cfg.Secret = "s"
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.exec.(*ProcessExecutor); !ok || cfg.Executor != nil {
		t.Fatalf("executor %T (config %T), want the process executor", w.exec, cfg.Executor)
	}
	// The data dir is one worker's at a time.
	w.closeRuntime()
	w.id.release()
	fake := newFakeExecutor(nil)
	cfg.Executor = fake
	if w, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if w.exec != Executor(fake) {
		t.Fatalf("executor %T, want the configured one", w.exec)
	}
}

// startThenCancel submits one job, waits until the executor is asked to
// start it, and cancels its batch.
func startThenCancel(t *testing.T, e *env, fake *fakeExecutor) *api.CreateBatchResponse {
	t.Helper()
	ctx := context.Background()
	b, err := e.client.CreateBatch(ctx, &api.CreateBatchRequest{Jobs: []api.JobSpec{{JobID: 1, Command: []string{"prog"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	fake.waitStart(t)
	if err := e.client.CancelBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	return b
}

// waitBatch waits for a batch to complete.
func waitBatch(t *testing.T, e *env, id int64) *api.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done, err := e.client.WaitBatch(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return done
}
