package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-sched/drover/testkit/testlog"
)

// file is a tar entry for a test layer.
type file struct {
	name string
	typ  byte // tar.TypeReg when zero
	mode int64
	body string
	link string
	uid  int
	gid  int
	dev  [2]int64
}

func layerTar(t *testing.T, files ...file) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Typeflag: f.typ, Mode: f.mode, Linkname: f.link, Uid: f.uid, Gid: f.gid,
			ModTime: mtime, Devmajor: f.dev[0], Devminor: f.dev[1], Format: tar.FormatPAX}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(f.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func isRoot() bool { return os.Geteuid() == 0 }

// extractTo extracts files into base/layer and returns that directory.
func extractTo(t *testing.T, base string, files ...file) (string, error) {
	t.Helper()
	dir := filepath.Join(base, "layer")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, extract(bytes.NewReader(layerTar(t, files...)), dir, isRoot(), testlog.New(t))
}

func TestExtractStaysInside(t *testing.T) {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		files   func(outside string) []file
		wantErr bool
	}{
		{"dotdot", func(string) []file { return []file{{name: "../evil", body: "x"}} }, true},
		{"deep dotdot", func(string) []file { return []file{{name: "a/../../evil", body: "x"}} }, true},
		{"absolute", func(o string) []file { return []file{{name: o + "/evil", body: "x"}} }, true},
		{"through absolute symlink", func(o string) []file {
			return []file{{name: "a", typ: tar.TypeSymlink, link: o}, {name: "a/evil", body: "x"}}
		}, false},
		{"through relative symlink", func(string) []file {
			return []file{{name: "a", typ: tar.TypeSymlink, link: "../../../../../../.."}, {name: "a/evil", body: "x"}}
		}, false},
		{"through symlinked dir chain", func(o string) []file {
			return []file{{name: "a", typ: tar.TypeSymlink, link: o}, {name: "b", typ: tar.TypeSymlink, link: "a"}, {name: "b/evil", body: "x"}}
		}, false},
		{"over a symlink", func(o string) []file {
			return []file{{name: "evil", typ: tar.TypeSymlink, link: o + "/evil"}, {name: "evil", body: "x"}}
		}, false},
		{"hardlink dotdot", func(string) []file {
			return []file{{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}}
		}, true},
		{"hardlink absolute", func(string) []file {
			return []file{{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}}
		}, true},
		{"hardlink through symlink", func(string) []file {
			return []file{{name: "s", typ: tar.TypeSymlink, link: "/etc"}, {name: "h", typ: tar.TypeLink, link: "s/passwd"}}
		}, true},
		{"whiteout through symlink", func(o string) []file {
			return []file{{name: "a", typ: tar.TypeSymlink, link: o}, {name: "a/.wh.keep", body: ""}}
		}, false},
		{"opaque through symlink", func(o string) []file {
			return []file{{name: "a", typ: tar.TypeSymlink, link: o}, {name: "a/.wh..wh..opq", body: ""}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			layer, err := extractTo(t, base, tc.files(outside)...)
			if tc.wantErr {
				var ce *contentError
				if !errors.As(err, &ce) {
					t.Errorf("extract: %v, want a content error", err)
				}
			} else if err != nil {
				t.Logf("extract refused: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(base, "evil")); !os.IsNotExist(err) {
				t.Errorf("%s/evil was written", base)
			}
			entries, _ := os.ReadDir(outside)
			if len(entries) != 1 {
				t.Errorf("outside directory now has %v", entries)
			}
			if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "keep" {
				t.Errorf("outside/keep: %q, %v", b, err)
			}
			if fi, err := os.Lstat(filepath.Join(outside, "keep")); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				t.Error("outside/keep became a whiteout")
			}
			if sz, _ := unix.Getxattr(outside, opaqueXattr, make([]byte, 4)); sz > 0 {
				t.Error("outside directory was marked opaque")
			}
			if b, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(b, passwd) {
				t.Fatal("/etc/passwd changed")
			}
			var host, h unix.Stat_t
			if unix.Stat("/etc/passwd", &host) == nil && unix.Lstat(filepath.Join(layer, "h"), &h) == nil && host.Ino == h.Ino && host.Dev == h.Dev {
				t.Error("layer hard-linked /etc/passwd")
			}
		})
	}
}

func TestExtractOverlayForm(t *testing.T) {
	files := []file{
		{name: "./", typ: tar.TypeDir, mode: 0o755},
		{name: "bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "bin/su", mode: 0o4755, body: "setuid", uid: 1000, gid: 1001},
		{name: "bin/link", typ: tar.TypeLink, link: "bin/su"},
		{name: "bin/sym", typ: tar.TypeSymlink, link: "/bin/su"},
		{name: "ro/", typ: tar.TypeDir, mode: 0o555},
		{name: "ro/file", body: "in a read-only dir"},
		{name: "fifo", typ: tar.TypeFifo, mode: 0o600},
		{name: "null", typ: tar.TypeChar, mode: 0o666, dev: [2]int64{1, 3}},
		{name: "opq/", typ: tar.TypeDir, mode: 0o700},
		{name: "opq/.wh..wh..opq"},
		{name: "opq/mine", body: "same layer"},
		{name: "implied/parent/file", body: "no dir entries"},
		{name: "etc/.wh.gone"},
		{name: ".wh..wh.plnk/", typ: tar.TypeDir, mode: 0o700},
	}
	layer, err := extractTo(t, t.TempDir(), files...)
	// Without root, the read-only directory would stop TempDir's cleanup.
	t.Cleanup(func() { os.Chmod(filepath.Join(layer, "ro"), 0o755) })
	if err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)

	var su, link unix.Stat_t
	if err := unix.Lstat(filepath.Join(layer, "bin/su"), &su); err != nil {
		t.Fatal(err)
	}
	if su.Mode&0o7777 != 0o4755 {
		t.Errorf("bin/su mode %o, want 4755", su.Mode&0o7777)
	}
	if isRoot() && (su.Uid != 1000 || su.Gid != 1001) {
		t.Errorf("bin/su owner %d:%d, want 1000:1001", su.Uid, su.Gid)
	}
	if got := time.Unix(su.Mtim.Unix()); !got.Equal(mtime) {
		t.Errorf("bin/su mtime %v, want %v", got, mtime)
	}
	if err := unix.Lstat(filepath.Join(layer, "bin/link"), &link); err != nil || link.Ino != su.Ino {
		t.Errorf("bin/link is not a hard link of bin/su: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(layer, "bin/sym")); err != nil || l != "/bin/su" {
		t.Errorf("bin/sym -> %q, %v", l, err)
	}
	if fi, err := os.Stat(filepath.Join(layer, "ro")); err != nil || fi.Mode().Perm() != 0o555 || !fi.ModTime().Equal(mtime) {
		t.Errorf("ro: %v, %v (want mode 555, mtime %v)", fi, err, mtime)
	}
	if b, err := os.ReadFile(filepath.Join(layer, "ro/file")); err != nil || string(b) != "in a read-only dir" {
		t.Errorf("ro/file: %q, %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(layer, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("fifo: %v, %v", fi, err)
	}
	if isRoot() {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(layer, "null"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != 3 {
			t.Errorf("null: %+v, %v", st, err)
		}
	}
	var wh unix.Stat_t
	if err := unix.Lstat(filepath.Join(layer, "etc/gone"), &wh); err != nil || wh.Mode&unix.S_IFMT != unix.S_IFCHR || wh.Rdev != 0 {
		t.Errorf("etc/gone is not a whiteout: %+v, %v", wh, err)
	}
	if _, err := os.Lstat(filepath.Join(layer, "etc/.wh.gone")); !os.IsNotExist(err) {
		t.Errorf("whiteout marker file kept: %v", err)
	}
	if !isOpaque(filepath.Join(layer, "opq")) {
		t.Error("opq is not marked opaque")
	}
	if _, err := os.Lstat(filepath.Join(layer, "opq", opaqueMarker)); !os.IsNotExist(err) {
		t.Errorf("opaque marker file kept: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(layer, "opq/mine")); err != nil || string(b) != "same layer" {
		t.Errorf("opq/mine: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(layer, "implied/parent/file")); err != nil || string(b) != "no dir entries" {
		t.Errorf("implied/parent/file: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(layer, ".wh..wh.plnk")); !os.IsNotExist(err) {
		t.Errorf("aufs metadata kept: %v", err)
	}
	size, err := diskUsage(layer)
	if err != nil || size <= 0 {
		t.Errorf("diskUsage = %d, %v", size, err)
	}
}

func TestExtractReplacesEntries(t *testing.T) {
	layer, err := extractTo(t, t.TempDir(),
		file{name: "d/", typ: tar.TypeDir, mode: 0o755},
		file{name: "d/x", body: "x"},
		file{name: "d", body: "now a file"},
		file{name: "f", body: "first"},
		file{name: "f", body: "second"},
		file{name: "s", typ: tar.TypeSymlink, link: "f"},
		file{name: "s/", typ: tar.TypeDir, mode: 0o700},
	)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(layer, "d")); err != nil || string(b) != "now a file" {
		t.Errorf("d: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(layer, "f")); err != nil || string(b) != "second" {
		t.Errorf("f: %q, %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(layer, "s")); err != nil || !fi.IsDir() {
		t.Errorf("s: %v, %v; want a directory", fi, err)
	}
}

func TestExtractRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	err := extract(strings.NewReader(strings.Repeat("not a tar ", 100)), dir, isRoot(), testlog.New(t))
	var ce *contentError
	if !errors.As(err, &ce) {
		t.Errorf("extract of garbage: %v, want a content error", err)
	}
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{
		"a/b":       "a/b",
		"./a//b/":   "a/b",
		"./":        ".",
		"a/../b":    "b",
		"a/b/../..": ".",
	} {
		if got, err := cleanName(in); err != nil || got != want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/a", "..", "../a", "a/../../b", "/"} {
		if got, err := cleanName(in); err == nil {
			t.Errorf("cleanName(%q) = %q, want an error", in, got)
		}
	}
}
