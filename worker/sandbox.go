package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/worker/cgroups"
)

// sandbox makes what each attempt runs in: a directory of its own under
// the jobs dir and, when the worker isolates jobs, a user of its own, a
// cgroup with its limits and a jail (namespaces, chroot, seccomp).
type sandbox struct {
	jobsDir  string
	uids     *uidPool         // nil: jobs run as the worker's user
	cgroups  *cgroups.Manager // nil: no limits, no measures
	jails    *jails           // nil: jobs run in the worker's namespaces
	maxProcs int64            // a job's process limit when it names none

	// Emptied directories are used again: making and removing one for
	// each job was a tenth of the machine's time on ext4 (its inode
	// allocator steps around recently deleted inodes).
	mu      sync.Mutex
	idle    []string
	nextDir int
}

// maxIdleDirs bounds the emptied directories kept for the next jobs.
const maxIdleDirs = 1024

// box is one attempt's sandbox.
type box struct {
	s     *sandbox
	ref   api.AttemptRef
	dir   string
	lease *uidLease     // nil: not isolated
	slot  *cgroups.Slot // nil: not isolated
	jail  *jail         // nil: not isolated, or a container on the host's network
}

// uid and gid are the attempt's user and group (0 when it runs as the
// worker's).
func (b *box) uid() int {
	if b.lease == nil {
		return 0
	}
	return b.lease.uid
}

// prepare gives the attempt an empty directory (mode 0700, owned by its
// user), leases its user, takes a cgroup with its limits and a jail for
// its network.
func (s *sandbox) prepare(a api.Assignment) (*box, error) {
	b := &box{s: s, ref: a.AttemptRef}
	var err error
	if b.dir, err = s.takeDir(); err != nil {
		return nil, err
	}
	if s.uids == nil {
		return b, nil
	}
	if b.lease, err = s.uids.lease(); err != nil {
		b.release(false)
		return nil, err
	}
	if err := os.Chown(b.dir, b.lease.uid, b.lease.uid); err != nil {
		b.release(false)
		return nil, fmt.Errorf("give the working directory to user %d: %w", b.lease.uid, err)
	}
	pids := a.MaxProcesses
	if pids == 0 {
		pids = s.maxProcs
	}
	limits := cgroups.Limits{CPUMilli: int64(a.CPU*1000 + 0.5), Memory: a.Memory, Pids: pids}
	if mode := jailMode(a.Network); a.Image == "" || mode != api.NetworkHost {
		if b.jail, err = s.jails.take(mode, limits); err != nil {
			b.release(false)
			return nil, fmt.Errorf("make the job's namespaces: %w", err)
		}
		b.slot = b.jail.slot
		return b, nil
	}
	// A container on the host's network: runc makes the rest.
	if b.slot, err = s.cgroups.Acquire(limits); err != nil {
		b.release(false)
		return nil, fmt.Errorf("make the job's cgroup: %w", err)
	}
	return b, nil
}

// start starts a process job's command in the attempt's jail and cgroup.
func (b *box) start(cmd *exec.Cmd) error { return b.jail.start(cmd) }

// takeDir returns an empty directory of the jobs dir, one used before if
// there is one.
func (s *sandbox) takeDir() (string, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		dir := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return dir, nil
	}
	s.nextDir++
	dir := filepath.Join(s.jobsDir, "d"+strconv.Itoa(s.nextDir))
	s.mu.Unlock()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("create working directory: %w", err)
	}
	return dir, nil
}

// putDir empties a directory a job used and keeps it for the next one.
func (s *sandbox) putDir(dir string) {
	if err := emptyDir(dir); err != nil {
		os.RemoveAll(dir)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idle) >= maxIdleDirs {
		os.Remove(dir)
		return
	}
	s.idle = append(s.idle, dir)
}

// emptyDir removes everything in dir, and makes it mode 0700 again.
func emptyDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	if fi.Mode() == os.ModeDir|0o700 {
		return nil // as the last job left it: no inode to change
	}
	return os.Chmod(dir, 0o700)
}

// release kills what is left of the attempt, empties its directory (or,
// with keepDir, keeps it under the attempt's name where only the worker's
// user can reach it), then gives back its jail or cgroup and its user:
// the next job of the jail or the user finds nothing of this one.
func (b *box) release(keepDir bool) {
	// A slot that cannot be emptied may leave something of the job in
	// the jail's namespaces: the jail goes.
	killed := true
	if b.slot != nil {
		killed = b.slot.Kill() == nil
	}
	if b.dir != "" {
		if keepDir {
			b.s.keep(b.dir, b.ref)
		} else {
			b.s.putDir(b.dir)
		}
		b.dir = ""
	}
	switch {
	case b.jail != nil && killed:
		// The jail keeps its cgroup slot for its next job, which
		// renews it; killed now, nothing of this job runs on.
		b.s.jails.put(b.jail)
	case b.jail != nil:
		b.s.jails.discard(b.jail)
	case b.slot != nil:
		b.slot.Release()
	}
	b.jail, b.slot = nil, nil
	if b.lease != nil {
		b.lease.release()
		b.lease = nil
	}
}

