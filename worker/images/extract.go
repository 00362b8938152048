package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// Overlayfs's markers, as layers are stored: a whiteout is a 0/0 character
// device, an opaque directory has the xattr set to "y". Unprivileged
// extraction cannot set trusted.* and falls back to the user.* name that
// overlayfs reads with the userxattr option.
const (
	whiteoutPrefix  = ".wh."
	opaqueMarker    = ".wh..wh..opq"
	opaqueXattr     = "trusted.overlay.opaque"
	userOpaqueXattr = "user.overlay.opaque"
)

// extract unpacks the layer tar r into dir (an empty directory) in
// overlayfs form. Nothing is written outside dir: names are cleaned and
// must stay inside, parent directories are resolved inside dir (a symlink
// in the layer pointing at /etc resolves to dir/etc), final components are
// never followed, and hard links must point inside dir. Ownership and
// device nodes need root; without it they are skipped.
func extract(r io.Reader, dir string, privileged bool, log *slog.Logger) error {
	root, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{dir: dir, root: root, privileged: privileged, log: log}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, tar.ErrHeader) || errors.Is(err, tar.ErrFieldTooLong) {
			return invalidf("read layer tar: %w", err)
		}
		if err != nil {
			return fmt.Errorf("read layer tar: %w", err) // say, the connection dropped
		}
		if err := x.entry(hdr, tr); err != nil {
			return fmt.Errorf("%q: %w", hdr.Name, err)
		}
	}
	// Directories get their modes and times last: writing their entries
	// would change the times, and a read-only mode would stop the writes
	// of an unprivileged extraction.
	for _, d := range x.dirs {
		if err := x.finishDir(d); err != nil {
			return fmt.Errorf("%q: %w", d.rel, err)
		}
	}
	return nil
}

type extractor struct {
	dir        string
	root       *os.File // O_PATH handle on dir
	privileged bool
	log        *slog.Logger
	dirs       []dirEntry // directories to finish, in tar order
}

type dirEntry struct {
	rel string
	hdr *tar.Header
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeDir:
	default:
		if rel == "." {
			return invalidf("a %q entry that is not a directory", hdr.Name)
		}
	}
	dir, base := path.Split(rel)
	parent, err := securejoin.MkdirAllHandle(x.root, cmpDir(dir), 0o755)
	if err != nil {
		if structural(err) {
			// Say, a parent that is a file or a symlink to nowhere.
			return invalidf("create parent directory: %w", err)
		}
		return fmt.Errorf("create parent directory: %w", err)
	}
	defer parent.Close()
	pfd := int(parent.Fd())

	if strings.HasPrefix(base, whiteoutPrefix) {
		return x.whiteout(parent, base)
	}
	perm := uint32(hdr.Mode) & 0o7777
	switch hdr.Typeflag {
	case tar.TypeDir:
		if rel != "." {
			if err := replaceAt(pfd, base, true); err != nil {
				return err
			}
			if err := unix.Mkdirat(pfd, base, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				return err
			}
		}
		x.dirs = append(x.dirs, dirEntry{rel, hdr})
		return nil
	case tar.TypeReg, tar.TypeGNUSparse:
		if err := replaceAt(pfd, base, false); err != nil {
			return err
		}
		if err := x.file(pfd, base, hdr, perm, r); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := replaceAt(pfd, base, false); err != nil {
			return err
		}
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return err
		}
		if err := x.chown(unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)); err != nil {
			return err
		}
	case tar.TypeLink:
		return x.hardlink(pfd, base, hdr.Linkname)
	case tar.TypeFifo, tar.TypeChar, tar.TypeBlock:
		kind := map[byte]uint32{tar.TypeFifo: unix.S_IFIFO, tar.TypeChar: unix.S_IFCHR, tar.TypeBlock: unix.S_IFBLK}[hdr.Typeflag]
		if kind != unix.S_IFIFO && !x.privileged {
			x.log.Debug("skipping device node: not root", "name", hdr.Name)
			return nil
		}
		if err := replaceAt(pfd, base, false); err != nil {
			return err
		}
		dev := int(unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor)))
		if err := unix.Mknodat(pfd, base, kind|perm, dev); err != nil {
			return err
		}
		if err := x.chown(unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)); err != nil {
			return err
		}
		// After chown, which clears setuid bits; mknod's mode had the umask.
		if err := unix.Fchmodat(pfd, base, perm, 0); err != nil {
			return err
		}
	default:
		x.log.Debug("skipping tar entry of unsupported type", "name", hdr.Name, "type", hdr.Typeflag)
		return nil
	}
	return setTimes(pfd, base, hdr.AccessTime, hdr.ModTime)
}

