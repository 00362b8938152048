package cgroups

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/testkit/testlog"
	"golang.org/x/sys/unix"
)

// openFakeV2 opens a Manager on a fake cgroup2 tree (processes cannot be
// placed there: these tests cover the file logic only).
func openFakeV2(t *testing.T, root string, tweak ...func(*Config)) *Manager {
	t.Helper()
	cfg := Config{
		Root:        root,
		Parent:      "drover/node1",
		Logger:      testlog.New(t),
		KillTimeout: 50 * time.Millisecond,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	m, err := open(cfg, fakeDirs{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != V2 {
		t.Fatalf("detected %v, want v2", m.Version())
	}
	return m
}

// Open enables the controllers from the root down to Parent, and Close
// removes what Open created.
func TestV2OpenClose(t *testing.T) {
	root := newFakeRoot(t)
	m := openFakeV2(t, root)
	for _, d := range []string{"", "drover", "drover/node1"} {
		if got := readTrim(t, filepath.Join(root, d, "cgroup.subtree_control")); got != "+cpu +memory +pids" {
			t.Errorf("%s/cgroup.subtree_control = %q, want +cpu +memory +pids", d, got)
		}
	}
	h, err := m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(root, "drover/node1/slot-1/p")) {
		t.Error("slot-1/p not created")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(root, "drover")) {
		t.Error("Close left drover/ behind")
	}
	if _, err := h.Usage(); !errors.Is(err, ErrReleased) {
		t.Errorf("Usage after Close: %v, want ErrReleased", err)
	}
}

// Already enabled controllers are not written again: a cgroup with
// processes of its own refuses any write.
func TestV2EnableOnlyMissing(t *testing.T) {
	root := newFakeRoot(t)
	writeT(t, filepath.Join(root, "cgroup.subtree_control"), "cpu memory\n")
	m := openFakeV2(t, root)
	defer m.Close()
	if got := readTrim(t, filepath.Join(root, "cgroup.subtree_control")); got != "+pids" {
		t.Errorf("root cgroup.subtree_control written %q, want +pids", got)
	}
}

// Limits are written in cgroup v2's formats, and only when they change.
func TestV2Limits(t *testing.T) {
	root := newFakeRoot(t)
	m := openFakeV2(t, root, func(c *Config) { c.MaxIdle = 1 })
	defer m.Close()
	slot := filepath.Join(root, "drover/node1/slot-1")
	check := func(want map[string]string) {
		t.Helper()
		for f, v := range want {
			if got := readTrim(t, filepath.Join(slot, f)); got != v {
				t.Errorf("%s = %q, want %q", f, got, v)
			}
		}
	}
	h, err := m.Acquire(Limits{CPUMilli: 500, Memory: 256 << 20, Pids: 100})
	if err != nil {
		t.Fatal(err)
	}
	check(map[string]string{
		"cpu.max":         "50000 100000",
		"cpu.weight":      "20", // shares 512
		"memory.max":      "268435456",
		"memory.swap.max": "0",
		"pids.max":        "100",
	})
	h.Release()

	// Same limits: nothing written.
	for _, f := range []string{"cpu.max", "cpu.weight", "memory.max", "memory.swap.max", "pids.max"} {
		writeT(t, filepath.Join(slot, f), "untouched")
	}
	h, err = m.Acquire(Limits{CPUMilli: 500, Memory: 256 << 20, Pids: 100})
	if err != nil {
		t.Fatal(err)
	}
	check(map[string]string{"cpu.max": "untouched", "memory.max": "untouched", "pids.max": "untouched"})
	h.Release()

	// Only the memory limit changes.
	h, err = m.Acquire(Limits{CPUMilli: 500, Memory: 1 << 30, Pids: 100})
	if err != nil {
		t.Fatal(err)
	}
	check(map[string]string{"cpu.max": "untouched", "memory.max": "1073741824", "memory.swap.max": "0", "pids.max": "untouched"})
	h.Release()

	h, err = m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() != "slot-1" {
		t.Fatalf("got %s, want the one idle slot-1", h.Name())
	}
	check(map[string]string{
		"cpu.max":         "max 100000",
		"cpu.weight":      "100",
		"memory.max":      "max",
		"memory.swap.max": "max",
		"pids.max":        "max",
	})
}

func TestCPUConversions(t *testing.T) {
	for _, c := range []struct {
		milli                 int64
		quota, shares, weight int64
	}{
		{0, -1, 1024, 100},
		{1, 1000, 2, 1},
		{5, 1000, 5, 1},
		{250, 25000, 256, 10},
		{1000, 100000, 1024, 39},
		{2000, 200000, 2048, 79},
		{256000, 25600000, 262144, 10000},
		{1000000, 100000000, 262144, 10000},
	} {
		l := Limits{CPUMilli: c.milli}
		if q, s, w := cpuQuota(l), cpuShares(l), cpuWeight(l); q != c.quota || s != c.shares || w != c.weight {
			t.Errorf("CPUMilli %d: quota %d shares %d weight %d, want %d %d %d", c.milli, q, s, w, c.quota, c.shares, c.weight)
		}
	}
}

// Usage and OOMKilled read cpu.stat, memory.current, memory.peak and
// memory.events, relative to Acquire; a reused slot's peak is reset
// through its open memory.peak.
func TestV2Counters(t *testing.T) {
	root := newFakeRoot(t)
	m := openFakeV2(t, root)
	defer m.Close()
	slot := filepath.Join(root, "drover/node1/slot-1")
	h, err := m.Acquire(Limits{Memory: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	writeT(t, filepath.Join(slot, "cpu.stat"), "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
	writeT(t, filepath.Join(slot, "memory.current"), "1000\n")
	writeT(t, filepath.Join(slot, "memory.peak"), "5000\n")
	u, err := h.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Usage{CPU: 2500 * time.Millisecond, Memory: 1000, PeakMemory: 5000}); u != want {
		t.Errorf("Usage() = %+v, want %+v", u, want)
	}
	if oom, err := h.OOMKilled(); err != nil || oom {
		t.Errorf("OOMKilled() = %v, %v; want false", oom, err)
	}
	writeT(t, filepath.Join(slot, "memory.events"), "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n")
	if oom, err := h.OOMKilled(); err != nil || !oom {
		t.Errorf("OOMKilled() = %v, %v after oom_kill 1; want true", oom, err)
	}
	if got, want := h.ContainerPath(), "/drover/node1/slot-1/c"; got != want {
		t.Errorf("ContainerPath() = %q, want %q", got, want)
	}
	// runc's child, left behind by a killed runc.
	if err := (fakeDirs{}).mkdir(filepath.Join(slot, "c")); err != nil {
		t.Fatal(err)
	}
	// Over DropCacheAbove, and (the fake's reclaim frees nothing) still
	// after reclaim: the slot goes, with runc's child.
	writeT(t, filepath.Join(slot, "memory.current"), "33554432\n")
	if err := h.Release(); !errors.Is(err, ErrCharged) {
		t.Errorf("Release of a slot still charged after reclaim: %v, want ErrCharged", err)
	}
	if exists(slot) {
		t.Error("a slot still charged after reclaim was kept")
	}

	h, err = m.Acquire(Limits{Memory: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	slot = filepath.Join(root, "drover/node1/slot-2")
	if err := (fakeDirs{}).mkdir(filepath.Join(slot, "c")); err != nil {
		t.Fatal(err)
	}
	h.ContainerPath()
	writeT(t, filepath.Join(slot, "memory.current"), "1000\n")
	h.Release()
	if exists(filepath.Join(slot, "c")) {
		t.Error("Release left runc's child behind")
	}

	h, err = m.Acquire(Limits{Memory: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() != "slot-2" {
		t.Fatalf("got %s, want the released slot-2", h.Name())
	}
	if got := readTrim(t, filepath.Join(slot, "memory.peak")); got != "reset" {
		t.Errorf("memory.peak of a reused slot = %q, want it reset", got)
	}
	writeT(t, filepath.Join(slot, "memory.peak"), "3000\n")
	if u, err := h.Usage(); err != nil || u.CPU != 0 || u.PeakMemory != 3000 {
		t.Errorf("Usage() of the second job = %+v, %v; want no CPU yet and peak 3000", u, err)
	}
	if oom, err := h.OOMKilled(); err != nil || oom {
		t.Errorf("second job: OOMKilled() = %v, %v; want false", oom, err)
	}
}

// Without a per-fd memory.peak reset (Linux < 6.12) a used slot is replaced.
func TestV2NoPeakReset(t *testing.T) {
	root := newFakeRoot(t)
	m := openFakeV2(t, root)
	defer m.Close()
	m.b.(*v2).peakReset = false
	h, err := m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	h, err = m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() != "slot-2" {
		t.Errorf("got %s, want a new slot-2", h.Name())
	}
	if exists(filepath.Join(root, "drover/node1/slot-1")) {
		t.Error("slot-1 not removed")
	}
}

// Kill reads cgroup.events once when the slot is empty; otherwise it
// writes cgroup.kill and waits, within KillTimeout, for the slot to empty.
func TestV2Kill(t *testing.T) {
	root := newFakeRoot(t)
	m := openFakeV2(t, root)
	defer m.Close()
	h, err := m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	slot := filepath.Join(root, "drover/node1/slot-1")
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(slot, "cgroup.kill")); got != "" {
		t.Errorf("cgroup.kill written (%q) for an empty slot", got)
	}
	// A container's processes (a killed slot that nothing was started in
	// since is known to be empty: only Start and a container fill it).
	h.ContainerPath()
	writeT(t, filepath.Join(slot, "cgroup.events"), "populated 1\nfrozen 0\n")
	err = h.Kill()
	if err == nil || !strings.Contains(err.Error(), "slot-1: processes still running after 50ms") {
		t.Errorf("Kill of a slot that stays populated: %v", err)
	}
	if got := readTrim(t, filepath.Join(slot, "cgroup.kill")); got != "1" {
		t.Errorf("cgroup.kill = %q, want 1", got)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		_ = os.WriteFile(filepath.Join(slot, "cgroup.events"), []byte("populated 0\nfrozen 0\n"), 0o644)
	}()
	if err := h.Kill(); err != nil {
		t.Errorf("Kill of a slot that empties: %v", err)
	}
	h.Release()
}

// Start asks clone3 to start the process in the slot's leaf, keeping the
// caller's attributes and leaving the caller's struct alone. (On the fake
// tree the kernel refuses: the leaf is no cgroup.)
func TestV2Start(t *testing.T) {
	root := newFakeRoot(t)
	m := openFakeV2(t, root)
	defer m.Close()
	h, err := m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = attr
	if err := h.Start(cmd); err == nil {
		_ = cmd.Wait()
		t.Fatal("Start into a directory that is no cgroup succeeded")
	}
	got := cmd.SysProcAttr
	if !got.UseCgroupFD || got.CgroupFD != h.s.cg.(*v2Slot).leafFD || !got.Setpgid || got.Pdeathsig != syscall.SIGKILL {
		t.Errorf("SysProcAttr = %+v", got)
	}
	if attr.UseCgroupFD {
		t.Error("caller's SysProcAttr modified")
	}
}

// Errors name the file and the value written.
func TestV2WriteError(t *testing.T) {
	root := newFakeRoot(t)
	m := openFakeV2(t, root, func(c *Config) { c.MaxIdle = 1 })
	defer m.Close()
	h, err := m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	mem := filepath.Join(root, "drover/node1/slot-1/memory.max")
	if err := os.Remove(mem); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mem, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = m.Acquire(Limits{Memory: 268435456})
	want := "acquire slot-1: write " + mem + " = 268435456: is a directory"
	if err == nil || err.Error() != want {
		t.Errorf("Acquire: %v\nwant %s", err, want)
	}
	if !errors.Is(err, unix.EISDIR) {
		t.Errorf("%v is not EISDIR", err)
	}
}

// Open kills and removes a previous run's slots.
func TestV2OpenCleansLeftovers(t *testing.T) {
	root := newFakeRoot(t)
	for _, d := range []string{"drover", "drover/node1", "drover/node1/slot-7", "drover/node1/slot-7/p"} {
		if err := (fakeDirs{}).mkdir(filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	writeT(t, filepath.Join(root, "drover/node1/slot-7/cgroup.freeze"), "1\n")
	m := openFakeV2(t, root)
	defer m.Close()
	if exists(filepath.Join(root, "drover/node1/slot-7")) {
		t.Error("leftover slot-7 not removed")
	}
}

// A pids limit without the pids controller is refused before any slot is
// touched.
func TestV2NoPids(t *testing.T) {
	root := newFakeRoot(t)
	writeT(t, filepath.Join(root, "cgroup.controllers"), "cpu memory\n")
	m := openFakeV2(t, root)
	defer m.Close()
	if _, err := m.Acquire(Limits{Pids: 10}); err == nil || !strings.Contains(err.Error(), "pids limit 10: no pids controller") {
		t.Errorf("Acquire with a pids limit: %v", err)
	}
	h, err := m.Acquire(Limits{Memory: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() != "slot-1" {
		t.Errorf("got %s, want slot-1 (no slot wasted)", h.Name())
	}
}

// The default Parent on v2 is "jobs" beside the worker's cgroup, or
// "drover" when the worker is in the root.
func TestV2DefaultParent(t *testing.T) {
	root := newFakeRoot(t)
	m, err := open(Config{Root: root, Logger: testlog.New(t), KillTimeout: 50 * time.Millisecond}, fakeDirs{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	own, _ := selfCgroups()
	want := "drover"
	if own[""] != "/" {
		want = strings.TrimPrefix(filepath.Join(filepath.Dir(own[""]), "jobs"), "/")
	}
	if got := m.b.(*v2).parent; got != want {
		t.Errorf("default parent %q, want %q (own cgroup %q)", got, want, own[""])
	}
}
