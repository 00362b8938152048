package cgroups

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// backend is how the Manager drives one cgroup version.
type backend interface {
	// newSlot creates the cgroups of a slot and opens its files.
	newSlot(name string) (slotCgroup, error)
	// containerPath is the cgroupsPath runc is given for a slot.
	containerPath(name string) string
	// check reports limits the hierarchy cannot enforce.
	check(l Limits) error
	// close removes the parent and the directories Open created.
	close() error
}

// slotCgroup is the cgroup of one slot. Its methods other than usage and
// oomKilled are called with the slot's mutex held.
type slotCgroup interface {
	// setLimits writes the limits of next that differ from cur, the
	// limits currently written.
	setLimits(cur, next Limits) error
	// begin starts a job: it resets or records the counters in b so that
	// usage and oomKilled count this job only. It returns errRecreate
	// when the slot cannot be reset and must be replaced.
	begin(b *baseline) error
	// start starts cmd inside the slot.
	start(cmd *exec.Cmd) error
	// join moves the calling thread, locked by the caller, into the
	// slot until leave; leave moves it back out. (v2 places processes,
	// not threads: both do nothing there.)
	join() error
	leave() error
	usage(b *baseline) (Usage, error)
	oomKilled(b *baseline) (bool, error)
	// kill kills every process of the slot and waits until they are
	// gone; lifted says whether it lifted the slot's CPU limit to do it
	// (the next limits are then written whole).
	kill() (lifted bool, err error)
	// tidy readies a killed slot for the next job: it reclaims memory
	// left charged and, when a container ran, removes runc's leftovers.
	tidy(container bool) error
	// destroy closes the slot's files and removes its cgroups. The slot
	// must be empty.
	destroy() error
}

// baseline holds the counters of a slot when a job began.
type baseline struct {
	cpu      int64 // CPU time, ns
	oomKills int64 // OOM kill counter
	oomSeen  atomic.Bool
}

// ErrCharged is matched by errors.Is for a slot that holds memory the
// last job left where reclaim cannot reach it (files of a tmpfs it wrote,
// shared memory): the next job would find that memory taken from its
// limit, and run out. Renew fails with it (the caller takes another slot)
// and Release destroys such a slot (the charge moves to the parent, no
// job's).
var ErrCharged = errors.New("the slot holds memory the last job left charged (tmpfs files, shared memory)")

// errRecreate is returned by slotCgroup.begin when the slot's peak memory
// cannot be reset (cgroup v2 before Linux 6.12): the Manager replaces the
// slot with a new one.
var errRecreate = errors.New("slot must be recreated")

// Manager hands out job cgroups ("slots") under one parent and reuses them:
// creating and removing cgroups costs more CPU than a tiny job. All methods
// are safe for concurrent use.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	version Version
	b       backend

	mu     sync.Mutex
	idle   []*slot            // released slots, most recent last
	all    map[*slot]struct{} // every slot not destroyed
	nextID int
	closed bool
}

// Open prepares drover's cgroup subtree as cfg describes: it detects the
// cgroup version, kills and removes what a previous run left under Parent,
// and creates Parent (on v2 enabling the cpu, memory and pids controllers
// down to it).
func Open(cfg Config) (*Manager, error) {
	return open(cfg, kernelDirs{})
}

