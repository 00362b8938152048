package worker

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/drover-sched/drover/api"
)

// leaveBehind is a job that leaves something in every place a job of the
// same jail or user could look next: files in /tmp, /var/tmp, /dev/shm
// (mode 0644, readable by anyone), System V shared memory, a message
// queue and a semaphore set (mode 0666), a POSIX message queue; it prints
// "left" when it has. Its marks hold mark.
func leaveBehind(tool, mark string) string {
	return "set -e; for d in /tmp /var/tmp /dev/shm; do echo " + mark + " > $d/" + mark + "; chmod 644 $d/" + mark + "; done; " +
		"ipcmk -M 4096 -p 0666 >/dev/null; ipcmk -Q -p 0666 >/dev/null; ipcmk -S 1 -p 0666 >/dev/null; " +
		tool + " mq-make " + mark + "; echo left"
}

// lookFor is a job that looks for what leaveBehind left and prints what it
// finds.
func lookFor(tool, mark string) string {
	return "for d in /tmp /var/tmp /dev/shm; do cat $d/" + mark + " 2>/dev/null && echo found $d; done; " +
		"echo sysv $(ipcs -m -q -s | grep -c 0x); echo mq $(" + tool + " mq-find " + mark + "); echo looked"
}

// A process job's /tmp, /var/tmp and /dev/shm and its IPC objects are its
// own: the next job of the same jail (as another user) finds none of
// them, nor does the host, and a job cannot write anywhere else on the
// host. On a worker without private places the second job read every
// file and listed every IPC object.
func TestJailPrivatePlaces(t *testing.T) {
	r := newJailRig(t, nil)
	mark := "left-" + randomHex(t)
	code, out := r.run(t, "", "sh", "-c", leaveBehind(r.tool, mark))
	if code != 0 || !strings.Contains(out, "left") {
		t.Fatalf("the first job: exit %d: %s", code, out)
	}
	for _, d := range privatePlaces {
		if _, err := os.Stat(filepath.Join(d, mark)); err == nil {
			t.Errorf("the job's file is in the host's %s", d)
		}
	}
	if n := hostSysV(t); n != 0 {
		t.Logf("the host has %d System V objects (none of them the job's: it has an IPC namespace of its own)", n)
	}
	code, out = r.run(t, "", "sh", "-c", lookFor(r.tool, mark))
	t.Logf("the second job:\n%s", out)
	if code != 0 || !strings.Contains(out, "looked") {
		t.Fatalf("the second job: exit %d: %s", code, out)
	}
	if strings.Contains(out, "found") || !strings.Contains(out, "sysv 0") || !strings.Contains(out, "mq absent") {
		t.Errorf("the next job of the jail found what the last one left:\n%s", out)
	}
	r.sb.jails.mu.Lock()
	live := r.sb.jails.live
	r.sb.jails.mu.Unlock()
	if live != 1 {
		t.Errorf("%d jails for two jobs in a row: the jail was not emptied and reused", live)
	}

	// The private places are sticky, like the host's.
	code, out = r.run(t, "", "stat", "-c", "%a", "/tmp", "/var/tmp", "/dev/shm")
	if code != 0 || out != "1777\n1777\n1777\n" {
		t.Errorf("the private places' modes: exit %d: %q", code, out)
	}

	// The rest of the host is read-only to a job; its own directory
	// is not.
	code, out = r.run(t, "", "sh", "-c", "touch /run/lock/"+mark+" || echo refused-lock; touch /etc/"+mark+" || echo refused-etc; echo x > mine && echo wrote-mine")
	if !strings.Contains(out, "refused-lock") || !strings.Contains(out, "refused-etc") || !strings.Contains(out, "wrote-mine") {
		t.Errorf("exit %d: a job wrote the host, or not its own directory:\n%s", code, out)
	}
	for _, f := range []string{"/run/lock/" + mark, "/etc/" + mark} {
		if _, err := os.Stat(f); err == nil {
			os.Remove(f)
			t.Errorf("a job made %s on the host", f)
		}
	}
}

// hostSysV counts the host's System V IPC objects.
func hostSysV(t *testing.T) int {
	t.Helper()
	n := 0
	for _, f := range []string{"/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "\n") - 1
	}
	return n
}

