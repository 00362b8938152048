package worker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What a job leaves behind stays its own. A process job runs in a view of
// the host that it cannot write (the jobs' mount namespace binds the whole
// tree read-only at the chroot), but for its own working directory and
// private copies of the host's shared writable places: each jail has a
// mount namespace of its own with a tmpfs at /tmp, /var/tmp and /dev/shm
// (sized to the job's memory limit, its pages charged to the job's cgroup
// as it writes them), and an IPC namespace of its own (System V shared
// memory, semaphores and message queues, POSIX message queues). When a
// job ends, a tmpfs it wrote is replaced by a new one by the jails'
// janitor before the jail runs another job (which frees its memory, so
// nothing stays charged to the cgroup slot); what it left in the jail's
// IPC namespace, where no other job can see it, is removed by the jail's
// thread before it forks the next job (a shared memory segment is charged
// to the slot: a slot left charged is not given to another job, see
// cgroups.ErrCharged). So nothing a job leaves is there for the next job
// of the jail, and nothing is left on the host for a later job that runs
// as the same user ID.

// privatePlaces are the host's shared writable directories a job gets
// private copies of (those the host has).
var privatePlaces = []string{"/tmp", "/var/tmp", "/dev/shm"}

// placeDir is the directory of a jail's tmpfs that is bound at a private
// place ("/var/tmp": "var-tmp").
func placeDir(place string) string {
	return strings.ReplaceAll(strings.TrimPrefix(place, "/"), "/", "-")
}

// privateTmp is a jail's private places as it set them up: one tmpfs,
// mounted outside the chroot, whose directories are bound at the chroot's
// /tmp, /var/tmp and /dev/shm (one file system: one look tells whether a
// job used any of them, and their sum is what its memory limit bounds),
// and how much of it is in use when nothing of a job is in it (its
// directories, and those the worker made to bind shared paths below them).
type privateTmp struct {
	fd     int // an O_PATH descriptor of the tmpfs, which any thread of the worker can statfs
	inodes uint64
	blocks uint64

	// An O_PATH descriptor of the root of the jail's message queue file
	// system, and its size with no queue in it (it grows with each).
	mq      int
	mqEmpty int64
}

// furnish mounts the jail's private places and message queue file system
// in the calling thread's mount namespace (the jail's own, made by the
// caller with its IPC namespace), for a job whose memory limit is size
// (0: none).
func (fs *jailFS) furnish(size int64) (*privateTmp, error) {
	t := &privateTmp{fd: -1, mq: -1}
	if err := fs.mountTmp(t, size); err != nil {
		t.close()
		return nil, err
	}
	// The jail's POSIX message queues are listed through its IPC
	// namespace's queue file system, mounted outside the chroot.
	if err := unix.Mount("mqueue", fs.mq, "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.close()
		return nil, fmt.Errorf("mount the jail's message queues at %s: %w", fs.mq, err)
	}
	fd, err := unix.Open(fs.mq, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.close()
		return nil, fmt.Errorf("the jail's message queues: %w", err)
	}
	t.mq = fd
	var st unix.Stat_t
	if err := unix.Fstat(t.mq, &st); err != nil {
		t.close()
		return nil, fmt.Errorf("the jail's message queues: %w", err)
	}
	t.mqEmpty = st.Size
	return t, nil
}

