package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/worker/cgroups"
	"github.com/drover-sched/drover/worker/images"
)

// ContainerExecutor runs commands in OCI containers with runc: each
// attempt gets a bundle of its own (a config.json and a root filesystem,
// an overlay of the image's cached layers over a private upper layer),
// runs as the attempt's user with the attempt's directory at /io, in
// namespaces of its own (the network one too, unless the job asks for the
// host's), and in a cgroup below the attempt's, so the attempt's limits
// and measures cover it.
type ContainerExecutor struct {
	runc   string // the runc binary
	root   string // runc's state (--root)
	dir    string // bundles
	resolv string // the resolv.conf of a container on the bridge
	images *images.Store
	log    *slog.Logger
	// starting bounds the containers runc is starting at once (a start
	// costs runc some 20 ms of CPU; a hundred at once on a few cores
	// thrash, and all start later than if they queued).
	starting chan struct{}
}

var _ Executor = (*ContainerExecutor)(nil)

// newContainerExecutor makes the executor's directories and clears what
// a previous run of the worker left there: bundles whose root filesystems
// are still mounted, and runc state of containers that are gone.
func newContainerExecutor(runc, root, dir, resolv string, store *images.Store, log *slog.Logger) (*ContainerExecutor, error) {
	for _, d := range []string{root, dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("container executor: %w", err)
		}
	}
	e := &ContainerExecutor{runc: runc, root: root, dir: dir, resolv: resolv, images: store, log: log, starting: make(chan struct{}, max(2, runtime.NumCPU()))}
	if states, err := os.ReadDir(root); err == nil {
		for _, st := range states {
			// Their processes died with the worker's cgroups; this drops
			// runc's record of them.
			_ = exec.Command(runc, "--root", root, "delete", "--force", st.Name()).Run()
		}
	}
	if bundles, err := os.ReadDir(dir); err == nil {
		for _, b := range bundles {
			e.removeBundle(filepath.Join(dir, b.Name()))
		}
	}
	return e, nil
}

// removeBundle unmounts a bundle's root filesystem, if mounted, and
// removes the bundle.
func (e *ContainerExecutor) removeBundle(bundle string) {
	_ = syscall.Unmount(filepath.Join(bundle, "fs", "rootfs"), syscall.MNT_DETACH)
	if err := os.RemoveAll(bundle); err != nil {
		e.log.Warn("remove container bundle", "bundle", bundle, "err", err)
	}
}

// Start makes the attempt's bundle and starts `runc run` on it. The
// container's output goes to out; runc stays the container's parent and
// exits with its status.
func (e *ContainerExecutor) Start(ctx context.Context, spec Spec, out io.Writer) (Handle, error) {
	if spec.Image == nil {
		return nil, errors.New("container executor: the attempt has no image")
	}
	if len(spec.Command) == 0 {
		// The image's own command, as docker run without one.
		spec.Command = slices.Concat(spec.Image.Entrypoint, spec.Image.Cmd)
		if len(spec.Command) == 0 {
			return nil, &StartError{Op: "run", Err: errors.New("the job names no command and its image has no entrypoint or cmd")}
		}
	}
	id := fmt.Sprintf("drover-%d-%d-%d", spec.Ref.BatchID, spec.Ref.JobID, spec.Ref.Attempt)
	bundle := filepath.Join(e.dir, id)
	e.removeBundle(bundle)
	if err := os.Mkdir(bundle, 0o700); err != nil {
		return nil, fmt.Errorf("make the container's bundle: %w", err)
	}
	c := &container{e: e, id: id, bundle: bundle, cgroup: spec.Cgroup, done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			c.cleanup()
		}
	}()
	rootfs, err := e.images.Mount(spec.Image, filepath.Join(bundle, "fs"))
	if err != nil {
		return nil, fmt.Errorf("make the container's root filesystem: %w", err)
	}
	c.rootfs = rootfs
	cfg, err := e.config(spec, rootfs.Path(), bundle)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("container config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return nil, fmt.Errorf("container config: %w", err)
	}
	select {
	case e.starting <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("not starting the container: %w", ctx.Err())
	}
	pidFile := filepath.Join(bundle, "pid")
	c.cmd = exec.Command(e.runc, "--root", e.root, "run", "--pid-file", pidFile, "--bundle", bundle, id)
	c.cmd.Stdout, c.cmd.Stderr = out, out
	// runc stays in the worker's cgroup (it is the worker's helper); the
	// container goes below the attempt's. A dying worker takes runc with
	// it, and the worker's next start kills what runc left.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c.cmd.WaitDelay = waitDelay
	if err := c.cmd.Start(); err != nil {
		<-e.starting
		return nil, &StartError{Op: "start", Name: e.runc, Err: unwrapExec(err)}
	}
	ok = true
	go c.wait()
	go func() {
		// runc writes the pid file once the job's process runs.
		defer func() { <-e.starting }()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			select {
			case <-c.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := os.Stat(pidFile); err == nil {
				return
			}
		}
	}()
	return c, nil
}

