package cgroups

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cfsPeriod is the CFS period of every slot, in microseconds (the kernel's
// default, so it is never written): CPUMilli/1000 cores is a quota of
// CPUMilli*100 µs per period.
const cfsPeriod = 100_000

// cpuQuota is the CFS quota in microseconds per cfsPeriod for l, or -1 for
// none. The kernel refuses quotas under 1 ms.
func cpuQuota(l Limits) int64 {
	if l.CPUMilli == 0 {
		return -1
	}
	return max(l.CPUMilli*cfsPeriod/1000, 1000)
}

// cpuShares is the v1 cpu.shares for l: 1024 per core, the kernel's default
// (one core's worth) without a request.
func cpuShares(l Limits) int64 {
	if l.CPUMilli == 0 {
		return 1024
	}
	return min(max(l.CPUMilli*1024/1000, 2), 262144)
}

// cpuWeight is the v2 cpu.weight for l, converted from cpu.shares by the
// linear map runc used until 1.3 (the Debian runc here is 1.1.5), so that
// weights stay proportional to the cores asked for; the kernel's default
// without a request. (opencontainers/cgroups' ConvertCPUSharesToCgroupV2Value
// now maps shares on a curve that gives 2 cores 1.74 times the weight of
// one, 4 cores 3.0 times: drover keeps the proportional map.)
func cpuWeight(l Limits) int64 {
	if l.CPUMilli == 0 {
		return 100
	}
	return 1 + (cpuShares(l)-2)*9999/262142
}

// v1Controllers are the v1 controllers a slot uses; a thread that starts a
// job joins the slot's leaf in each of their hierarchies for the fork. The
// freezer is not among them: see (*v1Slot).kill.
var v1Controllers = []string{"cpu", "cpuacct", "memory", "pids"}

// v1 is the cgroup v1 backend: one hierarchy per mount, possibly several
// controllers per mount (cpu,cpuacct).
type v1 struct {
	log     *slog.Logger
	dirs    dirOps
	parent  string            // Config.Parent, cleaned
	ctrl    map[string]string // controller -> mount point, for v1Controllers present
	used    []string          // distinct mount points of ctrl
	freezer string            // mount point of the freezer, for Open's cleanup; "" if none
	mounts  []string          // every v1 mount under Root: runc creates its cgroups in all
	memsw   bool              // memory.memsw.* exist (swap accounting)
	created []string          // directories Open created, parents first
	// home holds, per used hierarchy, the tasks file of the worker's own
	// cgroup, open for writing: a thread that started a job goes back
	// there.
	home        []*cgFile
	self        int
	killTimeout time.Duration
	dropAbove   int64
}

// v1Mounts lists the cgroup v1 mounts under root.
func v1Mounts(root string) ([]mount, error) {
	all, err := readMounts()
	if err != nil {
		return nil, err
	}
	var out []mount
	for _, m := range all {
		if m.fstype == "cgroup" && within(m.point, root) {
			out = append(out, m)
		}
	}
	return out, nil
}

// openV1 finds the hierarchies, cleans Parent up and creates it.
func openV1(cfg Config, log *slog.Logger, dirs dirOps) (*v1, error) {
	mounts, err := v1Mounts(cfg.Root)
	if err != nil {
		return nil, err
	}
	h := &v1{
		log:         log,
		dirs:        dirs,
		ctrl:        map[string]string{},
		self:        os.Getpid(),
		killTimeout: cfg.KillTimeout,
		dropAbove:   cfg.DropCacheAbove,
	}
	for _, m := range mounts {
		h.mounts = append(h.mounts, m.point)
		if h.freezer == "" && m.has("freezer") {
			h.freezer = m.point
		}
		for _, c := range v1Controllers {
			if _, ok := h.ctrl[c]; !ok && m.has(c) {
				h.ctrl[c] = m.point
				if !slices.Contains(h.used, m.point) {
					h.used = append(h.used, m.point)
				}
			}
		}
	}
	for _, c := range []string{"cpu", "cpuacct", "memory"} {
		if h.ctrl[c] == "" {
			return nil, fmt.Errorf("%w: no cgroup v1 %s hierarchy under %s", ErrUnsupported, c, cfg.Root)
		}
	}
	parent := cfg.Parent
	if parent == "" {
		parent = "drover"
	}
	if h.parent, err = cleanParent(parent); err != nil {
		return nil, err
	}
	own, err := selfCgroups()
	if err != nil {
		return nil, err
	}
	for c := range h.ctrl {
		if p, ok := own[c]; ok && within(p, "/"+h.parent) {
			return nil, fmt.Errorf("cgroups: the worker's own %s cgroup %s is inside Parent %s, which the Manager empties", c, p, h.parent)
		}
	}
	for _, mnt := range h.used {
		f, err := openFile(filepath.Join(mnt, h.ownPath(mnt, own), "tasks"), unix.O_WRONLY)
		if err != nil {
			h.closeHome()
			return nil, fmt.Errorf("cgroups: the worker's own cgroup: %w", err)
		}
		h.home = append(h.home, f)
	}
	if err := h.cleanup(); err != nil {
		h.closeHome()
		return nil, fmt.Errorf("clean up %s: %w", h.parent, err)
	}
	for _, mnt := range h.used {
		dir := mnt
		for _, el := range strings.Split(h.parent, "/") {
			dir = filepath.Join(dir, el)
			if exists(dir) {
				continue
			}
			if err := dirs.mkdir(dir); err != nil {
				h.closeHome()
				return nil, err
			}
			h.created = append(h.created, dir)
		}
	}
	h.memsw = exists(filepath.Join(h.ctrl["memory"], h.parent, "memory.memsw.limit_in_bytes"))
	log.Info("cgroups ready", "parent", h.parent, "hierarchies", h.used, "memsw", h.memsw)
	return h, nil
}

// ownPath is the worker's own cgroup in the hierarchy mounted at mnt, from
// own (/proc/self/cgroup), by the first controller of that hierarchy it
// names ("/" when it names none).
func (h *v1) ownPath(mnt string, own map[string]string) string {
	for _, c := range v1Controllers {
		if h.ctrl[c] == mnt {
			if p, ok := own[c]; ok {
				return p
			}
		}
	}
	return "/"
}

// closeHome closes the tasks files of the worker's own cgroups.
func (h *v1) closeHome() {
	for _, f := range h.home {
		f.close()
	}
	h.home = nil
}

// join moves the calling thread into the cgroups whose tasks files are
// given (writing "0": the writer itself). On an error it has moved the
// thread into the first ones only.
func join(tasks []*cgFile) error {
	for _, f := range tasks {
		if err := f.write("0"); err != nil {
			return err
		}
	}
	return nil
}

// cleanup kills and removes what a previous run left under Parent, in
// every hierarchy (runc creates its paths in all of them).
func (h *v1) cleanup() error {
	var roots []string
	for _, mnt := range h.mounts {
		if d := filepath.Join(mnt, h.parent); exists(d) {
			roots = append(roots, d)
		}
	}
	if len(roots) == 0 {
		return nil
	}
	var fz freezer
	if mnt := h.freezer; mnt != "" && exists(filepath.Join(mnt, h.parent)) {
		// A run that crashed in the middle of a kill leaves cgroups
		// frozen, and a frozen task does not die: thaw them all
		// first. (Thawing a parent does not thaw a child frozen by
		// itself.)
		if err := writeTree(filepath.Join(mnt, h.parent), "freezer.state", "THAWED"); err != nil {
			return err
		}
		fz = v1Freezer{state: filepath.Join(mnt, h.parent, "freezer.state")}
	}
	if err := killTree(roots, fz, h.self, h.killTimeout); err != nil {
		return err
	}
	for _, r := range roots {
		subs, err := subdirs(r)
		if err != nil {
			return err
		}
		for _, s := range subs {
			h.log.Info("removing leftover cgroup", "dir", s)
			if err := removeTree(h.dirs, s, h.killTimeout); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *v1) check(l Limits) error {
	if l.Pids > 0 && h.ctrl["pids"] == "" {
		return fmt.Errorf("cgroups: pids limit %d: no cgroup v1 pids hierarchy", l.Pids)
	}
	return nil
}

func (h *v1) containerPath(name string) string {
	return "/" + h.parent + "/" + name + "/c"
}

// dir is slot name's cgroup in the hierarchy of controller c, elems below.
func (h *v1) dir(c, name string, elems ...string) string {
	return filepath.Join(append([]string{h.ctrl[c], h.parent, name}, elems...)...)
}

func (h *v1) close() error {
	var errs []error
	for _, mnt := range h.mounts {
		if err := removeTree(h.dirs, filepath.Join(mnt, h.parent), h.killTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	// Ancestors Open created, deepest first, if nothing else uses them.
	for i := len(h.created) - 1; i >= 0; i-- {
		_ = h.dirs.rmdir(h.created[i])
	}
	h.closeHome()
	return errors.Join(errs...)
}

// v1Slot is a slot on cgroup v1. Cgroup v1 has no way to create a process
// in a cgroup, but a child inherits the cgroups of the thread that forks
// it, and v1 places threads, not processes: the thread that starts a job
// joins the slot's leaf for the fork and goes back to the worker's cgroups
// after (see start).
type v1Slot struct {
	h    *v1
	name string

	cpuUsage    *cgFile // cpuacct.usage (ns, hierarchical)
	memUsage    *cgFile // memory.usage_in_bytes
	memMax      *cgFile // memory.max_usage_in_bytes (reset by writing 0)
	leafOOM     *cgFile // p/memory.oom_control (oom_kill counts p only)
	oomEvents   *cgFile // eventfd notified when the slot hits its limit unrecoverably
	pidsCurrent *cgFile // pids.current, nil without the pids controller
	pidsMax     string  // pids.max ("" without the pids controller)
	pidsMaxFile *cgFile // pids.max, kept open once a start outside a joined thread wrote it (every job's start does)
	pids        int64   // the job's pids limit (0: none)
	// tasks holds p/tasks of every used hierarchy while a start or a
	// join needs them, and is nil otherwise: a slot keeps few files
	// open, for every file the worker holds is one more that each job's
	// fork copies and its exec closes.
	tasks  []*cgFile
	joined int // the thread Join moved in (its TID), or 0
}

func (h *v1) newSlot(name string) (_ slotCgroup, err error) {
	s := &v1Slot{h: h, name: name}
	defer func() {
		if err != nil {
			_ = s.destroy()
		}
	}()
	for _, mnt := range h.used {
		d := filepath.Join(mnt, h.parent, name)
		if err := h.dirs.mkdir(d); err != nil {
			return nil, err
		}
		if err := h.dirs.mkdir(filepath.Join(d, "p")); err != nil {
			return nil, err
		}
	}
	if s.cpuUsage, err = openFile(h.dir("cpuacct", name, "cpuacct.usage"), unix.O_RDONLY); err != nil {
		return nil, err
	}
	if s.memUsage, err = openFile(h.dir("memory", name, "memory.usage_in_bytes"), unix.O_RDONLY); err != nil {
		return nil, err
	}
	if s.memMax, err = openFile(h.dir("memory", name, "memory.max_usage_in_bytes"), unix.O_RDWR); err != nil {
		return nil, err
	}
	if s.leafOOM, err = openFile(h.dir("memory", name, "p", "memory.oom_control"), unix.O_RDONLY); err != nil {
		return nil, err
	}
	if h.ctrl["pids"] != "" {
		if s.pidsCurrent, err = openFile(h.dir("pids", name, "pids.current"), unix.O_RDONLY); err != nil {
			return nil, err
		}
		// Written when a jail joins or leaves and when the limit
		// changes: not a descriptor of its own for every fork to copy.
		s.pidsMax = h.dir("pids", name, "pids.max")
	}
	if s.oomEvents, err = registerOOMEvents(h.dir("memory", name)); err != nil {
		return nil, err
	}
	return s, nil
}

// registerOOMEvents returns an eventfd the kernel signals whenever the
// memory cgroup dir, or an ancestor, runs out of memory under its limit
// and calls the OOM killer. On v1 the oom_kill counter of memory.oom_control
// counts only kills of processes in that very cgroup, so a kill inside
// runc's child cgroup would not show on the slot; the notification does.
func registerOOMEvents(dir string) (*cgFile, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev, err := newCgFile("eventfd of "+dir+"/memory.oom_control", os.NewFile(uintptr(efd), "eventfd"))
	if err != nil {
		return nil, err
	}
	ctl := filepath.Join(dir, "memory.oom_control")
	cfd, err := unix.Open(ctl, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		ev.close()
		return nil, fmt.Errorf("open %s: %w", ctl, err)
	}
	// The registration holds what it needs; the control file's fd can go.
	err = writeFile(filepath.Join(dir, "cgroup.event_control"), fmt.Sprintf("%d %d", efd, cfd))
	unix.Close(cfd)
	if err != nil {
		ev.close()
		return nil, err
	}
	return ev, nil
}

// openTasks opens p/tasks of every used hierarchy into s.tasks.
func (s *v1Slot) openTasks() error {
	for _, mnt := range s.h.used {
		f, err := openFile(filepath.Join(mnt, s.h.parent, s.name, "p", "tasks"), unix.O_WRONLY)
		if err != nil {
			s.closeTasks()
			return err
		}
		s.tasks = append(s.tasks, f)
	}
	return nil
}

// closeTasks closes s.tasks.
func (s *v1Slot) closeTasks() {
	for _, f := range s.tasks {
		f.close()
	}
	s.tasks = nil
}

// start forks cmd from the calling thread while that thread is in the
// slot's leaf in every used hierarchy, then takes the thread back to the
// worker's own cgroups: the child is born in the slot, and nothing of the
// worker stays there. Each move is one write per hierarchy (about 12 µs
// each on a 2-core VM); the thread's part in the fork is counted in the
// job's CPU. The thread counts in pids.current while it is in the slot,
// and the job may fork before it has left: the pids limit is one higher
// meanwhile, so that the job has exactly its own, no less, at all times.
// A thread that cannot go back is left locked, so that it ends with its
// goroutine instead of running other goroutines inside the job's cgroups.
func (s *v1Slot) start(cmd *exec.Cmd) error {
	if s.joined != 0 {
		runtime.LockOSThread()
		here := unix.Gettid() == s.joined
		runtime.UnlockOSThread()
		if here {
			return cmd.Start()
		}
	}
	if s.pids > 0 {
		base := s.pids
		if s.joined != 0 {
			base++
		}
		if s.pidsMaxFile == nil {
			var err error
			if s.pidsMaxFile, err = openFile(s.pidsMax, unix.O_WRONLY); err != nil {
				return err
			}
		}
		if err := s.pidsMaxFile.write(strconv.FormatInt(base+1, 10)); err != nil {
			return err
		}
		defer func() {
			if err := s.pidsMaxFile.write(strconv.FormatInt(base, 10)); err != nil {
				s.h.log.Error("cannot lower a job's pids limit back after its start", "slot", s.name, "err", err)
			}
		}()
	}
	if err := s.openTasks(); err != nil {
		return err
	}
	defer s.closeTasks()
	runtime.LockOSThread()
	if err := join(s.tasks); err != nil {
		if herr := join(s.h.home); herr != nil {
			s.h.log.Error("a thread could not leave a slot it began to join; it ends with its goroutine", "slot", s.name, "err", herr)
			return fmt.Errorf("join %s: %w", s.name, err)
		}
		runtime.UnlockOSThread()
		return fmt.Errorf("join %s: %w", s.name, err)
	}
	err := cmd.Start()
	if herr := join(s.h.home); herr != nil {
		s.h.log.Error("a thread that started a job could not leave its slot; it ends with its goroutine", "slot", s.name, "err", herr)
		return err
	}
	runtime.UnlockOSThread()
	return err
}

// join moves the calling thread into the slot's leaf for good (until
// leave), raising the pids limit by one for it.
func (s *v1Slot) join() error {
	if s.joined != 0 {
		return fmt.Errorf("join %s: thread %d has joined it already", s.name, s.joined)
	}
	if s.pids > 0 {
		if err := s.writePidsMax(s.pids + 1); err != nil {
			return err
		}
	}
	if err := s.openTasks(); err != nil {
		return err
	}
	defer s.closeTasks()
	if err := join(s.tasks); err != nil {
		if herr := join(s.h.home); herr != nil {
			s.joined = unix.Gettid() // partly in: treat it as joined
			return fmt.Errorf("join %s: %w (and back: %v)", s.name, err, herr)
		}
		if s.pids > 0 {
			_ = s.writePidsMax(s.pids)
		}
		return fmt.Errorf("join %s: %w", s.name, err)
	}
	s.joined = unix.Gettid()
	return nil
}

// leave moves the joined thread (the caller) back to the worker's
// cgroups and lowers the pids limit again.
func (s *v1Slot) leave() error {
	if s.joined == 0 {
		return nil
	}
	if unix.Gettid() != s.joined {
		return fmt.Errorf("leave %s: thread %d joined it, not %d", s.name, s.joined, unix.Gettid())
	}
	if err := join(s.h.home); err != nil {
		return fmt.Errorf("leave %s: %w", s.name, err)
	}
	s.joined = 0
	if s.pids > 0 {
		return s.writePidsMax(s.pids)
	}
	return nil
}

func (s *v1Slot) setLimits(cur, next Limits) error {
	h := s.h
	if next.CPUMilli != cur.CPUMilli {
		if err := writeFile(h.dir("cpu", s.name, "cpu.cfs_quota_us"), strconv.FormatInt(cpuQuota(next), 10)); err != nil {
			return err
		}
		if err := writeFile(h.dir("cpu", s.name, "cpu.shares"), strconv.FormatInt(cpuShares(next), 10)); err != nil {
			return err
		}
	}
	if next.Memory != cur.Memory {
		v := "-1"
		if next.Memory > 0 {
			v = strconv.FormatInt(next.Memory, 10)
		}
		mem := h.dir("memory", s.name, "memory.limit_in_bytes")
		files := []string{mem}
		if h.memsw {
			// memsw must stay >= the memory limit: raise it first,
			// lower it last.
			memsw := h.dir("memory", s.name, "memory.memsw.limit_in_bytes")
			if next.Memory == 0 || (cur.Memory != 0 && next.Memory > cur.Memory) {
				files = []string{memsw, mem}
			} else {
				files = []string{mem, memsw}
			}
		}
		for _, f := range files {
			if err := writeFile(f, v); err != nil {
				return err
			}
		}
	}
	if next.Pids != cur.Pids && s.pidsMax != "" {
		v := int64(-1) // max
		if next.Pids > 0 {
			v = next.Pids
			if s.joined != 0 {
				v++ // + the joined thread
			}
		}
		if err := s.writePidsMax(v); err != nil {
			return err
		}
		s.pids = next.Pids
	}
	return nil
}

func (s *v1Slot) begin(b *baseline) error {
	var err error
	if b.cpu, err = s.cpuUsage.readInt(); err != nil {
		return err
	}
	// The watermark restarts from the current usage.
	if err := s.memMax.write("0"); err != nil {
		return err
	}
	if b.oomKills, err = s.leafOOM.readKey("oom_kill"); err != nil {
		return err
	}
	_, err = s.oomEvent() // drop the previous job's
	return err
}

// oomEvent reads and clears the OOM eventfd.
func (s *v1Slot) oomEvent() (bool, error) {
	var buf [8]byte
	var n int
	var rerr error
	err := s.oomEvents.rc.Read(func(fd uintptr) bool {
		n, rerr = unix.Read(int(fd), buf[:])
		return true
	})
	if err == nil {
		err = rerr
	}
	if errors.Is(err, unix.EAGAIN) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", s.oomEvents.path, err)
	}
	return n == 8 && binary.NativeEndian.Uint64(buf[:]) > 0, nil
}

func (s *v1Slot) usage(b *baseline) (Usage, error) {
	cpu, err := s.cpuUsage.readInt()
	if err != nil {
		return Usage{}, err
	}
	mem, err := s.memUsage.readInt()
	if err != nil {
		return Usage{}, err
	}
	peak, err := s.memMax.readInt()
	if err != nil {
		return Usage{}, err
	}
	return Usage{CPU: time.Duration(cpu - b.cpu), Memory: mem, PeakMemory: peak}, nil
}

func (s *v1Slot) oomKilled(b *baseline) (bool, error) {
	ev, err := s.oomEvent()
	if err != nil {
		return false, err
	}
	if !ev {
		// A kill in p without the slot's limit being hit: the
		// machine ran out of memory.
		n, err := s.leafOOM.readKey("oom_kill")
		if err != nil {
			return false, err
		}
		ev = n > b.oomKills
	}
	if ev {
		b.oomSeen.Store(true)
	}
	return ev, nil
}

func (s *v1Slot) kill() (bool, error) {
	h := s.h
	// Fast path: one read. (No thread of the worker is in the slot but
	// a joined one: start takes its thread out before it returns.)
	if s.pidsCurrent != nil {
		joined := int64(0)
		if s.joined != 0 {
			joined = 1
		}
		if n, err := s.pidsCurrent.readInt(); err == nil && n <= joined {
			return false, nil
		}
	}
	var roots []string
	for _, mnt := range h.used {
		roots = append(roots, filepath.Join(mnt, h.parent, s.name))
	}
	// Lift the job's CPU quota first: a task killed while its cgroup is
	// throttled runs (to exit) only in its next period's share, which a
	// loaded machine may be slow to give it; the next job sets its own.
	lifted := false
	if h.ctrl["cpu"] != "" {
		lifted = writeFile(h.dir("cpu", s.name, "cpu.cfs_quota_us"), "-1") == nil
	}
	// No freezer: slots are not made in its hierarchy (a thread starting
	// a job would have to join it too, and a freeze caught while one
	// does would freeze a worker thread, possibly holding a lock of the
	// Go runtime). killTree repeats list-and-SIGKILL instead until the
	// slot is empty; a process cannot fork once killed, and the pids
	// limit bounds a fork bomb.
	return lifted, killTree(roots, nil, h.self, h.killTimeout)
}

func (s *v1Slot) tidy(container bool) error {
	h := s.h
	if container {
		// runc removes its cgroup when the container ends, but not
		// when killed; it also creates the path in every hierarchy.
		for _, mnt := range h.mounts {
			subs, err := subdirs(filepath.Join(mnt, h.parent, s.name))
			if err != nil {
				return err
			}
			for _, d := range subs {
				if filepath.Base(d) == "p" {
					continue
				}
				if err := removeTree(h.dirs, d, h.killTimeout); err != nil {
					return err
				}
			}
		}
	}
	if h.dropAbove >= 0 {
		mem, err := s.memUsage.readInt()
		if err != nil {
			return err
		}
		if mem > h.dropAbove {
			// Page cache of files the job wrote stays charged to
			// the slot; reclaim it so the next job starts low.
			if err := writeFile(h.dir("memory", s.name, "memory.force_empty"), "0"); err != nil {
				return err
			}
			return chargedAfterReclaim(s.memUsage, h.dropAbove)
		}
	}
	return nil
}

// chargedAfterReclaim fails with ErrCharged when a slot still holds more
// than limit after its memory was reclaimed.
func chargedAfterReclaim(usage *cgFile, limit int64) error {
	mem, err := usage.readInt()
	if err != nil {
		return err
	}
	if mem > limit {
		return fmt.Errorf("%w: %d bytes after reclaim", ErrCharged, mem)
	}
	return nil
}

// writePidsMax sets the slot's pids limit (n < 0: none).
func (s *v1Slot) writePidsMax(n int64) error {
	v := "max"
	if n >= 0 {
		v = strconv.FormatInt(n, 10)
	}
	if s.pidsMaxFile != nil {
		return s.pidsMaxFile.write(v)
	}
	return writeFile(s.pidsMax, v)
}

func (s *v1Slot) destroy() error {
	for _, f := range []*cgFile{s.cpuUsage, s.memUsage, s.memMax, s.leafOOM, s.oomEvents, s.pidsCurrent, s.pidsMaxFile} {
		f.close()
	}
	s.closeTasks()
	// removeTree retries while a killed process is still leaving.
	var errs []error
	for _, mnt := range s.h.mounts {
		if err := removeTree(s.h.dirs, filepath.Join(mnt, s.h.parent, s.name), s.h.killTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
