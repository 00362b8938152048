package images

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"golang.org/x/sys/unix"

	"github.com/drover-sched/drover/testkit/testimage"
)

func needRoot(t *testing.T) {
	t.Helper()
	if !isRoot() {
		t.Skip("overlayfs mounts need root; run the tests as root to cover them")
	}
}

// whiteoutStore is a store holding testimage.WhiteoutImage, and the image.
func whiteoutStore(t *testing.T, mod func(*Config)) (*Store, *Image) {
	t.Helper()
	reg := startRegistry(t, testimage.RegistryConfig{})
	wimg, err := testimage.WhiteoutImage(jobtool(t))
	if err != nil {
		t.Fatal(err)
	}
	ref := push(t, reg, wimg, "whiteout:v1")
	s := openStore(t, t.TempDir(), "w1", mod)
	img := get(t, s, ref)
	t.Cleanup(img.Release)
	return s, img
}

func mounted(path string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// checkView checks the merged view of testimage.WhiteoutImage.
func checkView(t *testing.T, root string) {
	t.Helper()
	if fi, err := os.Stat(filepath.Join(root, "bin/jobtool")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/jobtool: %v, %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("tmp: %v, %v", fi, err)
	}
	if names := list(t, root, "data"); !slices.Equal(names, []string{"keep.txt"}) {
		t.Errorf("/data holds %v, want keep.txt only (gone.txt and dir whited out)", names)
	}
	if names := list(t, root, "opaque"); !slices.Equal(names, []string{"upper.txt"}) {
		t.Errorf("/opaque holds %v, want upper.txt only (opaque)", names)
	}
	if b, err := os.ReadFile(filepath.Join(root, "data/keep.txt")); err != nil || string(b) != "keep\n" {
		t.Errorf("data/keep.txt: %q, %v", b, err)
	}
}

func list(t *testing.T, root, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Error(err)
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// tree describes every entry under root (but root itself) in one line:
// type, mode, owner, mtime, and content or link target.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o owner=%d:%d mtime=%d", st.Mode, st.Uid, st.Gid, st.Mtim.Nano())
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" sha256=%x", sha256.Sum256(b))
		case unix.S_IFLNK:
			l, _ := os.Readlink(p)
			desc += " link=" + l
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMountOverlay(t *testing.T) {
	needRoot(t)
	s, img := whiteoutStore(t, nil)
	layersBefore := map[string]map[string]string{}
	for _, d := range img.LayerDirs() {
		layersBefore[d] = tree(t, d)
	}
	dir := filepath.Join(t.TempDir(), "attempt")
	rf, err := s.Mount(img, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !rf.Overlay || rf.Path() != filepath.Join(dir, "rootfs") || !mounted(rf.Path()) {
		t.Fatalf("Overlay=%v Path=%s mounted=%v", rf.Overlay, rf.Path(), mounted(rf.Path()))
	}
	checkView(t, rf.Path())

	// Writes go to upper; the layers stay as they were.
	if err := os.WriteFile(filepath.Join(rf.Path(), "data/new.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rf.Path(), "data/keep.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(rf.Path(), "bin/jobtool")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"data/new.txt", "data/keep.txt", "bin/jobtool"} {
		if _, err := os.Lstat(filepath.Join(dir, "upper", f)); err != nil {
			t.Errorf("upper/%s: %v", f, err)
		}
	}
	for d, before := range layersBefore {
		if after := tree(t, d); !maps.Equal(before, after) {
			t.Errorf("layer %s changed:\nbefore %v\nafter  %v", d, before, after)
		}
	}

	// The rootfs holds the layers after the image is released.
	img.Release()
	if held := s.Stats().Held; held != 3 {
		t.Errorf("%d layers held with the rootfs mounted, want 3", held)
	}
	if err := rf.Close(); err != nil {
		t.Fatal(err)
	}
	if mounted(rf.Path()) {
		t.Error("still mounted after Close")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s survived Close: %v", dir, err)
	}
	if held := s.Stats().Held; held != 0 {
		t.Errorf("%d layers held after Close", held)
	}
	if err := rf.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestMountCopyMatchesOverlay(t *testing.T) {
	s, img := whiteoutStore(t, nil)
	base := t.TempDir()

	s.cfg.CopyRootfs = true
	cp, err := s.Mount(img, filepath.Join(base, "copy"))
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if cp.Overlay {
		t.Fatal("CopyRootfs mounted an overlay")
	}
	checkView(t, cp.Path())
	if isRoot() {
		s.cfg.CopyRootfs = false
		ov, err := s.Mount(img, filepath.Join(base, "overlay"))
		if err != nil {
			t.Fatal(err)
		}
		defer ov.Close()
		if want, got := tree(t, ov.Path()), tree(t, cp.Path()); !maps.Equal(want, got) {
			for k := range mergeKeys(want, got) {
				if want[k] != got[k] {
					t.Errorf("%s: overlay %q, copy %q", k, want[k], got[k])
				}
			}
		}
	}
	// A copy does not hold the layers.
	img.Release()
	if held := s.Stats().Held; held > 0 && !isRoot() {
		t.Errorf("%d layers held by a copied rootfs", held)
	}
	if err := cp.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "copy")); !os.IsNotExist(err) {
		t.Errorf("copy survived Close: %v", err)
	}
}

// TestMountManyLayers mounts an image whose lowerdir option does not fit
// in a page, which takes the new mount API.
func TestMountManyLayers(t *testing.T) {
	needRoot(t)
	reg := startRegistry(t, testimage.RegistryConfig{})
	wimg := baseImage(t)
	const n = 60
	for i := range n {
		wimg = addFiles(t, wimg, map[string]string{fmt.Sprintf("layers/%02d", i): fmt.Sprint(i)})
	}
	ref := push(t, reg, wimg, "many:v1")
	s := openStore(t, t.TempDir(), "w1", nil)
	img := get(t, s, ref)
	defer img.Release()
	if l := len(strings.Join(img.LayerDirs(), ":")); l < os.Getpagesize() {
		t.Fatalf("lowerdir is only %d bytes; the test needs more than a page", l)
	}
	rf, err := s.Mount(img, filepath.Join(t.TempDir(), "attempt"))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	if !rf.Overlay {
		t.Fatal("not an overlay")
	}
	if names := list(t, rf.Path(), "layers"); len(names) != n {
		t.Errorf("/layers holds %d files, want %d", len(names), n)
	}
	if _, err := os.Stat(filepath.Join(rf.Path(), "bin/jobtool")); err != nil {
		t.Error(err)
	}
}

// TestCloseBusyRootfs closes a rootfs a process still uses: the mount is
// detached lazily and the directory still removed.
func TestCloseBusyRootfs(t *testing.T) {
	needRoot(t)
	s, img := whiteoutStore(t, nil)
	dir := filepath.Join(t.TempDir(), "attempt")
	rf, err := s.Mount(img, dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(rf.Path(), "data/keep.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := rf.Close(); err != nil {
		t.Fatal(err)
	}
	if mounted(rf.Path()) {
		t.Error("still mounted")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s survived Close: %v", dir, err)
	}
	b := make([]byte, 4)
	if _, err := f.Read(b); err != nil || string(b) != "keep" {
		t.Errorf("open file after lazy detach: %q, %v", b, err)
	}
}

func TestMountRefusesUsedDir(t *testing.T) {
	s, img := whiteoutStore(t, func(c *Config) { c.CopyRootfs = true })
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "upper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Mount(img, dir); err == nil {
		t.Fatal("Mount over an existing upper directory succeeded")
	}
	if _, err := s.Mount(img, "relative"); err == nil {
		t.Fatal("Mount of a relative directory succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "upper")); err != nil {
		t.Errorf("Mount removed a directory it did not make: %v", err)
	}
	if held := s.Stats().Held; held != 3 {
		t.Errorf("%d layers held after failed Mounts, want the image's 3", held)
	}
}

// TestMountFallsBackToCopy mounts where overlayfs is refused: with EPERM
// (not root) the rootfs is a copy, with another error Mount fails.
func TestMountFallsBackToCopy(t *testing.T) {
	s, img := whiteoutStore(t, nil)
	defer func(m func(lowers []string, upper, work, target string) error) { overlayMount = m }(overlayMount)
	overlayMount = func(lowers []string, upper, work, target string) error {
		return fmt.Errorf("mount overlay on %s: %w", target, unix.EPERM)
	}
	rf, err := s.Mount(img, filepath.Join(t.TempDir(), "attempt"))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	if rf.Overlay {
		t.Error("Overlay is set")
	}
	checkView(t, rf.Path())

	overlayMount = func(lowers []string, upper, work, target string) error {
		return fmt.Errorf("mount overlay on %s: %w", target, unix.ENOSPC)
	}
	dir := filepath.Join(t.TempDir(), "attempt")
	if _, err := s.Mount(img, dir); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Errorf("Mount with overlayfs failing for another reason: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed Mount left %v", entries)
	}
}

func TestMountImageWithoutLayers(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	ref := push(t, reg, empty.Image, "empty:v1")
	s := openStore(t, t.TempDir(), "w1", nil)
	img := get(t, s, ref)
	defer img.Release()
	rf, err := s.Mount(img, filepath.Join(t.TempDir(), "attempt"))
	if err != nil {
		t.Fatal(err)
	}
	if entries, err := os.ReadDir(rf.Path()); err != nil || len(entries) != 0 {
		t.Errorf("rootfs of an image without layers: %v, %v", entries, err)
	}
	if err := rf.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOverlayUnavailable(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EPERM, unix.ENODEV, unix.EINVAL} {
		if !overlayUnavailable(fmt.Errorf("mount overlay: %w", errno)) {
			t.Errorf("%v: not taken for a host without overlayfs", errno)
		}
	}
	if overlayUnavailable(fmt.Errorf("mount overlay: %w", unix.ENOENT)) {
		t.Error("ENOENT taken for a host without overlayfs")
	}
}

func mergeKeys(a, b map[string]string) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}