// config is the attempt's OCI runtime configuration.
func (e *ContainerExecutor) config(spec Spec, rootfs, bundle string) (*specs.Spec, error) {
	img := spec.Image
	hostname := fmt.Sprintf("job-%d-%d", spec.Ref.BatchID, spec.Ref.JobID)
	ro := []string{"nosuid", "noexec", "nodev", "ro"}
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		// The job's temporary places are tmpfs of the size of its
		// memory limit, charged to its cgroup as it writes them, gone
		// with the container.
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: append([]string{"nosuid", "noexec", "nodev"}, tmpfsOption(spec.Memory)...)},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: append([]string{"nosuid", "nodev"}, tmpfsOption(spec.Memory)...)},
		{Destination: api.JobDirMount, Type: "bind", Source: spec.Dir, Options: []string{"rbind", "rw", "nosuid", "nodev"}},
	}
	namespaces := []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}}
	hosts := filepath.Join(bundle, "hosts")
	if spec.Network == api.NetworkHost {
		// The host's network, its names and its resolver; /sys as it is
		// (sysfs cannot be mounted again outside a network namespace).
		mounts = append(mounts,
			specs.Mount{Destination: "/sys", Type: "none", Source: "/sys", Options: append([]string{"rbind"}, ro...)},
			specs.Mount{Destination: "/etc/hosts", Type: "bind", Source: "/etc/hosts", Options: []string{"bind", "ro"}},
			specs.Mount{Destination: "/etc/resolv.conf", Type: "bind", Source: "/etc/resolv.conf", Options: []string{"bind", "ro"}})
	} else {
		// The jail's network namespace (on the bridge, or loopback
		// only), or a new one.
		namespaces = append(namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: spec.NetNS})
		if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost "+hostname+"\n::1\tlocalhost ip6-localhost ip6-loopback\n"), 0o644); err != nil {
			return nil, fmt.Errorf("container hosts file: %w", err)
		}
		mounts = append(mounts,
			specs.Mount{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: ro},
			specs.Mount{Destination: "/etc/hosts", Type: "bind", Source: hosts, Options: []string{"bind", "ro"}})
		if jailMode(spec.Network) == api.NetworkBridge && e.resolv != "" {
			mounts = append(mounts, specs.Mount{Destination: "/etc/resolv.conf", Type: "bind", Source: e.resolv, Options: []string{"bind", "ro"}})
		}
	}
	mounts = append(mounts, specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: append([]string{"relatime"}, ro...)})
	cgroupsPath := ""
	if spec.Cgroup != nil {
		cgroupsPath = spec.Cgroup.ContainerPath()
	}
	cfg := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			User:            specs.User{UID: uint32(spec.UID), GID: uint32(spec.GID)},
			Args:            spec.Command,
			Env:             containerEnv(img.Env, spec.Env),
			Cwd:             api.JobDirMount,
			Capabilities:    &specs.LinuxCapabilities{},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: rootfs},
		Hostname: hostname,
		Mounts:   mounts,
		Linux: &specs.Linux{
			Namespaces:  namespaces,
			CgroupsPath: cgroupsPath,
			Resources:   &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
			MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
				"/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	// Docker's default profile, for a process without capabilities.
	sc, err := containerSeccomp(cfg)
	if err != nil {
		return nil, err
	}
	cfg.Linux.Seccomp = sc
	return cfg, nil
}

// containerEnv is a container's environment: the image's (PATH above
// all), HOME and TMPDIR, then the job's variables, which win.
func containerEnv(image, job []string) []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + api.JobDirMount, "TMPDIR=/tmp", "LANG=C.UTF-8"}
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i := slices.IndexFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }); i >= 0 {
			env[i] = kv
			return
		}
		env = append(env, kv)
	}
	for _, kv := range image {
		set(kv)
	}
	for _, kv := range job {
		set(kv)
	}
	return env
}

// container is a started `runc run`.
type container struct {
	e      *ContainerExecutor
	id     string
	bundle string
	rootfs *images.Rootfs
	cgroup *cgroups.Slot
	cmd    *exec.Cmd

	once sync.Once
	done chan struct{} // closed once runc has exited and the bundle is gone
	res  Result
	err  error
}

// wait waits for runc, whose exit status is the container's (128+N for a
// container killed by signal N), kills what is left and removes the
// bundle.
func (c *container) wait() {
	err := c.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		c.err = fmt.Errorf("wait for runc: %w", err)
	}
	c.res = Result{ExitCode: exitCode(c.cmd.ProcessState)}
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		// runc itself was killed: the container may still be there.
		c.res.Signal = ws.Signal()
		_ = exec.Command(c.e.runc, "--root", c.e.root, "delete", "--force", c.id).Run()
	} else if code := c.res.ExitCode; code > 128 && code <= 128+64 {
		c.res.Signal = syscall.Signal(code - 128)
	}
	if c.cgroup != nil {
		if kerr := c.cgroup.Kill(); kerr != nil && c.err == nil {
			c.err = fmt.Errorf("kill what the container left running: %w", kerr)
		}
	}
	c.cleanup()
	close(c.done)
}

// cleanup unmounts the root filesystem and removes the bundle.
func (c *container) cleanup() {
	c.once.Do(func() {
		if c.rootfs != nil {
			if err := c.rootfs.Close(); err != nil {
				c.e.log.Warn("unmount container root filesystem", "container", c.id, "err", err)
			}
		}
		c.e.removeBundle(c.bundle)
	})
}

// Wait waits for the container to end.
func (c *container) Wait() (Result, error) {
	<-c.done
	return c.res, c.err
}

// Done is closed once the container has ended.
func (c *container) Done() <-chan struct{} { return c.done }

// Stop sends SIGTERM to the container's first process (runc passes it
// on), then, once grace has passed, kills everything in the container's
// cgroup (a first process that ignores SIGTERM, as a PID namespace's
// init does unless it handles it, would otherwise live on).
func (c *container) Stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-c.done:
		return
	case <-timer.C:
	}
	if c.cgroup != nil {
		_ = c.cgroup.Kill()
	}
	_ = exec.Command(c.e.runc, "--root", c.e.root, "kill", c.id, "KILL").Run()
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
}