// file writes a regular file's content, owner, mode and xattrs.
func (x *extractor) file(pfd int, base string, hdr *tar.Header, perm uint32, r io.Reader) error {
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return err
	}
	if err := x.chown(unix.Fchown(fd, hdr.Uid, hdr.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, perm); err != nil {
		return err
	}
	// After chown, which drops file capabilities.
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok || !allowedXattr(name) {
			continue
		}
		if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil {
			x.log.Debug("skipping xattr", "name", hdr.Name, "xattr", name, "err", err)
		}
	}
	return f.Close()
}

// allowedXattr says which xattrs from a layer are kept: file capabilities
// and user attributes. Never overlay's own (an image could otherwise forge
// redirects or metacopy pointers), nor other trusted.* or security.*.
func allowedXattr(name string) bool {
	return name == "security.capability" ||
		strings.HasPrefix(name, "user.") && !strings.HasPrefix(name, "user.overlay.")
}

// hardlink links base (in pfd) to target, a path inside the layer.
func (x *extractor) hardlink(pfd int, base, target string) error {
	rel, err := cleanName(target)
	if err != nil {
		return fmt.Errorf("hard link target %q: %w", target, err)
	}
	if rel == "." {
		return invalidf("hard link to the layer's root")
	}
	tdir, tbase := path.Split(rel)
	tparent, err := securejoin.OpenatInRoot(x.root, cmpDir(tdir))
	if err != nil {
		return linkError(target, err)
	}
	defer tparent.Close()
	if err := replaceAt(pfd, base, false); err != nil {
		return err
	}
	// Flags 0: a symlink target is linked itself, not followed.
	if err := unix.Linkat(int(tparent.Fd()), tbase, pfd, base, 0); err != nil {
		return linkError(target, err)
	}
	return nil
}

// linkError blames the layer for a hard link whose target is not a file
// earlier in it.
func linkError(target string, err error) error {
	if structural(err) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EXDEV) {
		return invalidf("hard link to %q, which is not a file earlier in the layer: %w", target, err)
	}
	return fmt.Errorf("hard link to %q: %w", target, err)
}