// open is Open with the directory operations the tests' fake needs.
func open(cfg Config, dirs dirOps) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, all: map[*slot]struct{}{}, nextID: 1}
	v, err := detect(cfg)
	if err != nil {
		return nil, err
	}
	m.version = v
	m.log = cfg.Logger.With("component", "cgroups", "cgroup", v.String())
	switch v {
	case V1:
		m.b, err = openV1(cfg, m.log, dirs)
	case V2:
		m.b, err = openV2(cfg, m.log, dirs)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// detect chooses the cgroup version cfg asks for or Root offers.
func detect(cfg Config) (Version, error) {
	v2ok := func() bool {
		b, err := os.ReadFile(cfg.Root + "/cgroup.controllers")
		if err != nil {
			return false
		}
		f := strings.Fields(string(b))
		return slices.Contains(f, "cpu") && slices.Contains(f, "memory")
	}
	v1ok := func() bool {
		mounts, err := v1Mounts(cfg.Root)
		if err != nil {
			return false
		}
		var cpu, mem bool
		for _, m := range mounts {
			cpu = cpu || m.has("cpu")
			mem = mem || m.has("memory")
		}
		return cpu && mem
	}
	switch cfg.Version {
	case V2:
		if !v2ok() {
			return 0, fmt.Errorf("%w: %s is not a cgroup2 mount with the cpu and memory controllers", ErrUnsupported, cfg.Root)
		}
	case V1:
		if !v1ok() {
			return 0, fmt.Errorf("%w: no cgroup v1 cpu and memory hierarchies mounted under %s", ErrUnsupported, cfg.Root)
		}
	default:
		switch {
		case v2ok():
			return V2, nil
		case v1ok():
			return V1, nil
		default:
			return 0, fmt.Errorf("%w: %s has neither cgroup v2 with cpu and memory nor cgroup v1 cpu and memory hierarchies", ErrUnsupported, cfg.Root)
		}
	}
	return cfg.Version, nil
}

// Version returns the cgroup version in use, for logs and for the worker to
// report.
func (m *Manager) Version() Version { return m.version }

// Acquire returns a slot for a job with limits l: an idle slot, preferably
// one that already has these limits, or a new one. The slot's counters
// start at zero for this job. The caller must Release it.
func (m *Manager) Acquire(l Limits) (*Slot, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := m.b.check(l); err != nil {
		return nil, err
	}
	s, err := m.take(l)
	if err != nil {
		return nil, err
	}
	h, err := s.begin(l)
	if errors.Is(err, errRecreate) {
		// A new slot needs no reset.
		m.destroy(s)
		if s, err = m.newSlot(m.allocID()); err != nil {
			return nil, err
		}
		h, err = s.begin(l)
	}
	if err != nil {
		m.destroy(s)
		return nil, fmt.Errorf("acquire %s: %w", s.name, err)
	}
	return h, nil
}

// take removes an idle slot from the pool, preferring one with limits l,
// or creates one.
func (m *Manager) take(l Limits) (*slot, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(m.idle); n > 0 {
		i := n - 1
		for j := n - 1; j >= 0; j-- {
			if m.idle[j].limits == l {
				i = j
				break
			}
		}
		s := m.idle[i]
		m.idle = slices.Delete(m.idle, i, i+1)
		m.mu.Unlock()
		return s, nil
	}
	m.mu.Unlock()
	return m.newSlot(m.allocID())
}

// allocID returns the number of a new slot.
func (m *Manager) allocID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.nextID
	m.nextID++
	return id
}

// newSlot creates slot id.
func (m *Manager) newSlot(id int) (*slot, error) {
	name := fmt.Sprintf("slot-%d", id)
	cg, err := m.b.newSlot(name)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	s := &slot{m: m, name: name, cg: cg}
	m.mu.Lock()
	closed := m.closed
	if !closed {
		m.all[s] = struct{}{}
	}
	m.mu.Unlock()
	if closed {
		_ = cg.destroy()
		return nil, ErrClosed
	}
	m.log.Debug("created slot", "slot", name)
	return s, nil
}

// put returns a released slot to the pool, or destroys it when the pool is
// full or closed.
func (m *Manager) put(s *slot) {
	m.mu.Lock()
	if m.closed || len(m.idle) >= m.cfg.MaxIdle {
		m.mu.Unlock()
		m.destroy(s)
		return
	}
	m.idle = append(m.idle, s)
	m.mu.Unlock()
}

// destroy removes a slot that holds no job.
func (m *Manager) destroy(s *slot) {
	m.mu.Lock()
	_, ok := m.all[s]
	delete(m.all, s)
	m.mu.Unlock()
	if !ok {
		return // Close got it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cg.destroy(); err != nil {
		m.log.Error("cannot remove slot", "slot", s.name, "err", err)
	}
}

// Close kills the processes of every slot, acquired or idle, and removes
// the slots and Parent. Slots still held by callers fail with ErrReleased
// afterwards.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	var slots []*slot
	for s := range m.all {
		slots = append(slots, s)
	}
	m.all = map[*slot]struct{}{}
	m.idle = nil
	m.mu.Unlock()

	var errs []error
	for _, s := range slots {
		s.mu.Lock()
		s.owner.Store(nil)
		if _, err := s.cg.kill(); err != nil {
			errs = append(errs, err)
		}
		if err := s.cg.destroy(); err != nil {
			errs = append(errs, err)
		}
		s.mu.Unlock()
	}
	if err := m.b.close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// slot is a job cgroup of the pool.
