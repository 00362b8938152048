// Package cgroups runs every job attempt of a worker in a cgroup of its own,
// which enforces the job's CPU and memory request, measures what the job used,
// tells whether the OOM killer struck it, and lets the worker kill everything
// the job started, including processes that left its process group.
//
// # Slots
//
// Creating and removing cgroups costs several hundred microseconds of CPU
// per job (a directory in each cgroup v1 hierarchy, limits, rmdir), which a
// worker running a thousand tiny jobs a second cannot pay. The Manager
// therefore keeps a pool of job cgroups, called slots, and reuses them:
// Acquire takes an idle slot, writes only the limits that differ from the
// previous job's and resets the slot's counters; Release kills what is left
// in it and returns it to the pool.
//
// Layout, under Config.Parent in each hierarchy:
//
//	<Parent>/slot-N      limits and counters of one job
//	<Parent>/slot-N/p    the processes of a job started by Slot.Start
//	<Parent>/slot-N/c    an OCI container's cgroup, created and removed by
//	                     runc (Slot.ContainerPath)
//
// Processes live in leaves because cgroup v2 forbids processes in a cgroup
// whose controllers are enabled for its children, and because runc must be
// free to create its own child.
//
// # Starting a process inside the slot
//
// A process must be born in the slot: started outside and moved in, it
// would run unaccounted and unlimited for a moment, and moving a process
// costs the kernel a lock on every thread group. On cgroup v2 Slot.Start
// uses clone3's CLONE_INTO_CGROUP (SysProcAttr.UseCgroupFD). Cgroup v1 has
// no such flag, but a child inherits the cgroups of the thread that forks
// it, and v1 places threads, not processes: Slot.Start locks the calling
// goroutine to its thread, moves that thread into slot-N/p of every
// hierarchy (a write of "0", the writer itself, to each tasks file, held
// open per slot), forks, and moves the thread back to the worker's own
// cgroups: about 100 µs for four hierarchies on a 2-core VM. While it forks, the thread counts in the slot's pids.current
// (so a pids limit must leave room for it and the child) and its few
// microseconds of fork work in the job's CPU; the slot's CPU quota applies
// to it, so a Start right after a job that used up its quota waits for the
// next 100 ms period. Because the thread belongs to the worker, listing
// the slot's processes skips the worker's PID. Start works from any
// thread, so a caller may start a job from a thread it locked in
// namespaces of its own or under a seccomp filter.
//
// Moving threads contends for the kernel's cgroup locks with every fork
// of the machine: under a thousand starts a second it cost a third of the
// throughput. A caller that starts jobs from a thread of its own (the
// worker's jails) therefore joins that thread to the slot for good
// (Slot.Join, until Slot.Leave) and keeps the slot from job to job
// (Slot.Renew: kill, reset, new limits, without the pool): Start from the
// joined thread is then only the fork. The joined thread counts in the
// slot's pids (the limit is one higher while it is there).
//
// # Delegation
//
// On cgroup v2 the worker needs a delegated subtree (systemd: Delegate=yes).
// When Config.Parent is empty the Manager uses a sibling of the worker's own
// cgroup named "jobs": run the worker in a leaf of the delegated subtree, for
// instance with systemd's DelegateSubgroup=worker, so that it lives in
// drover.service/worker and the jobs in drover.service/jobs. The worker's
// own cgroup must not be inside Parent. On open the Manager enables the cpu,
// memory and pids controllers from the root down to Parent.
//
// # What is runc's library and what is by hand
//
// The parts that run once, when the Manager opens or when a slot still
// has processes to kill, are the maintained libraries runc itself uses:
// the mount table (github.com/moby/sys/mountinfo), the worker's own
// cgroups (/proc/self/cgroup) and the listing of a cgroup tree's
// processes (github.com/opencontainers/cgroups). The per-job path is by
// hand: the library's per-job cycle on a reused v1 slot (fs.Manager Set,
// Stats of cpu and memory, OOMKillCount, GetAllPids) costs 315–330 µs of
// CPU against 10 µs here (49 µs when every job has new limits), because
// Set writes every limit through a fresh open each time and Stats parses
// memory.stat and the per-CPU counters, where a slot writes only what
// changed and reads three numbers from files it holds open;
// containerd/cgroups/v3 costs 560–590 µs (BenchmarkLibRuncCycle,
// BenchmarkLibContainerdCycle, BenchmarkSlotOverheadNewLimits;
// docs/performance.md). The libraries have no equivalent of what is
// drover's own either: a watermark reset and OOM counters read against a
// baseline per job through held-open files, a thread joined to a v1
// slot, a pids limit one higher while it is there, CLONE_INTO_CGROUP (a
// caller's choice). Creating the v2 Parent and enabling its controllers
// stays by hand too, since the library's fs2.CreateCgroupPath accepts
// only paths under /sys/fs/cgroup and enables every controller the root
// offers; so does removal, whose EBUSY retries last Config.KillTimeout
// where the library's RemovePath gives up after about a second.
//
// # Containers
//
// runc must be given ContainerPath as its cgroupsPath and must use its
// cgroupfs driver (not systemd). The limits of the slot apply to the
// container's child cgroup; the OCI spec should not set CPU or memory limits
// of its own. On cgroup v1 an OOM kill is counted only in the cgroup of the
// killed process, which runc removes when the container ends, so OOMKilled
// relies on the slot's OOM notification, which fires only when the slot's
// own limit is hit; a lower limit in the spec would go unnoticed.
package cgroups

