package worker

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/worker/cgroups"
)

// A jail is what keeps a job's processes from the host and from other jobs
// beyond its user: a cgroup slot, a network namespace of its own (on the
// worker's bridge, or with loopback only; none for network "host"), the
// jobs' mount namespace, whose /proc shows a process only to its own user
// (jobs run as users of their own, so each sees its processes only) and
// in which the job is chrooted to a copy of the whole tree (a chrooted
// process cannot make a user namespace, and without one it has no
// capability to make any namespace), no_new_privs, and a seccomp filter
// (processFilter). Making a network namespace and its veth takes
// milliseconds, so jails are made once and reused, one job at a time, as
// Hail's worker pools its namespaces per job slot: a job start only hands
// its command to the jail's thread.
//
// Each jail has an OS thread of the worker's that lives in the jail's
// namespaces under no_new_privs and the filter, joined to the jail's
// cgroup slot (cgroups.Slot.Join), and forks the jail's jobs: a child is
// born in its parent thread's namespaces and cgroups with its filter, and
// Go's fork and exec runs under the filter unchanged. The jail keeps its
// slot from job to job (cgroups.Slot.Renew), so on cgroup v1 no thread
// moves between cgroups as jobs start, which would contend for the
// kernel's cgroup locks with every fork of the machine (a third of the
// dev agent's throughput). Pdeathsig is tied to the thread, which lives as
// long as the jail.
//
// Nothing a job can change in its jail outlives it: it is neither root nor
// owner of the jail's namespaces, so it cannot change their addresses,
// routes, sysctls or mounts, and its processes (and their sockets) are
// killed with its cgroup before the jail is used again.
type jail struct {
	mode string        // api.NetworkBridge, api.NetworkNone or api.NetworkHost
	net  *jailNet      // on the bridge (nil otherwise)
	slot *cgroups.Slot // the job's hold on the jail's cgroup slot
	tid  int           // the jail's thread
	reqs chan *exec.Cmd
	done chan error // the thread's answers; closed when it has left the slot

	// The private places in the jail's own mount namespace, and the
	// memory limit they are sized for (see private.go).
	tmp    *privateTmp
	size   int64
	broken atomic.Bool // what its last job left could not be removed: not to be used again
}

// jails is a worker's pool of jails.
type jails struct {
	log     *slog.Logger
	fs      *jailFS
	bridge  *bridge // nil: no bridge (jobs on it are refused)
	cgroups *cgroups.Manager
	filter  *unix.SockFprog
	janitor *janitor
	maxIdle int

	mu     sync.Mutex
	idle   map[string][]*jail // by mode, most recent last
	live   int                // jails made and not destroyed
	closed bool
}

// jailsConfig is what a worker's jails are made from.
type jailsConfig struct {
	Root    string        // the chroot (an empty directory; jails mount on it)
	Queues  string        // an empty directory of the worker's own, where each jail mounts its message queues
	Shared  []string      // the worker's directories jobs write in (the jobs dir); the rest of the host is read-only
	Resolv  string        // the jobs' resolv.conf ("": the host's, or its upstream's)
	Bridge  *bridgeConfig // nil: no bridge
	MaxIdle int           // idle jails kept per mode
}

