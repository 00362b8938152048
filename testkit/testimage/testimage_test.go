package testimage

import (
	"archive/tar"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func buildJobtool(t *testing.T) string {
	t.Helper()
	bin, err := Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestBuildRunsJobtool(t *testing.T) {
	bin := buildJobtool(t)
	for _, tc := range []struct {
		args []string
		out  string
		code int
	}{
		{[]string{"true"}, "", 0},
		{[]string{"false"}, "", 1},
		{[]string{"exit", "7"}, "", 7},
		{[]string{"echo", "a", "b"}, "a b\n", 0},
		{[]string{"probe", "/nonexistent"}, "denied /nonexistent: stat /nonexistent: no such file or directory\n", 0},
		{[]string{"probe", bin}, "readable " + bin + "\n", 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := exec.Command(bin, tc.args...).Output()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || string(out) != tc.out {
				t.Errorf("exit %d, output %q; want %d, %q", code, out, tc.code, tc.out)
			}
		})
	}
	file := filepath.Join(t.TempDir(), "sub", "f")
	if err := exec.Command(bin, "write", file, "hello").Run(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "cat", file).Output(); err != nil || string(out) != "hello" {
		t.Errorf("cat after write = %q, %v", out, err)
	}
}

// TestImageLayout checks the jobtool image's files and config.
func TestImageLayout(t *testing.T) {
	bin := buildJobtool(t)
	img, err := Image(bin)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cf.Config.Cmd, " "); got != "/bin/jobtool true" || len(cf.Config.Entrypoint) != 0 || cf.Config.Env[0] != "PATH=/bin:/usr/bin" {
		t.Errorf("config = %+v", cf.Config)
	}
	modes := map[string]int64{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[hdr.Name] = hdr.Mode
	}
	for n, m := range map[string]int64{"bin/jobtool": 0o755, "tmp": 0o1777, "etc/passwd": 0o644, "etc/group": 0o644} {
		if modes[n] != m {
			t.Errorf("%s: mode %o, want %o (all: %v)", n, modes[n], m, modes)
		}
	}

	// A second build of the same binary shares the layer.
	again, err := Image(bin)
	if err != nil {
		t.Fatal(err)
	}
	derived, err := AddFiles(again, map[string]string{"etc/extra": "x"})
	if err != nil {
		t.Fatal(err)
	}
	l1, _ := img.Layers()
	l2, _ := derived.Layers()
	d1, _ := l1[0].Digest()
	d2, _ := l2[0].Digest()
	if len(l2) != 2 || d1 != d2 {
		t.Errorf("derived image has %d layers, base digest %s vs %s", len(l2), d2, d1)
	}
}

func TestRegistryCountsAndAuth(t *testing.T) {
	bin := buildJobtool(t)
	img, err := Image(bin)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(RegistryConfig{Username: "alice", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ref, err := reg.Push(img, "team/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	reg.Reset()

	r, _ := name.ParseReference(ref)
	// Without credentials: 401.
	_, err = remote.Image(r, remote.WithUserAgent("anon"))
	var te *transport.Error
	if !errors.As(err, &te) || te.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous pull: %v, want 401", err)
	}
	if reg.Count(func(q Request) bool { return q.Status == 401 && strings.HasPrefix(q.UserAgent, "anon") }) == 0 {
		t.Errorf("no 401 recorded: %+v", reg.Requests())
	}

	// With an auth file.
	dir := t.TempDir()
	if err := WriteAuthFile(filepath.Join(dir, "config.json"), reg.Host, "alice", "secret"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	t.Setenv("HOME", dir)
	pulled, err := remote.Image(r, remote.WithUserAgent("worker-1"), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := pulled.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ls[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	want, _ := img.Digest()
	if got, _ := pulled.Digest(); got != want {
		t.Errorf("pulled digest %s, pushed %s", got, want)
	}
	w1 := func(kind Kind) func(Request) bool {
		return func(q Request) bool {
			return q.Method == http.MethodGet && q.Kind == kind && q.Status == 200 && strings.HasPrefix(q.UserAgent, "worker-1") && q.Repo == "team/app"
		}
	}
	if m, b := reg.Count(w1(KindManifest)), reg.Count(w1(KindBlob)); m != 1 || b != 1 {
		t.Errorf("worker-1 made %d manifest and %d blob GETs, want 1 and 1: %+v", m, b, reg.Requests())
	}
}

func TestIndex(t *testing.T) {
	bin := buildJobtool(t)
	img, err := Image(bin)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Index(map[string]v1.Image{"linux/amd64": img, "linux/arm64/v8": img})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(RegistryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ref, err := reg.PushIndex(idx, "multi:v1")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := name.ParseReference(ref)
	got, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	im, err := got.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 || im.Manifests[1].Platform.Variant != "v8" {
		t.Errorf("index manifests = %+v", im.Manifests)
	}
}

func TestMain(m *testing.M) {
	// The registry under test must not see the developer's credentials.
	os.Unsetenv("DOCKER_CONFIG")
	os.Exit(m.Run())
}
