package images

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// Rootfs is one attempt's root filesystem: an overlay of an image's layers
// with a writable upper directory of its own, or a copy of the layers.
type Rootfs struct {
	// Overlay tells whether the root filesystem is an overlayfs mount
	// (else a copy, made when overlayfs is unavailable or CopyRootfs is set).
	Overlay bool

	dir    string
	path   string
	unhold func() // releases the layers; safe to call again

	mu        sync.Mutex
	unmounted bool
	closed    bool
}

// Path is the root filesystem's directory, for runc's root.path.
func (r *Rootfs) Path() string { return r.path }

// Close unmounts the root filesystem (detaching it lazily if processes
// still use it) and removes its directory with everything the attempt
// wrote. After a failure it may be called again; after success, further
// calls do nothing.
func (r *Rootfs) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if r.Overlay && !r.unmounted {
		if err := unmount(r.path); err != nil {
			return err
		}
		r.unmounted = true
	}
	r.unhold()
	if err := os.RemoveAll(r.dir); err != nil {
		return fmt.Errorf("remove rootfs: %w", err)
	}
	r.closed = true
	return nil
}

func unmount(target string) error {
	err := unix.Unmount(target, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(target, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: not mounted
		return fmt.Errorf("unmount rootfs %s: %w", target, err)
	}
	return nil
}

// Mount assembles a root filesystem for one attempt in dir (which must be
// absolute and, if it exists, have no upper, work or rootfs entries):
// dir/rootfs is an overlayfs mount of img's layers (mounted nodev, so
// device nodes from the image cannot be opened) with dir/upper and
// dir/work for what the attempt writes. Without overlayfs (not root, or no
// overlay support here) or with Config.CopyRootfs, dir/rootfs is a copy of
// the layers instead, applied in order with their whiteouts; device nodes
// are left out of a copy, which lives on a filesystem without nodev.
//
// img must not have been released yet. An overlay holds img's layers
// until Close, so img may be released before that; a copy needs them only
// while Mount runs.
func (s *Store) Mount(img *Image, dir string) (*Rootfs, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("mount rootfs for %s: directory %q is not absolute", img.Ref, dir)
	}
	upper, work, target := filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mount rootfs for %s: %w", img.Ref, err)
	}
	var made []string
	fail := func(err error) (*Rootfs, error) {
		for _, d := range made {
			os.RemoveAll(d)
		}
		return nil, fmt.Errorf("mount rootfs for %s: %w", img.Ref, err)
	}
	for _, d := range []string{upper, work, target} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail(err)
		}
		made = append(made, d)
	}

	s.mu.Lock()
	s.holdLocked(img.layers, s.now())
	s.mu.Unlock()
	var once sync.Once
	rf := &Rootfs{dir: dir, path: target, unhold: func() { once.Do(func() { s.unhold(img.layers) }) }}

	if !s.cfg.CopyRootfs {
		lowers := make([]string, 0, len(img.dirs)+1)
		for i := len(img.dirs) - 1; i >= 0; i-- {
			lowers = append(lowers, img.dirs[i]) // overlayfs lists the top layer first
		}
		if len(lowers) == 0 {
			// overlayfs wants a lower directory; an image may have no layers.
			empty := filepath.Join(dir, "empty")
			if err := os.Mkdir(empty, 0o755); err != nil {
				rf.unhold()
				return fail(err)
			}
			made = append(made, empty)
			lowers = append(lowers, empty)
		}
		err := overlayMount(lowers, upper, work, target)
		if err == nil {
			rf.Overlay = true
			return rf, nil
		}
		if !overlayUnavailable(err) {
			rf.unhold()
			return fail(err)
		}
		if s.copyWarned.CompareAndSwap(false, true) {
			s.log.Warn("overlayfs unavailable: copying image layers for each attempt", "err", err)
		}
	}
	err := copyLayers(img.dirs, target, s.root)
	rf.unhold() // a copy does not need the layers any more
	if err != nil {
		return fail(err)
	}
	return rf, nil
}

// overlayMount is mountOverlay, or a test's stand-in for a host without
// overlayfs.
var overlayMount = mountOverlay

