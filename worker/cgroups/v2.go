package cgroups

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// v2 is the cgroup v2 backend.
type v2 struct {
	log         *slog.Logger
	dirs        dirOps
	root        string // the cgroup2 mount
	parent      string // Config.Parent, cleaned
	hasKill     bool   // cgroup.kill (Linux 5.14)
	hasSwap     bool   // memory.swap.max (swap accounting)
	hasPids     bool   // the pids controller
	hasReclaim  bool   // memory.reclaim (Linux 5.19)
	peakReset   bool   // memory.peak resets per fd (Linux 6.12)
	created     []string
	self        int
	killTimeout time.Duration
	dropAbove   int64
}

// openV2 cleans Parent up and creates it, enabling the controllers slots
// need on the way down from the root.
func openV2(cfg Config, log *slog.Logger, dirs dirOps) (*v2, error) {
	h := &v2{
		log:         log,
		dirs:        dirs,
		root:        cfg.Root,
		self:        os.Getpid(),
		killTimeout: cfg.KillTimeout,
		dropAbove:   cfg.DropCacheAbove,
	}
	own, err := selfCgroups()
	if err != nil {
		return nil, err
	}
	parent := cfg.Parent
	if parent == "" {
		p, ok := own[""]
		switch {
		case !ok:
			return nil, errors.New("cgroups: no cgroup v2 entry for the worker in /proc/self/cgroup; set Parent")
		case p == "/":
			parent = "drover"
		default:
			parent = path.Join(path.Dir(p), "jobs")
		}
	}
	if h.parent, err = cleanParent(parent); err != nil {
		return nil, err
	}
	if p, ok := own[""]; ok && within(p, "/"+h.parent) {
		return nil, fmt.Errorf("cgroups: the worker's own cgroup %s is inside Parent %s, which the Manager empties", p, h.parent)
	}
	b, err := readFile(filepath.Join(h.root, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	// Open's detect has made sure cpu and memory are available; the
	// tests of the real kernel (v2_kernel_test.go) open the backend on
	// a cgroup2 mount that offers neither, which enables none.
	var want []string
	for _, c := range []string{"cpu", "memory", "pids"} {
		if slices.Contains(strings.Fields(string(b)), c) {
			want = append(want, c)
		}
	}
	h.hasPids = slices.Contains(want, "pids")
	if err := h.cleanup(); err != nil {
		return nil, fmt.Errorf("clean up %s: %w", h.parent, err)
	}
	dir := h.root
	if err := enableControllers(dir, want); err != nil {
		return nil, err
	}
	for _, el := range strings.Split(h.parent, "/") {
		dir = filepath.Join(dir, el)
		if !exists(dir) {
			if err := dirs.mkdir(dir); err != nil {
				return nil, err
			}
			h.created = append(h.created, dir)
		}
		if err := enableControllers(dir, want); err != nil {
			return nil, err
		}
	}
	h.hasKill = exists(filepath.Join(dir, "cgroup.kill"))
	h.hasSwap = exists(filepath.Join(dir, "memory.swap.max"))
	h.hasReclaim = exists(filepath.Join(dir, "memory.reclaim"))
	if f, err := openFile(filepath.Join(dir, "memory.peak"), unix.O_RDWR); err == nil {
		h.peakReset = f.write("reset") == nil
		f.close()
	}
	log.Info("cgroups ready", "parent", h.parent, "kill", h.hasKill, "swap", h.hasSwap, "peak_reset", h.peakReset)
	return h, nil
}

// enableControllers enables want in dir's cgroup.subtree_control, so that
// dir's children have them. A cgroup other than the root that has
// processes of its own cannot (EBUSY): the worker must not live in an
// ancestor of Parent.
func enableControllers(dir string, want []string) error {
	sc := filepath.Join(dir, "cgroup.subtree_control")
	b, err := readFile(sc)
	if err != nil {
		return err
	}
	have := strings.Fields(strings.ReplaceAll(string(b), "+", ""))
	var add []string
	for _, c := range want {
		if !slices.Contains(have, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := writeFile(sc, strings.Join(add, " ")); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%w (a cgroup with processes cannot enable controllers for its children; run the worker in a leaf of a delegated subtree)", err)
		}
		return err
	}
	return nil
}

// cleanup kills and removes what a previous run left under Parent.
func (h *v2) cleanup() error {
	dir := filepath.Join(h.root, h.parent)
	subs, err := subdirs(dir)
	if err != nil || len(subs) == 0 {
		return err
	}
	for _, s := range subs {
		h.log.Info("removing leftover cgroup", "dir", s)
		if err := writeTree(s, "cgroup.freeze", "0"); err != nil {
			return err
		}
		if err := h.killDir(s); err != nil {
			return err
		}
		if err := removeTree(h.dirs, s, h.killTimeout); err != nil {
			return err
		}
	}
	return nil
}

// killDir kills every process in cgroup dir and below and waits until
// they are gone: with cgroup.kill, which is safe against concurrent forks,
// or else by freezing, killing and thawing.
func (h *v2) killDir(dir string) error {
	if !exists(filepath.Join(dir, "cgroup.kill")) {
		return killTree([]string{dir}, v2Freezer{dir: dir}, h.self, h.killTimeout)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.kill"), "1"); err != nil {
		return err
	}
	return waitEmptyV2(dir, h.killTimeout)
}

// waitEmptyV2 waits until cgroup dir has no live process left.
func waitEmptyV2(dir string, timeout time.Duration) error {
	events := filepath.Join(dir, "cgroup.events")
	empty := func() (bool, error) {
		b, err := readFile(events)
		v, _ := keyValue(b, "populated")
		return v == 0, err
	}
	if err := waitFor(timeout, empty); err != nil {
		return err
	}
	if ok, err := empty(); !ok || err != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("kill %s: processes still running after %v", dir, timeout)
	}
	return nil
}

func (h *v2) check(l Limits) error {
	if l.Pids > 0 && !h.hasPids {
		return fmt.Errorf("cgroups: pids limit %d: no pids controller in %s", l.Pids, h.root)
	}
	return nil
}

func (h *v2) containerPath(name string) string {
	return "/" + h.parent + "/" + name + "/c"
}

func (h *v2) close() error {
	err := removeTree(h.dirs, filepath.Join(h.root, h.parent), h.killTimeout)
	for i := len(h.created) - 1; i >= 0; i-- {
		_ = h.dirs.rmdir(h.created[i])
	}
	return err
}

// v2Slot is a slot on cgroup v2.
type v2Slot struct {
	h    *v2
	name string
	dir  string

	leafFD     int     // slot-N/p, for CLONE_INTO_CGROUP; -1 when closed
	cpuStat    *cgFile // cpu.stat (usage_usec)
	memCurrent *cgFile // memory.current
	memPeak    *cgFile // memory.peak, reset through this fd
	memEvents  *cgFile // memory.events (oom_kill, hierarchical)
	events     *cgFile // cgroup.events (populated)
	used       bool    // has run a job: its peak needs a reset
}

func (h *v2) newSlot(name string) (_ slotCgroup, err error) {
	s := &v2Slot{h: h, name: name, dir: filepath.Join(h.root, h.parent, name), leafFD: -1}
	defer func() {
		if err != nil {
			_ = s.destroy()
		}
	}()
	if err := h.dirs.mkdir(s.dir); err != nil {
		return nil, err
	}
	leaf := filepath.Join(s.dir, "p")
	if err := h.dirs.mkdir(leaf); err != nil {
		return nil, err
	}
	if s.leafFD, err = unix.Open(leaf, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open %s: %w", leaf, err)
	}
	peakFlags := unix.O_RDONLY
	if h.peakReset {
		peakFlags = unix.O_RDWR
	}
	for _, f := range []struct {
		dst   **cgFile
		name  string
		flags int
	}{
		{&s.cpuStat, "cpu.stat", unix.O_RDONLY},
		{&s.memCurrent, "memory.current", unix.O_RDONLY},
		{&s.memEvents, "memory.events", unix.O_RDONLY},
		{&s.events, "cgroup.events", unix.O_RDONLY},
		{&s.memPeak, "memory.peak", peakFlags},
	} {
		if *f.dst, err = openFile(filepath.Join(s.dir, f.name), f.flags); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *v2Slot) setLimits(cur, next Limits) error {
	h := s.h
	w := func(file, v string) error { return writeFile(filepath.Join(s.dir, file), v) }
	if next.CPUMilli != cur.CPUMilli {
		cpuMax := "max " + strconv.Itoa(cfsPeriod)
		if q := cpuQuota(next); q > 0 {
			cpuMax = fmt.Sprintf("%d %d", q, cfsPeriod)
		}
		if err := w("cpu.max", cpuMax); err != nil {
			return err
		}
		if err := w("cpu.weight", strconv.FormatInt(cpuWeight(next), 10)); err != nil {
			return err
		}
	}
	if next.Memory != cur.Memory {
		mem, swap := "max", "max"
		if next.Memory > 0 {
			mem, swap = strconv.FormatInt(next.Memory, 10), "0"
		}
		if err := w("memory.max", mem); err != nil {
			return err
		}
		if h.hasSwap {
			if err := w("memory.swap.max", swap); err != nil {
				return err
			}
		}
	}
	if next.Pids != cur.Pids && h.hasPids {
		v := "max"
		if next.Pids > 0 {
			v = strconv.FormatInt(next.Pids, 10)
		}
		if err := w("pids.max", v); err != nil {
			return err
		}
	}
	return nil
}

func (s *v2Slot) begin(b *baseline) error {
	if s.used {
		if !s.h.peakReset {
			return errRecreate
		}
		if err := s.memPeak.write("reset"); err != nil {
			s.h.log.Warn("cannot reset memory.peak; recreating slot", "slot", s.name, "err", err)
			return errRecreate
		}
	}
	s.used = true
	usec, err := s.cpuStat.readKey("usage_usec")
	if err != nil {
		return err
	}
	b.cpu = usec * 1000
	b.oomKills, err = s.memEvents.readKey("oom_kill")
	return err
}

func (s *v2Slot) start(cmd *exec.Cmd) error {
	// A copy: the caller's attributes may be shared between commands.
	var attr syscall.SysProcAttr
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.UseCgroupFD = true
	attr.CgroupFD = s.leafFD
	cmd.SysProcAttr = &attr
	return cmd.Start()
}

func (s *v2Slot) join() error  { return nil }
func (s *v2Slot) leave() error { return nil }

func (s *v2Slot) usage(b *baseline) (Usage, error) {
	usec, err := s.cpuStat.readKey("usage_usec")
	if err != nil {
		return Usage{}, err
	}
	mem, err := s.memCurrent.readInt()
	if err != nil {
		return Usage{}, err
	}
	peak, err := s.memPeak.readInt()
	if err != nil {
		return Usage{}, err
	}
	return Usage{CPU: time.Duration(usec*1000 - b.cpu), Memory: mem, PeakMemory: peak}, nil
}

func (s *v2Slot) oomKilled(b *baseline) (bool, error) {
	n, err := s.memEvents.readKey("oom_kill")
	if err != nil {
		return false, err
	}
	if n > b.oomKills {
		b.oomSeen.Store(true)
		return true, nil
	}
	return false, nil
}

func (s *v2Slot) kill() (bool, error) {
	// Fast path: one read.
	if n, err := s.events.readKey("populated"); err == nil && n == 0 {
		return false, nil
	}
	// Lift the job's CPU limit first, as v1 does: a throttled task exits
	// only in its next period's share. The next job sets its own.
	lifted := false
	if exists(filepath.Join(s.dir, "cpu.max")) {
		lifted = writeFile(filepath.Join(s.dir, "cpu.max"), "max") == nil
	}
	return lifted, s.h.killDir(s.dir)
}

func (s *v2Slot) tidy(container bool) error {
	h := s.h
	if container {
		subs, err := subdirs(s.dir)
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
	if h.dropAbove >= 0 && h.hasReclaim {
		mem, err := s.memCurrent.readInt()
		if err != nil {
			return err
		}
		if mem > h.dropAbove {
			// Page cache of files the job wrote stays charged to
			// the slot; reclaim it so the next job starts low. The
			// kernel answers EAGAIN when it could not reclaim all.
			err := writeFile(filepath.Join(s.dir, "memory.reclaim"), strconv.FormatInt(mem, 10))
			if err != nil && !errors.Is(err, unix.EAGAIN) {
				return err
			}
			return chargedAfterReclaim(s.memCurrent, h.dropAbove)
		}
	}
	return nil
}

func (s *v2Slot) destroy() error {
	for _, f := range []*cgFile{s.cpuStat, s.memCurrent, s.memPeak, s.memEvents, s.events} {
		f.close()
	}
	if s.leafFD >= 0 {
		unix.Close(s.leafFD)
		s.leafFD = -1
	}
	return removeTree(s.h.dirs, s.dir, s.h.killTimeout)
}
