// Package testimage makes container images for tests and benchmarks: it
// builds jobtool (a static program whose subcommands do what tests need a
// job to do), packs it into images, and serves them from an in-process
// registry that counts the requests it gets, so a test can assert how
// often each worker pulled.
//
// Nothing here takes a *testing.T: a benchmark command uses it too.
package testimage

import (
	"archive/tar"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// jobtoolSource is embedded so that Build works from a compiled binary run
// anywhere, not only from a test in this module's source tree.
//
//go:embed jobtool/main.go
var jobtoolSource []byte

// Build compiles jobtool, statically (CGO_ENABLED=0) for linux and this
// machine's architecture, into dir/jobtool and returns that path. It needs
// the go command on PATH; jobtool uses only the standard library, so no
// module download is involved.
func Build(dir string) (string, error) {
	src, err := os.MkdirTemp("", "jobtool-src-")
	if err != nil {
		return "", fmt.Errorf("build jobtool: %w", err)
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module jobtool\n\ngo 1.22\n"), 0o644); err != nil {
		return "", fmt.Errorf("build jobtool: %w", err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), jobtoolSource, 0o644); err != nil {
		return "", fmt.Errorf("build jobtool: %w", err)
	}
	out, err := filepath.Abs(filepath.Join(dir, "jobtool"))
	if err != nil {
		return "", fmt.Errorf("build jobtool: %w", err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOWORK=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build jobtool: %w: %s", err, b)
	}
	return out, nil
}

// epoch is every file's mtime in the images made here, so that a layer's
// digest depends on its content alone and images built separately from
// the same binary share their base layer.
var epoch = time.Unix(946684800, 0) // 2000-01-01

// Image returns an image whose single layer holds /bin/jobtool (from the
// binary at the given path), /tmp (1777) and a minimal /etc/passwd and
// /etc/group (root and nobody). Its config has Env PATH=/bin:/usr/bin, no
// Entrypoint and Cmd ["/bin/jobtool", "true"].
func Image(binary string) (v1.Image, error) {
	b, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("jobtool image: %w", err)
	}
	layer, err := newLayer([]entry{
		{name: "bin/", mode: 0o755},
		{name: "bin/jobtool", mode: 0o755, body: b},
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, body: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/bin/jobtool\nnobody:x:65534:65534:nobody:/nonexistent:/bin/jobtool\n")},
		{name: "tmp/", mode: 0o1777},
	})
	if err != nil {
		return nil, fmt.Errorf("jobtool image: %w", err)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		OS:           "linux",
		Architecture: runtime.GOARCH,
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			Env: []string{"PATH=/bin:/usr/bin"},
			Cmd: []string{"/bin/jobtool", "true"},
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("jobtool image: %w", err)
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("jobtool image: %w", err)
	}
	return img, nil
}

// AddFiles returns img with one more layer holding files (path -> content,
// mode 0644, parent directories 0755). A name ".wh.NAME" is a whiteout of
// NAME in the layers below, "DIR/.wh..wh..opq" makes DIR opaque. Images
// made with AddFiles on the same base share the base's layers.
func AddFiles(img v1.Image, files map[string]string) (v1.Image, error) {
	var entries []entry
	dirs := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		p = strings.TrimPrefix(path.Clean(p), "/")
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
		entries = append(entries, entry{name: p, mode: 0o644, body: []byte(files[p])})
	}
	for d := range dirs {
		entries = append(entries, entry{name: d + "/", mode: 0o755})
	}
	// Parents before children, as tar writers do.
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	layer, err := newLayer(entries)
	if err != nil {
		return nil, fmt.Errorf("add files: %w", err)
	}
	out, err := mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("add files: %w", err)
	}
	return out, nil
}

// WhiteoutImage returns the jobtool Image with two more layers: the first
// adds /data/keep.txt, /data/gone.txt, /data/dir/x.txt,
// /opaque/lower.txt and /opaque/sub/deep.txt; the second whites out
// /data/gone.txt and /data/dir, makes /opaque opaque and adds
// /opaque/upper.txt. Mounted, /data holds keep.txt only and /opaque
// upper.txt only.
func WhiteoutImage(binary string) (v1.Image, error) {
	img, err := Image(binary)
	if err != nil {
		return nil, err
	}
	img, err = AddFiles(img, map[string]string{
		"data/keep.txt":       "keep\n",
		"data/gone.txt":       "gone\n",
		"data/dir/x.txt":      "x\n",
		"opaque/lower.txt":    "lower\n",
		"opaque/sub/deep.txt": "deep\n",
	})
	if err != nil {
		return nil, err
	}
	return AddFiles(img, map[string]string{
		"data/.wh.gone.txt":   "",
		"data/.wh.dir":        "",
		"opaque/.wh..wh..opq": "",
		"opaque/upper.txt":    "upper\n",
	})
}