// overlayUnavailable tells errors of a host without usable overlayfs (not
// root, no overlay module, an upper directory on an unsupported
// filesystem) from the others.
func overlayUnavailable(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EINVAL)
}

// mountOverlay mounts overlayfs on target. mount(2) takes the options as
// one page, which 40 or so layers fill; beyond that, or with paths that
// would need escaping, the layers go one by one through the new mount
// API's "lowerdir+" (Linux 6.8).
func mountOverlay(lowers []string, upper, work, target string) error {
	opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + upper + ",workdir=" + work + ",index=off"
	paths := strings.Join(append(slices.Clone(lowers), upper, work), "")
	if len(opts) < os.Getpagesize() && !strings.ContainsAny(paths, `,:\`) {
		if err := unix.Mount("overlay", target, "overlay", unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("mount overlay on %s: %w", target, err)
		}
		return nil
	}
	return mountOverlayAPI(lowers, upper, work, target)
}

// mountOverlayAPI mounts overlayfs with fsopen/fsconfig/fsmount/move_mount.
func mountOverlayAPI(lowers []string, upper, work, target string) error {
	fd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fd)
	for _, l := range lowers {
		if err := unix.FsconfigSetString(fd, "lowerdir+", l); err != nil {
			// Not %w: this EINVAL means an old kernel, not a host
			// without overlayfs, and a copy fallback would hide it.
			return fmt.Errorf("the image has %d layers, too many for mount(2)'s one-page options, and this kernel's overlayfs does not take lowerdir+ (Linux 6.8 or later does): %v%s",
				len(lowers), err, fsLog(fd))
		}
	}
	for _, kv := range [][2]string{{"upperdir", upper}, {"workdir", work}, {"index", "off"}} {
		if err := unix.FsconfigSetString(fd, kv[0], kv[1]); err != nil {
			return fmt.Errorf("overlay option %s=%s: %w%s", kv[0], kv[1], err, fsLog(fd))
		}
	}
	if err := unix.FsconfigCreate(fd); err != nil {
		return fmt.Errorf("create overlay: %w%s", err, fsLog(fd))
	}
	mfd, err := unix.Fsmount(fd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("fsmount overlay: %w%s", err, fsLog(fd))
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move overlay mount to %s: %w", target, err)
	}
	return nil
}

// fsLog returns the messages the kernel left on a filesystem context,
// which say which option it refused and why.
func fsLog(fd int) string {
	var msgs []string
	buf := make([]byte, 1024)
	for range 16 {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			break
		}
		msgs = append(msgs, strings.TrimSpace(string(buf[:n])))
	}
	if len(msgs) == 0 {
		return ""
	}
	return " (kernel: " + strings.Join(msgs, "; ") + ")"
}

// copyLayers applies layer directories (bottom first, in overlayfs form)
// to target as overlayfs would show them: an entry replaces what lower
// layers had at its path, except that directories merge; a whiteout
// removes the path; an opaque directory first loses what lower layers put
// in it. Paths in target are resolved inside target, and nothing is
// followed, so symlinks from the image cannot redirect writes.
func copyLayers(layers []string, target string, privileged bool) error {
	root, err := os.OpenFile(target, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer root.Close()
	c := &copier{root: root, privileged: privileged, dirs: map[string]*unix.Stat_t{}}
	for _, l := range layers {
		if err := c.layer(l); err != nil {
			return fmt.Errorf("copy layer %s: %w", filepath.Base(l), err)
		}
	}
	// Directory modes and times last, as in extract.
	for rel, st := range c.dirs {
		if err := c.finishDir(rel, st); err != nil {
			return fmt.Errorf("copy %s: %w", rel, err)
		}
	}
	return nil
}

type copier struct {
	root       *os.File
	privileged bool
	dirs       map[string]*unix.Stat_t // the topmost layer's directory metadata
}

func (c *copier) layer(src string) error {
	links := map[uint64]string{} // inode -> first path, for hard links
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			if isOpaque(p) {
				return emptyAt(int(c.root.Fd()), ".")
			}
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		parent, err := securejoin.MkdirAllHandle(c.root, filepath.Dir(rel), 0o755)
		if err != nil {
			return err
		}
		defer parent.Close()
		pfd, base := int(parent.Fd()), filepath.Base(rel)
		if err := c.entry(p, rel, pfd, base, &st, links); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		return nil
	})
}

func (c *copier) entry(src, rel string, pfd int, base string, st *unix.Stat_t, links map[uint64]string) error {
	perm := st.Mode & 0o7777
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := replaceAt(pfd, base, true); err != nil {
			return err
		}
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		if isOpaque(src) {
			if err := emptyAt(pfd, base); err != nil {
				return err
			}
		}
		c.dirs[rel] = st
		return nil
	case unix.S_IFREG:
		if err := replaceAt(pfd, base, false); err != nil {
			return err
		}
		if st.Nlink > 1 {
			if first, ok := links[st.Ino]; ok {
				return c.link(first, pfd, base)
			}
			links[st.Ino] = rel
		}
		if err := c.file(src, pfd, base, st, perm); err != nil {
			return err
		}
	case unix.S_IFLNK:
		if err := replaceAt(pfd, base, false); err != nil {
			return err
		}
		link, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(link, pfd, base); err != nil {
			return err
		}
		if err := c.chown(unix.Fchownat(pfd, base, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)); err != nil {
			return err
		}
	case unix.S_IFIFO:
		if err := replaceAt(pfd, base, false); err != nil {
			return err
		}
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|perm, 0); err != nil {
			return err
		}
		if err := c.chown(unix.Fchownat(pfd, base, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)); err != nil {
			return err
		}
		if err := unix.Fchmodat(pfd, base, perm, 0); err != nil {
			return err
		}
	default:
		// A whiteout (0/0 character device) removes the path; other
		// devices and sockets replace it with nothing (see Mount).
		return replaceAt(pfd, base, false)
	}
	return unix.UtimesNanoAt(pfd, base, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

// file copies a regular file's content, owner, mode and capabilities.
func (c *copier) file(src string, pfd int, base string, st *unix.Stat_t, perm uint32) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), base)
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if err := c.chown(unix.Fchown(fd, int(st.Uid), int(st.Gid))); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, perm); err != nil {
		return err
	}
	buf := make([]byte, 256)
	if n, err := unix.Fgetxattr(int(in.Fd()), "security.capability", buf); err == nil {
		_ = unix.Fsetxattr(fd, "security.capability", buf[:n], 0)
	}
	return out.Close()
}

// link makes base (in pfd) a hard link to first, a path copied earlier
// from the same layer.
func (c *copier) link(first string, pfd int, base string) error {
	tparent, err := securejoin.OpenatInRoot(c.root, filepath.Dir(first))
	if err != nil {
		return err
	}
	defer tparent.Close()
	return unix.Linkat(int(tparent.Fd()), filepath.Base(first), pfd, base, 0)
}

func (c *copier) finishDir(rel string, st *unix.Stat_t) error {
	parent, err := securejoin.OpenatInRoot(c.root, filepath.Dir(rel))
	if err != nil {
		return nil // removed by a later layer
	}
	defer parent.Close()
	base := filepath.Base(rel)
	fd, err := unix.Openat(int(parent.Fd()), base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := c.chown(unix.Fchown(fd, int(st.Uid), int(st.Gid))); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return err
	}
	return unix.UtimesNanoAt(int(parent.Fd()), base, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

func (c *copier) chown(err error) error {
	if err != nil && !c.privileged && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL)) {
		return nil
	}
	return err
}

// isOpaque reports whether a layer directory hides lower layers' content.
func isOpaque(p string) bool {
	buf := make([]byte, 4)
	for _, name := range []string{opaqueXattr, userOpaqueXattr} {
		if n, err := unix.Lgetxattr(p, name, buf); err == nil && string(buf[:n]) == "y" {
			return true
		}
	}
	return false
}

// emptyAt removes everything in directory base of pfd.
func emptyAt(pfd int, base string) error {
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), base)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := replaceAt(fd, n, false); err != nil {
			return err
		}
	}
	return nil
}
