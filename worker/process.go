package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-sched/drover/worker/cgroups"
)

// ProcessExecutor runs commands as processes of this machine, each in a
// process group of its own that is killed when the command ends. The zero
// value is ready to use.
type ProcessExecutor struct {
	mu    sync.Mutex
	paths map[string]string // program name -> path found in PATH
}

var _ Executor = (*ProcessExecutor)(nil)

// waitDelay is how long output may stay open after a command's main process
// has exited: a background child that keeps stdout open must not hold the
// command open.
const waitDelay = 500 * time.Millisecond

// Start starts spec's command as a process in a process group of its own,
// in spec.Dir, with the worker's PATH, USER and LOGNAME, HOME and TMPDIR set
// to spec.Dir, LANG=C.UTF-8, then spec.Env.
func (e *ProcessExecutor) Start(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
	if len(spec.Command) == 0 {
		return nil, &StartError{Op: "run", Err: errors.New("empty command")}
	}
	name := spec.Command[0]
	path, err := e.lookPath(name)
	if err != nil {
		return nil, &StartError{Op: "run", Name: name, Err: unwrapExec(err)}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("not starting %q: %w", name, err)
	}
	cmd := exec.Command(path, spec.Command[1:]...)
	cmd.Args[0] = name
	cmd.Dir = spec.Dir
	cmd.Env = processEnv(spec)
	cmd.Stdout = out
	cmd.Stderr = out
	if cmd.Stdin, err = devNull(); err != nil {
		return nil, &StartError{Op: "start", Name: name, Err: err}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if spec.UID != 0 {
		// No supplementary groups: the worker's would follow the job.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(spec.UID), Gid: uint32(spec.GID), Groups: []uint32{}}
	}
	cmd.WaitDelay = waitDelay
	start := cmd.Start
	switch {
	case spec.Start != nil:
		// In the job's jail, and inside its cgroup.
		start = func() error { return spec.Start(cmd) }
	case spec.Cgroup != nil:
		// Born inside the job's cgroup: nothing it starts escapes it.
		start = func() error { return spec.Cgroup.Start(cmd) }
	}
	if err := start(); err != nil {
		return nil, &StartError{Op: "start", Name: name, Err: unwrapExec(err)}
	}
	p := &process{cmd: cmd, cgroup: spec.Cgroup, done: make(chan struct{})}
	go p.wait()
	return p, nil
}

// devNull is /dev/null, opened once for every job's standard input (os/exec
// would open it for each).
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// lookPath finds a program in PATH, remembering what it found: most jobs of
// a batch run the same program, and every lookup is a dozen stat calls.
func (e *ProcessExecutor) lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	e.mu.Lock()
	p, ok := e.paths[name]
	e.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	if e.paths == nil {
		e.paths = map[string]string{}
	}
	e.paths[name] = p
	e.mu.Unlock()
	return p, nil
}

// processEnv is the environment of spec's process: the base environment,
// then the job's variables, which win on a duplicate key.
func processEnv(spec Spec) []string {
	user := os.Getenv("USER")
	logname := os.Getenv("LOGNAME")
	if spec.UID != 0 {
		user = "job" + strconv.Itoa(spec.UID)
		logname = user
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"USER=" + user,
		"LOGNAME=" + logname,
		"HOME=" + spec.Dir,
		"TMPDIR=" + spec.Dir,
		"LANG=C.UTF-8",
	}
	return append(env, spec.Env...)
}

// process is a started command of the ProcessExecutor.
type process struct {
	cmd    *exec.Cmd
	cgroup *cgroups.Slot
	done   chan struct{} // closed once the process has ended and its group is killed
	res    Result
	err    error
}

// wait waits for the process, kills what it left in its process group
// (and, with a cgroup, anywhere: a child that made a session of its own
// too), and records how it ended.
func (p *process) wait() {
	err := p.cmd.Wait()
	// What the job left running ends with it, as in a container: it would
	// use resources nobody accounts for.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if p.cgroup != nil {
		if kerr := p.cgroup.Kill(); kerr != nil && err == nil {
			err = fmt.Errorf("kill what the job left running: %w", kerr)
		}
	}
	p.res = result(p.cmd.ProcessState)
	if p.cmd.ProcessState != nil {
		if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			p.res.Usage = ru
		}
	}
	var ee *exec.ExitError
	// An exit status is in the result, and a background child holding the
	// output past waitDelay does not count against the job.
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		p.err = fmt.Errorf("wait for %q: %w", p.cmd.Args[0], err)
	}
	close(p.done)
}

// Done is closed once the process has ended.
func (p *process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to end.
func (p *process) Wait() (Result, error) {
	<-p.done
	return p.res, p.err
}

// Stop sends SIGTERM to the process group, then SIGKILL after the grace
// period if the process has not ended. Children that ignored SIGTERM and
// outlived the leader are killed with the group when it ends (see wait).
func (p *process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if p.cgroup != nil {
			_ = p.cgroup.Kill()
		}
	}
}

// result is how a process ended.
func result(ps *os.ProcessState) Result {
	r := Result{ExitCode: exitCode(ps)}
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Signal = ws.Signal()
		}
	}
	return r
}

// exitCode follows the shell's convention: 128+N for a process killed by
// signal N.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// unwrapExec strips os/exec's and os's wrapping (which repeat the program's
// name) from an error starting a program.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