// keptDir is the directory of the jobs dir, reached by the worker's user
// alone, where attempts' directories are kept (Config.KeepWorkDirs): a
// later job that runs as the same user ID must not find them.
const keptDir = "kept"

// keep moves an attempt's directory into the kept directory, under the
// attempt's name.
func (s *sandbox) keep(dir string, ref api.AttemptRef) {
	kept := filepath.Join(s.jobsDir, keptDir)
	if err := os.Mkdir(kept, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		os.RemoveAll(dir)
		return
	}
	to := filepath.Join(kept, fmt.Sprintf("%d-%d-%d", ref.BatchID, ref.JobID, ref.Attempt))
	os.RemoveAll(to)
	if err := os.Rename(dir, to); err != nil {
		os.RemoveAll(dir)
	}
}

// openSandbox sets the jobs dir up and, when isolating, the user pool,
// the cgroups and the jails.
func openSandbox(cfg *Config, nodeID string, isolate bool, log *slog.Logger) (_ *sandbox, err error) {
	// A directory of this node's own under the jobs dir: workers of one
	// host may share a -jobs-dir.
	base := cfg.JobsDir
	if base == "" {
		base = "/var/lib/drover-jobs"
		if os.Geteuid() != 0 {
			base = filepath.Join(os.TempDir(), "drover-jobs-"+strconv.Itoa(os.Geteuid()))
		}
	}
	s := &sandbox{jobsDir: filepath.Join(base, nodeID[:12]), maxProcs: cfg.MaxProcesses}
	if within(s.jobsDir, cfg.DataDir) || within(cfg.DataDir, s.jobsDir) {
		return nil, fmt.Errorf("jobs dir %s and data dir %s overlap: jobs must not reach the worker's identity and tokens", s.jobsDir, cfg.DataDir)
	}
	if err := os.MkdirAll(s.jobsDir, 0o711); err != nil {
		return nil, fmt.Errorf("create jobs dir: %w", err)
	}

	// Left by an earlier run: its jobs are gone (their attempts were
	// preempted or lost).
	entries, err := os.ReadDir(s.jobsDir)
	if err != nil {
		return nil, fmt.Errorf("read jobs dir: %w", err)
	}
	for _, e := range entries {
		os.RemoveAll(filepath.Join(s.jobsDir, e.Name()))
	}
	if !isolate {
		return s, nil
	}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	// Jobs may pass through the jobs dir to their own directory, but not
	// list it.
	if err := os.Chmod(s.jobsDir, 0o711); err != nil {
		return nil, fmt.Errorf("jobs dir: %w", err)
	}
	if err := traversable(s.jobsDir); err != nil {
		return nil, err
	}
	if s.uids, err = newUIDPool(cfg.UIDLeaseDir, cfg.JobUIDFirst, cfg.JobUIDCount); err != nil {
		return nil, err
	}
	s.uids.sweep(log)
	parent := cfg.CgroupParent
	if parent == "" {
		parent = "drover/" + nodeID[:12]
	}
	if s.cgroups, err = cgroups.Open(cgroups.Config{Parent: parent, Logger: log}); err != nil {
		return nil, fmt.Errorf("job cgroups: %w", err)
	}
	jc := jailsConfig{
		Root:   filepath.Join(cfg.DataDir, "jail"),
		Queues: filepath.Join(cfg.DataDir, "jail-mq"),
		Shared: append([]string{s.jobsDir}, cfg.JobWritableDirs...),
		Resolv: cfg.JobResolvConf,
		Bridge: &bridgeConfig{NodeID: nodeID, Subnets: cfg.BridgeSubnets, Block: cfg.BridgeBlock, LeaseDir: cfg.NetworkLeaseDir,
			Deny: cfg.BridgeDeny, Servers: cfg.Servers},
		MaxIdle: maxIdleJails,
	}
	if s.jails, err = openJails(jc, s.cgroups, log); err != nil {
		return nil, fmt.Errorf("job namespaces: %w", err)
	}
	return s, nil
}

// maxIdleJails bounds the idle jails of each network mode kept for the
// next jobs (as many as the cgroups keep idle slots).
const maxIdleJails = 64

// close removes the jails (whose threads leave their cgroups), kills
// every job's leftovers, removes the cgroups and drops the user leases.
func (s *sandbox) close() {
	if s.jails != nil {
		s.jails.close()
	}
	if s.cgroups != nil {
		s.cgroups.Close()
	}
	if s.uids != nil {
		s.uids.close()
	}
}

// traversable checks that every directory above dir lets other users pass
// (search permission), or jobs could not reach their own directories.
func traversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("jobs dir: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("jobs dir %s is under %s (mode %s), which jobs' users cannot pass through: choose another -jobs-dir or allow others to search %s", abs, d, fi.Mode().Perm(), d)
		}
		if d == "/" {
			return nil
		}
	}
}