// openJails makes the jobs' mount namespace, the bridge and the filter;
// jails take their cgroup slots from cg.
func openJails(cfg jailsConfig, cg *cgroups.Manager, log *slog.Logger) (_ *jails, err error) {
	p := &jails{log: log.With("component", "jails"), cgroups: cg, maxIdle: cfg.MaxIdle, idle: map[string][]*jail{}}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.filter, err = processFilter(cg.Version() == cgroups.V2); err != nil {
		return nil, err
	}
	if p.fs, err = openJailFS(cfg, p.log); err != nil {
		return nil, err
	}
	p.janitor = newJanitor(p.fs)
	if cfg.Bridge != nil {
		bc := *cfg.Bridge
		bc.DNS = nameservers(p.fs.resolv)
		if p.bridge, err = openBridge(bc, p.log); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// jailMode is the jail mode of a job's network ("" is the bridge).
func jailMode(network string) string {
	if network == "" {
		return api.NetworkBridge
	}
	return network
}

// take returns a jail of mode whose cgroup slot is ready for a job with
// limits l: an idle one, renewed, or a new one.
func (p *jails) take(mode string, l cgroups.Limits) (*jail, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("the worker is stopping")
		}
		idle := p.idle[mode]
		if len(idle) == 0 {
			p.live++
			p.mu.Unlock()
			break
		}
		j := idle[len(idle)-1]
		p.idle[mode] = idle[:len(idle)-1]
		p.mu.Unlock()
		h, err := j.slot.Renew(l)
		if err == nil {
			j.slot = h
			if l.Memory == j.size {
				return j, nil
			}
			if err = p.janitor.empty(j, l.Memory); err == nil {
				return j, nil
			}
		}
		p.log.Warn("cannot ready a jail for the next job; making another jail", "err", err)
		p.discard(j)
	}
	j, err := p.make(mode, l)
	if err != nil {
		p.mu.Lock()
		p.live--
		p.mu.Unlock()
		return nil, err
	}
	return j, nil
}

// put gives back a jail whose job has ended (its cgroup killed: nothing of
// it runs), for the next job, once what the job left in it is removed;
// beyond maxIdle idle jails of its mode, or once the pool is closed, or
// when it cannot be emptied, it is destroyed.
func (p *jails) put(j *jail) {
	if j.broken.Load() {
		p.discard(j)
		return
	}
	if err := p.janitor.empty(j, j.size); err != nil {
		p.log.Warn("cannot empty a jail; destroying it", "err", err)
		p.discard(j)
		return
	}
	p.mu.Lock()
	if p.closed || len(p.idle[j.mode]) >= p.maxIdle {
		p.live--
		p.mu.Unlock()
		p.destroy(j)
		return
	}
	p.idle[j.mode] = append(p.idle[j.mode], j)
	p.mu.Unlock()
}

// discard destroys a jail that must not be used again.
func (p *jails) discard(j *jail) {
	p.mu.Lock()
	p.live--
	p.mu.Unlock()
	p.destroy(j)
}

// close destroys the idle jails, and any given back later, then the
// bridge and the mount namespace.
func (p *jails) close() {
	p.mu.Lock()
	p.closed = true
	var all []*jail
	for _, js := range p.idle {
		all = append(all, js...)
	}
	p.idle = map[string][]*jail{}
	p.live -= len(all)
	p.mu.Unlock()
	for _, j := range all {
		p.destroy(j)
	}
	if p.janitor != nil {
		p.janitor.close()
	}
	if p.bridge != nil {
		p.bridge.close()
	}
	if p.fs != nil {
		p.fs.close()
	}
}

// make makes a jail: it takes a cgroup slot; its thread enters the
// namespaces (a new network namespace for the bridge and none, then the
// jobs' mount namespace), the host side attaches a bridge jail's
// namespace, and the thread takes no_new_privs and the filter and joins
// the slot.
func (p *jails) make(mode string, l cgroups.Limits) (*jail, error) {
	if mode == api.NetworkBridge && p.bridge == nil {
		return nil, errors.New("this worker has no bridge for jobs (network \"bridge\")")
	}
	slot, err := p.cgroups.Acquire(l)
	if err != nil {
		return nil, fmt.Errorf("make the job's cgroup: %w", err)
	}
	j := &jail{mode: mode, slot: slot, reqs: make(chan *exec.Cmd), done: make(chan error)}
	entered := make(chan int)   // the namespace's fd (-1 for the host's), from the thread
	attached := make(chan bool) // go on (or give up), to the thread
	goLocked(func() { j.thread(p, l.Memory, entered, attached) })
	nsFD := <-entered
	if nsFD == -2 {
		err := <-j.done
		slot.Release()
		return nil, err
	}
	ok := true
	if mode == api.NetworkBridge {
		if j.net, err = p.bridge.attach(nsFD); err != nil {
			ok = false
		}
	}
	if nsFD >= 0 {
		unix.Close(nsFD)
	}
	attached <- ok
	if !ok {
		<-j.done
		slot.Release()
		return nil, err
	}
	if err := <-j.done; err != nil {
		if j.net != nil {
			p.bridge.detach(j.net)
		}
		slot.Release()
		return nil, err
	}
	p.log.Debug("made a jail", "mode", mode, "thread", j.tid, "slot", slot.Name())
	return j, nil
}