type slot struct {
	m    *Manager
	name string
	cg   slotCgroup

	// mu serializes the operations that change the slot: Acquire's
	// limits and reset, Start, Kill, Release, destroy. Usage and
	// OOMKilled only read open files and do not take it, so that a
	// sampler is never held up by a long Kill.
	mu        sync.Mutex
	limits    Limits               // limits written to the cgroup
	owner     atomic.Pointer[Slot] // the job's handle; nil when idle
	container atomic.Bool          // ContainerPath was asked for this job
	// empty: the slot was killed empty and nothing was started in it
	// since (Start, ContainerPath), so a kill has nothing to do: the
	// executor, the release and the next job's renewal each ask for one,
	// and a read of a cgroup file costs some 5 µs.
	empty bool
}

// begin writes l, resets the counters and hands the slot to a new job.
func (s *slot) begin(l Limits) (*Slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l != s.limits {
		if err := s.cg.setLimits(s.limits, l); err != nil {
			return nil, err
		}
		s.limits = l
	}
	h := &Slot{s: s}
	if err := s.cg.begin(&h.base); err != nil {
		return nil, err
	}
	s.container.Store(false)
	s.owner.Store(h)
	return h, nil
}

// Slot is a job's hold on a slot of the Manager, from Acquire to Release.
// Its methods are safe for concurrent use; after Release they fail with
// ErrReleased, since the slot may then run another job.
type Slot struct {
	s    *slot
	base baseline
}

// Name returns the slot's name ("slot-3"), the last element of its cgroup
// path, for logs.
func (h *Slot) Name() string { return h.s.name }

// Start starts cmd from the calling goroutine's OS thread so that its
// process is born inside the slot (in leaf slot-N/p) and never runs
// outside it: on cgroup v2 through clone3's CLONE_INTO_CGROUP (Start sets
// cmd.SysProcAttr's UseCgroupFD and CgroupFD), on cgroup v1 by moving the
// thread into the slot for the fork and back out after. The caller's
// cmd.SysProcAttr (Setpgid, Pdeathsig, Credential, Chroot...) is kept, and
// so is the thread's state: a caller that locked its goroutine to a thread
// in namespaces of its own, or under a seccomp filter, starts the process
// there. Pdeathsig is tied to that thread. Start may be called for several
// commands of a job.
func (h *Slot) Start(cmd *exec.Cmd) error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.s.owner.Load() != h {
		return ErrReleased
	}
	h.s.empty = false
	return h.s.cg.start(cmd)
}

// ContainerPath returns the cgroupsPath to give runc for the job's
// container ("/drover/<node>/slot-3/c"): a child of the slot, so the slot's
// limits apply to the container and its counters include it. runc creates
// and removes the child itself; Release removes what a killed runc left.
func (h *Slot) ContainerPath() string {
	h.s.mu.Lock()
	h.s.empty = false
	h.s.mu.Unlock()
	h.s.container.Store(true)
	return h.s.m.b.containerPath(h.s.name)
}

// Usage returns what the job used since Acquire, child cgroups included.
// It reads three open files and is cheap enough to sample every running
// job every few seconds. Read the final usage before Release.
func (h *Slot) Usage() (Usage, error) {
	if h.s.owner.Load() != h {
		return Usage{}, ErrReleased
	}
	return h.s.cg.usage(&h.base)
}

// OOMKilled tells whether the kernel's OOM killer struck the job since
// Acquire, in the slot or a child cgroup: the job reached its memory limit
// and could not be given more, or (counted only for processes started by
// Start) the machine ran out of memory. A job killed with SIGKILL and
// OOMKilled is reported as out of memory rather than as killed.
func (h *Slot) OOMKilled() (bool, error) {
	if h.s.owner.Load() != h {
		return false, ErrReleased
	}
	if h.base.oomSeen.Load() {
		return true, nil
	}
	return h.s.cg.oomKilled(&h.base)
}

// Kill kills every process in the slot and its child cgroups, including
// those that left the job's process group or session, and waits until they
// are gone, for at most Config.KillTimeout. It is one file read when the
// slot is already empty.
func (h *Slot) Kill() error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.s.owner.Load() != h {
		return ErrReleased
	}
	return h.s.kill()
}

// kill kills what runs in the slot unless it is known to be empty. The
// caller holds s.mu.
func (s *slot) kill() error {
	if s.empty {
		return nil
	}
	lifted, err := s.cg.kill()
	if lifted {
		// The CPU limit was lifted (so that throttled tasks die at
		// once): the next limits written are written whole.
		s.limits.CPUMilli = -1
	}
	s.empty = err == nil
	return err
}

