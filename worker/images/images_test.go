package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/drover-sched/drover/testkit/testimage"
	"github.com/drover-sched/drover/testkit/testlog"
)

var (
	jobtoolOnce sync.Once
	jobtoolDir  string
	jobtoolBin  string
	jobtoolErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if jobtoolDir != "" {
		os.RemoveAll(jobtoolDir)
	}
	os.Exit(code)
}

// jobtool builds jobtool once per test binary.
func jobtool(t *testing.T) string {
	t.Helper()
	jobtoolOnce.Do(func() {
		jobtoolDir, jobtoolErr = os.MkdirTemp("", "images-test-")
		if jobtoolErr == nil {
			jobtoolBin, jobtoolErr = testimage.Build(jobtoolDir)
		}
	})
	if jobtoolErr != nil {
		t.Fatal(jobtoolErr)
	}
	return jobtoolBin
}

func baseImage(t *testing.T) v1.Image {
	t.Helper()
	img, err := testimage.Image(jobtool(t))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func addFiles(t *testing.T, img v1.Image, files map[string]string) v1.Image {
	t.Helper()
	img, err := testimage.AddFiles(img, files)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func startRegistry(t *testing.T, cfg testimage.RegistryConfig) *testimage.Registry {
	t.Helper()
	reg, err := testimage.NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

func push(t *testing.T, reg *testimage.Registry, img v1.Image, repoTag string) string {
	t.Helper()
	ref, err := reg.Push(img, repoTag)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// clock is an injected Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// openStore opens a store in dir with the test's logger and user agent
// ua; mod adjusts the config.
func openStore(t *testing.T, dir, ua string, mod func(*Config)) *Store {
	t.Helper()
	cfg := Config{Dir: dir, UserAgent: ua, Logger: testlog.New(t), Egress: loopbackAllowed}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, s *Store, ref string) *Image {
	t.Helper()
	img, err := s.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// gets counts successful GETs of kind by user agent ua.
func gets(reg *testimage.Registry, ua string, kind testimage.Kind) int {
	return reg.Count(func(q testimage.Request) bool {
		return q.Method == http.MethodGet && q.Kind == kind && strings.HasPrefix(q.UserAgent, ua)
	})
}

func digest(t *testing.T, img v1.Image) string {
	t.Helper()
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func TestGetServesTagFromCache(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	want := baseImage(t)
	ref := push(t, reg, want, "app:v1")
	reg.Reset()
	s := openStore(t, t.TempDir(), "w1", nil)

	img := get(t, s, ref)
	if img.Digest != digest(t, want) {
		t.Errorf("Digest = %s, want %s", img.Digest, digest(t, want))
	}
	if strings.Join(img.Cmd, " ") != "/bin/jobtool true" || strings.Join(img.Env, " ") != "PATH=/bin:/usr/bin" || img.Ref != ref {
		t.Errorf("image = %+v", img)
	}
	dirs := img.LayerDirs()
	if len(dirs) != 1 {
		t.Fatalf("LayerDirs = %v", dirs)
	}
	if fi, err := os.Stat(filepath.Join(dirs[0], "bin/jobtool")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/jobtool in layer: %v, %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dirs[0], "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmp in layer: %v, %v", fi, err)
	}
	img.Release()
	if n := len(reg.Requests()); n == 0 {
		t.Fatal("first Get made no registry request")
	}

	reg.Reset()
	again := get(t, s, ref)
	defer again.Release()
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("second Get made %d registry requests: %+v", n, reg.Requests())
	}
	st := s.Stats()
	if st.Pulls != 1 || st.Hits != 1 || st.LayerPulls != 1 || st.Layers != 1 || st.Images != 1 || st.Bytes <= 0 || st.Held != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestSharedBaseLayerPulledOnce(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	base := baseImage(t)
	derived := addFiles(t, base, map[string]string{"etc/motd": "derived\n"})
	baseRef := push(t, reg, base, "base:v1")
	derivedRef := push(t, reg, derived, "derived:v1")
	reg.Reset()
	s := openStore(t, t.TempDir(), "w1", nil)

	get(t, s, baseRef).Release()
	if m, b := gets(reg, "w1", testimage.KindManifest), gets(reg, "w1", testimage.KindBlob); m != 1 || b != 2 {
		t.Errorf("base: %d manifest and %d blob GETs, want 1 and 2 (config, layer)", m, b)
	}
	reg.Reset()
	img := get(t, s, derivedRef)
	defer img.Release()
	ls, _ := derived.Layers()
	baseLayer, _ := ls[0].Digest()
	newLayer, _ := ls[1].Digest()
	if n := reg.Count(func(q testimage.Request) bool { return q.Kind == testimage.KindBlob && q.Ref == baseLayer.String() }); n != 0 {
		t.Errorf("derived pull fetched the shared base layer %d times", n)
	}
	if n := reg.Count(func(q testimage.Request) bool { return q.Method == "GET" && q.Ref == newLayer.String() }); n != 1 {
		t.Errorf("derived pull fetched its own layer %d times, want 1", n)
	}
	if st := s.Stats(); st.LayerPulls != 2 || st.Layers != 2 || st.Images != 2 {
		t.Errorf("Stats = %+v", st)
	}
	if d := img.LayerDirs(); len(d) != 2 {
		t.Errorf("LayerDirs = %v", d)
	} else if _, err := os.Stat(filepath.Join(d[1], "etc/motd")); err != nil {
		t.Error(err)
	}
}

func TestConcurrentGetsDownloadOnce(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	base := baseImage(t)
	derived := addFiles(t, base, map[string]string{"etc/motd": "derived\n"})
	baseRef := push(t, reg, base, "base:v1")
	derivedRef := push(t, reg, derived, "derived:v1")
	reg.Reset()
	s := openStore(t, t.TempDir(), "w1", nil)

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		ref := baseRef
		if i%2 == 1 {
			ref = derivedRef
		}
		wg.Go(func() {
			img, err := s.Get(context.Background(), ref)
			if err != nil {
				errs <- err
				return
			}
			img.Release()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	blobGets := map[string]int{}
	for _, q := range reg.Requests() {
		if q.Method == http.MethodGet && q.Kind == testimage.KindBlob {
			blobGets[q.Ref]++
		}
	}
	// Two configs, the shared layer and the derived image's own layer.
	if len(blobGets) != 4 {
		t.Errorf("blobs fetched: %v, want 4 distinct", blobGets)
	}
	for d, n := range blobGets {
		if n != 1 {
			t.Errorf("blob %s fetched %d times", d, n)
		}
	}
	if m := gets(reg, "w1", testimage.KindManifest); m != 2 {
		t.Errorf("%d manifest GETs, want 2", m)
	}
	if st := s.Stats(); st.Pulls != 2 || st.LayerPulls != 2 || st.Held != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// blobImage is an image of one layer holding a file of size bytes whose
// content depends on seed, so that images of the same size differ.
func blobImage(t *testing.T, seed string, size int) v1.Image {
	t.Helper()
	return addFiles(t, empty.Image, map[string]string{"blob": strings.Repeat(seed, size/len(seed))})
}

func TestEvictionLRUNeverHeld(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	refs := map[string]string{}
	for _, n := range []string{"a", "b", "c"} {
		refs[n] = push(t, reg, blobImage(t, n, 256<<10), "img-"+n+":v1")
	}
	// Measure one layer's size on disk.
	probe := openStore(t, t.TempDir(), "probe", nil)
	get(t, probe, refs["a"]).Release()
	layer := probe.Stats().Bytes

	clk := newClock()
	s := openStore(t, t.TempDir(), "w1", func(c *Config) {
		c.MaxBytes = layer * 5 / 2 // two layers fit, three do not
		c.Now = clk.Now
	})
	// b is the least recently used, but held.
	b := get(t, s, refs["b"])
	clk.Add(time.Minute)
	a := get(t, s, refs["a"])
	aDirs := a.LayerDirs()
	a.Release()
	clk.Add(time.Minute)
	c := get(t, s, refs["c"])

	if _, err := os.Stat(aDirs[0]); !os.IsNotExist(err) {
		t.Errorf("a's layer (least recently used, not held) is still there: %v", err)
	}
	for _, img := range []*Image{b, c} {
		if _, err := os.Stat(img.LayerDirs()[0]); err != nil {
			t.Errorf("held layer of %s evicted: %v", img.Ref, err)
		}
	}
	if st := s.Stats(); st.Evictions != 1 || st.Layers != 2 || st.Images != 2 || st.Bytes > c.store.cfg.MaxBytes {
		t.Errorf("Stats = %+v", st)
	}

	// Now b was released before c: getting a again evicts b.
	clk.Add(time.Minute)
	b.Release()
	clk.Add(time.Minute)
	c.Release()
	clk.Add(time.Minute)
	a = get(t, s, refs["a"])
	defer a.Release()
	if _, err := os.Stat(b.LayerDirs()[0]); !os.IsNotExist(err) {
		t.Errorf("b's layer is still there: %v", err)
	}
	if _, err := os.Stat(c.LayerDirs()[0]); err != nil {
		t.Errorf("c's layer (more recently used than b's) evicted: %v", err)
	}
	// b is forgotten, so getting it pulls again.
	reg.Reset()
	get(t, s, refs["b"]).Release()
	if gets(reg, "w1", testimage.KindBlob) != 2 {
		t.Errorf("evicted image not pulled again: %+v", reg.Requests())
	}
	if entries, _ := os.ReadDir(s.tmp); len(entries) != 0 {
		t.Errorf("evicted layers left in %s: %v", s.tmp, entries)
	}
}

func TestIndexSurvivesReopen(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	ref := push(t, reg, addFiles(t, baseImage(t), map[string]string{"x": "x"}), "app:v1")
	dir := t.TempDir()
	clk := newClock()
	mod := func(c *Config) { c.Now = clk.Now }
	s := openStore(t, dir, "w1", mod)
	get(t, s, ref).Release()
	before := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	reg.Reset()
	clk.Add(time.Minute) // within RefreshTags
	s = openStore(t, dir, "w2", mod)
	after := s.Stats()
	if after.Bytes != before.Bytes || after.Layers != 2 || after.Images != 1 {
		t.Errorf("after reopen Stats = %+v, before %+v", after, before)
	}
	img := get(t, s, ref)
	defer img.Release()
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("Get after reopen made %d registry requests", n)
	}
	s.mu.Lock()
	for id, l := range s.idx.Layers {
		if !l.LastUsed.Equal(clk.Now()) {
			t.Errorf("layer %s last used %v, want %v", id, l.LastUsed, clk.Now())
		}
	}
	s.mu.Unlock()
}

func TestOpenCleansDebris(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	ref := push(t, reg, baseImage(t), "app:v1")
	dir := t.TempDir()
	s := openStore(t, dir, "w1", nil)
	get(t, s, ref).Release()
	s.Close()

	half := filepath.Join(dir, "tmp", "layer-123")
	unknown := filepath.Join(dir, "layers", strings.Repeat("ab", 32))
	for _, d := range []string{half, unknown} {
		if err := os.MkdirAll(filepath.Join(d, "usr/bin"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s = openStore(t, dir, "w1", nil)
	for _, d := range []string{half, unknown} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s survived New: %v", d, err)
		}
	}
	if st := s.Stats(); st.Layers != 1 || st.Images != 1 {
		t.Errorf("Stats = %+v", st)
	}

	// A layer directory lost behind the index's back loses its image.
	s.Close()
	entries, _ := os.ReadDir(filepath.Join(dir, "layers"))
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, "layers", e.Name()))
	}
	s = openStore(t, dir, "w1", nil)
	if st := s.Stats(); st.Layers != 0 || st.Images != 0 || st.Bytes != 0 {
		t.Errorf("Stats = %+v", st)
	}
	reg.Reset()
	get(t, s, ref).Release()
	if gets(reg, "w1", testimage.KindBlob) != 2 {
		t.Errorf("lost layer not pulled again: %+v", reg.Requests())
	}
}

func TestOpenLocksDir(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir, "w1", nil)
	if _, err := New(Config{Dir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second New of %s: %v, want in use", dir, err)
	}
}

func TestTagRefresh(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	v1img := baseImage(t)
	v2img := addFiles(t, v1img, map[string]string{"etc/version": "2"})
	ref := push(t, reg, v1img, "app:latest")
	clk := newClock()
	s := openStore(t, t.TempDir(), "w1", func(c *Config) { c.Now = clk.Now; c.RefreshTags = time.Minute })
	get(t, s, ref).Release()

	push(t, reg, v2img, "app:latest")
	reg.Reset()
	clk.Add(30 * time.Second)
	if img := get(t, s, ref); img.Digest != digest(t, v1img) {
		t.Errorf("within RefreshTags: digest %s, want the cached %s", img.Digest, digest(t, v1img))
	} else {
		img.Release()
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("within RefreshTags: %d registry requests", n)
	}

	clk.Add(time.Minute)
	img := get(t, s, ref)
	img.Release()
	if img.Digest != digest(t, v2img) {
		t.Errorf("after RefreshTags: digest %s, want the new %s", img.Digest, digest(t, v2img))
	}
	if gets(reg, "w1", testimage.KindManifest) != 1 || gets(reg, "w1", testimage.KindBlob) != 2 {
		t.Errorf("after RefreshTags: requests %+v", reg.Requests())
	}

	// Unchanged tag: a HEAD, no GET.
	reg.Reset()
	clk.Add(2 * time.Minute)
	get(t, s, ref).Release()
	heads := reg.Count(func(q testimage.Request) bool { return q.Method == http.MethodHead && q.Kind == testimage.KindManifest })
	if heads != 1 || gets(reg, "w1", testimage.KindManifest) != 0 || gets(reg, "w1", testimage.KindBlob) != 0 {
		t.Errorf("refresh of an unchanged tag: requests %+v", reg.Requests())
	}
	if st := s.Stats(); st.Pulls != 3 || st.Hits != 1 {
		t.Errorf("Stats = %+v", st)
	}

	// A digest reference never expires.
	dref := reg.Ref("app@" + digest(t, v2img))
	get(t, s, dref).Release()
	reg.Reset()
	clk.Add(time.Hour)
	get(t, s, dref).Release()
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("cached digest reference: %d registry requests", n)
	}
}

func TestTagKeptWhileRegistryDown(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	want := baseImage(t)
	ref := push(t, reg, want, "app:v1")
	clk := newClock()
	s := openStore(t, t.TempDir(), "w1", func(c *Config) { c.Now = clk.Now; c.RefreshTags = time.Minute })
	get(t, s, ref).Release()

	reg.Close()
	clk.Add(2 * time.Minute)
	img := get(t, s, ref)
	img.Release()
	if img.Digest != digest(t, want) {
		t.Errorf("digest %s, want %s", img.Digest, digest(t, want))
	}
	if st := s.Stats(); st.Pulls != 2 {
		t.Errorf("Stats = %+v; want a second pull attempt", st)
	}
	// Another image is still an error.
	_, err := s.Get(context.Background(), reg.Ref("other:v1"))
	checkPullError(t, err, reg.Ref("other:v1"), ReasonTransient, false, "unreachable")
}

func TestMultiPlatformIndex(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	mine := baseImage(t)
	other := addFiles(t, mine, map[string]string{"etc/other": "other"})
	otherArch := "s390x"
	if runtime.GOARCH == otherArch {
		otherArch = "riscv64"
	}
	idx, err := testimage.Index(map[string]v1.Image{"linux/" + otherArch: other, "linux/" + runtime.GOARCH: mine})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reg.PushIndex(idx, "multi:v1")
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, t.TempDir(), "w1", nil)
	img := get(t, s, ref)
	defer img.Release()
	if img.Digest != digest(t, mine) {
		t.Errorf("resolved %s, want the linux/%s image %s", img.Digest, runtime.GOARCH, digest(t, mine))
	}
	// By the index's digest, from the cache.
	h, _ := idx.Digest()
	dref := reg.Ref("multi@" + h.String())
	get(t, s, dref).Release()
	reg.Reset()
	get(t, s, dref).Release()
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("cached index digest: %d registry requests", n)
	}
}

// tarballLayer is a layer of an uncompressed tar.
func tarballLayer(b []byte) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}

// checkPullError checks that err is a PullError for ref with reason, that
// errors.Is(err, ErrUnavailable) says unavailable, and that the message
// has each of words.
// loopbackAllowed lets pulls reach the tests' registries, on the host's
// loopback, as an operator's -registry-allow 127.0.0.0/8 would.
var loopbackAllowed = Egress{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func checkPullError(t *testing.T, err error, ref string, reason Reason, unavailable bool, words ...string) {
	t.Helper()
	var pe *PullError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *PullError", err, err)
	}
	if pe.Reason != reason || pe.Ref != ref {
		t.Errorf("reason %v ref %q, want %v %q: %v", pe.Reason, pe.Ref, reason, ref, err)
	}
	if errors.Is(err, ErrUnavailable) != unavailable {
		t.Errorf("errors.Is(err, ErrUnavailable) = %v, want %v: %v", !unavailable, unavailable, err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, fmt.Sprintf("pull image %q: ", ref)) {
		t.Errorf("message %q does not start with pull image %q", msg, ref)
	}
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q lacks %q", msg, w)
		}
	}
	t.Logf("%v error: %v", reason, err)
}

