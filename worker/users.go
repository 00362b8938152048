package worker

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// uidPool lends jobs the user IDs they run as. A lease is a lock on one
// byte of a file every worker of the host shares (an open file
// description lock on the ID's offset), so two workers on one machine
// never run jobs as the same user at once, and a worker that dies drops
// its leases with its file. One file for all leases: every descriptor a
// worker holds is one more that each job's exec must close. IDs are
// handed out round robin. Nothing a job leaves outlives it for the next
// job of its ID: it writes only its own directory and its jail's private
// places, which are emptied when it ends (private.go), and at start a
// worker removes what jobs of its range left in the host's shared places
// before that was so (sweep).
type uidPool struct {
	file  *os.File
	first int
	count int

	mu   sync.Mutex
	next int
	held map[int]bool // this worker's leases: its own locks never conflict with each other
}

// uidLease is one user ID held by one attempt; the job's group ID is the
// same number.
type uidLease struct {
	uid  int
	pool *uidPool
}

func newUIDPool(dir string, first, count int) (*uidPool, error) {
	if first < 1000 || count < 1 || first+count > 1<<31-2 {
		return nil, fmt.Errorf("job user IDs %d-%d: the range starts at 1000 or more (not a system account) and holds at least one ID", first, first+count-1)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create user ID lease dir: %w", err)
	}
	if name, id, ok := accountInRange("/etc/passwd", first, count); ok {
		return nil, fmt.Errorf("job user IDs %d-%d include %d, the account %q of /etc/passwd: jobs would have its files; choose another range with -job-uids", first, first+count-1, id, name)
	}
	f, err := os.OpenFile(filepath.Join(dir, "leases"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open user ID leases: %w", err)
	}
	return &uidPool{file: f, first: first, count: count, next: int(uint32(os.Getpid()) % uint32(count)), held: map[int]bool{}}, nil
}

// lease takes the next free user ID.
func (p *uidPool) lease() (*uidLease, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for tries := 0; tries < p.count; tries++ {
		uid := p.first + p.next
		p.next = (p.next + 1) % p.count
		if p.held[uid] {
			continue
		}
		err := p.lock(uid, unix.F_WRLCK)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			continue // another worker of the host has it
		}
		if err != nil {
			return nil, fmt.Errorf("lease job user ID %d: %w", uid, err)
		}
		p.held[uid] = true
		return &uidLease{uid: uid, pool: p}, nil
	}
	return nil, fmt.Errorf("every job user ID of %d-%d is in use on this host", p.first, p.first+p.count-1)
}

// lock sets (F_WRLCK) or clears (F_UNLCK) the lock on uid's byte.
func (p *uidPool) lock(uid int, typ int16) error {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: int64(uid - p.first), Len: 1}
	return unix.FcntlFlock(p.file.Fd(), unix.F_OFD_SETLK, &lk)
}

// sweep removes what users of the range own in the host's shared writable
// places and their System V IPC objects, but for IDs another worker of
// the host holds now.
func (p *uidPool) sweep(log *slog.Logger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	owned := func(uid uint32) bool {
		id := int(uid)
		if id < p.first || id >= p.first+p.count || p.held[id] {
			return false
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(id - p.first), Len: 1}
		return unix.FcntlFlock(p.file.Fd(), unix.F_OFD_GETLK, &lk) == nil && lk.Type == unix.F_UNLCK
	}
	n, err := sweepHost(owned)
	if n > 0 {
		log.Info("removed what earlier jobs left in the host's shared places", "removed", n, "job_uids", fmt.Sprintf("%d-%d", p.first, p.first+p.count-1))
	}
	if err != nil {
		log.Warn("cannot remove all that earlier jobs left in the host's shared places", "err", err)
	}
}

// close drops every lease.
func (p *uidPool) close() { p.file.Close() }

// release gives the ID back. Call it once nothing of the job's runs.
func (l *uidLease) release() {
	p := l.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.lock(l.uid, unix.F_UNLCK)
	delete(p.held, l.uid)
}

// accountInRange finds an account of a passwd file whose ID is in the
// range.
func accountInRange(passwd string, first, count int) (string, int, bool) {
	f, err := os.Open(passwd)
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		id, err := strconv.Atoi(fields[2])
		if err == nil && id >= first && id < first+count {
			return fields[0], id, true
		}
	}
	return "", 0, false
}