// Join moves the calling goroutine's OS thread into the slot (its leaf
// slot-N/p) and keeps it there until Leave: every process the thread
// forks is born in the slot, and Start from it costs nothing more than
// the fork (on cgroup v1 Start otherwise moves the thread in and out for
// each fork, writes that contend for the kernel's cgroup locks with every
// fork of the machine). Join locks the goroutine to its thread until
// Leave. While a thread is joined the slot's pids limit is one higher (the
// thread counts in it), so that the job has exactly its own. Call Leave,
// from the same goroutine, before Release, or let the thread end (a
// goroutine that exits locked ends its thread) first; Renew keeps a joined
// thread where it is. On cgroup v2 Join and Leave only lock and unlock
// the thread: a process is placed there by CLONE_INTO_CGROUP.
func (h *Slot) Join() error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if h.s.owner.Load() != h {
		return ErrReleased
	}
	runtime.LockOSThread()
	if err := h.s.cg.join(); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

// Leave moves the thread Join moved back to the worker's own cgroups, and
// unlocks it. It must be called from the goroutine that called Join. A
// thread that cannot leave stays locked, so that it ends with its
// goroutine instead of running others inside the slot.
func (h *Slot) Leave() error {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	if err := h.s.cg.leave(); err != nil {
		return err
	}
	runtime.UnlockOSThread()
	return nil
}

// Renew ends the job's hold on the slot and begins a new job on it with
// limits l, as Release and Acquire would, but without the slot going back
// to the pool: a thread joined to it (Join) stays. It kills what is left
// of the job, reclaims its page cache as Release does, writes l and resets
// the counters, and returns the new job's handle; h is released. On an
// error where the slot could not be emptied or written h keeps it
// (nothing of the job may run any more, but the slot could not be
// readied): make any joined thread leave, then Release it. (An error
// resetting its counters destroys the slot; Release then does nothing.)
// On cgroup v2 before Linux 6.12, where a slot's peak memory cannot
// be reset, Renew gives a new slot, as Acquire does (no thread is joined
// to a slot on v2).
func (h *Slot) Renew(l Limits) (*Slot, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := h.s.m.b.check(l); err != nil {
		return nil, err
	}
	s := h.s
	s.mu.Lock()
	if s.owner.Load() != h {
		s.mu.Unlock()
		return nil, ErrReleased
	}
	err := s.kill()
	if err == nil {
		err = s.cg.tidy(s.container.Load())
	}
	if err == nil && l != s.limits {
		if err = s.cg.setLimits(s.limits, l); err == nil {
			s.limits = l
		}
	}
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("renew %s: %w", s.name, err)
	}
	n := &Slot{s: s}
	err = s.cg.begin(&n.base)
	if err == nil {
		s.container.Store(false)
		s.owner.Store(n)
		s.mu.Unlock()
		return n, nil
	}
	s.owner.Store(nil)
	s.mu.Unlock()
	s.m.destroy(s)
	if !errors.Is(err, errRecreate) {
		return nil, fmt.Errorf("renew %s: %w", s.name, err)
	}
	ns, err := s.m.newSlot(s.m.allocID())
	if err != nil {
		return nil, err
	}
	n, err = ns.begin(l)
	if err != nil {
		s.m.destroy(ns)
		return nil, fmt.Errorf("renew %s: %w", ns.name, err)
	}
	return n, nil
}

// Release kills what is left of the job and returns the slot to the pool
// for the next job. When the job left more than Config.DropCacheAbove
// charged (page cache of files it wrote), Release first reclaims it, which
// can take tens of milliseconds for dirty data. A slot that cannot be
// emptied is destroyed, or left in place with an error logged when even
// that fails; the error says so, and that something of the job may still
// run (whatever the job shared with others, such as its namespaces, must
// not go to another job). Releasing twice does nothing.
func (h *Slot) Release() error {
	s := h.s
	s.mu.Lock()
	if s.owner.Load() != h {
		s.mu.Unlock()
		return nil
	}
	s.owner.Store(nil)
	err := s.kill()
	if err == nil {
		err = s.cg.tidy(s.container.Load())
	}
	s.mu.Unlock()
	if err != nil {
		s.m.log.Error("cannot reuse slot", "slot", s.name, "err", err)
		s.m.destroy(s)
		return fmt.Errorf("release %s: %w", s.name, err)
	}
	s.m.put(s)
	return nil
}