// close closes the descriptors.
func (t *privateTmp) close() {
	if t == nil {
		return
	}
	for _, fd := range []*int{&t.fd, &t.mq} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// mountTmp mounts a new tmpfs for the private places, binds its
// directories at them and, below them, the worker's directories that jobs
// reach through one (the jobs dir, when it is under /tmp), and records
// what the empty tmpfs holds.
func (fs *jailFS) mountTmp(t *privateTmp, size int64) error {
	if err := unix.Mount("tmpfs", fs.tmp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpfsOptions(size)); err != nil {
		return fmt.Errorf("mount the jail's private places: %w", err)
	}
	for _, p := range fs.places {
		dir := filepath.Join(fs.tmp, placeDir(p))
		if err := os.Mkdir(dir, 0o777); err != nil {
			return fmt.Errorf("private %s: %w", p, err)
		}
		if err := unix.Chmod(dir, 0o1777); err != nil {
			return fmt.Errorf("private %s: %w", p, err)
		}
		for _, s := range fs.shared {
			if !within(s, p) {
				continue
			}
			below := filepath.Join(dir, strings.TrimPrefix(s, p))
			if err := os.MkdirAll(below, 0o755); err != nil {
				return fmt.Errorf("private %s: %w", p, err)
			}
			if err := unix.Mount(s, below, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s in the private %s: %w", s, p, err)
			}
		}
		if err := unix.Mount(dir, filepath.Join(fs.root, p), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind the private %s: %w", p, err)
		}
	}
	fd, err := unix.Open(fs.tmp, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the jail's private places: %w", err)
	}
	if t.fd >= 0 {
		unix.Close(t.fd)
	}
	t.fd = fd
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(t.fd, &sfs); err != nil {
		return fmt.Errorf("the jail's private places: %w", err)
	}
	t.inodes, t.blocks = sfs.Files-sfs.Ffree, sfs.Blocks-sfs.Bfree
	return nil
}

// unmountTmp takes the private places and their tmpfs away (lazily: the
// tmpfs goes with its last user, the descriptor mountTmp replaces).
func (fs *jailFS) unmountTmp() error {
	for _, p := range fs.places {
		if err := unix.Unmount(filepath.Join(fs.root, p), unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount the last job's %s: %w", p, err)
		}
	}
	if err := unix.Unmount(fs.tmp, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount the last job's private places: %w", err)
	}
	return nil
}

// tmpfsOptions are a private place's mount options for a job whose memory
// limit is size (0: none, the kernel's default of half the memory).
func tmpfsOptions(size int64) string {
	o := "mode=1777"
	if size > 0 {
		o += ",size=" + strconv.FormatInt(size, 10)
	}
	return o
}

// tmpfsOption is tmpfsOptions as a container's mount options.
func tmpfsOption(size int64) []string { return strings.Split(tmpfsOptions(size), ",") }

// used reports whether a job left something in the private places. Any
// of the worker's threads may ask, without entering the jail.
func (t *privateTmp) used() (bool, error) {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(t.fd, &sfs); err != nil {
		return false, fmt.Errorf("the jail's private places: %w", err)
	}
	return sfs.Files-sfs.Ffree != t.inodes || sfs.Blocks-sfs.Bfree != t.blocks, nil
}

// janitor replaces the private places a job wrote, and sizes them for the
// next job, in the jails' mount namespaces. It runs on OS threads of its
// own that are under no filter (a jail's thread is under the jobs'
// seccomp filter, which refuses mounts).
type janitor struct {
	fs   *jailFS
	reqs chan janitorReq
}

type janitorReq struct {
	j    *jail
	size int64 // the memory limit of the jail's next job
	done chan error
}

// janitors is how many jails are emptied at once.
const janitors = 2

func newJanitor(fs *jailFS) *janitor {
	jn := &janitor{fs: fs, reqs: make(chan janitorReq)}
	for range janitors {
		goLocked(jn.loop)
	}
	return jn
}

// close ends the janitor's threads.
func (jn *janitor) close() { close(jn.reqs) }

func (jn *janitor) loop() {
	// setns into a mount namespace needs a thread whose root and working
	// directory are its own.
	err := unix.Unshare(unix.CLONE_FS)
	for r := range jn.reqs {
		if err != nil {
			r.done <- fmt.Errorf("the jails' janitor: unshare its file system context: %w", err)
			continue
		}
		r.done <- jn.clean(r.j, r.size)
	}
}

// empty readies j for a job whose memory limit is size: a private place
// the last job left something in is replaced by a new tmpfs (its pages,
// however many files hold them, freed and uncharged as the old one goes),
// and every place is sized for the next job. It is cheap when there is
// nothing to do: a look at each place, from the calling goroutine.
// Nothing of the last job may run.
func (jn *janitor) empty(j *jail, size int64) error {
	used, err := j.tmp.used()
	if err != nil {
		return err
	}
	if !used && size == j.size {
		return nil
	}
	r := janitorReq{j: j, size: size, done: make(chan error, 1)}
	jn.reqs <- r
	return <-r.done
}

// clean is empty's work on a janitor's thread, in the jail's mount
// namespace.
func (jn *janitor) clean(j *jail, size int64) error {
	ns, err := unix.Open("/proc/self/task/"+strconv.Itoa(j.tid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open a jail's mount namespace: %w", err)
	}
	err = unix.Setns(ns, unix.CLONE_NEWNS)
	unix.Close(ns)
	if err != nil {
		return fmt.Errorf("enter a jail's mount namespace: %w", err)
	}
	used, err := j.tmp.used()
	if err != nil {
		return err
	}
	switch {
	case used:
		if err := jn.fs.unmountTmp(); err != nil {
			return err
		}
		if err := jn.fs.mountTmp(j.tmp, size); err != nil {
			return err
		}
	case size != j.size:
		if err := unix.Mount("", jn.fs.tmp, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, tmpfsOptions(size)); err != nil {
			return fmt.Errorf("size the jail's private places: %w", err)
		}
	}
	j.size = size
	return nil
}

// clearIPC removes every System V IPC object and POSIX message queue of
// the calling thread's IPC namespace, whose queue file system's root t.mq
// is: what the last job of a jail left, before the next one starts.
func clearIPC(t *privateTmp) error {
	if err := removeSysV(nil); err != nil {
		return err
	}
	// The queue file system's root grows by an entry's size with each
	// queue: as large as when it was mounted, there is nothing to list.
	var st unix.Stat_t
	if err := unix.Fstat(t.mq, &st); err != nil {
		return fmt.Errorf("the jail's message queues: %w", err)
	}
	if st.Size == t.mqEmpty {
		return nil
	}
	fd, err := unix.Openat(t.mq, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("list the jail's message queues: %w", err)
	}
	f := os.NewFile(uintptr(fd), "mqueue")
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("list the jail's message queues: %w", err)
	}
	for _, n := range names {
		if err := unix.Unlinkat(t.mq, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove message queue %q: %w", n, err)
		}
	}
	return nil
}

// System V IPC commands of <linux/ipc.h>, <linux/shm.h>, <linux/msg.h> and
// <linux/sem.h> that x/sys/unix does not name.
const (
	ipcRMID = 0
	msgStat = 11
	msgInfo = 12
	shmStat = 13
	shmInfo = 14
	semStat = 18
	semInfo = 19
)

// sysvKind is one kind of System V IPC object and how to list and remove
// it: info returns the highest index in use and how many objects there
// are, stat the object at an index (its ID and owner), remove removes one.
type sysvKind struct {
	name   string
	info   func(buf *[256]byte) (maxIdx int, err error)
	inUse  func(buf *[256]byte) int32
	stat   func(idx int, buf *[256]byte) (id int, err error)
	remove func(id int) error
}

var sysvKinds = []sysvKind{
	{
		name: "shared memory segment",
		info: func(buf *[256]byte) (int, error) {
			return unix.SysvShmCtl(0, shmInfo, (*unix.SysvShmDesc)(unsafe.Pointer(buf)))
		},
		inUse: func(buf *[256]byte) int32 { return *(*int32)(unsafe.Pointer(buf)) }, // shm_info.used_ids
		stat: func(idx int, buf *[256]byte) (int, error) {
			return unix.SysvShmCtl(idx, shmStat, (*unix.SysvShmDesc)(unsafe.Pointer(buf)))
		},
		remove: func(id int) error { _, err := unix.SysvShmCtl(id, ipcRMID, nil); return err },
	},
	{
		name:  "message queue",
		info:  func(buf *[256]byte) (int, error) { return ipcSyscall(unix.SYS_MSGCTL, 0, msgInfo, 0, buf) },
		inUse: func(buf *[256]byte) int32 { return *(*int32)(unsafe.Pointer(buf)) }, // msginfo.msgpool: the queues in use
		stat: func(idx int, buf *[256]byte) (int, error) {
			return ipcSyscall(unix.SYS_MSGCTL, idx, msgStat, 0, buf)
		},
		remove: func(id int) error { _, err := ipcSyscall(unix.SYS_MSGCTL, id, ipcRMID, 0, nil); return err },
	},
	{
		name: "semaphore set",
		info: func(buf *[256]byte) (int, error) { return ipcSyscall(unix.SYS_SEMCTL, 0, 0, semInfo, buf) },
		// seminfo.semusz, the sets in use, is its eighth int.
		inUse: func(buf *[256]byte) int32 { return *(*int32)(unsafe.Pointer(&buf[28])) },
		stat: func(idx int, buf *[256]byte) (int, error) {
			return ipcSyscall(unix.SYS_SEMCTL, idx, 0, semStat, buf)
		},
		remove: func(id int) error { _, err := ipcSyscall(unix.SYS_SEMCTL, id, 0, ipcRMID, nil); return err },
	},
}

// ipcSyscall makes msgctl(a, b, buf) or semctl(a, b, c, buf).
func ipcSyscall(trap uintptr, a, b, c int, buf *[256]byte) (int, error) {
	var p uintptr
	if buf != nil {
		p = uintptr(unsafe.Pointer(buf))
	}
	var r uintptr
	var errno unix.Errno
	if trap == unix.SYS_MSGCTL {
		r, _, errno = unix.Syscall(trap, uintptr(a), uintptr(b), p)
	} else {
		r, _, errno = unix.Syscall6(trap, uintptr(a), uintptr(b), uintptr(c), p, 0, 0)
	}
	if errno != 0 {
		return int(r), errno
	}
	return int(r), nil
}

// removeSysV removes the System V IPC objects of the calling thread's IPC
// namespace that owned selects by their owner's user ID (nil: all).
func removeSysV(owned func(uid uint32) bool) error {
	var buf [256]byte
	for _, k := range sysvKinds {
		clear(buf[:])
		maxIdx, err := k.info(&buf)
		if err != nil {
			return fmt.Errorf("list System V %ss: %w", k.name, err)
		}
		if k.inUse(&buf) == 0 {
			continue
		}
		for idx := 0; idx <= maxIdx; idx++ {
			id, err := k.stat(idx, &buf)
			if err != nil {
				continue // no object at idx
			}
			// Every kind's stat starts with its struct ipc64_perm:
			// key, then uid.
			if owned != nil && !owned(*(*uint32)(unsafe.Pointer(&buf[4]))) {
				continue
			}
			if err := k.remove(id); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
				return fmt.Errorf("remove System V %s %d: %w", k.name, id, err)
			}
		}
	}
	return nil
}

// hostPlaces are the host's world-writable directories where a job of an
// older worker, without private places, may have left files. Every job
// now writes only its own directory and its private places; sweepHost
// removes what jobs of the range left there before.
var hostPlaces = []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue"}

// sweepHost removes what job users (the IDs owned selects) own in the
// host's shared writable places (and in the world-writable directories
// below them, but no other: a worker's jobs dir may be there, holding
// running jobs' directories), and their System V IPC objects in the
// host's IPC namespace. It returns how many it removed.
func sweepHost(owned func(uid uint32) bool) (int, error) {
	n := 0
	var errs []error
	for _, place := range hostPlaces {
		if _, err := os.Lstat(place); err != nil {
			continue
		}
		err := filepath.WalkDir(place, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			var st unix.Stat_t
			if unix.Lstat(path, &st) != nil {
				return nil
			}
			if path != place && owned(st.Uid) {
				if err := os.RemoveAll(path); err != nil {
					errs = append(errs, err)
				} else {
					n++
				}
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() && st.Mode&0o002 == 0 {
				return filepath.SkipDir
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeSysV(owned); err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}