// destroy ends a jail's thread (it leaves the jail's cgroup slot first),
// and with it the jail's namespaces, takes its veth off the bridge and
// gives the slot back.
func (p *jails) destroy(j *jail) {
	if j.net != nil {
		p.bridge.detach(j.net)
	}
	close(j.reqs)
	for range j.done {
	}
	j.tmp.close()
	j.slot.Release()
}

// thread is the body of a jail's OS thread (locked by goLocked, never
// unlocked: the thread ends with it). It sends on entered the fd of the
// network namespace it made (-1 for the host's; -2 when it failed, the
// error following on done), waits for the go-ahead on attached, finishes
// its namespaces, takes no_new_privs and the filter, joins the slot and
// says so on done; then it forks what it is asked to, answering on done,
// and at the end leaves the slot and closes done.
func (j *jail) thread(p *jails, size int64, entered chan<- int, attached <-chan bool) {
	j.tid = unix.Gettid()
	fd := -1
	if j.mode != api.NetworkHost {
		var err error
		if fd, err = newNetns(); err != nil {
			entered <- -2
			j.done <- err
			close(j.done)
			return
		}
	}
	entered <- fd
	if !<-attached {
		close(j.done)
		return
	}
	if err := j.enter(p, size); err != nil {
		j.tmp.close()
		j.done <- err
		close(j.done)
		return
	}
	j.done <- nil
	for cmd := range j.reqs {
		j.done <- j.fork(p, cmd)
	}
	if err := j.slot.Leave(); err != nil {
		p.log.Error("a jail's thread cannot leave its cgroup slot", "slot", j.slot.Name(), "err", err)
	}
	close(j.done)
}

// newNetns moves the calling thread into a new network namespace with
// loopback up, and returns an fd of the namespace.
func newNetns() (int, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return -1, fmt.Errorf("make the job's network namespace: %w", err)
	}
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		return -1, fmt.Errorf("bring the job's loopback up: %w", err)
	}
	// Ping through ICMP sockets, the way an unprivileged user can (a
	// setuid ping gains nothing under no_new_privs).
	// (/proc/sys/net is the opener's network namespace's.)
	if err := os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 2147483647"), 0); err != nil {
		return -1, fmt.Errorf("let the job ping: %w", err)
	}
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the job's network namespace: %w", err)
	}
	return fd, nil
}

// enter configures the jail's eth0 (on the bridge), moves the thread into
// a copy of the jobs' mount namespace and a new IPC namespace, both the
// jail's own, with its private places sized for a job of memory limit
// size, puts it under no_new_privs and the filter, and joins it to the
// jail's cgroup slot.
func (j *jail) enter(p *jails, size int64) error {
	if j.net != nil {
		if err := p.bridge.configure(j.net); err != nil {
			return err
		}
	}
	// setns into a mount namespace needs a thread whose root and
	// working directory are its own.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare the jail thread's file system context: %w", err)
	}
	if err := unix.Setns(int(p.fs.ns.Fd()), unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("enter the jobs' mount namespace: %w", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_NEWIPC); err != nil {
		return fmt.Errorf("make the jail's mount and IPC namespaces: %w", err)
	}
	var err error
	if j.tmp, err = p.fs.furnish(size); err != nil {
		return err
	}
	j.size = size
	if err := loadFilter(p.filter); err != nil {
		return err
	}
	return j.slot.Join()
}

