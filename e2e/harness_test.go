// Package e2e runs the drover binary the way a user does: a real dev agent
// with real worker processes, driven by the real CLI.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/freeport"
	"github.com/drover-sched/drover/testkit/testimage"
)

var droverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "drover-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	droverBin = filepath.Join(dir, "drover")
	// drover-bench beside drover: `drover bench` runs it.
	build := exec.Command("go", "build", "-o", dir+"/", "../cmd/drover", "../cmd/drover-bench")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build drover and drover-bench:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildJobProgram builds a program of this module (pkg, a path from the
// module's root) where a job's user can read and run it (jobs run as
// users of their own, with a /tmp of their own): the hostile suite's
// attackers.
func buildJobProgram(t *testing.T, pkg string) string {
	t.Helper()
	dir, err := testimage.MkdirForJobs("drover-jobprogram-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// jobWritableDir makes a directory every job user may write, for a
// worker's -job-writable-dir (a job sees the rest of the host
// read-only): where the tests' jobs leave what the tests look for.
func jobWritableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// freePort picks an address for a process that binds it later and must
// find it again (a restart on the same address, an address a job is
// told before its server listens): freeport's rule, the one every
// harness uses.
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// agent is a running `drover agent -dev`.
type agent struct {
	t       *testing.T
	cmd     *exec.Cmd
	dataDir string
	addr    string
	token   string
	logPath string
	done    chan struct{}
}

// startAgent starts a dev agent in dataDir (empty: a new one) serving at
// addr. With addr empty the agent binds a port of the kernel's choice
// itself and the harness reads it from <dataDir>/api.addr: no port is
// picked and let go, so none can be taken before the agent binds it. A
// test that restarts the agent on its address passes one (freePort).
func startAgent(t *testing.T, dataDir, addr string, args ...string) *agent {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return startNode(t, dataDir, addr, append([]string{"agent", "-dev", "-data-dir", dataDir, "-http-addr", addr, "-log-level", "warn"}, args...))
}

// startNode runs drover with all (an agent, or a server alone that
// bootstraps itself in dataDir and serves plain HTTP at addr) and waits
// until its admin token works. An agent given port 0 says where it
// listens in <dataDir>/api.addr.
func startNode(t *testing.T, dataDir, addr string, all []string) *agent {
	t.Helper()
	return startNodeWith(t, dataDir, addr, all, nil)
}

// startNodeWith is startNode with files the process inherits open, as
// descriptors 3 and up (as a shell or a supervisor may leave them).
func startNodeWith(t *testing.T, dataDir, addr string, all []string, files []*os.File) *agent {
	t.Helper()
	addrFile := ""
	if _, port, _ := net.SplitHostPort(addr); port == "0" {
		// A restart in the same data dir must not read the last run's.
		addrFile = filepath.Join(dataDir, "api.addr")
		if err := os.Remove(addrFile); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	logFile, err := os.CreateTemp(t.TempDir(), all[0]+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(droverBin, all...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = files
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, cmd: cmd, dataDir: dataDir, addr: "http://" + addr, logPath: logFile.Name(), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(a.done) }()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			data, _ := os.ReadFile(a.logPath)
			t.Logf("%s output:\n%s", all[0], data)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if addrFile != "" {
			if b, err := os.ReadFile(addrFile); err == nil && strings.HasSuffix(string(b), "\n") {
				a.addr, addrFile = strings.TrimSpace(string(b)), ""
			}
		}
		if b, err := os.ReadFile(filepath.Join(dataDir, "root.token")); err == nil && addrFile == "" {
			a.token = strings.TrimSpace(string(b))
			if err := api.NewClient(a.addr, a.token).Health(context.Background()); err == nil {
				break
			}
		}
		select {
		case <-a.done:
			data, _ := os.ReadFile(a.logPath)
			t.Fatalf("%s exited during start:\n%s", all[0], data)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start within 30s", all[0])
		}
	}
	return a
}

func (a *agent) running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits.
func (a *agent) stop() {
	if !a.running() {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
}

// kill9 kills the agent the hard way; its workers die with it.
func (a *agent) kill9() {
	_ = a.cmd.Process.Kill()
	<-a.done
}

func (a *agent) client() *api.Client { return api.NewClient(a.addr, a.token) }

// result is what one CLI invocation did.
type result struct {
	stdout, stderr string
	code           int
}

// drover runs the CLI against the agent as the given token.
func (a *agent) drover(token string, args ...string) result {
	a.t.Helper()
	return runCLI(a.t, []string{"DROVER_ADDR=" + a.addr, "DROVER_TOKEN=" + token}, args...)
}

func runCLI(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runCLIFor(t, 120*time.Second, env, args...)
}

// runCLIFor is runCLI for a command that may take up to timeout.
func runCLIFor(t *testing.T, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = append(append(os.Environ(), "HOME="+t.TempDir()), env...)
	cmd.Dir = ".."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run drover %v: %v", args, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

func (r result) must(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

func writeSpec(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
