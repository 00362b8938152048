package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const mib = 1 << 20

// The child is born in slot-N/p of every hierarchy the slot uses, keeps the
// worker's cgroups elsewhere, and keeps the caller's SysProcAttr; the
// worker itself stays where it was, and no thread of it stays in the slot
// (the one that forked went back).
func TestV1StartInLeaf(t *testing.T) {
	m := openTestV1(t)
	before := procCgroups(t, os.Getpid())
	h, err := m.Acquire(Limits{CPUMilli: 1000, Memory: 128 * mib, Pids: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	cmd := helper("sleep")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	cg := procCgroups(t, pid)
	hv, _ := v1Of(h)
	want := "/" + hv.parent + "/" + h.Name() + "/p"
	for c := range hv.ctrl {
		if cg[c] != want {
			t.Errorf("%s cgroup of the child = %q, want %q", c, cg[c], want)
		}
	}
	for c, p := range cg {
		if _, ours := hv.ctrl[c]; !ours && p != before[c] {
			t.Errorf("%s cgroup of the child = %q, want the worker's %q", c, p, before[c])
		}
	}
	if pgid, _ := syscall.Getpgid(pid); pgid != pid {
		t.Errorf("child's process group = %d, want its own (Setpgid kept)", pgid)
	}
	if after := procCgroups(t, os.Getpid()); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("worker's cgroups changed: %v -> %v", before, after)
	}
	if n := slotThreads(t, hv.parent); n != 0 {
		t.Errorf("%d threads of the worker in the slots, want none", n)
	}
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if sig := waitExit(t, cmd); sig != syscall.SIGKILL {
		t.Errorf("child ended by signal %v, want SIGKILL", sig)
	}
}

// A job over its memory limit is OOM-killed and reported so; the next job
// in the same slot, with a higher limit, is not, and its peak is its own.
func TestV1MemoryLimitOOM(t *testing.T) {
	m := openTestV1(t)
	h, err := m.Acquire(Limits{Memory: 64 * mib})
	if err != nil {
		t.Fatal(err)
	}
	name := h.Name()
	cmd := helper("alloc=200")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if sig := waitExit(t, cmd); sig != syscall.SIGKILL {
		t.Fatalf("job over its limit ended by signal %v, want SIGKILL", sig)
	}
	oom, err := h.OOMKilled()
	if err != nil || !oom {
		t.Errorf("OOMKilled() = %v, %v; want true", oom, err)
	}
	u, err := h.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("OOM job: %+v", u)
	if u.PeakMemory < 60*mib || u.PeakMemory > 65*mib {
		t.Errorf("PeakMemory = %d MiB, want about the 64 MiB limit", u.PeakMemory/mib)
	}
	h.Release()

	h, err = m.Acquire(Limits{Memory: 256 * mib})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() != name {
		t.Fatalf("second job got %s, want the released %s", h.Name(), name)
	}
	cmd = helper("alloc=8")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if sig := waitExit(t, cmd); sig != 0 {
		t.Fatalf("small job ended by signal %v", sig)
	}
	if oom, err := h.OOMKilled(); err != nil || oom {
		t.Errorf("second job: OOMKilled() = %v, %v; want false", oom, err)
	}
	u, err = h.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("small job: %+v", u)
	if u.PeakMemory < 8*mib || u.PeakMemory > 40*mib {
		t.Errorf("second job: PeakMemory = %d MiB, want its own (8 MiB + a Go runtime)", u.PeakMemory/mib)
	}
}

// A busy job limited to half a core gets half a core, on two cores.
func TestV1CPUQuota(t *testing.T) {
	m := openTestV1(t)
	h, err := m.Acquire(Limits{CPUMilli: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	hv, _ := v1Of(h)
	dir := filepath.Join(hv.ctrl["cpu"], hv.parent, h.Name())
	for file, want := range map[string]string{"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("%s = %q, want %s", file, got, want)
		}
	}
	// Four spinning threads want more than the half core they may have,
	// however many other programs share the machine: the job is throttled
	// once it has run a while, and never uses more than its quota. How
	// much CPU it gets below that is the machine's business, not drover's.
	cmd := helper("spinners=4")
	start := time.Now()
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	var stat []byte
	throttled := regexp.MustCompile(`nr_throttled [1-9]`)
	for deadline := time.Now().Add(60 * time.Second); ; {
		time.Sleep(200 * time.Millisecond)
		if stat, err = os.ReadFile(filepath.Join(dir, "cpu.stat")); err != nil {
			t.Fatal(err)
		}
		if throttled.Match(stat) && time.Since(start) >= 2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job limited to 0.5 core, spinning in 4 threads for %v: cpu.stat %q: never throttled", time.Since(start), stat)
		}
	}
	u, err := h.Usage()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	cores := u.CPU.Seconds() / elapsed.Seconds()
	t.Logf("CPU %v in %v: %.2f cores; cpu.stat %q", u.CPU, elapsed, cores, stat)
	if u.CPU <= 0 {
		t.Errorf("the job used no CPU (%v)", u.CPU)
	}
	// A period's quota is 50 ms; the first and last periods of the window
	// may fall partly outside it.
	if limit := 0.5 + 0.1/elapsed.Seconds(); cores > limit+0.05 {
		t.Errorf("job limited to 0.5 core used %.2f cores", cores)
	}
	// Kill lifted the quota (so the throttled spinners died at once);
	// the next job in the slot, with the same limits, has it again.
	if got, _ := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us")); strings.TrimSpace(string(got)) != "-1" {
		t.Errorf("after the kill, cpu.cfs_quota_us = %q; want the quota lifted", got)
	}
	name := h.Name()
	h.Release()
	h2, err := m.Acquire(Limits{CPUMilli: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Release()
	if h2.Name() != name {
		t.Fatalf("the next job got %s, not the released %s", h2.Name(), name)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us")); strings.TrimSpace(string(got)) != "50000" {
		t.Errorf("the next job with the same limits: cpu.cfs_quota_us = %q, want 50000", got)
	}
}

// Usage counts the current job only, after a slot is reused with other
// limits.
func TestV1UsagePerJob(t *testing.T) {
	m := openTestV1(t)
	h, err := m.Acquire(Limits{Memory: 512 * mib})
	if err != nil {
		t.Fatal(err)
	}
	name := h.Name()
	cmd := helper("alloc=100", "spin=400ms")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	u1, err := h.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first job: %+v", u1)
	if u1.CPU < 350*time.Millisecond || u1.PeakMemory < 100*mib {
		t.Errorf("first job: %+v, want >= 400ms CPU and >= 100 MiB peak", u1)
	}
	h.Release()

	h, err = m.Acquire(Limits{CPUMilli: 2000, Memory: 128 * mib})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() != name {
		t.Fatalf("second job got %s, want the released %s", h.Name(), name)
	}
	u, err := h.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU != 0 {
		t.Errorf("fresh job: CPU = %v, want 0", u.CPU)
	}
	cmd = exec.Command("/bin/true")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	u2, err := h.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("second job: %+v", u2)
	if u2.CPU > 50*time.Millisecond || u2.PeakMemory > 16*mib {
		t.Errorf("second job: %+v, want its own few ms and MiB", u2)
	}
}

// Kill kills a grandchild that left the job's session, and the slot is
// empty for the next job.
func TestV1KillEscapedSession(t *testing.T) {
	m := openTestV1(t)
	h, err := m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	name := h.Name()
	cmd := helper("escape")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if sig := waitExit(t, cmd); sig != 0 {
		t.Fatalf("child ended by signal %v", sig)
	}
	gc, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("grandchild pid: %v (output %q)", err, out.String())
	}
	if !alive(gc) {
		t.Fatalf("grandchild %d not running", gc)
	}
	t.Cleanup(func() { _ = syscall.Kill(gc, syscall.SIGKILL) })
	if sid, _ := unix.Getsid(gc); sid != gc {
		t.Errorf("grandchild's session = %d, want its own", sid)
	}
	hv, _ := v1Of(h)
	if got, want := procCgroups(t, gc)["memory"], "/"+hv.parent+"/"+name+"/p"; got != want {
		t.Errorf("grandchild's memory cgroup = %s, want %s", got, want)
	}
	start := time.Now()
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kill took %v", time.Since(start))
	if alive(gc) {
		t.Errorf("grandchild %d alive after Kill", gc)
	}
	h.Release()

	h, err = m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() != name {
		t.Fatalf("got %s, want the released %s", h.Name(), name)
	}
	roots := []string{filepath.Join(hv.ctrl["memory"], hv.parent, name)}
	if pids, err := listProcs(roots, os.Getpid()); err != nil || len(pids) != 0 {
		t.Errorf("processes in the reused slot: %v, %v", pids, err)
	}
	// The killed grandchild was reparented to init, and pids.current
	// counts it until init reaps it.
	_, s := v1Of(h)
	var n int64
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if n, err = s.pidsCurrent.readInt(); err != nil || n == 0 {
			break
		}
	}
	t.Logf("pids.current %d %v after Kill", n, time.Since(start))
	if err != nil || n != 0 {
		t.Errorf("pids.current of the reused slot = %d, %v; want 0", n, err)
	}
}