// fork starts cmd from the jail's thread, chrooted to the copy of the
// tree, in the jail's cgroup slot, once it has removed what the last job
// left in the jail's IPC namespace (a few system calls here; an IPC
// namespace of each job's own cost some 30 to 50 µs of the worker's CPU a
// job to make, and more to free).
func (j *jail) fork(p *jails, cmd *exec.Cmd) error {
	if err := clearIPC(j.tmp); err != nil {
		j.broken.Store(true)
		return err
	}
	var attr syscall.SysProcAttr
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.Chroot = p.fs.root
	cmd.SysProcAttr = &attr
	return j.slot.Start(cmd)
}

// start starts cmd in the jail.
func (j *jail) start(cmd *exec.Cmd) error {
	j.reqs <- cmd
	return <-j.done
}

// netnsPath is the jail's network namespace as a path a container runtime
// can join ("" for the host's).
func (j *jail) netnsPath() string {
	if j.mode == api.NetworkHost {
		return ""
	}
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/task/" + strconv.Itoa(j.tid) + "/ns/net"
}

// addr is the jail's address on the bridge (invalid off it).
func (j *jail) addr() netip.Addr {
	if j.net == nil {
		return netip.Addr{}
	}
	return j.net.addr
}

// goLocked runs fn in a new goroutine locked to an OS thread of its own
// that is not the process's main thread, and never unlocks it: fn may
// change the thread's namespaces, root or seccomp filter for good, and
// the runtime ends the thread when fn returns. (The main thread cannot
// end; left in namespaces of a jail, it would be the worker's face in
// /proc.)
func goLocked(fn func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			fn()
			return
		}
		// Hold the main thread so that the next goroutine runs on
		// another, and give it back once that one is locked.
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			fn()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// jailFS is the jobs' mount namespace: a copy of the worker's, receiving
// its later mounts and unmounts (slave propagation), whose /proc is a
// procfs of its own mounted hidepid=invisible (a process's directory is
// there only for its own user), with the whole tree bound again at root,
// where jobs are chrooted, read-only but for /proc and the worker's shared
// directories (the jobs dir): a job writes only its own directory and its
// jail's private places (private.go). When the host's resolver is on
// loopback (which a job on the bridge cannot reach), the upstream
// servers' resolv.conf is bound over the copy's; so is the operator's
// (Config.JobResolvConf).
type jailFS struct {
	root   string   // the chroot, the same path inside and out
	ns     *os.File // the mount namespace
	resolv string   // the resolv.conf a job on the bridge uses
	shared []string // the worker's directories jobs write in, bound at the same path in the chroot
	places []string // the host's shared writable places each jail has a private copy of
	tmp    string   // where each jail mounts the tmpfs of its private places (outside the chroot)
	mq     string   // where each jail mounts its message queue file system (outside the chroot)
}

// openJailFS makes the jobs' mount namespace on a thread of its own, with
// cfg.Resolv as the jobs' resolv.conf ("": jobResolvConf).
func openJailFS(cfg jailsConfig, log *slog.Logger) (*jailFS, error) {
	root, resolv := cfg.Root, cfg.Resolv
	tmp := filepath.Join(filepath.Dir(cfg.Queues), "jail-tmp")
	for _, d := range []string{root, cfg.Queues, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("jail root: %w", err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, fmt.Errorf("jail root: %w", err)
	}
	for _, d := range []string{cfg.Queues, tmp} {
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("jail: %w", err)
		}
	}
	if resolv == "" {
		resolv = jobResolvConf(log)
	}
	fs := &jailFS{root: root, resolv: resolv, mq: cfg.Queues, tmp: tmp}
	for _, d := range cfg.Shared {
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			return nil, fmt.Errorf("jobs' directory %s: %w", d, err)
		}
		fs.shared = append(fs.shared, real)
	}
	for _, p := range privatePlaces {
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			fs.places = append(fs.places, p)
		}
	}
	done := make(chan error)
	goLocked(func() { done <- fs.make() })
	if err := <-done; err != nil {
		return nil, fmt.Errorf("make the jobs' mount namespace: %w", err)
	}
	return fs, nil
}

