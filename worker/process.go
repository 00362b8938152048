package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/drover-sched/drover/worker/cgroups"
	"golang.org/x/sys/unix"
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
	if err := closeInherited(); err != nil {
		return nil, &StartError{Op: "start", Name: name, Err: err}
	}
	cmd := exec.Command(path, spec.Command[1:]...)
	cmd.Args[0] = name
	cmd.Dir = spec.Dir
	cmd.Env = processEnv(spec)
	if cmd.Stdin, err = devNull(); err != nil {
		return nil, &StartError{Op: "start", Name: name, Err: err}
	}
	// The output's pipe is the worker's own, as are the process's pidfd
	// and its reaping (see wait): os/exec would add a goroutine, and a
	// thread blocked in waitid for each job.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, &StartError{Op: "start", Name: name, Err: err}
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	pidfd := -1
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: &pidfd}
	if spec.UID != 0 {
		// No supplementary groups: the worker's would follow the job.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(spec.UID), Gid: uint32(spec.GID), Groups: []uint32{}}
	}
	start := cmd.Start
	switch {
	case spec.Start != nil:
		// In the job's jail, and inside its cgroup.
		start = func() error { return spec.Start(cmd) }
	case spec.Cgroup != nil:
		// Born inside the job's cgroup: nothing it starts escapes it.
		start = func() error { return spec.Cgroup.Start(cmd) }
	}
	err = start()
	pw.Close()
	if err != nil {
		pr.Close()
		if pidfd >= 0 {
			syscall.Close(pidfd)
		}
		return nil, &StartError{Op: "start", Name: name, Err: unwrapExec(err)}
	}
	p := &process{cmd: cmd, pid: cmd.Process.Pid, cgroup: spec.Cgroup, out: pr, copied: make(chan struct{}), done: make(chan struct{})}
	if pidfd >= 0 {
		if err := syscall.SetNonblock(pidfd, true); err == nil {
			p.pidfd = os.NewFile(uintptr(pidfd), "pidfd")
		} else {
			syscall.Close(pidfd)
		}
	}
	go p.copy(out)
	go p.wait()
	return p, nil
}

// closeInherited marks every descriptor above 2 close-on-exec, once,
// before the first job starts. The worker's own are (Go opens them so);
// those it was started with may not be: whatever started it (a shell, a
// supervisor) may have left one open, and every job would inherit it, a
// file its user cannot open written through the worker's descriptor.
var closeInherited = sync.OnceValue(func() error {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	// Before Linux 5.11: one by one.
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("mark the worker's inherited descriptors close-on-exec: %w", err)
	}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("mark descriptor %d close-on-exec: %w", fd, err)
		}
	}
	return nil
})

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
	pid    int      // and its process group's ID
	pidfd  *os.File // the process's pidfd, in the runtime's poller (nil: none)
	out    *os.File // the read end of its output's pipe
	copied chan struct{}
	cgroup *cgroups.Slot
	done   chan struct{} // closed once the process has ended and its group is killed
	res    Result
	err    error
}

// copy copies the process's output to w until every writer of the pipe
// is gone, or wait gives up on them.
func (p *process) copy(w io.Writer) {
	_, _ = io.Copy(w, p.out)
	close(p.copied)
}

// wait waits for the process, kills what it left in its process group
// (and, with a cgroup, anywhere: a child that made a session of its own
// too), and records how it ended once its output is in: a background
// child holding the output open past waitDelay does not hold the job.
func (p *process) wait() {
	res, err := p.reap(func() {
		// What the job left running ends with it, as in a container:
		// it would use resources nobody accounts for. (Before the
		// process is reaped, while its ID cannot name another group.)
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	})
	p.res = res
	// Then the cgroup, which counts the process until it is reaped.
	if p.cgroup != nil {
		if kerr := p.cgroup.Kill(); kerr != nil && err == nil {
			err = fmt.Errorf("kill what the job left running: %w", kerr)
		}
	}
	select {
	case <-p.copied:
	default:
		timer := time.NewTimer(waitDelay)
		select {
		case <-p.copied:
		case <-timer.C:
			_ = p.out.SetReadDeadline(time.Now())
			<-p.copied
		}
		timer.Stop()
	}
	p.out.Close()
	if err != nil {
		p.err = fmt.Errorf("wait for %q: %w", p.cmd.Args[0], err)
	}
	close(p.done)
}

// siginfoChild is the part of a siginfo_t that waitid fills for a child.
type siginfoChild struct {
	Signo, Errno, Code, _ int32
	Pid                   int32
	UID                   uint32
	Status                int32
	_                     [100]byte
}

// reap waits for the process to end, through its pidfd in the runtime's
// poller (no thread waits), calls ended, and reaps it.
func (p *process) reap(ended func()) (Result, error) {
	if p.pidfd == nil {
		ps, err := p.cmd.Process.Wait()
		ended()
		if err != nil {
			return Result{ExitCode: -1}, err
		}
		r := result(ps)
		r.Usage, _ = ps.SysUsage().(*syscall.Rusage)
		return r, nil
	}
	defer p.pidfd.Close()
	defer p.cmd.Process.Release()
	rc, err := p.pidfd.SyscallConn()
	if err != nil {
		ended()
		return Result{ExitCode: -1}, err
	}
	var (
		info siginfoChild
		ru   syscall.Rusage
		werr error
	)
	waitid := func(fd uintptr, options int) bool {
		const pPIDFD = 3 // P_PIDFD of <linux/wait.h>
		for {
			info = siginfoChild{}
			_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPIDFD, fd, uintptr(unsafe.Pointer(&info)), uintptr(syscall.WEXITED|options), uintptr(unsafe.Pointer(&ru)), 0)
			switch e {
			case 0:
				return info.Pid != 0 // 0: still running (WNOHANG)
			case syscall.EINTR:
				continue
			}
			werr = e
			return true
		}
	}
	const wNoWait = 0x1000000 // WNOWAIT of <linux/wait.h>
	if err = rc.Read(func(fd uintptr) bool { return waitid(fd, syscall.WNOHANG|wNoWait) }); err == nil {
		err = werr
	}
	ended()
	if err == nil {
		_ = rc.Control(func(fd uintptr) { waitid(fd, 0) })
		err = werr
	}
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	const cldExited = 1 // CLD_EXITED of <asm-generic/siginfo.h>; otherwise killed or dumped
	r := Result{ExitCode: int(info.Status), Usage: &ru}
	if info.Code != cldExited {
		r.Signal = syscall.Signal(info.Status)
		r.ExitCode = 128 + int(info.Status)
	}
	return r, nil
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
	pgid := p.pid
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