// mkChild creates child cgroup c of h's slot in the hierarchies the slot
// uses and moves pid into it, as runc does for a container, and returns a
// func removing it as runc does when the container ends.
func mkChild(t *testing.T, h *Slot, pid int) (rm func()) {
	t.Helper()
	hv, _ := v1Of(h)
	var dirs []string
	for _, mnt := range hv.used {
		d := filepath.Join(mnt, h.ContainerPath())
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	return func() {
		t.Helper()
		for _, d := range dirs {
			if err := removeTree(kernelDirs{}, d, 5*time.Second); err != nil {
				t.Error(err)
			}
		}
	}
}

// A container's child cgroup (runc's slot-N/c) counts in the slot's usage,
// its OOM kill is reported even after runc removed the child, and Kill
// reaches into it.
func TestV1ContainerChild(t *testing.T) {
	m := openTestV1(t)
	// Room for the race detector's memory in the helper.
	h, err := m.Acquire(Limits{Memory: 128 * mib})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	hv, _ := v1Of(h)
	if got, want := h.ContainerPath(), "/"+hv.parent+"/"+h.Name()+"/c"; got != want {
		t.Errorf("ContainerPath() = %q, want %q", got, want)
	}

	// Usage includes the child, also once removed.
	cmd := helper("stdin", "spin=300ms", "alloc=40")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	rm := mkChild(t, h, cmd.Process.Pid)
	fmt.Fprintln(stdin, "go")
	if sig := waitExit(t, cmd); sig != 0 {
		t.Fatalf("container process ended by signal %v", sig)
	}
	rm()
	u, err := h.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("usage with a removed child: %+v", u)
	if u.CPU < 250*time.Millisecond || u.PeakMemory < 40*mib {
		t.Errorf("Usage() = %+v, want the child's 300ms CPU and 40 MiB", u)
	}
	if oom, err := h.OOMKilled(); err != nil || oom {
		t.Errorf("OOMKilled() = %v, %v before any OOM", oom, err)
	}

	// An OOM kill inside the child.
	cmd = helper("stdin", "alloc=300")
	stdin, err = cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	rm = mkChild(t, h, cmd.Process.Pid)
	fmt.Fprintln(stdin, "go")
	if sig := waitExit(t, cmd); sig != syscall.SIGKILL {
		t.Fatalf("container process over the limit ended by signal %v, want SIGKILL", sig)
	}
	// What the kernel counts where (v1: the victim's cgroup only).
	child := filepath.Join(hv.ctrl["memory"], h.ContainerPath())
	for _, d := range []string{filepath.Dir(child), child} {
		b, _ := os.ReadFile(filepath.Join(d, "memory.oom_control"))
		t.Logf("%s/memory.oom_control: %q", d, b)
	}
	rm()
	if oom, err := h.OOMKilled(); err != nil || !oom {
		t.Errorf("OOMKilled() = %v, %v after an OOM kill in the removed child; want true", oom, err)
	}

	// Kill reaches into the child.
	cmd = helper("sleep")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	mkChild(t, h, cmd.Process.Pid)
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if sig := waitExit(t, cmd); sig != syscall.SIGKILL {
		t.Errorf("process in the child ended by signal %v, want SIGKILL", sig)
	}
	// Release removes the child runc would have left.
	h.Release()
	if exists(child) {
		t.Errorf("%s left after Release", child)
	}
}

// Open kills and removes what a previous run left under Parent.
func TestV1OpenCleansLeftovers(t *testing.T) {
	m := openTestV1(t)
	parent := m.b.(*v1).parent
	h, err := m.Acquire(Limits{Memory: 64 * mib})
	if err != nil {
		t.Fatal(err)
	}
	cmd := helper("sleep")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	// A crash: the Manager goes away without Close.
	hv := m.b.(*v1)
	m.mu.Lock()
	m.all = map[*slot]struct{}{}
	m.idle = nil
	m.mu.Unlock()

	m2, err := Open(Config{Parent: parent, Version: V1, Logger: m.log, KillTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if sig := waitExit(t, cmd); sig != syscall.SIGKILL {
		t.Errorf("leftover process ended by signal %v, want SIGKILL", sig)
	}
	for _, mnt := range hv.mounts {
		if d := filepath.Join(mnt, parent, h.Name()); exists(d) {
			t.Errorf("leftover %s not removed", d)
		}
	}
}

// Many jobs at once: each is born in its own slot (its /proc/self/cgroup
// says so), and no thread of the worker stays in a slot.
func TestV1Concurrent(t *testing.T) {
	// Few idle slots: slots are created and destroyed under load too.
	m := openTestV1(t, func(c *Config) { c.MaxIdle = 3 })
	parent := m.b.(*v1).parent
	before := procCgroups(t, os.Getpid())
	limits := []Limits{{}, {CPUMilli: 500, Memory: 64 * mib}, {CPUMilli: 1500, Memory: 128 * mib, Pids: 20}}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 8 {
		wg.Go(func() {
			for i := range 30 {
				if err := concurrentJob(m, parent, limits[(g+i)%len(limits)]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m.mu.Lock()
	slots, idle := len(m.all), len(m.idle)
	m.mu.Unlock()
	t.Logf("%d slots, %d idle", slots, idle)
	if slots > 3 || idle != slots {
		t.Errorf("%d slots, %d idle; want at most MaxIdle 3, all idle", slots, idle)
	}
	if after := procCgroups(t, os.Getpid()); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("worker's main thread moved: %v -> %v", before, after)
	}
	if n := slotThreads(t, parent); n != 0 {
		t.Errorf("%d worker threads in slots, want none", n)
	}
}

func concurrentJob(m *Manager, parent string, l Limits) error {
	h, err := m.Acquire(l)
	if err != nil {
		return err
	}
	defer h.Release()
	cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := h.Start(cmd); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return err
	}
	cg, err := parseCgroupText(out.Bytes())
	if err != nil {
		return err
	}
	if want := "/" + parent + "/" + h.Name() + "/p"; cg["memory"] != want || cg["cpu"] != want {
		return fmt.Errorf("job of %s ran in %s (memory) and %s (cpu)", h.Name(), cg["memory"], cg["cpu"])
	}
	if _, err := h.Usage(); err != nil {
		return err
	}
	if oom, err := h.OOMKilled(); err != nil || oom {
		return fmt.Errorf("OOMKilled() = %v, %v", oom, err)
	}
	return nil
}

// Limits are written, only when they change, in the formats v1 wants.
func TestV1Limits(t *testing.T) {
	m := openTestV1(t, func(c *Config) { c.MaxIdle = 1 })
	read := func(h *Slot, c, file string) string {
		hv, _ := v1Of(h)
		return readTrim(t, hv.dir(c, h.Name(), file))
	}
	h, err := m.Acquire(Limits{CPUMilli: 250, Memory: 100 * mib, Pids: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ctrl, file, want string }{
		{"cpu", "cpu.cfs_quota_us", "25000"},
		{"cpu", "cpu.cfs_period_us", "100000"},
		{"cpu", "cpu.shares", "256"},
		{"memory", "memory.limit_in_bytes", strconv.Itoa(100 * mib)},
		{"memory", "memory.memsw.limit_in_bytes", strconv.Itoa(100 * mib)},
		{"pids", "pids.max", "5"},
	} {
		if c.file == "memory.memsw.limit_in_bytes" && !m.b.(*v1).memsw {
			continue
		}
		if got := read(h, c.ctrl, c.file); got != c.want {
			t.Errorf("%s = %s, want %s", c.file, got, c.want)
		}
	}
	h.Release()
	h, err = m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	unlimited := "9223372036854771712" // -1, page-aligned
	for _, c := range []struct{ ctrl, file, want string }{
		{"cpu", "cpu.cfs_quota_us", "-1"},
		{"cpu", "cpu.shares", "1024"},
		{"memory", "memory.limit_in_bytes", unlimited},
		{"pids", "pids.max", "max"},
	} {
		if got := read(h, c.ctrl, c.file); got != c.want {
			t.Errorf("%s = %s, want %s", c.file, got, c.want)
		}
	}
	if _, err := m.Acquire(Limits{Memory: -1}); err == nil || !strings.Contains(err.Error(), "Memory -1") {
		t.Errorf("Acquire with a negative limit: %v", err)
	}
}

// Kill's fast path; a released handle is refused; Close ends everything.
func TestV1Lifecycle(t *testing.T) {
	m := openTestV1(t)
	h, err := m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Kill(); err != nil {
		t.Errorf("Kill of an empty slot: %v", err)
	}
	h.Release()
	h.Release() // no-op
	if _, err := h.Usage(); !errors.Is(err, ErrReleased) {
		t.Errorf("Usage after Release: %v, want ErrReleased", err)
	}
	if err := h.Start(exec.Command("/bin/true")); !errors.Is(err, ErrReleased) {
		t.Errorf("Start after Release: %v, want ErrReleased", err)
	}
	h2, err := m.Acquire(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.OOMKilled(); !errors.Is(err, ErrReleased) {
		t.Errorf("OOMKilled of a stale handle while the slot runs another job: %v, want ErrReleased", err)
	}
	cmd := helper("sleep")
	if err := h2.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if sig := waitExit(t, cmd); sig != syscall.SIGKILL {
		t.Errorf("job running at Close ended by signal %v, want SIGKILL", sig)
	}
	if _, err := m.Acquire(Limits{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
	if err := h2.Kill(); !errors.Is(err, ErrReleased) {
		t.Errorf("Kill after Close: %v, want ErrReleased", err)
	}
}

// Release reclaims the page cache a job left charged to its slot, so the
// next job's memory and peak start low.
func TestV1ReleaseDropsCache(t *testing.T) {
	m := openTestV1(t)
	h, err := m.Acquire(Limits{Memory: 512 * mib})
	if err != nil {
		t.Fatal(err)
	}
	name := h.Name()
	cmd := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(t.TempDir(), "f"), "bs=1M", "count=64", "status=none")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	u, err := h.Usage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after writing 64 MiB: %+v", u)
	if u.Memory < 60*mib {
		t.Fatalf("Memory = %d MiB, want the 64 MiB of page cache", u.Memory/mib)
	}
	start := time.Now()
	h.Release()
	t.Logf("Release took %v", time.Since(start))
	h, err = m.Acquire(Limits{Memory: 512 * mib})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() != name {
		t.Fatalf("got %s, want the released %s", h.Name(), name)
	}
	if u, err := h.Usage(); err != nil || u.Memory > 4*mib || u.PeakMemory > 4*mib {
		t.Errorf("next job starts at %+v, %v; want the cache gone", u, err)
	}
}

// Kill empties a slot whose job keeps forking (without the freezer).
func TestV1KillForkLoop(t *testing.T) {
	m := openTestV1(t)
	h, err := m.Acquire(Limits{Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	cmd := exec.Command("/bin/sh", "-c", "while :; do sleep 100 & done")
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	_, s := v1Of(h)
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if n, _ := s.pidsCurrent.readInt(); n >= 30 {
			break
		}
	}
	start := time.Now()
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kill took %v", time.Since(start))
	waitExit(t, cmd)
	hv, _ := v1Of(h)
	roots := []string{filepath.Join(hv.ctrl["memory"], hv.parent, h.Name())}
	if pids, err := listProcs(roots, os.Getpid()); err != nil || len(pids) != 0 {
		t.Errorf("processes left after Kill: %v, %v", pids, err)
	}
}

// A job's pids limit holds it to exactly that many tasks: the thread that
// forked it counted only while it forked.
func TestV1PidsLimitIsExact(t *testing.T) {
	m := openTestV1(t)
	hv := m.b.(*v1)
	if hv.ctrl["pids"] == "" {
		t.Skip("no cgroup v1 pids hierarchy")
	}
	h, err := m.Acquire(Limits{Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	// sh and as many sleeps as it can fork of the 20 it asks for; sh
	// gives up at the first refused fork (and stays, unreaped, counted).
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt 20 ]; do sleep 30 & i=$((i+1)); done; echo forked all")
	cmd.Stdout, cmd.Stderr = out, out
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	var said []byte
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end) && !bytes.Contains(said, []byte("fork")); time.Sleep(5 * time.Millisecond) {
		said, _ = os.ReadFile(out.Name())
	}
	_, s := v1Of(h)
	if n, err := s.pidsCurrent.readInt(); err != nil || n != 8 {
		t.Errorf("pids.current = %d, %v with a limit of 8 and a job forking 20; want 8", n, err)
	}
	if !bytes.Contains(said, []byte("Cannot fork")) {
		t.Errorf("the job said %q; want sh's \"Cannot fork\"", said)
	}
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
}

// A thread that joins a slot stays there from job to job (Renew) and
// forks each job into it without moving; the slot's pids limit counts it
// and gives the job its own; Kill spares it; Leave takes it back.
func TestV1JoinAndRenew(t *testing.T) {
	m := openTestV1(t)
	hv := m.b.(*v1)
	h, err := m.Acquire(Limits{Memory: 64 * mib, Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	type req struct {
		h    *Slot
		cmd  *exec.Cmd
		done chan error
	}
	reqs := make(chan req)
	left := make(chan error)
	joined := make(chan error)
	go func() {
		// The jail's thread, in short.
		if err := h.Join(); err != nil {
			joined <- err
			return
		}
		joined <- nil
		for r := range reqs {
			r.done <- r.h.Start(r.cmd)
		}
		left <- h.Leave()
	}()
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
	_, s := v1Of(h)
	pidsMax := filepath.Join(hv.ctrl["pids"], hv.parent, h.Name(), "pids.max")
	if n := slotThreads(t, hv.parent); n != 1 {
		t.Errorf("%d worker threads in the slot after Join, want 1", n)
	}
	if got := readTrim(t, pidsMax); got != "9" {
		t.Errorf("pids.max with a thread joined = %s, want 9 (8 and the thread)", got)
	}
	run := func(h *Slot, cmd *exec.Cmd) {
		t.Helper()
		done := make(chan error)
		reqs <- req{h, cmd, done}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		cg := procCgroups(t, cmd.Process.Pid)
		if want := "/" + hv.parent + "/" + h.Name() + "/p"; cg["memory"] != want || cg["pids"] != want {
			t.Errorf("the job runs in %s and %s, want %s", cg["memory"], cg["pids"], want)
		}
	}
	first := helper("sleep")
	run(h, first)
	if err := h.Kill(); err != nil {
		t.Fatal(err)
	}
	if sig := waitExit(t, first); sig != syscall.SIGKILL {
		t.Errorf("the first job ended by %v, want SIGKILL", sig)
	}
	if n := slotThreads(t, hv.parent); n != 1 {
		t.Errorf("Kill took the joined thread too: %d left", n)
	}
	// The next job, with other limits, on the same slot.
	h2, err := h.Renew(Limits{Memory: 128 * mib, Pids: 20})
	if err != nil {
		t.Fatal(err)
	}
	if h2.Name() != h.Name() {
		t.Fatalf("Renew moved the job from %s to %s", h.Name(), h2.Name())
	}
	if _, err := h.Usage(); !errors.Is(err, ErrReleased) {
		t.Errorf("the first job's handle after Renew: %v, want ErrReleased", err)
	}
	if got := readTrim(t, pidsMax); got != "21" {
		t.Errorf("pids.max after Renew = %s, want 21", got)
	}
	second := helper("pid", "sleep")
	out, _ := second.StdoutPipe()
	run(h2, second)
	buf := make([]byte, 32)
	if n, _ := out.Read(buf); n == 0 {
		t.Error("the second job said nothing")
	}
	if u, err := h2.Usage(); err != nil || u.PeakMemory > 64*mib {
		t.Errorf("the second job's usage %+v, %v", u, err)
	}
	if err := h2.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, second)
	close(reqs)
	if err := <-left; err != nil {
		t.Fatal(err)
	}
	if n := slotThreads(t, hv.parent); n != 0 {
		t.Errorf("%d worker threads in the slot after Leave", n)
	}
	if got := readTrim(t, pidsMax); got != "20" {
		t.Errorf("pids.max after Leave = %s, want 20", got)
	}
	if n, err := s.pidsCurrent.readInt(); err != nil || n != 0 {
		t.Errorf("pids.current after Leave = %d, %v", n, err)
	}
	if err := h2.Release(); err != nil {
		t.Fatal(err)
	}
}

// A slot that keeps memory the last job left where reclaim cannot reach
// it (here files on a tmpfs, as a job's /dev/shm would) is not given to
// the next job: Renew fails with ErrCharged and Release destroys it, so
// the next job starts in a slot with nothing charged. Reused as it was,
// the next job of a 256 MiB slot would find 64 MiB of it taken.
func TestV1ChargedSlotIsNotReused(t *testing.T) {
	m := openTestV1(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=128m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	fill := func(h *Slot, name string) {
		t.Helper()
		cmd := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, name), "bs=1M", "count=64", "status=none")
		if err := h.Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	h, err := m.Acquire(Limits{Memory: 256 * mib})
	if err != nil {
		t.Fatal(err)
	}
	fill(h, "a")
	if _, err := h.Renew(Limits{Memory: 256 * mib}); !errors.Is(err, ErrCharged) {
		t.Errorf("Renew of a slot holding 64 MiB of tmpfs: %v, want ErrCharged", err)
	}
	name := h.Name()
	if err := h.Release(); !errors.Is(err, ErrCharged) {
		t.Errorf("Release: %v, want ErrCharged", err)
	}
	h, err = m.Acquire(Limits{Memory: 256 * mib})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.Name() == name {
		t.Errorf("the charged %s was given to the next job", name)
	}
	if u, err := h.Usage(); err != nil || u.Memory > 4*mib {
		t.Errorf("the next job starts at %+v, %v; want nothing charged", u, err)
	}
}

// Lowering a slot's memory limit below what a finished job left charged
// makes the kernel reclaim in the write, and the write returns EINTR when
// a signal reaches the thread meanwhile: the Go runtime sends SIGURG to
// preempt goroutines, so a busy worker sees it (a job once failed with
// "write .../memory.memsw.limit_in_bytes = 16777216: interrupted system
// call"). The write is retried.
func TestV1LowerLimitUnderSignals(t *testing.T) {
	m := openTestV1(t)
	h, err := m.Acquire(Limits{Memory: 512 * mib})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	var sent atomic.Int64
	go func() { // what the runtime's preemption does, more often
		defer close(done)
		pid := os.Getpid()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ents, _ := os.ReadDir("/proc/self/task")
			for _, e := range ents {
				if tid, err := strconv.Atoi(e.Name()); err == nil && tid != unix.Gettid() {
					if unix.Tgkill(pid, tid, unix.SIGURG) == nil {
						sent.Add(1)
					}
				}
			}
		}
	}()
	defer func() { close(stop); <-done; t.Logf("%d signals sent", sent.Load()) }()
	dir := t.TempDir()
	for i := range 8 {
		cmd := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, strconv.Itoa(i)), "bs=1M", "count=128", "status=none")
		if err := h.Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		small, err := h.Renew(Limits{Memory: 16 * mib})
		if err != nil {
			t.Fatalf("round %d: lower the limit under signals: %v", i, err)
		}
		if h, err = small.Renew(Limits{Memory: 512 * mib}); err != nil {
			t.Fatal(err)
		}
	}
	h.Release()
}
