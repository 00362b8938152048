package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testlog"
)

// syncBuffer is a buffer safe to read while a process writes to it.
type syncBuffer struct{ testlog.Buffer }

// waitFor polls until the output contains s.
func (b *syncBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("output %q never contained %q", b.String(), s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startSh starts script with sh -c in a fresh directory.
func startSh(t *testing.T, ex *ProcessExecutor, script string, env ...string) (Handle, *syncBuffer, string) {
	t.Helper()
	dir := t.TempDir()
	out := &syncBuffer{}
	spec := Spec{Ref: api.AttemptRef{BatchID: 1, JobID: 2, Attempt: 3}, Command: []string{"sh", "-c", script}, Env: env, Dir: dir}
	h, err := ex.Start(context.Background(), spec, out)
	if err != nil {
		t.Fatal(err)
	}
	return h, out, dir
}

// waitResult waits for h with a deadline.
func waitResult(t *testing.T, h Handle) Result {
	t.Helper()
	done := make(chan Result, 1)
	go func() {
		res, err := h.Wait()
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		// The kernel's count of what the process used comes with it;
		// the tests compare the rest.
		if res.Usage == nil {
			t.Errorf("result %+v carries no usage", res)
		}
		res.Usage = nil
		return res
	case <-time.After(20 * time.Second):
		t.Fatal("the process did not end")
		return Result{}
	}
}

func TestProcessExitCodeAndOutput(t *testing.T) {
	ex := &ProcessExecutor{}
	h, out, _ := startSh(t, ex, "echo out; echo err >&2; echo out again; exit 7")
	if res := waitResult(t, h); res != (Result{ExitCode: 7}) {
		t.Fatalf("result %+v", res)
	}
	if got := out.String(); got != "out\nerr\nout again\n" {
		t.Fatalf("output %q", got)
	}
	// Wait may be asked again; Stop after the end does nothing.
	h.Stop(time.Second)
	if res, err := h.Wait(); res.ExitCode != 7 || err != nil {
		t.Fatalf("second Wait: %+v, %v", res, err)
	}
}

func TestProcessKilledBySignal(t *testing.T) {
	h, _, _ := startSh(t, &ProcessExecutor{}, "kill -9 $$")
	if res := waitResult(t, h); res != (Result{ExitCode: 137, Signal: syscall.SIGKILL}) {
		t.Fatalf("result %+v", res)
	}
}

func TestProcessEnvironmentAndDirectory(t *testing.T) {
	h, out, dir := startSh(t, &ProcessExecutor{}, `pwd; echo "home=$HOME tmp=$TMPDIR lang=$LANG job=$DROVER_JOB_ID path=$PATH"; echo "$0"`,
		"DROVER_JOB_ID=2", "LANG=en_US.UTF-8")
	if res := waitResult(t, h); res.ExitCode != 0 {
		t.Fatalf("result %+v, output %q", res, out.String())
	}
	want := dir + "\nhome=" + dir + " tmp=" + dir + " lang=en_US.UTF-8 job=2 path=" + os.Getenv("PATH") + "\nsh\n"
	if got := out.String(); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

func TestProcessStartErrors(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte{0, 1, 2, 3}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		op    string
		cause error
		msg   string
	}{
		{"definitely-not-a-program-xyz", "run", exec.ErrNotFound, `cannot run "definitely-not-a-program-xyz": executable file not found in $PATH`},
		{notExec, "run", fs.ErrPermission, `cannot run "` + notExec + `": permission denied`},
		{filepath.Join(dir, "missing"), "run", fs.ErrNotExist, `cannot run "` + filepath.Join(dir, "missing") + `": stat ` + filepath.Join(dir, "missing") + `: no such file or directory`},
		{garbage, "start", syscall.ENOEXEC, `cannot start "` + garbage + `": exec format error`},
	} {
		h, err := (&ProcessExecutor{}).Start(context.Background(), Spec{Command: []string{c.name}, Dir: dir}, &syncBuffer{})
		var se *StartError
		if h != nil || !errors.As(err, &se) || se.Op != c.op || !errors.Is(err, c.cause) || err.Error() != c.msg {
			t.Errorf("Start(%s) = %v, %v (%#v), want a StartError %q wrapping %v", c.name, h, err, se, c.msg, c.cause)
		}
	}
}

func TestProcessStartCancelled(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	spec := Spec{Command: []string{"touch", "started"}, Dir: dir}
	h, err := (&ProcessExecutor{}).Start(ctx, spec, &syncBuffer{})
	if h != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Start = %v, %v; want context.Canceled", h, err)
	}
	var se *StartError
	if errors.As(err, &se) {
		t.Fatalf("a cancelled start reads as a start error: %v", err)
	}
	// A program that cannot be found is reported as such even then: the
	// lookup comes first, as before the executor existed.
	spec.Command = []string{"definitely-not-a-program-xyz"}
	if _, err := (&ProcessExecutor{}).Start(ctx, spec, &syncBuffer{}); !errors.As(err, &se) {
		t.Fatalf("Start of a missing program = %v, want a StartError", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
		t.Fatal("the process of a cancelled start ran")
	}
}

// Stop sends SIGTERM and waits the grace period before SIGKILL.
func TestProcessStopEscalatesAfterGrace(t *testing.T) {
	h, out, _ := startSh(t, &ProcessExecutor{}, "trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.05; done")
	out.waitFor(t, "ready")
	const grace = 300 * time.Millisecond
	begin := time.Now()
	h.Stop(grace)
	res := waitResult(t, h)
	if took := time.Since(begin); took < grace {
		t.Fatalf("SIGKILL came after %s, before the grace of %s", took, grace)
	}
	if res != (Result{ExitCode: 137, Signal: syscall.SIGKILL}) {
		t.Fatalf("result %+v", res)
	}
	out.waitFor(t, "got TERM")
}

// Stop ends the whole process group: a child that ignores SIGTERM dies when
// the leader has gone, without waiting for the grace period.
func TestProcessStopKillsTheProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	h, out, _ := startSh(t, &ProcessExecutor{}, `(trap "" TERM; exec sleep 60) & echo $! > `+pidFile+`; echo ready; wait`)
	out.waitFor(t, "ready")
	child := readPID(t, pidFile)
	stopped := time.Now()
	h.Stop(time.Minute)
	if took := time.Since(stopped); took > 5*time.Second {
		t.Fatalf("Stop took %s", took)
	}
	if res := waitResult(t, h); res != (Result{ExitCode: 143, Signal: syscall.SIGTERM}) {
		t.Fatalf("result %+v", res)
	}
	if !waitGone(child, 5*time.Second) {
		t.Fatal("a child that ignored SIGTERM outlived the stop")
	}
}

// A background child does not hold the command open past waitDelay, and
// dies with it.
func TestProcessBackgroundChild(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	begin := time.Now()
	h, out, _ := startSh(t, &ProcessExecutor{}, `sleep 60 & echo $! > `+pidFile+`; echo main done`)
	if res := waitResult(t, h); res != (Result{}) {
		t.Fatalf("result %+v", res)
	}
	// Held, Wait would last the child's 60 s; how much less a loaded
	// machine takes is not drover's.
	if took := time.Since(begin); took > 30*time.Second {
		t.Fatalf("Wait took %s: the background child held it", took)
	}
	if got := out.String(); got != "main done\n" {
		t.Fatalf("output %q", got)
	}
	if !waitGone(readPID(t, pidFile), 5*time.Second) {
		t.Fatal("the leftover child kept running after the command ended")
	}
}

// readPID reads the process ID a test's command wrote, and kills that
// process when the test ends in case the code under test did not.
func readPID(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		t.Fatalf("pid file %q: %v", data, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// waitGone waits until a process has ended: it no longer exists, or it is
// a zombie its new parent has not reaped yet.
func waitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// The state follows the command name, which is in parentheses.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProcessLookPathCache(t *testing.T) {
	ex := &ProcessExecutor{}
	h, _, _ := startSh(t, ex, "exit 0")
	waitResult(t, h)
	ex.mu.Lock()
	p, ok := ex.paths["sh"]
	ex.mu.Unlock()
	if want, _ := exec.LookPath("sh"); !ok || p != want {
		t.Fatalf("cached path of sh %q (%v), want %q", p, ok, want)
	}
}
