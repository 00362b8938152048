package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The worker's identity lives in its data dir, as a Nomad client's does: a
// node ID made on first start and kept, so a restarted worker is known as
// the same node whatever its name, and two workers with their own data
// dirs are two nodes even on one host with one name.
const (
	nodeIDFile   = "node-id"
	tokenFile    = "instance-token" // the last activation's token (0600)
	lockFile     = "lock"
	nodeIDLength = 32 // hex digits
	maxSecret    = 4096
)

// DefaultDataDir is the data dir of a worker named name that is given
// none: /var/lib/drover-worker-NAME for root, else
// $XDG_STATE_HOME/drover/worker-NAME (~/.local/state/drover/worker-NAME).
// Never under a directory every user may write to, such as /tmp: a job
// could make the directory first (see openOwnDir).
func DefaultDataDir(name string) (string, error) {
	return defaultDataDir(name, os.Geteuid() == 0)
}

func defaultDataDir(name string, root bool) (string, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", fmt.Errorf("worker name %q cannot name a data dir: give -data-dir", name)
	}
	if root {
		return "/var/lib/drover-worker-" + name, nil
	}
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) { // the XDG rule: a relative value is ignored
		home, err := os.UserHomeDir()
		if err != nil || !filepath.IsAbs(home) {
			return "", fmt.Errorf("no home directory to keep the worker's data dir in (%v): give -data-dir", err)
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "drover", "worker-"+name), nil
}