// structural tells errors caused by the layer's own tree (a path through
// a file or a dangling symlink) from the machine's (no space, I/O).
func structural(err error) bool {
	for _, e := range []error{unix.ENOENT, unix.ENOTDIR, unix.ELOOP, unix.EEXIST} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// whiteout turns ".wh.NAME" into overlayfs's whiteout for NAME, and
// ".wh..wh..opq" into the opaque mark on its directory.
func (x *extractor) whiteout(parent *os.File, base string) error {
	if base == opaqueMarker {
		return x.setOpaque(parent)
	}
	if strings.HasPrefix(base, whiteoutPrefix+whiteoutPrefix) {
		return nil // aufs bookkeeping (.wh..wh.plnk and the like): no meaning here
	}
	victim := strings.TrimPrefix(base, whiteoutPrefix)
	if victim == "" || victim == "." || victim == ".." {
		return invalidf("whiteout of %q", victim)
	}
	pfd := int(parent.Fd())
	if err := replaceAt(pfd, victim, false); err != nil {
		return err
	}
	// Creating a 0/0 character device needs no privilege (Linux 5.8+).
	if err := unix.Mknodat(pfd, victim, unix.S_IFCHR, 0); err != nil {
		return fmt.Errorf("create whiteout: %w", err)
	}
	return nil
}

func (x *extractor) setOpaque(dir *os.File) error {
	err := unix.Fsetxattr(int(dir.Fd()), opaqueXattr, []byte("y"), 0)
	if err != nil && !x.privileged {
		err = unix.Fsetxattr(int(dir.Fd()), userOpaqueXattr, []byte("y"), 0)
	}
	if err != nil {
		return fmt.Errorf("mark directory opaque: %w", err)
	}
	return nil
}

// finishDir sets a directory's owner, mode and times, if it is still a
// directory (a later entry may have replaced it).
func (x *extractor) finishDir(d dirEntry) error {
	rel, hdr := d.rel, d.hdr
	var fd int
	var err error
	parent := x.root
	base := "."
	if rel == "." {
		fd, err = unix.Open(x.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		var dir string
		dir, base = path.Split(rel)
		parent, err = securejoin.OpenatInRoot(x.root, cmpDir(dir))
		if err != nil {
			return nil // removed by a later entry
		}
		defer parent.Close()
		fd, err = unix.Openat(int(parent.Fd()), base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := x.chown(unix.Fchown(fd, hdr.Uid, hdr.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, uint32(hdr.Mode)&0o7777); err != nil {
		return err
	}
	if rel == "." {
		atime := hdr.AccessTime
		if atime.IsZero() {
			atime = hdr.ModTime
		}
		return unix.UtimesNano(x.dir, []unix.Timespec{timespec(atime), timespec(hdr.ModTime)})
	}
	return setTimes(int(parent.Fd()), base, hdr.AccessTime, hdr.ModTime)
}

// chown filters a chown error: as root it is an error, unprivileged the
// layer keeps the worker's ownership.
func (x *extractor) chown(err error) error {
	if err != nil && !x.privileged && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL)) {
		return nil
	}
	return err
}

// cleanName returns a tar entry's name relative to the layer root ("."
// for the root itself), refusing names that are absolute or leave it.
func cleanName(n string) (string, error) {
	if n == "" {
		return "", invalidf("empty name")
	}
	if path.IsAbs(n) {
		return "", invalidf("absolute path")
	}
	c := path.Clean(n)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", invalidf("path leaves the layer")
	}
	return c, nil
}

// cmpDir turns path.Split's directory ("" or "a/b/") into a relative path.
func cmpDir(dir string) string {
	if dir == "" {
		return "."
	}
	return strings.TrimSuffix(dir, "/")
}

// replaceAt clears the way for a new entry named base in directory pfd:
// whatever is there goes, except a directory when keepDir is set (a
// directory entry over a directory merges). Nothing is followed.
func replaceAt(pfd int, base string, keepDir bool) error {
	var st unix.Stat_t
	err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(pfd, base, 0)
	}
	if keepDir {
		return nil
	}
	// os.RemoveAll opens the parent (here the magic link to pfd) and then
	// works with *at calls that do not follow symlinks.
	return os.RemoveAll(fmt.Sprintf("/proc/self/fd/%d/%s", pfd, base))
}

// setTimes sets the times of base in dirfd without following it. A zero
// atime is the mtime.
func setTimes(dirfd int, base string, atime, mtime time.Time) error {
	if atime.IsZero() {
		atime = mtime
	}
	ts := []unix.Timespec{timespec(atime), timespec(mtime)}
	return unix.UtimesNanoAt(dirfd, base, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func timespec(t time.Time) unix.Timespec {
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

// diskUsage is the disk space of the files under dir, hard links counted
// once.
func diskUsage(dir string) (int64, error) {
	var total int64
	seen := map[uint64]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			total += fi.Size()
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}