// A private place is a tmpfs as large as the job's memory limit, resized
// for each job; what a job writes there is charged to its cgroup and
// freed when it ends: a job that left 200 MiB in /dev/shm under a 256 MiB
// limit does not make the next job of its jail run out of memory. On a
// worker whose jobs share the host's /dev/shm, the second job was killed.
func TestJailPrivatePlacesAreChargedAndFreed(t *testing.T) {
	r := newJailRig(t, nil)
	run := func(mem int64, cmd string) (int, string) {
		j := r.start(t, api.Assignment{Command: []string{"sh", "-c", cmd}, CPU: 1, Memory: mem})
		res := waitResult(t, j.h)
		out := j.out.String()
		if oom, _ := j.bx.slot.OOMKilled(); oom {
			out += "\n(out of memory)"
		}
		j.stop()
		return res.ExitCode, out
	}
	code, out := run(256<<20, "df -B1 --output=size /tmp /var/tmp /dev/shm | tail -n +2; head -c 200M /dev/zero > /dev/shm/fill && echo filled")
	if code != 0 || !strings.Contains(out, "filled") {
		t.Fatalf("the first job: exit %d: %s", code, out)
	}
	for _, f := range strings.Fields(out)[:3] {
		if size, _ := strconv.ParseInt(f, 10, 64); size != 256<<20 {
			t.Errorf("a private place of a 256 MiB job is %s bytes:\n%s", f, out)
		}
	}
	code, out = run(256<<20, r.tool+" alloc 100 && echo allocated")
	if code != 0 || !strings.Contains(out, "allocated") {
		t.Errorf("the next job of the jail could not allocate 100 MiB of its 256: exit %d: %s", code, out)
	}
	// The next job's size is its own.
	code, out = run(512<<20, "df -B1 --output=size /tmp | tail -1")
	if size, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64); code != 0 || size != 512<<20 {
		t.Errorf("a 512 MiB job's /tmp: exit %d: %s", code, out)
	}
	// A job's tmpfs pages are its own to pay for: more than its limit
	// in /tmp is refused or killed, not taken from the host.
	code, out = run(64<<20, "head -c 100M /dev/zero > /tmp/big; echo exit $?")
	if code == 0 && strings.Contains(out, "exit 0") {
		t.Errorf("a 64 MiB job wrote 100 MiB to its /tmp:\n%s", out)
	}
}

// The jobs dir may be under /tmp (as in tests, or an operator's choice):
// jobs still reach their own directories there, through their private
// /tmp.
func TestJailJobsDirUnderTmp(t *testing.T) {
	dir, err := os.MkdirTemp("", "drover-jobs-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o711)
	t.Cleanup(func() { os.RemoveAll(dir) })
	r := newJailRig(t, func(c *Config) { c.JobsDir = dir })
	code, out := r.run(t, "", "sh", "-c", "pwd; echo hi > f && cat f; ls /tmp | wc -l")
	if code != 0 || !strings.Contains(out, "hi") || !strings.HasPrefix(out, dir) {
		t.Errorf("a job in a jobs dir under /tmp: exit %d: %s", code, out)
	}
	// The next job finds its own /tmp as the last one found it (the
	// worker's directories to its jobs dir, nothing else), after a job
	// that filled it.
	code, out = r.run(t, "", "sh", "-c", "touch /tmp/x /tmp/y; ls -A /tmp")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	code, out = r.run(t, "", "sh", "-c", "ls -A /tmp; pwd")
	if code != 0 || strings.Contains(out, "\nx\n") || strings.Contains(out, "y\n") || !strings.Contains(out, dir) {
		t.Errorf("after a job left /tmp/x and /tmp/y, the next one's /tmp: exit %d: %s", code, out)
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	return testNodeID(t)[:12]
}

// sweepHost removes what users of the job range own in the host's shared
// places (and the world-writable directories below them) and their System
// V objects, and nothing else: not another user's files, nor anything in a
// directory that is not world-writable (a worker's jobs dir under /tmp).
func TestSweepHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (files and IPC objects of other users)")
	}
	const inRange, other = 300_007, 300_100
	owned := func(uid uint32) bool { return uid == inRange }
	mark := "sweep-" + randomHex(t)
	mk := func(path string, uid int, dir bool) string {
		t.Helper()
		var err error
		if dir {
			err = os.Mkdir(path, 0o777)
		} else {
			err = os.WriteFile(path, []byte("x"), 0o600)
		}
		if err == nil {
			err = os.Chown(path, uid, uid)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(path) })
		return path
	}
	left := mk("/tmp/"+mark+"-left", inRange, false)
	leftDir := mk("/dev/shm/"+mark+"-dir", inRange, true)
	mk(leftDir+"/inside", inRange, false)
	kept := mk("/tmp/"+mark+"-kept", other, false)
	open := mk("/tmp/"+mark+"-open", 0, true) // world-writable: looked into
	os.Chmod(open, 0o777|os.ModeSticky)
	deep := mk(open+"/left", inRange, false)
	closed := mk("/tmp/"+mark+"-closed", 0, true) // a jobs dir: not looked into
	os.Chmod(closed, 0o711)
	running := mk(closed+"/d1", inRange, true)

	// A shared memory segment of the range's user, and one of another.
	seg := func(uid int) int {
		t.Helper()
		id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
		if err != nil {
			t.Fatal(err)
		}
		var d unix.SysvShmDesc
		if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &d); err != nil {
			t.Fatal(err)
		}
		d.Perm.Uid = uint32(uid)
		if _, err := unix.SysvShmCtl(id, unix.IPC_SET, &d); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
		return id
	}
	leftSeg, keptSeg := seg(inRange), seg(other)

	n, err := sweepHost(owned)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{left, leftDir, deep} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	for _, p := range []string{kept, open, closed, running} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	var d unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(leftSeg, unix.IPC_STAT, &d); err == nil {
		t.Error("the range user's shared memory segment is still there")
	}
	if _, err := unix.SysvShmCtl(keptSeg, unix.IPC_STAT, &d); err != nil {
		t.Errorf("another user's segment was removed: %v", err)
	}
	if n < 3 {
		t.Errorf("sweepHost says it removed %d", n)
	}
}