// make builds the namespace on the calling thread, which ends after.
func (fs *jailFS) make() error {
	if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave: %w", err)
	}
	procs, err := procMounts()
	if err != nil {
		return err
	}
	// Deepest first; /proc's own submounts go with it.
	for _, m := range slices.Backward(procs) {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount the host's procfs at %s: %w", m, err)
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible"); err != nil {
		return fmt.Errorf("mount /proc with hidepid=invisible: %w", err)
	}
	if err := unix.Mount("/", fs.root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind / at %s: %w", fs.root, err)
	}
	if fs.resolv != "/etc/resolv.conf" {
		target := filepath.Join(fs.root, "etc/resolv.conf")
		if err := unix.Mount(fs.resolv, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s at %s: %w", fs.resolv, target, err)
		}
	}
	// The host as jobs see it is read-only: a job has nowhere to leave a
	// file for another but its own directory and its private places,
	// which go when it ends.
	if err := unix.MountSetattr(-1, fs.root, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make the jobs' view of the host read-only: %w", err)
	}
	// A process's own files under /proc (oom_score_adj, comm) stay its
	// to write.
	if err := unix.MountSetattr(-1, filepath.Join(fs.root, "proc"), 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make the jobs' /proc writable: %w", err)
	}
	for _, d := range fs.shared {
		target := filepath.Join(fs.root, d)
		if err := unix.Mount(d, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s at %s: %w", d, target, err)
		}
	}
	ns, err := os.Open("/proc/thread-self/ns/mnt")
	if err != nil {
		return fmt.Errorf("open the namespace: %w", err)
	}
	fs.ns = ns
	return nil
}

// close drops the worker's hold on the namespace; it goes with the last
// jail thread.
func (fs *jailFS) close() {
	if fs.ns != nil {
		fs.ns.Close()
	}
}

// procMounts lists the mount points of procfs in the calling thread's
// mount namespace.
func procMounts() ([]string, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fl := range fields {
			if fl == "-" && i >= 6 && i+1 < len(fields) {
				if fields[i+1] == "proc" {
					out = append(out, unescapeMount(fields[4]))
				}
				break
			}
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes ("\040" for a space),
// which are Go's too.
func unescapeMount(s string) string {
	if u, err := strconv.Unquote(`"` + s + `"`); err == nil {
		return u
	}
	return s
}

// jobResolvConf is the resolv.conf jobs on the bridge use: the host's,
// unless it names only loopback servers (systemd-resolved's stub), which
// a job's namespace cannot reach; then systemd-resolved's list of the
// upstream servers, when there is one.
func jobResolvConf(log *slog.Logger) string {
	const host, upstream = "/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"
	if !onlyLoopbackServers(host) {
		return host
	}
	if _, err := os.Stat(upstream); err == nil && !onlyLoopbackServers(upstream) {
		return upstream
	}
	log.Warn("the host's resolver is on loopback, which jobs on the bridge cannot reach, and no upstream servers are known: their names will not resolve", "resolv.conf", host)
	return host
}

// onlyLoopbackServers tells whether a resolv.conf names nameservers and
// all of them are loopback addresses.
func onlyLoopbackServers(path string) bool {
	ns := nameservers(path)
	for _, a := range ns {
		if !a.IsLoopback() {
			return false
		}
	}
	return len(ns) > 0
}

// nameservers lists the nameservers of a resolv.conf.
func nameservers(path string) []netip.Addr {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if a, err := netip.ParseAddr(f[1]); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