func TestPullErrors(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{})
	ref := push(t, reg, baseImage(t), "app:v1")
	s := openStore(t, t.TempDir(), "w1", nil)
	ctx := context.Background()
	// The base layer is cached, so that a failing pull has nothing else
	// in flight.
	get(t, s, ref).Release()

	t.Run("missing tag", func(t *testing.T) {
		bad := reg.Ref("app:nope")
		_, err := s.Get(ctx, bad)
		checkPullError(t, err, bad, ReasonNotFound, true, "not found", reg.Host)
	})
	t.Run("missing repository", func(t *testing.T) {
		bad := reg.Ref("nothere:v1")
		_, err := s.Get(ctx, bad)
		checkPullError(t, err, bad, ReasonNotFound, true, "not found")
	})
	t.Run("bad reference", func(t *testing.T) {
		_, err := s.Get(ctx, "Not A//Reference")
		checkPullError(t, err, "Not A//Reference", ReasonBadReference, true)
	})
	t.Run("no platform", func(t *testing.T) {
		arch := "s390x"
		if runtime.GOARCH == arch {
			arch = "riscv64"
		}
		idx, err := testimage.Index(map[string]v1.Image{"linux/" + arch: baseImage(t)})
		if err != nil {
			t.Fatal(err)
		}
		bad, err := reg.PushIndex(idx, "foreign:v1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Get(ctx, bad)
		checkPullError(t, err, bad, ReasonNoPlatform, true, "linux/"+runtime.GOARCH, "linux/"+arch)
	})
	t.Run("layer escaping its directory", func(t *testing.T) {
		tarball := layerTar(t, file{name: "ok", body: "ok"}, file{name: "../../evil", body: "x"})
		layer, err := tarballLayer(tarball)
		if err != nil {
			t.Fatal(err)
		}
		evil, err := mutate.AppendLayers(baseImage(t), layer)
		if err != nil {
			t.Fatal(err)
		}
		bad := push(t, reg, evil, "evil:v1")
		_, err = s.Get(ctx, bad)
		checkPullError(t, err, bad, ReasonInvalid, true, "leaves the layer")
		if entries, _ := os.ReadDir(s.tmp); len(entries) != 0 {
			t.Errorf("failed extraction left %v", entries)
		}
		if _, err := os.Stat(filepath.Join(s.cfg.Dir, "evil")); !os.IsNotExist(err) {
			t.Errorf("evil written: %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		down := startRegistry(t, testimage.RegistryConfig{})
		bad := down.Ref("app:v1")
		down.Close()
		_, err := s.Get(ctx, bad)
		checkPullError(t, err, bad, ReasonTransient, false, "unreachable")
	})
	t.Run("canceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Get(cctx, reg.Ref("other:v1"))
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
			t.Errorf("canceled Get: %v", err)
		}
	})
	// The good image still works after all that.
	reg.Reset()
	get(t, s, ref).Release()
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("cached image: %d registry requests after failed pulls", n)
	}
}

func TestPullAuth(t *testing.T) {
	reg := startRegistry(t, testimage.RegistryConfig{Username: "alice", Password: "s3cret"})
	ref := push(t, reg, baseImage(t), "private/app:v1")
	dir := t.TempDir()
	ctx := context.Background()

	t.Run("no credentials", func(t *testing.T) {
		// The default keychain, with nothing for it to find.
		empty := t.TempDir()
		for _, v := range []string{"HOME", "DOCKER_CONFIG", "REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR"} {
			t.Setenv(v, empty)
		}
		s := openStore(t, t.TempDir(), "w1", nil)
		_, err := s.Get(ctx, ref)
		checkPullError(t, err, ref, ReasonDenied, true, reg.Host, "credentials", "Docker config")
	})
	t.Run("wrong password", func(t *testing.T) {
		auth := filepath.Join(dir, "wrong.json")
		if err := testimage.WriteAuthFile(auth, reg.Host, "alice", "guess"); err != nil {
			t.Fatal(err)
		}
		s := openStore(t, t.TempDir(), "w1", func(c *Config) { c.AuthFile = auth })
		_, err := s.Get(ctx, ref)
		checkPullError(t, err, ref, ReasonDenied, true, reg.Host, "auth file "+auth)
	})
	t.Run("right password", func(t *testing.T) {
		auth := filepath.Join(dir, "right.json")
		if err := testimage.WriteAuthFile(auth, reg.Host, "alice", "s3cret"); err != nil {
			t.Fatal(err)
		}
		s := openStore(t, t.TempDir(), "w1", func(c *Config) { c.AuthFile = auth })
		get(t, s, ref).Release()
	})
	t.Run("username and password fields", func(t *testing.T) {
		auth := filepath.Join(dir, "fields.json")
		b := fmt.Sprintf(`{"auths": {"http://%s": {"username": "alice", "password": "s3cret"}}}`, reg.Host)
		if err := os.WriteFile(auth, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		s := openStore(t, t.TempDir(), "w1", func(c *Config) { c.AuthFile = auth })
		get(t, s, ref).Release()
	})
	t.Run("missing auth file", func(t *testing.T) {
		_, err := New(Config{Dir: t.TempDir(), AuthFile: filepath.Join(dir, "absent.json")})
		if err == nil || !strings.Contains(err.Error(), "AuthFile") {
			t.Errorf("New with a missing auth file: %v", err)
		}
	})
}

func TestInsecureRegistries(t *testing.T) {
	s := openStore(t, t.TempDir(), "w1", func(c *Config) { c.Insecure = []string{"registry.internal:5000"} })
	for ref, scheme := range map[string]string{
		"registry.internal:5000/app:v1": "http",
		"registry.internal/app:v1":      "https",
		"example.com/app:v1":            "https",
	} {
		r, err := s.parse(ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Context().Scheme(); got != scheme {
			t.Errorf("%s: scheme %s, want %s", ref, got, scheme)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := &Config{Dir: "relative", MaxBytes: -1, RefreshTags: -time.Second, LayerDownloads: -1, Insecure: []string{"bad host/x"}}
	err := cfg.Validate()
	for _, w := range []string{"Dir", "MaxBytes", "RefreshTags", "LayerDownloads", "Insecure"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate() = %v; want it to name %s", err, w)
		}
	}
	for _, ok := range []Config{{Dir: "/var/lib/images"}, func() Config { c := DefaultConfig(); c.Dir = "/x"; return c }()} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", ok, err)
		}
	}
}
