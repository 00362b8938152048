package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/worker/cgroups"
)

// sandbox makes what each attempt runs in: a directory of its own under
// the jobs dir and, when the worker isolates jobs, a user of its own and
// a cgroup with its limits.
type sandbox struct {
	jobsDir string
	uids    *uidPool         // nil: jobs run as the worker's user
	cgroups *cgroups.Manager // nil: no limits, no measures
}

// box is one attempt's sandbox.
type box struct {
	dir   string
	lease *uidLease     // nil: not isolated
	slot  *cgroups.Slot // nil: not isolated
}

// uid and gid are the attempt's user and group (0 when it runs as the
// worker's).
func (b *box) uid() int {
	if b.lease == nil {
		return 0
	}
	return b.lease.uid
}

// prepare makes the attempt's directory (mode 0700, owned by its user),
// leases its user and takes a cgroup with its limits.
func (s *sandbox) prepare(a api.Assignment) (*box, error) {
	b := &box{dir: filepath.Join(s.jobsDir, fmt.Sprintf("%d-%d-%d", a.BatchID, a.JobID, a.Attempt))}
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("create working directory: %w", err)
		}
		// A directory left by an earlier run of this worker: start afresh.
		if err := os.RemoveAll(b.dir); err != nil {
			return nil, fmt.Errorf("clear working directory: %w", err)
		}
		if err := os.Mkdir(b.dir, 0o700); err != nil {
			return nil, fmt.Errorf("create working directory: %w", err)
		}
	}
	if s.uids == nil {
		return b, nil
	}
	var err error
	if b.lease, err = s.uids.lease(); err != nil {
		b.release(false)
		return nil, err
	}
	if err := os.Chown(b.dir, b.lease.uid, b.lease.uid); err != nil {
		b.release(false)
		return nil, fmt.Errorf("give the working directory to user %d: %w", b.lease.uid, err)
	}
	limits := cgroups.Limits{CPUMilli: int64(a.CPU*1000 + 0.5), Memory: a.Memory}
	if b.slot, err = s.cgroups.Acquire(limits); err != nil {
		b.release(false)
		return nil, fmt.Errorf("make the job's cgroup: %w", err)
	}
	return b, nil
}

// release kills what is left of the attempt, then gives back its cgroup
// and user and removes its directory (unless keepDir).
func (b *box) release(keepDir bool) {
	if b.slot != nil {
		b.slot.Release()
		b.slot = nil
	}
	if b.lease != nil {
		b.lease.release()
		b.lease = nil
	}
	if !keepDir {
		os.RemoveAll(b.dir)
	}
}

// openSandbox sets the jobs dir up and, when isolating, the user pool and
// the cgroups.
func openSandbox(cfg *Config, nodeID string, isolate bool) (*sandbox, error) {
	s := &sandbox{jobsDir: cfg.JobsDir}
	if s.jobsDir == "" {
		if os.Geteuid() == 0 {
			s.jobsDir = filepath.Join("/var/lib/drover-jobs", nodeID[:12])
		} else {
			s.jobsDir = filepath.Join(os.TempDir(), "drover-jobs-"+strconv.Itoa(os.Geteuid()), nodeID[:12])
		}
	}
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
	parent := cfg.CgroupParent
	if parent == "" {
		parent = "drover/" + nodeID[:12]
	}
	if s.cgroups, err = cgroups.Open(cgroups.Config{Parent: parent, Logger: cfg.Logger}); err != nil {
		return nil, fmt.Errorf("job cgroups: %w", err)
	}
	return s, nil
}

// close kills every job's leftovers and removes the cgroups.
func (s *sandbox) close() {
	if s.cgroups != nil {
		s.cgroups.Close()
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