// Index returns a multi-platform index of images by platform ("linux/amd64",
// "linux/arm64/v8").
func Index(images map[string]v1.Image) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, ps := range slices.Sorted(maps.Keys(images)) {
		p, err := v1.ParsePlatform(ps)
		if err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: images[ps], Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(empty.Index, adds...), nil
}

// Push writes img to ref, with credentials from the Docker default
// keychain (for pushing to a real registry from a benchmark).
func Push(img v1.Image, ref string) error {
	return push(img, ref, authn.DefaultKeychain)
}

// PushIndex writes idx and its images to ref, like Push.
func PushIndex(idx v1.ImageIndex, ref string) error {
	return push(idx, ref, authn.DefaultKeychain)
}

func push(obj any, ref string, keys authn.Keychain, opts ...remote.Option) error {
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	if keys != nil {
		opts = append(opts, remote.WithAuthFromKeychain(keys))
	}
	switch o := obj.(type) {
	case v1.Image:
		err = remote.Write(r, o, opts...)
	case v1.ImageIndex:
		err = remote.WriteIndex(r, o, opts...)
	}
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// WriteAuthFile writes a Docker config.json at path giving username and
// password for registry host (as docker login would).
func WriteAuthFile(path, host, username, password string) error {
	auth := encodeAuth(username, password)
	b := fmt.Sprintf("{\"auths\": {%q: {\"auth\": %q}}}\n", host, auth)
	if err := os.WriteFile(path, []byte(b), 0o600); err != nil {
		return fmt.Errorf("write auth file: %w", err)
	}
	return nil
}

// entry is one file of a layer being built.
type entry struct {
	name string // ending in "/" for a directory
	mode int64
	body []byte
}

// newLayer packs entries into a gzip-compressed layer with fixed times and
// root ownership.
func newLayer(entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(e.name, "/") {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
}

// Fixture is jobtool built once for a process, where any user may run it
// (jobs run as users of their own), and its image in a registry that
// lives as long as the process.
type Fixture struct {
	// Binary is jobtool on this machine.
	Binary string
	// Registry serves the image; Ref names it by tag.
	Registry *Registry
	Ref      string
}

var shared struct {
	sync.Once
	f   *Fixture
	err error
}

// MkdirForJobs makes a new directory (as os.MkdirTemp does, named
// prefix and a random suffix) that an isolated job can read: an isolating
// worker gives each job a /tmp, /var/tmp and /dev/shm of its own, so what
// a test shares with its jobs cannot be there. Running as root it is
// under /var/lib/drover-test, otherwise (no isolation) the system's
// temporary directory.
func MkdirForJobs(prefix string) (string, error) {
	base := ""
	if os.Geteuid() == 0 {
		base = "/var/lib/drover-test"
		if err := os.MkdirAll(base, 0o755); err != nil {
			return "", err
		}
	}
	return os.MkdirTemp(base, prefix)
}

// Shared builds the process's Fixture on its first call and returns it
// on every call; the tests of several files share one build and one
// registry.
func Shared() (*Fixture, error) {
	shared.Do(func() {
		dir, err := MkdirForJobs("drover-jobtool-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			shared.err = err
			return
		}
		f := &Fixture{}
		if f.Binary, err = Build(dir); err != nil {
			shared.err = err
			return
		}
		img, err := Image(f.Binary)
		if err != nil {
			shared.err = err
			return
		}
		if f.Registry, err = NewRegistry(RegistryConfig{}); err != nil {
			shared.err = err
			return
		}
		f.Ref = f.Registry.Ref("tools/jobtool:1")
		if _, err := f.Registry.Push(img, "tools/jobtool:1"); err != nil {
			shared.err = err
			return
		}
		shared.f = f
	})
	return shared.f, shared.err
}
