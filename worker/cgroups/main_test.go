package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/testkit/testlog"
	ocg "github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a job process (see runHelper).
const helperEnv = "DROVER_CGROUPS_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		runHelper(os.Args[1:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// keep holds the helper's allocations so they are not collected.
var keep [][]byte

// runHelper performs the steps of a job process, in order:
//
//	alloc=N    allocate and touch N MiB
//	spin=D     busy-loop until the process has used D of CPU
//	spinners=N busy-loop forever in N goroutines
//	stdin      wait for a line on stdin
//	escape     start a grandchild in a new session that sleeps, print its
//	           pid and exit
//	sleep      sleep forever
//	pid        print the process's pid
func runHelper(steps []string) {
	in := bufio.NewReader(os.Stdin)
	for _, step := range steps {
		name, arg, _ := strings.Cut(step, "=")
		switch name {
		case "alloc":
			n, _ := strconv.Atoi(arg)
			b := make([]byte, n<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		case "spin":
			// Until the process has used d of CPU, however busy the
			// machine is: the tests check the CPU a job used.
			d, _ := time.ParseDuration(arg)
			for cpuUsed() < d {
				for i := 0; i < 100_000; i++ {
					spinSink += i
				}
			}
		case "spinners":
			n, _ := strconv.Atoi(arg)
			for range n {
				go func() {
					var x atomic.Int64
					for {
						x.Add(1)
					}
				}()
			}
			time.Sleep(time.Hour)
		case "stdin":
			_, _ = in.ReadString('\n')
		case "escape":
			cmd := exec.Command(os.Args[0], "sleep")
			cmd.Env = append(os.Environ(), helperEnv+"=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Println(cmd.Process.Pid)
		case "sleep":
			time.Sleep(time.Hour)
		case "pid":
			fmt.Println(os.Getpid())
		default:
			fmt.Fprintf(os.Stderr, "unknown helper step %q\n", step)
			os.Exit(2)
		}
	}
}

var spinSink int

// cpuUsed is the CPU time this process has used.
func cpuUsed() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// helper returns a command running the test binary as a job process doing
// steps (see runHelper).
func helper(steps ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], steps...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

var parentSeq atomic.Int64

// testParent is a Parent of the test's own, so that tests and runs do not
// meet.
func testParent(t testing.TB) string {
	name := regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-")
	return fmt.Sprintf("drover-test-%d-%d-%s", os.Getpid(), parentSeq.Add(1), name)
}

// openTestV1 opens a Manager on this machine's cgroup v1 hierarchies, closed
// (and checked to leave nothing behind) when the test ends. It skips the
// test without root or without v1 cpu and memory hierarchies.
func openTestV1(t testing.TB, tweak ...func(*Config)) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	cfg := Config{
		Parent:      testParent(t),
		Version:     V1,
		Logger:      testlog.New(t),
		KillTimeout: 5 * time.Second,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	m, err := Open(cfg)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no cgroup v1 cpu and memory hierarchies: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, mnt := range m.b.(*v1).mounts {
			if d := filepath.Join(mnt, cfg.Parent); exists(d) {
				t.Errorf("%s left behind", d)
			}
		}
	})
	return m
}

// v1Of returns the v1 backend of m and the slot's v1 state.
func v1Of(h *Slot) (*v1, *v1Slot) {
	s := h.s.cg.(*v1Slot)
	return s.h, s
}

// procCgroups returns /proc/pid/cgroup as hierarchy -> path.
func procCgroups(t testing.TB, pid int) map[string]string {
	t.Helper()
	m, err := ocg.ParseCgroupFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// parseCgroupText parses the content of a /proc/<pid>/cgroup a job
// printed, with the parser the package uses.
func parseCgroupText(b []byte) (map[string]string, error) {
	f, err := os.CreateTemp("", "drover-cgroup-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return ocg.ParseCgroupFile(f.Name())
}

// alive tells whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	if err := unix.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// slotThreads counts the threads of this process whose memory cgroup is
// under parent: on v1 there must be none once Start returned.
func slotThreads(t testing.TB, parent string) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		cg, err := ocg.ParseCgroupFile("/proc/self/task/" + task.Name() + "/cgroup")
		if err != nil {
			continue // exited
		}
		if within(cg["memory"], "/"+parent) {
			n++
		}
	}
	return n
}

// fakeDirs is a fake cgroup2 file system in a plain directory: mkdir fills
// a new cgroup with interface files holding plausible contents, rmdir
// removes them and refuses, as the kernel does, a cgroup with children.
type fakeDirs struct{}

// fakeFiles are the interface files of a new fake cgroup2 cgroup.
var fakeFiles = map[string]string{
	"cgroup.controllers":     "cpu memory pids\n",
	"cgroup.subtree_control": "\n",
	"cgroup.procs":           "",
	"cgroup.events":          "populated 0\nfrozen 0\n",
	"cgroup.freeze":          "0\n",
	"cgroup.kill":            "",
	"cpu.max":                "max 100000\n",
	"cpu.weight":             "100\n",
	"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
	"memory.current":         "0\n",
	"memory.peak":            "0\n",
	"memory.max":             "max\n",
	"memory.swap.max":        "max\n",
	"memory.events":          "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
	"memory.reclaim":         "",
	"pids.max":               "max\n",
	"pids.current":           "0\n",
}

func (fakeDirs) mkdir(path string) error {
	if err := os.Mkdir(path, 0o755); err != nil {
		return err
	}
	for name, content := range fakeFiles {
		if err := os.WriteFile(filepath.Join(path, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (fakeDirs) rmdir(path string) error {
	ents, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("rmdir %s: %w", path, unix.ENOENT)
	}
	for _, e := range ents {
		if e.IsDir() {
			return fmt.Errorf("rmdir %s: %w", path, unix.EBUSY)
		}
	}
	for _, e := range ents {
		if err := os.Remove(filepath.Join(path, e.Name())); err != nil {
			return err
		}
	}
	return os.Remove(path)
}

// newFakeRoot returns the root of a fake cgroup2 hierarchy.
func newFakeRoot(t testing.TB) string {
	root := t.TempDir()
	for name, content := range map[string]string{
		"cgroup.controllers":     "cpuset cpu io memory hugetlb pids\n",
		"cgroup.subtree_control": "\n",
		"cgroup.procs":           "1\n",
		"cpu.stat":               "usage_usec 0\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// readTrim reads a file, trimmed.
func readTrim(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// writeT writes a file or fails the test.
func writeT(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits for cmd and returns the signal that killed it, or 0.
func waitExit(t testing.TB, cmd *exec.Cmd) syscall.Signal {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return ws.Signal()
	}
	if ws.ExitStatus() != 0 {
		t.Logf("exit status %d", ws.ExitStatus())
	}
	return 0
}
