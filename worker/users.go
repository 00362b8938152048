package worker

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// uidPool lends jobs the user IDs they run as. A lease is an exclusive
// flock on a file named after the ID in a directory every worker of the
// host shares, so two workers on one machine never run jobs as the same
// user at once, and a worker that dies drops its leases with its open
// files. IDs are handed out round robin, so an ID comes back only after
// every other one has been used (files a job left in a shared place such
// as /tmp stay its own for as long as possible).
type uidPool struct {
	dir   string
	first int
	count int

	mu   sync.Mutex
	next int
}

// uidLease is one user ID held by one attempt; the job's group ID is the
// same number.
type uidLease struct {
	uid  int
	file *os.File
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
	return &uidPool{dir: dir, first: first, count: count, next: int(uint32(os.Getpid()) % uint32(count))}, nil
}

// lease takes the next free user ID.
func (p *uidPool) lease() (*uidLease, error) {
	for tries := 0; tries < p.count; tries++ {
		p.mu.Lock()
		uid := p.first + p.next
		p.next = (p.next + 1) % p.count
		p.mu.Unlock()
		f, err := os.OpenFile(filepath.Join(p.dir, strconv.Itoa(uid)), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lease a job user ID: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			return nil, fmt.Errorf("lease job user ID %d: %w", uid, err)
		}
		return &uidLease{uid: uid, file: f}, nil
	}
	return nil, fmt.Errorf("every job user ID of %d-%d is in use on this host", p.first, p.first+p.count-1)
}

// release gives the ID back. Call it once nothing of the job's runs.
func (l *uidLease) release() { l.file.Close() }

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