import (
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"
)

// Version is a cgroup version. The Manager drives both because development
// machines still use cgroup v1 while production uses v2.
type Version int

const (
	// Detect lets Open choose: v2 when Root is a cgroup2 mount offering the
	// cpu and memory controllers, else v1 when cpu and memory hierarchies
	// are mounted under Root.
	Detect Version = 0
	// V1 is the legacy cgroup hierarchy, one mount per controller (or
	// group of controllers).
	V1 Version = 1
	// V2 is the unified cgroup hierarchy.
	V2 Version = 2
)

// String returns "detect", "v1" or "v2", as logs and errors print it.
func (v Version) String() string {
	switch v {
	case Detect:
		return "detect"
	case V1:
		return "v1"
	case V2:
		return "v2"
	}
	return fmt.Sprintf("Version(%d)", int(v))
}

// Config says where the Manager keeps its cgroups. The zero value of each
// field is replaced by its default in Open.
type Config struct {
	// Root is where the cgroup file systems are mounted: the cgroup2 mount
	// on v2, the directory holding one mount per v1 hierarchy on v1.
	// Default /sys/fs/cgroup.
	Root string
	// Parent is drover's subtree, relative to the root of each hierarchy,
	// such as "drover/<node-id>". The Manager owns it: on open it kills
	// and removes whatever a previous run left there. When empty it is
	// "drover" on v1 and, on v2, "jobs" beside the worker's own cgroup
	// (see Delegation in the package documentation).
	Parent string
	// Version is the cgroup version to use; Detect (zero) chooses.
	Version Version
	// Logger receives the Manager's logs. Default slog.Default().
	Logger *slog.Logger
	// MaxIdle bounds the idle slots kept for reuse; slots released beyond
	// it are destroyed. Each idle slot holds a handful of open files.
	// Default 64; negative keeps none.
	MaxIdle int
	// KillTimeout bounds how long Kill waits for the processes of a slot
	// to end. Default 10s.
	KillTimeout time.Duration
	// DropCacheAbove is the memory, in bytes, a released slot may still
	// have charged (mostly page cache of files the job wrote) before
	// Release reclaims it, so that the next job's memory and peak do not
	// start high. Default 16 MiB; negative never reclaims.
	DropCacheAbove int64
}

