package e2e

// The hostile-tenant suite, item 2 of issue 25 ("jobs in namespaces of
// their own"): a real dev agent with its real workers, and real jobs as
// the attacker. Each test attacks one boundary of the jail a worker gives
// every job (see worker/jail.go) and fails on a worker without it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// hostileAgent starts a dev agent with its two workers, which isolate
// jobs (the tests run as root) and pull from the test registry (allowed:
// it is on the host's loopback), and returns it with jobtool's path.
func hostileAgent(t *testing.T) (*agent, string) {
	t.Helper()
	tool, reg, _ := jobtoolImage(t)
	return startAgent(t, "", "", "-registry-allow", reg.Host), tool
}

// submit creates a batch of jobs as the agent's root token (an admin, who
// may also use network "host") and returns its ID.
func submit(t *testing.T, a *agent, name string, jobs ...api.JobSpec) int64 {
	t.Helper()
	for i := range jobs {
		jobs[i].JobID = int64(i + 1)
		if jobs[i].CPU == 0 {
			jobs[i].CPU, jobs[i].Memory = 0.1, 128<<20
		}
	}
	res, err := a.client().CreateBatch(context.Background(), &api.CreateBatchRequest{Name: name, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// jobLog waits for a job to end and returns its log.
func jobLog(t *testing.T, a *agent, batch, job int64) string {
	t.Helper()
	c := a.client()
	ctx := context.Background()
	waitFor(t, fmt.Sprintf("job %d/%d to end", batch, job), 2*time.Minute, func() bool {
		j, err := c.GetJob(ctx, batch, job)
		return err == nil && (j.State == api.JobSuccess || j.State == api.JobFailed || j.State == api.JobError || j.State == api.JobCancelled)
	})
	log, err := c.JobLog(ctx, batch, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	return string(log)
}

// waitLog waits until a running job's log holds s, and returns the log.
func waitLog(t *testing.T, a *agent, batch, job int64, s string) string {
	t.Helper()
	var log []byte
	waitFor(t, fmt.Sprintf("job %d/%d to say %q", batch, job, s), time.Minute, func() bool {
		log, _ = a.client().JobLog(context.Background(), batch, job, 0)
		return strings.Contains(string(log), s)
	})
	return string(log)
}

func randomMark(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestHostileProcSnooping: a job does not see another tenant's running
// job in /proc (on a worker without the jail, /proc/PID/cmdline is world
// readable and leaks the secret in its command line), nor the worker's or
// the agent's processes: its /proc lists processes of its own user only.
func TestHostileProcSnooping(t *testing.T) {
	a, _ := hostileAgent(t)
	secret := "secret-" + randomMark(t)
	victim := submit(t, a, "victim", api.JobSpec{Name: "victim", Command: []string{"sh", "-c", "echo running; sleep 60; : " + secret},
		Env: map[string]string{"API_KEY": secret}})
	waitLog(t, a, victim, 1, "running")
	// The pattern matches the secret but its own text does not hold it,
	// so the spy's grep does not find itself.
	pattern := secret[:len(secret)-1] + "[" + secret[len(secret)-1:] + "]"
	spy := submit(t, a, "spy", api.JobSpec{Name: "spy", Command: []string{"sh", "-c",
		"grep -l '" + pattern + "' /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null; " +
			"echo uids; for p in /proc/[0-9]*; do stat -c %u $p; done | sort -u; echo me $(id -u); ls /proc/1 2>&1 | head -1"}})
	log := jobLog(t, a, spy, 1)
	t.Logf("spy's log:\n%s", log)
	if strings.Contains(log, "/cmdline") || strings.Contains(log, "/environ") {
		t.Errorf("a job found another job's secret in /proc:\n%s", log)
	}
	uids := strings.Fields(log[strings.Index(log, "uids")+4 : strings.Index(log, "me ")])
	me := strings.Fields(log[strings.Index(log, "me ")+3:])[0]
	if len(uids) != 1 || uids[0] != me {
		t.Errorf("the job (uid %s) sees processes of users %v", me, uids)
	}
	if !strings.Contains(log, "No such file or directory") {
		t.Errorf("the job sees init's /proc/1")
	}
	if err := a.client().CancelBatch(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
}

// outsideNet is "the world" as a job can tell: a network namespace of the
// test's own (ip netns), joined to the host by a veth, with addresses in
// 198.18.0.0/15 (set aside for tests) and servers in it answering with
// their names. The cloud's metadata address, 169.254.169.254, is routed
// to it as it would be to the cloud's metadata server.
type outsideNet struct {
	ns      string
	veth    string
	host    string // the host's side
	addr    string // the world's address
	servers map[string]string
}

// newOutsideNet makes the namespace and starts tool serve on each of its
// addresses (port 8080); everything goes when the test ends. withMetadata
// also gives it 169.254.169.254, routed from the host (one test at a time
// on the host may: a lock file serializes them).
func newOutsideNet(t *testing.T, tool string, withMetadata bool) *outsideNet {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("ip (iproute2) is not installed")
	}
	var rnd [2]byte
	rand.Read(rnd[:])
	base := netip.AddrFrom4([4]byte{198, 18 + rnd[0]&1, rnd[1], 0})
	o := &outsideNet{ns: "drover-e2e-" + hex.EncodeToString(rnd[:]), veth: "dve" + hex.EncodeToString(rnd[:]),
		host: base.Next().String(), addr: base.Next().Next().String(), servers: map[string]string{}}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", o.ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", o.ns).Run() })
	ip("link", "add", o.veth, "type", "veth", "peer", "name", "eth0", "netns", o.ns)
	t.Cleanup(func() { exec.Command("ip", "link", "del", o.veth).Run() })
	ip("addr", "add", o.host+"/29", "dev", o.veth)
	ip("link", "set", o.veth, "up")
	ip("-n", o.ns, "link", "set", "lo", "up")
	ip("-n", o.ns, "addr", "add", o.addr+"/29", "dev", "eth0")
	ip("-n", o.ns, "link", "set", "eth0", "up")
	ip("-n", o.ns, "route", "add", "default", "via", o.host)
	addrs := []string{o.addr}
	if withMetadata {
		lockMetadataRoute(t)
		ip("-n", o.ns, "addr", "add", "169.254.169.254/32", "dev", "eth0")
		ip("route", "add", "169.254.169.254/32", "via", o.addr, "dev", o.veth)
		t.Cleanup(func() { exec.Command("ip", "route", "del", "169.254.169.254/32", "via", o.addr).Run() })
		addrs = append(addrs, "169.254.169.254")
	}
	for _, addr := range addrs {
		hp := net.JoinHostPort(addr, "8080")
		startListener(t, "serve "+hp+" in the outside", exec.Command("ip", "netns", "exec", o.ns, tool, "serve", hp, "world "+addr))
		o.servers[addr] = hp
	}
	return o
}

// lockMetadataRoute takes a host-wide lock for the route to
// 169.254.169.254 (one test process at a time may own it), released when
// the test ends.
func lockMetadataRoute(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile("/run/drover-e2e-metadata.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			t.Fatal("another test holds the route to 169.254.169.254")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() { f.Close() })
}

// TestHostileNetwork: a job on the default network (the bridge) reaches
// the world through NAT, but not a service on the host's loopback, the
// agent's API, any other address of the host, the cloud's metadata
// address or another job; nothing from outside opens a connection to a
// job; on network "none" a job has loopback only. On a worker that runs
// jobs on the host's network, every one of these is reached.
func TestHostileNetwork(t *testing.T) {
	a, tool := hostileAgent(t)
	o := newOutsideNet(t, tool, true)
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "host service")
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	apiAddr := strings.TrimPrefix(a.addr, "http://")
	var hostAddrs []string
	ifaces, _ := net.InterfaceAddrs()
	for _, ia := range ifaces {
		if n, ok := ia.(*net.IPNet); ok && n.IP.To4() != nil && !strings.HasPrefix(n.IP.String(), "172.23.") {
			hostAddrs = append(hostAddrs, net.JoinHostPort(n.IP.String(), port))
		}
	}

	// A server in a job, whose address another job then tries.
	server := submit(t, a, "server", api.JobSpec{Name: "server", Command: []string{"sh", "-c",
		"ip -4 -o addr show eth0; exec " + tool + " serve 0.0.0.0:7777 job-server"}})
	serverLog := waitLog(t, a, server, 1, "listening")
	m := regexp.MustCompile(`inet ([0-9.]+)/`).FindStringSubmatch(serverLog)
	if m == nil {
		t.Fatalf("the server job has no address:\n%s", serverLog)
	}
	jobAddr := net.JoinHostPort(m[1], "7777")
	// The host itself reaches the job (the jail lets replies out).
	if c, err := net.DialTimeout("tcp", jobAddr, 5*time.Second); err != nil {
		t.Errorf("the host cannot reach the job at %s: %v", jobAddr, err)
	} else {
		c.Close()
	}

	refused := append([]string{
		net.JoinHostPort("127.0.0.1", port), // a service on the host's loopback (and every address)
		apiAddr,                             // the agent's API
		o.servers["169.254.169.254"],        // the cloud's metadata
		jobAddr,                             // another job
	}, hostAddrs...)
	attacker := submit(t, a, "attacker",
		api.JobSpec{Name: "world", Command: []string{tool, "dial", o.servers[o.addr]}},
		api.JobSpec{Name: "refused", Command: append([]string{tool, "dial"}, refused...)},
		api.JobSpec{Name: "none", Network: api.NetworkNone, Command: []string{"sh", "-c", "cat /proc/net/dev; " + tool + " dial " + o.servers[o.addr] + " " + apiAddr}})
	world := jobLog(t, a, attacker, 1)
	if !strings.Contains(world, "reached "+o.servers[o.addr]+": world "+o.addr) {
		t.Errorf("a job on the bridge did not reach the world through NAT:\n%s", world)
	}
	log := jobLog(t, a, attacker, 2)
	if strings.Contains(log, "reached") {
		t.Errorf("a job on the bridge reached the host, the agent, the metadata address or another job:\n%s", log)
	}
	if n := strings.Count(log, "unreachable"); n != len(refused) {
		t.Errorf("%d of %d refusals in the job's log:\n%s", n, len(refused), log)
	}
	none := jobLog(t, a, attacker, 3)
	if strings.Contains(none, "reached") || !strings.Contains(none, "lo:") || strings.Contains(none, "eth0:") {
		t.Errorf("a job on network none:\n%s", none)
	}
	// Nothing from the world opens a connection to a job.
	out, err := exec.Command("ip", "netns", "exec", o.ns, tool, "dial", jobAddr).CombinedOutput()
	if strings.Contains(string(out), "reached") {
		t.Errorf("the world opened a connection to a job: %s %v", out, err)
	}
	if err := a.client().CancelBatch(context.Background(), server); err != nil {
		t.Fatal(err)
	}
}

// TestHostilePrivilege: a process job cannot become root in a user
// namespace of its own (unshare -Ur), nor make the system calls the
// jail's filter refuses; a container job cannot make those Docker's
// default seccomp profile refuses.
func TestHostilePrivilege(t *testing.T) {
	a, tool := hostileAgent(t)
	_, _, ref := jobtoolImage(t)
	calls := []string{"clone-user", "keyctl", "userfaultfd", "io_uring", "perf_event"}
	b := submit(t, a, "privilege",
		api.JobSpec{Name: "unshare", Command: []string{"sh", "-c", "unshare -Ur id; echo exit $?"}},
		api.JobSpec{Name: "calls", Command: append([]string{tool, "deny"}, calls...)},
		api.JobSpec{Name: "container", Image: ref, Command: append([]string{"jobtool", "deny"}, calls...)})
	if log := jobLog(t, a, b, 1); strings.Contains(log, "uid=0") || strings.Contains(log, "exit 0") {
		t.Errorf("unshare -Ur in a job:\n%s", log)
	}
	for job, what := range map[int64]string{2: "a process job", 3: "a container job"} {
		log := jobLog(t, a, b, job)
		if strings.Contains(log, "allowed") || strings.Count(log, "denied") != len(calls) {
			t.Errorf("%s made system calls it may not:\n%s", what, log)
		}
	}
}

// forkBomb is a fork bomb that keeps as many processes as it can: each
// forks a copy of itself and waits for it, again and again, so the chain
// grows until a fork fails and regrows whenever a link dies.
const forkBomb = "echo started; b() { while :; do b & wait; done; }; b"

// TestHostileForkBomb: a fork bomb is held to its max_processes, and the
// worker and other jobs carry on beside it: a batch of `true` jobs
// completes while it runs, and cancelling it leaves nothing of it behind.
func TestHostileForkBomb(t *testing.T) {
	a, _ := hostileAgent(t)
	mark := "forkbomb-" + randomMark(t)
	bomb := submit(t, a, "bomb", api.JobSpec{Name: "bomb", MaxProcesses: 64, Command: []string{"sh", "-c", forkBomb, mark}})
	waitLog(t, a, bomb, 1, "started")
	// Sampled for 3 s, and on until it has reached half its limit: a
	// loaded machine forks slowly (the minute only bounds a bomb that
	// never ran).
	peak := 0
	for start := time.Now(); time.Since(start) < 3*time.Second || peak < 32 && time.Since(start) < time.Minute; time.Sleep(20 * time.Millisecond) {
		peak = max(peak, countProcs(t, mark))
	}
	t.Logf("the fork bomb peaked at %d processes", peak)
	if peak > 64 || peak < 32 {
		t.Errorf("the fork bomb had up to %d processes; want its max_processes, 64 (and half of it at least, or it never ran)", peak)
	}
	others := submit(t, a, "others", api.JobSpec{Name: "true", Count: 20, Command: []string{"true"}})
	if b := waitDone(t, a.client(), others, time.Minute); b.NSucceeded != 20 {
		t.Errorf("jobs beside the fork bomb: %+v", b)
	}
	if err := a.client().CancelBatch(context.Background(), bomb); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a.client(), bomb, time.Minute)
	waitFor(t, "the fork bomb's processes to go", 30*time.Second, func() bool { return countProcs(t, mark) == 0 })
}

// countProcs counts the host's processes whose command line holds s.
func countProcs(t *testing.T, s string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), s) {
			n++
		}
	}
	return n
}

// startListener starts srv, a jobtool server, for the test's length and
// waits until it says it listens.
func startListener(t *testing.T, what string, srv *exec.Cmd) {
	t.Helper()
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	buf := make([]byte, 64)
	if n, err := out.Read(buf); err != nil || !strings.Contains(string(buf[:n]), "listening") {
		t.Fatalf("%s: %q %v", what, buf[:n], err)
	}
}
