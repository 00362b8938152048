package cgroups

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/testkit/testlog"
	"golang.org/x/sys/unix"
)

// The tests in this file run the cgroup v2 backend against the real
// kernel, not the fake tree of v2_test.go. This machine is cgroup v1
// (hybrid): its cgroup2 hierarchy (mounted at /sys/fs/cgroup/unified, and
// mountable anywhere else, the same hierarchy) offers no cpu, memory or
// pids controller, since those are bound to their v1 hierarchies, and a
// controller moves to v2 only once its v1 hierarchy is empty and
// unmounted, which a shared machine cannot do. What v2 gives every cgroup
// without a controller runs here for real: CLONE_INTO_CGROUP, cgroup.kill,
// cgroup.freeze and cgroup.events, cgroup.procs, cpu.stat, rmdir of a
// cgroup that has just been emptied, and Open's clean-up of what a
// crashed run left. Limits, memory.current/peak, memory.events (OOM) and
// pids stay covered only by the fake tree.

// kernelV2 opens the v2 backend on this machine's cgroup2 hierarchy (a
// mount of its own when none is mounted) under a Parent of the test's
// own, closed and checked to be gone when the test ends.
func kernelV2(t *testing.T) (*v2, Config) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	ms, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	root := ""
	for _, m := range ms {
		if m.fstype == "cgroup2" {
			root = m.point
			break
		}
	}
	if root == "" {
		dir := t.TempDir()
		if err := unix.Mount("none", dir, "cgroup2", 0, ""); err != nil {
			t.Skipf("no cgroup2 hierarchy: mount: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
		root = dir
	}
	cfg := Config{Root: root, Parent: testParent(t), Logger: testlog.New(t), KillTimeout: 5 * time.Second, DropCacheAbove: -1}
	h, err := openV2(cfg, cfg.Logger, kernelDirs{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if d := filepath.Join(root, cfg.Parent); exists(d) {
			t.Errorf("%s left behind", d)
		}
	})
	return h, cfg
}

// kernelSlot makes the parts of a v2 slot that need no controller: the
// slot and its leaf, the leaf's descriptor for CLONE_INTO_CGROUP, and
// cgroup.events and cpu.stat held open.
func kernelSlot(t *testing.T, h *v2, name string) *v2Slot {
	t.Helper()
	s := &v2Slot{h: h, name: name, dir: filepath.Join(h.root, h.parent, name), leafFD: -1}
	for _, d := range []string{s.dir, filepath.Join(s.dir, "p")} {
		if err := h.dirs.mkdir(d); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(filepath.Join(s.dir, "p"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.leafFD = fd
	if s.events, err = openFile(filepath.Join(s.dir, "cgroup.events"), unix.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	if s.cpuStat, err = openFile(filepath.Join(s.dir, "cpu.stat"), unix.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := s.kill(); err != nil {
			t.Errorf("kill %s: %v", name, err)
		}
		if err := s.destroy(); err != nil {
			t.Errorf("destroy %s: %v", name, err)
		}
	})
	return s
}

// v2CgroupOf returns the cgroup v2 path of pid ("" when it is gone).
func v2CgroupOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// A job started in a slot is born in its leaf (clone3's
// CLONE_INTO_CGROUP), so are the processes it starts, even in a session
// of their own and orphaned; the worker is not moved; kill ends them all
// and the slot is empty.
func TestV2KernelStartAndKill(t *testing.T) {
	h, cfg := kernelV2(t)
	s := kernelSlot(t, h, "slot-1")
	own := v2CgroupOf(os.Getpid())

	cmd := helper("escape")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.start(cmd); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("read the escaped pid: %v", err)
	}
	if got := v2CgroupOf(cmd.Process.Pid); got != "" && got != "/"+cfg.Parent+"/slot-1/p" {
		t.Errorf("job in %s, want /%s/slot-1/p", got, cfg.Parent)
	}
	if sig := waitExit(t, cmd); sig != 0 {
		t.Fatalf("job killed by %v", sig)
	}
	escaped, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := v2CgroupOf(escaped), "/"+cfg.Parent+"/slot-1/p"; got != want {
		t.Errorf("escaped grandchild in %q, want %q", got, want)
	}
	if got := v2CgroupOf(os.Getpid()); got != own {
		t.Errorf("the worker moved from %s to %s", own, got)
	}
	if n, err := s.events.readKey("populated"); err != nil || n != 1 {
		t.Errorf("populated = %d, %v with the grandchild alive; want 1", n, err)
	}

	if _, err := s.kill(); err != nil {
		t.Fatal(err)
	}
	if alive(escaped) {
		t.Errorf("escaped grandchild %d survived the kill", escaped)
	}
	if n, err := s.events.readKey("populated"); err != nil || n != 0 {
		t.Errorf("populated = %d, %v after the kill; want 0", n, err)
	}
	if pids, err := listProcs([]string{s.dir}, os.Getpid()); err != nil || len(pids) != 0 {
		t.Errorf("processes left: %v, %v", pids, err)
	}
}

// The slot's cpu.stat counts the CPU of the job's processes, which is
// what Usage reports.
func TestV2KernelCPU(t *testing.T) {
	h, _ := kernelV2(t)
	s := kernelSlot(t, h, "slot-1")
	before, err := s.cpuStat.readKey("usage_usec")
	if err != nil {
		t.Fatal(err)
	}
	cmd := helper("spin=150ms")
	if err := s.start(cmd); err != nil {
		t.Fatal(err)
	}
	if sig := waitExit(t, cmd); sig != 0 {
		t.Fatalf("job killed by %v", sig)
	}
	after, err := s.cpuStat.readKey("usage_usec")
	if err != nil {
		t.Fatal(err)
	}
	if used := time.Duration(after-before) * time.Microsecond; used < 150*time.Millisecond {
		t.Errorf("slot used %v of CPU, the job at least 150ms", used)
	}
}

// Without cgroup.kill (before Linux 5.14) a slot is killed by freezing,
// listing, killing and thawing it: a job that forks without pause is
// killed whole, none of its children escaping between the list and the
// kill.
func TestV2KernelFreezeKill(t *testing.T) {
	h, _ := kernelV2(t)
	s := kernelSlot(t, h, "slot-1")
	cmd := exec.Command("/bin/sh", "-c", "while :; do /bin/sleep 30 & done")
	if err := s.start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	time.Sleep(50 * time.Millisecond)
	if err := killTree([]string{s.dir}, v2Freezer{dir: s.dir}, os.Getpid(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n, err := s.events.readKey("populated"); err != nil || n != 0 {
		t.Errorf("populated = %d, %v after the kill; want 0", n, err)
	}
	if b, err := readFile(filepath.Join(s.dir, "cgroup.freeze")); err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("cgroup.freeze = %q, %v after the kill; want 0 (thawed)", b, err)
	}
}

// A worker that crashed left a slot frozen in the middle of a kill, with
// a process in it: the next Open thaws it, kills the process and removes
// the slot.
func TestV2KernelCleanupFrozenLeftover(t *testing.T) {
	h, cfg := kernelV2(t)
	dir := filepath.Join(h.root, h.parent, "slot-7")
	for _, d := range []string{dir, filepath.Join(dir, "p")} {
		if err := unix.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(filepath.Join(dir, "p"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	left := &v2Slot{h: h, leafFD: fd}
	cmd := helper("sleep")
	err = left.start(cmd)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	if err := writeFile(filepath.Join(dir, "cgroup.freeze"), "1"); err != nil {
		t.Fatal(err)
	}

	h2, err := openV2(cfg, cfg.Logger, kernelDirs{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the leftover job %d survived Open", cmd.Process.Pid)
	}
	if exists(dir) {
		t.Errorf("%s not removed", dir)
	}
	if err := h2.close(); err != nil {
		t.Error(err)
	}
}
