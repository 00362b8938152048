package worker

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/worker/cgroups"
	"github.com/drover-sched/drover/worker/images"
)

// Executor runs the command of a job attempt. The worker keeps the attempt's
// lifecycle (its working directory, timeout, kills, log and reports); the
// executor only starts the command, waits for it and stops it. The process
// executor (ProcessExecutor) runs commands as processes of this machine.
type Executor interface {
	// Start starts spec's command, writing its output (stdout and stderr
	// together) to out until Wait returns. ctx bounds only the starting:
	// when it is cancelled before the command runs, Start returns an error
	// wrapping ctx.Err(); once Start has returned, cancelling ctx has no
	// effect (Handle.Stop ends the command). A command that cannot be
	// started at all (program missing, not executable) is reported as a
	// *StartError. Any error but ctx's ends the attempt in error, with the
	// error as its message.
	Start(ctx context.Context, spec Spec, out io.Writer) (Handle, error)
}

// Spec is what an executor needs to run an attempt's command.
type Spec struct {
	// Ref names the attempt (for the executor's own naming, such as a
	// container's).
	Ref api.AttemptRef
	// Command is the argv; a Command[0] without a slash is looked up in
	// the executor's PATH.
	Command []string
	// Env holds the job's variables ("KEY=value"): DROVER_* and the job's
	// own. The executor adds its base environment (PATH, HOME, ...) before
	// them; on a duplicate key the later entry wins.
	Env []string
	// Dir is the attempt's private working directory, created by the
	// worker. The command runs in it and uses it as HOME and TMPDIR (a
	// container sees it at /io).
	Dir string
	// UID and GID are the user and group the command runs as; 0 runs it
	// as the worker's own user.
	UID, GID int
	// Cgroup is the attempt's cgroup: a process is started inside it, a
	// container's cgroup is made below it (nil: none).
	Cgroup *cgroups.Slot
	// Memory is the job's memory limit (0: none): a container's /tmp and
	// /dev/shm are tmpfs of this size, as a process job's are.
	Memory int64
	// Start, when set, starts a process's command in the attempt's
	// jail: its namespaces, chrooted, under no_new_privs and the jobs'
	// seccomp filter, inside Cgroup. The executor calls it instead of
	// starting the command itself.
	Start func(*exec.Cmd) error
	// Image is the container image to run in (nil: a process) and
	// Network its network (api.NetworkBridge, written "" too,
	// api.NetworkNone or api.NetworkHost). NetNS is the network
	// namespace (a path) a container joins: the jail's, on the bridge or
	// with loopback only; "" for the host's.
	Image   *images.Image
	Network string
	NetNS   string
}

// Handle is a started command.
type Handle interface {
	// Wait waits for the command to end and returns how it ended. What the
	// command left running (its process group) is killed before Wait
	// returns. A non-zero exit is not an error: the error reports that the
	// executor lost track of the command, and Result then says what is
	// known. Wait may be called more than once, and concurrently with
	// Stop.
	Wait() (Result, error)
	// Done is closed once Wait would return at once.
	Done() <-chan struct{}
	// Stop ends the command: SIGTERM to all of it (its process group),
	// then SIGKILL once grace has passed if the command has not ended. It
	// returns when the command has ended or SIGKILL was sent, and does
	// nothing once the command has ended.
	Stop(grace time.Duration)
}

// Result is how a command ended.
type Result struct {
	// ExitCode follows the shell's convention: 128+N for a command killed
	// by signal N, and -1 when the status is unknown.
	ExitCode int
	// Signal is the signal that killed the command, or 0.
	Signal syscall.Signal
	// Usage is what the command's processes used, as the kernel counted
	// it for the executor (used when the attempt has no cgroup; nil:
	// unknown).
	Usage *syscall.Rusage
}

// StartError reports that a command could not be started: the program was
// not found or could not be executed. The attempt ends in error with this
// message.
type StartError struct {
	// Op is "run" when the program could not be found or is not
	// executable, "start" when launching it failed.
	Op string
	// Name is the program as the job named it (Command[0]).
	Name string
	// Err is the underlying cause, such as exec.ErrNotFound.
	Err error
}

func (e *StartError) Error() string { return fmt.Sprintf("cannot %s %q: %v", e.Op, e.Name, e.Err) }

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }
