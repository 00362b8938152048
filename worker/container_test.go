package worker

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testimage"
	"github.com/drover-sched/drover/testkit/testlog"
	"github.com/drover-sched/drover/worker/cgroups"
	"github.com/drover-sched/drover/worker/images"
)

// jobtoolRef returns jobtool on this machine and its image's reference,
// served for the rest of the test binary.
// testRegistries lets pulls reach the tests' registries, on the host's
// loopback, as an operator's -registry-allow 127.0.0.0/8 would.
var testRegistries = images.Egress{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func jobtoolRef(t testing.TB) (string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("containers need root (runc, cgroups, job users); the tests run as root in make test")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is not installed: make test installs it, or apt-get install runc")
	}
	f, err := testimage.Shared()
	if err != nil {
		t.Fatal(err)
	}
	return f.Binary, f.Ref
}

// containerRig is what a container executor needs: an image store, a
// cgroup manager and job users.
type containerRig struct {
	ex    *ContainerExecutor
	store *images.Store
	cg    *cgroups.Manager
	uids  *uidPool
	jobs  string
}

func newContainerRig(t testing.TB) *containerRig {
	t.Helper()
	log := testlog.New(t)
	data := t.TempDir()
	store, err := images.New(images.Config{Dir: filepath.Join(data, "images"), Logger: log, Egress: testRegistries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cg, err := cgroups.Open(cgroups.Config{Parent: "drover-test/" + filepath.Base(data), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Close() })
	uids, err := newUIDPool(filepath.Join(data, "uids"), 300_000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := newContainerExecutor("runc", filepath.Join(data, "runc"), filepath.Join(data, "bundles"), "/etc/resolv.conf", store, log)
	if err != nil {
		t.Fatal(err)
	}
	return &containerRig{ex: ex, store: store, cg: cg, uids: uids, jobs: sharedDir(t, 0o711)}
}

// run runs command in the image as a job user in a cgroup and returns its
// result, output and the cgroup's usage.
func (r *containerRig) run(t *testing.T, ref string, network string, limits cgroups.Limits, command ...string) (Result, string, cgroups.Usage) {
	t.Helper()
	img, err := r.store.Get(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Release()
	lease, err := r.uids.lease()
	if err != nil {
		t.Fatal(err)
	}
	defer lease.release()
	slot, err := r.cg.Acquire(limits)
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release()
	dir, err := os.MkdirTemp(r.jobs, "job-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, lease.uid, lease.uid); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	h, err := r.ex.Start(context.Background(), Spec{Ref: api.AttemptRef{BatchID: 1, JobID: 2, Attempt: 3}, Command: command, Env: []string{"DROVER_JOB_ID=2"},
		Dir: dir, UID: lease.uid, GID: lease.uid, Cgroup: slot, Image: img, Network: network}, out)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	u, err := slot.Usage()
	if err != nil {
		t.Fatal(err)
	}
	return res, out.String(), u
}

// TestContainerRuns: a container job runs as its user, in its directory
// at /io, with the image's PATH and the job's variables, on a network of
// its own (loopback only) unless it asks for the host's, and its exit
// status comes back; the bundle is gone afterwards.
func TestContainerRuns(t *testing.T) {
	_, ref := jobtoolRef(t)
	r := newContainerRig(t)
	res, out, _ := r.run(t, ref, api.NetworkNone, cgroups.Limits{CPUMilli: 500, Memory: 64 << 20}, "jobtool", "env")
	if res.ExitCode != 0 {
		t.Fatalf("env: %+v\n%s", res, out)
	}
	for _, want := range []string{"DROVER_JOB_ID=2", "HOME=/io", "PATH=/bin:/usr/bin"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("environment lacks %s:\n%s", want, out)
		}
	}
	res, out, _ = r.run(t, ref, api.NetworkNone, cgroups.Limits{CPUMilli: 500, Memory: 64 << 20}, "jobtool", "id")
	if res.ExitCode != 0 || !strings.HasPrefix(out, "uid=30") {
		t.Fatalf("id: %+v %q", res, out)
	}
	if res, out, _ := r.run(t, ref, api.NetworkNone, cgroups.Limits{Memory: 64 << 20}, "jobtool", "exit", "3"); res.ExitCode != 3 {
		t.Fatalf("exit 3: %+v %q", res, out)
	}
	// Without a command, the image's own (jobtool true), as docker run.
	if res, out, _ := r.run(t, ref, api.NetworkNone, cgroups.Limits{Memory: 64 << 20}); res.ExitCode != 0 {
		t.Fatalf("the image's own command: %+v %q", res, out)
	}
	// Loopback only: the host's interfaces are not there.
	res, out, _ = r.run(t, ref, api.NetworkNone, cgroups.Limits{Memory: 64 << 20}, "jobtool", "cat", "/proc/net/dev")
	if res.ExitCode != 0 || strings.Count(strings.TrimSpace(out), "\n") != 2 || !strings.Contains(out, "lo:") {
		t.Fatalf("network none sees %q", out)
	}
	// The host's interfaces: other tests (and other workers' jobs) add
	// and remove theirs meanwhile, so the container must see those the
	// host had both before and after it ran.
	before := netDevs(t, hostNetDev(t))
	res, out, _ = r.run(t, ref, api.NetworkHost, cgroups.Limits{Memory: 64 << 20}, "jobtool", "cat", "/proc/net/dev")
	after := netDevs(t, hostNetDev(t))
	seen := netDevs(t, out)
	if res.ExitCode != 0 {
		t.Fatalf("network host: %+v %q", res, out)
	}
	for dev := range before {
		if after[dev] && !seen[dev] {
			t.Errorf("network host lacks the host's %s: sees %q", dev, out)
		}
	}
	if res, out, _ := r.run(t, ref, api.NetworkNone, cgroups.Limits{Memory: 64 << 20}, "no-such-program"); res.ExitCode == 0 || !strings.Contains(out, "no-such-program") {
		t.Fatalf("a missing program: %+v %q", res, out)
	}
	if left, _ := os.ReadDir(r.ex.dir); len(left) != 0 {
		t.Fatalf("bundles left behind: %v", left)
	}
}

// TestContainerLimits: a container's memory beyond its limit is killed,
// and its CPU is held to its share, both measured on the job's cgroup.
func TestContainerLimits(t *testing.T) {
	_, ref := jobtoolRef(t)
	r := newContainerRig(t)
	res, out, u := r.run(t, ref, api.NetworkNone, cgroups.Limits{CPUMilli: 1000, Memory: 64 << 20}, "jobtool", "alloc", "256")
	if res.ExitCode != 137 || u.PeakMemory > 65<<20 {
		t.Fatalf("alloc 256 MiB under 64: %+v %q %+v", res, out, u)
	}
	begin := time.Now()
	res, out, u = r.run(t, ref, api.NetworkNone, cgroups.Limits{CPUMilli: 500, Memory: 64 << 20}, "jobtool", "spin", "3")
	wall := time.Since(begin)
	// The limit is drover's: at most half a core over the run. How much
	// of that half the spin gets is the machine's (a loaded machine gave
	// it a fifth of a core): that the cgroup measured it at all is
	// drover's.
	if res.ExitCode != 0 || u.CPU.Seconds() > 0.6*wall.Seconds() || u.CPU <= 0 {
		t.Fatalf("spin at half a core: %+v %q, %s of CPU over %s", res, out, u.CPU, wall)
	}
}

// netDevs returns the interfaces named in /proc/net/dev's text.
func netDevs(t *testing.T, text string) map[string]bool {
	t.Helper()
	devs := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok {
			devs[strings.TrimSpace(name)] = true
		}
	}
	if !devs["lo"] || len(devs) < 2 {
		t.Fatalf("/proc/net/dev without lo and another interface: %q", text)
	}
	return devs
}

func hostNetDev(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