// DefaultConfig returns the configuration Open uses for zero fields.
func DefaultConfig() Config {
	return Config{
		Root:           "/sys/fs/cgroup",
		Logger:         slog.Default(),
		MaxIdle:        64,
		KillTimeout:    10 * time.Second,
		DropCacheAbove: 16 << 20,
	}
}

// withDefaults fills the zero fields of c from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Root == "" {
		c.Root = d.Root
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	if c.MaxIdle == 0 {
		c.MaxIdle = d.MaxIdle
	}
	if c.KillTimeout == 0 {
		c.KillTimeout = d.KillTimeout
	}
	if c.DropCacheAbove == 0 {
		c.DropCacheAbove = d.DropCacheAbove
	}
	return c
}

// Validate reports the first field of c that Open cannot use. An empty
// Parent is valid (Open chooses one).
func (c Config) Validate() error {
	if !path.IsAbs(c.Root) {
		return fmt.Errorf("cgroups config: Root %q is not an absolute path", c.Root)
	}
	if c.Parent != "" {
		if _, err := cleanParent(c.Parent); err != nil {
			return err
		}
	}
	if c.Version < Detect || c.Version > V2 {
		return fmt.Errorf("cgroups config: Version %d is not 0 (detect), 1 or 2", int(c.Version))
	}
	if c.KillTimeout < 0 {
		return fmt.Errorf("cgroups config: KillTimeout %v is negative", c.KillTimeout)
	}
	return nil
}

// cleanParent returns parent without leading or trailing slashes, refusing
// the hierarchy root itself and paths that climb out of it: the Manager
// kills everything under Parent.
func cleanParent(parent string) (string, error) {
	p := strings.Trim(path.Clean("/"+parent), "/")
	if p == "" {
		return "", fmt.Errorf("cgroups config: Parent %q is the root of the hierarchy", parent)
	}
	for _, el := range strings.Split(parent, "/") {
		if el == ".." {
			return "", fmt.Errorf("cgroups config: Parent %q contains \"..\"", parent)
		}
	}
	return p, nil
}

// Limits are the resources a job may use, as its request states them.
type Limits struct {
	// CPUMilli is the CPU the job may use, in thousandths of a core,
	// enforced as a CFS quota per 100 ms period and used as the job's
	// share of contended CPU. 0 means no limit.
	CPUMilli int64
	// Memory is the job's memory limit in bytes, swap included (the job
	// may not swap beyond it). A job exceeding it is OOM-killed. 0 means
	// no limit.
	Memory int64
	// Pids bounds the job's processes and threads. 0 means no limit.
	Pids int64
}

// Validate reports a negative limit, naming the field.
func (l Limits) Validate() error {
	switch {
	case l.CPUMilli < 0:
		return fmt.Errorf("cgroups limits: CPUMilli %d is negative", l.CPUMilli)
	case l.Memory < 0:
		return fmt.Errorf("cgroups limits: Memory %d is negative", l.Memory)
	case l.Pids < 0:
		return fmt.Errorf("cgroups limits: Pids %d is negative", l.Pids)
	}
	return nil
}

// Usage is what a job used since its slot was acquired, its child cgroups
// (a container's) included.
type Usage struct {
	// CPU is the CPU time used, user and system.
	CPU time.Duration
	// Memory is the memory charged now, page cache included, in bytes.
	Memory int64
	// PeakMemory is the highest Memory since Acquire, in bytes.
	PeakMemory int64
}

var (
	// ErrClosed is returned by a Manager, or a Slot of it, after Close:
	// the cgroups are gone.
	ErrClosed = errors.New("cgroups: manager closed")
	// ErrReleased is returned by the methods of a Slot after Release: the
	// slot may already run another job, whose numbers must not be mixed
	// with this one's.
	ErrReleased = errors.New("cgroups: slot released")
	// ErrUnsupported is returned by Open when Root offers neither cgroup
	// v2 with cpu and memory nor cgroup v1 cpu and memory hierarchies.
	ErrUnsupported = errors.New("cgroups: no usable cgroup hierarchy")
)