// openOwnDir opens the directory a worker keeps its identity and
// credentials in, making it (0700) and any missing directory above it
// (0755) first. It is the one check of a directory the worker trusts, and
// it refuses, naming what it found and what to do:
//
//   - a data dir that is a symlink, or not a directory;
//   - a data dir not owned by the worker's user, or that others may write
//     to: another user made it, and may have left links in it for the
//     worker to write its credentials through;
//   - a directory above it owned by anyone but root or the worker's user,
//     or that others may write to without the sticky bit (as /tmp has):
//     its owner, or anyone, could put another directory in its place.
//
// Symlinks above the data dir are followed when root or the worker's user
// owns them, the directories they lead to checked like any other. Each
// step opens the next directory from the last with O_NOFOLLOW and checks
// what it opened, so nothing can be swapped in between; the worker then
// reaches its files through the returned directory only. A data dir that
// others may read is made 0700.
func openOwnDir(path string) (*os.File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("worker data dir %s: %w", path, err)
	}
	if abs == "/" {
		return nil, errors.New("worker data dir /: give -data-dir a directory of the worker's own")
	}
	euid := os.Geteuid()
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("worker data dir %s: %s", abs, fmt.Sprintf(format, args...))
	}
	// The directories opened so far, from /; the last is the current one.
	type step struct {
		fd   int
		path string
	}
	var stack []step
	defer func() {
		for _, s := range stack {
			unix.Close(s.fd)
		}
	}()
	openRoot := func() error {
		for _, s := range stack {
			unix.Close(s.fd)
		}
		stack = stack[:0]
		fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return refuse("open /: %v", err)
		}
		stack = append(stack, step{fd, "/"})
		return nil
	}
	// checkAbove refuses a directory above the data dir that a user other
	// than root and the worker's could replace the data dir in.
	checkAbove := func(p string, st *unix.Stat_t) error {
		mode := fs.FileMode(st.Mode & 0o777)
		if st.Mode&unix.S_ISVTX != 0 {
			mode |= fs.ModeSticky
		}
		if int(st.Uid) != 0 && int(st.Uid) != euid {
			return refuse("it is under %s, owned by uid %d (mode %v): only root or this worker's user (uid %d) may own the directories above a worker's data dir, or their owner could put another in its place; give -data-dir a directory elsewhere", p, st.Uid, fs.ModeDir|mode, euid)
		}
		if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
			return refuse("it is under %s (mode %v, owner uid %d), which other users may write to without the sticky bit: any of them could put another directory in its place; give -data-dir a directory elsewhere, or chmod go-w %s", p, fs.ModeDir|mode, st.Uid, p)
		}
		return nil
	}
	if err := openRoot(); err != nil {
		return nil, err
	}
	var root unix.Stat_t
	if err := unix.Fstat(stack[0].fd, &root); err != nil {
		return nil, refuse("stat /: %v", err)
	}
	if err := checkAbove("/", &root); err != nil {
		return nil, err
	}
	todo := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		last := len(todo) == 0
		cur := stack[len(stack)-1]
		// A symlink's target may hold these; the path given, cleaned,
		// does not, so the last name is always a name.
		switch name {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(cur.fd)
				stack = stack[:len(stack)-1]
			}
			continue
		}
		p := filepath.Join(cur.path, name)
		var st unix.Stat_t
		err := unix.Fstatat(cur.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			perm := uint32(0o755)
			if last {
				perm = 0o700
			}
			if err := unix.Mkdirat(cur.fd, name, perm); err != nil && !errors.Is(err, unix.EEXIST) {
				return nil, refuse("create %s: %v", p, err)
			}
			err = unix.Fstatat(cur.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			return nil, refuse("stat %s: %v", p, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := readlinkat(cur.fd, name)
			if err != nil {
				return nil, refuse("read symlink %s: %v", p, err)
			}
			if last {
				return nil, refuse("it is a symlink (to %s), owned by uid %d: the worker keeps its credentials only in a real directory of its own; give -data-dir the directory itself", target, st.Uid)
			}
			if int(st.Uid) != 0 && int(st.Uid) != euid {
				return nil, refuse("it is reached through %s, a symlink (to %s) owned by uid %d: only root's or this worker's user's (uid %d) symlinks are followed; give -data-dir the directory itself", p, target, st.Uid, euid)
			}
			if links++; links > 40 {
				return nil, refuse("too many symlinks")
			}
			if filepath.IsAbs(target) {
				if err := openRoot(); err != nil {
					return nil, err
				}
			}
			todo = append(strings.Split(strings.TrimPrefix(target, "/"), "/"), todo...)
			continue
		case unix.S_IFDIR:
		default:
			return nil, refuse("%s is not a directory", p)
		}
		fd, err := unix.Openat(cur.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, refuse("open %s: %v", p, err)
		}
		stack = append(stack, step{fd, p})
		// What was opened is what is checked: a swap after the stat
		// above shows here.
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, refuse("stat %s: %v", p, err)
		}
		if !last {
			if err := checkAbove(p, &st); err != nil {
				return nil, err
			}
			continue
		}
		mode := fs.ModeDir | fs.FileMode(st.Mode&0o777)
		if int(st.Uid) != euid {
			return nil, refuse("it is owned by uid %d (mode %v), not by this worker's user (uid %d): another user made it, and could have left links in it for the worker to write its node ID and instance token through; remove it, or give -data-dir a directory of the worker's own", st.Uid, mode, euid)
		}
		if st.Mode&0o022 != 0 {
			return nil, refuse("its mode is %v: other users may write in it, and could have left links in it for the worker to write its node ID and instance token through; remove it, or chmod 700 it if only you wrote in it", mode)
		}
		if st.Mode&0o077 != 0 {
			// The data dir holds the worker's identity and instance
			// token: no job may read it.
			if err := unix.Fchmod(fd, 0o700); err != nil {
				return nil, refuse("chmod 700: %v", err)
			}
		}
		stack = stack[:len(stack)-1] // the caller's now
		return os.NewFile(uintptr(fd), abs), nil
	}
	return nil, refuse("nothing to open")
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// writeSecret keeps data in the file name of dir, as every credential the
// worker keeps is: written to a new file of a random name (O_CREAT|O_EXCL|
// O_NOFOLLOW, 0600), synced, renamed over name, and the directory synced.
// Nothing already at either name is opened or followed, and a crash
// leaves the old contents or the new, never a part.
func writeSecret(dir *os.File, name string, data []byte) error {
	var tmp string
	var fd int
	for try := 0; ; try++ {
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		tmp = tmpPrefix(name) + hex.EncodeToString(b)
		var err error
		fd, err = unix.Openat(int(dir.Fd()), tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || try == 3 {
			return fmt.Errorf("write %s: %w", filepath.Join(dir.Name(), tmp), err)
		}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), tmp))
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(int(dir.Fd()), tmp, int(dir.Fd()), name)
	}
	if err != nil {
		_ = unix.Unlinkat(int(dir.Fd()), tmp, 0)
		return fmt.Errorf("write %s: %w", filepath.Join(dir.Name(), name), err)
	}
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("write %s: sync the directory: %w", filepath.Join(dir.Name(), name), err)
	}
	return nil
}

