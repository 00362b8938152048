package e2e

// The hostile-tenant suite, items 2 and 3 of issue 41 ("what a worker does
// on a job's behalf stays inside that job's walls"): what a job leaves on
// its host (files in the shared temporary places, IPC objects, memory in
// /dev/shm) reaches neither a later job that runs as the same user ID, nor
// the next job of its cgroup slot. A real dev agent, its real worker, real
// jobs of two billing projects.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// tenantClients makes a user who is a member of a new billing project of
// the same name for each name, and returns their clients.
func tenantClients(t *testing.T, a *agent, names ...string) map[string]*api.Client {
	t.Helper()
	ctx := context.Background()
	out := map[string]*api.Client{}
	for _, n := range names {
		u, err := a.client().CreateUser(ctx, &api.CreateUserRequest{Name: n})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.client().CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: n, Members: []string{n}}); err != nil {
			t.Fatal(err)
		}
		out[n] = api.NewClient(a.addr, u.Token)
	}
	return out
}

// runAll submits one job per command to project (each on one core, so a
// one-core worker runs them one after another) and returns their logs.
func runAll(t *testing.T, c *api.Client, project string, cmds ...string) []string {
	t.Helper()
	ctx := context.Background()
	var jobs []api.JobSpec
	for i, cmd := range cmds {
		jobs = append(jobs, api.JobSpec{JobID: int64(i + 1), Name: fmt.Sprintf("j%d", i), Command: []string{"sh", "-c", cmd}, CPU: 1, Memory: 256 << 20})
	}
	b, err := c.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: project, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for i := range cmds {
		j := finished(t, c, b.ID, int64(i+1))
		log, err := c.JobLog(ctx, b.ID, int64(i+1), 0)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.JobSuccess {
			t.Fatalf("%s's job %d: %s %q\n%s", project, i+1, j.State, j.Message, log)
		}
		logs = append(logs, string(log))
	}
	return logs
}

var uidLine = regexp.MustCompile(`uid (\d+)`)

// TestHostileLeftoversAcrossProjects: project A's jobs leave files (umask
// 077, so readable by their own user alone) in /tmp, /var/tmp and
// /dev/shm, System V shared memory, a message queue and a semaphore set
// (mode 0600) and a POSIX message queue, and try the host's other shared
// place, /run/lock. Job user IDs come round after two (-job-uids
// 300000-300001), so project B's jobs run as A's IDs; they find nothing
// of A's. On the old worker B's job printed A's files and listed A's IPC
// objects as its own.
func TestHostileLeftoversAcrossProjects(t *testing.T) {
	tool, _, _ := jobtoolImage(t)
	a := startAgent(t, "", "", "-workers", "1", "-worker-cores", "1", "-job-uids", "300000-300001")
	c := tenantClients(t, a, "proja", "projb")
	mark := "secret-" + randomMark(t)
	// Each mark is named after its job's user.
	leftovers := func() []string {
		var all []string
		for _, d := range []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"} {
			m, _ := filepath.Glob(filepath.Join(d, mark+"-*"))
			all = append(all, m...)
		}
		return all
	}
	t.Cleanup(func() {
		for _, f := range leftovers() {
			os.Remove(f)
		}
	})
	leave := "umask 077; n=" + mark + "-$(id -u); echo uid $(id -u); for d in /tmp /var/tmp /dev/shm /run/lock; do echo $n > $d/$n && echo left $d; done; " +
		"ipcmk -M 4096 -p 0600 && ipcmk -Q -p 0600 && ipcmk -S 1 -p 0600 && " + tool + " mq-make $n && echo left ipc"
	left := runAll(t, c["proja"], "proja", leave, leave)
	aUIDs := map[string]bool{}
	for _, l := range left {
		t.Logf("A's job:\n%s", l)
		if !strings.Contains(l, "left ipc") || !strings.Contains(l, "left /tmp") {
			t.Fatalf("A's job did not leave its marks:\n%s", l)
		}
		if strings.Contains(l, "left /run/lock") {
			t.Errorf("A's job wrote the host's /run/lock:\n%s", l)
		}
		aUIDs[uidLine.FindStringSubmatch(l)[1]] = true
	}
	look := "n=" + mark + "-$(id -u); echo uid $(id -u); cat /tmp/$n /var/tmp/$n /dev/shm/$n /run/lock/$n 2>/dev/null; " +
		"echo ipc $(ipcs -m -q -s | awk -v u=$(id -u) '$3 == u' | wc -l); echo mq $(" + tool + " mq-find $n)"
	found := runAll(t, c["projb"], "projb", look, look)
	shared := false
	for _, l := range found {
		t.Logf("B's job:\n%s", l)
		shared = shared || aUIDs[uidLine.FindStringSubmatch(l)[1]]
		if strings.Contains(l, mark) || !strings.Contains(l, "ipc 0") || !strings.Contains(l, "mq absent") {
			t.Errorf("project B's job found what project A's left:\n%s", l)
		}
	}
	if !shared {
		t.Fatalf("B's jobs ran as none of A's user IDs (%v): the test proves nothing", aUIDs)
	}
	if f := leftovers(); len(f) > 0 {
		t.Errorf("A's files are on the host: %v", f)
	}
}

// TestHostileSharedMemoryLeftInTheSlot: a job (256 MiB limit) leaves 200
// MiB in /dev/shm and exits 0; the next job of its cgroup slot allocates
// 100 MiB of its own 256 and succeeds. On the old worker the tmpfs pages
// stayed charged to the slot (reclaim cannot take them) and the second
// job was killed as out of memory, billed as its own failure.
func TestHostileSharedMemoryLeftInTheSlot(t *testing.T) {
	tool, _, _ := jobtoolImage(t)
	a := startAgent(t, "", "", "-workers", "1", "-worker-cores", "1")
	c := tenantClients(t, a, "filler", "victim")
	t.Cleanup(func() { os.Remove("/dev/shm/fill") })
	runAll(t, c["filler"], "filler", "head -c 200M /dev/zero > /dev/shm/fill && echo filled")
	out := runAll(t, c["victim"], "victim", tool+" alloc 100 && echo allocated")
	if !strings.Contains(out[0], "allocated") {
		t.Errorf("the next job of the slot:\n%s", out[0])
	}
}

// A descriptor the worker was started with (a shell's redirection, a
// supervisor's log) is not a job's: a job that writes to it must not reach
// the file behind it, which its user cannot open. The agent inherits a
// root-owned 0600 file as descriptor 3, and its worker from it.
func TestHostileInheritedDescriptor(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "worker-log")
	f, err := os.OpenFile(secret, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dataDir := t.TempDir()
	a := startNodeWith(t, dataDir, "127.0.0.1:0", []string{"agent", "-dev", "-data-dir", dataDir, "-http-addr", "127.0.0.1:0", "-log-level", "warn", "-worker-cores", "1"}, []*os.File{f})
	c := tenantClients(t, a, "tenant")["tenant"]
	logs := runAll(t, c, "tenant", `ls -l /proc/self/fd; for fd in 3 4 5 6 7 8 9; do (eval "echo job-wrote >&$fd") 2>/dev/null && echo "wrote to $fd"; done; echo looked`)
	if !strings.Contains(logs[0], "looked") {
		t.Fatalf("the job did not run to its end:\n%s", logs[0])
	}
	if strings.Contains(logs[0], "wrote to") {
		t.Errorf("a job wrote to a descriptor of its worker's:\n%s", logs[0])
	}
	if b, _ := os.ReadFile(secret); len(b) > 0 {
		t.Errorf("a job wrote into the worker's inherited file: %q", b)
	}
}