func tmpPrefix(name string) string { return "." + name + ".tmp-" }

// readSecret reads the file name of dir, written by writeSecret: a
// regular file of the worker's user, not followed if it is a symlink.
// (nil, an error wrapping fs.ErrNotExist) when there is none.
func readSecret(dir *os.File, name string) ([]byte, error) {
	path := filepath.Join(dir.Name(), name)
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s is a symlink: the worker reads its credentials only from a file of its own; delete it", path)
		}
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s is not a file of the worker's user (mode %o, uid %d); delete it", path, st.Mode, st.Uid)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecret+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if len(b) > maxSecret {
		return nil, fmt.Errorf("%s holds more than %d bytes: not a credential of the worker's; delete it", path, maxSecret)
	}
	return b, nil
}

// identity is a worker's node ID and the lock that keeps a second process
// off its data dir.
type identity struct {
	dir    *os.File // the data dir, checked by openOwnDir
	nodeID string
	lock   *os.File
}

// claimIdentity checks and locks the data dir (openOwnDir) and returns
// its node ID, making one on first use. A second process on the same
// data dir is refused: it would claim the same node ID.
func claimIdentity(path string) (*identity, error) {
	dir, err := openOwnDir(path)
	if err != nil {
		return nil, err
	}
	id := &identity{dir: dir}
	fd, err := unix.Openat(int(dir.Fd()), lockFile, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		id.release()
		return nil, fmt.Errorf("open worker lock %s: %w", filepath.Join(dir.Name(), lockFile), err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), lockFile))
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := make([]byte, 32)
		n, _ := f.ReadAt(holder, 0)
		f.Close()
		id.release()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if pid := strings.TrimSpace(string(holder[:n])); pid != "" {
				who = "process " + pid
			}
			return nil, fmt.Errorf("data dir %s is in use by another drover worker (%s): each worker needs its own -data-dir", dir.Name(), who)
		}
		return nil, fmt.Errorf("lock worker data dir %s: %w", dir.Name(), err)
	}
	id.lock = f
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	id.removeLeftovers()
	if id.nodeID, err = id.loadOrMakeNodeID(); err != nil {
		id.release()
		return nil, err
	}
	return id, nil
}

// removeLeftovers removes the temporary files of a writeSecret a crash
// interrupted.
func (id *identity) removeLeftovers() {
	entries, err := id.dir.ReadDir(-1)
	if err != nil {
		return
	}
	for _, e := range entries {
		for _, f := range []string{nodeIDFile, tokenFile} {
			if strings.HasPrefix(e.Name(), tmpPrefix(f)) {
				_ = unix.Unlinkat(int(id.dir.Fd()), e.Name(), 0)
			}
		}
	}
}

func (id *identity) loadOrMakeNodeID() (string, error) {
	path := filepath.Join(id.dir.Name(), nodeIDFile)
	raw, err := readSecret(id.dir, nodeIDFile)
	if err == nil {
		s := strings.TrimSpace(string(raw))
		if len(s) != nodeIDLength {
			return "", fmt.Errorf("%s holds %q, not a node ID; delete it to make a new one", path, s)
		}
		if _, err := hex.DecodeString(s); err != nil {
			return "", fmt.Errorf("%s holds %q, not a node ID; delete it to make a new one", path, s)
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read node ID: %w", err)
	}
	b := make([]byte, nodeIDLength/2)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make node ID: %w", err)
	}
	s := hex.EncodeToString(b)
	if err := writeSecret(id.dir, nodeIDFile, []byte(s+"\n")); err != nil {
		return "", fmt.Errorf("node ID: %w", err)
	}
	return s, nil
}

// previousToken returns the token of the last activation, if kept.
func (id *identity) previousToken() string {
	raw, _ := readSecret(id.dir, tokenFile)
	return strings.TrimSpace(string(raw))
}

// keepToken remembers an activation's token, so the next start proves it
// is the same worker.
func (id *identity) keepToken(tok string) error {
	return writeSecret(id.dir, tokenFile, []byte(tok+"\n"))
}

func (id *identity) release() {
	if id.lock != nil {
		id.lock.Close() // closing drops the flock
		id.lock = nil
	}
	if id.dir != nil {
		id.dir.Close()
		id.dir = nil
	}
}
