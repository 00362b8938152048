package worker

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
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testimage"
	"github.com/drover-sched/drover/testkit/testlog"
	"github.com/drover-sched/drover/worker/images"
)

// testNodeID is a node ID of the test's own: the bridge, its table and
// its veths are named after it, so parallel tests do not meet.
func testNodeID(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// jailRig is an isolating worker's sandbox (job users, cgroups, jails on
// a bridge of its own) and a process executor: jobs run as they would on
// a worker running as root.
type jailRig struct {
	sb   *sandbox
	ex   *ProcessExecutor
	cfg  *Config
	node string
	tool string // jobtool, which every job user can run
	ref  string // jobtool's image

	store *images.Store      // made by containers
	cex   *ContainerExecutor // made by containers
}

// newJailRig opens the sandbox; tweak may change the worker's config.
func newJailRig(t *testing.T, tweak func(*Config)) *jailRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("jails need root (namespaces, cgroups, job users); the tests run as root in make test")
	}
	f, err := testimage.Shared()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.JobsDir = sharedDir(t, 0o711)
	cfg.Logger = testlog.New(t)
	cfg.UIDLeaseDir = filepath.Join(cfg.DataDir, "uids")
	cfg.Servers = []string{"http://127.0.0.1:1"}
	if tweak != nil {
		tweak(cfg)
	}
	r := &jailRig{cfg: cfg, node: testNodeID(t), ex: &ProcessExecutor{}, tool: f.Binary, ref: f.Ref}
	if r.sb, err = openSandbox(cfg, r.node, true, cfg.Logger); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.sb.close)
	return r
}

// containers returns the rig's container executor, made on first use.
func (r *jailRig) containers(t *testing.T) *ContainerExecutor {
	t.Helper()
	if r.cex != nil {
		return r.cex
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is not installed: make test installs it, or apt-get install runc")
	}
	var err error
	if r.store, err = images.New(images.Config{Dir: filepath.Join(r.cfg.DataDir, "images"), Logger: r.cfg.Logger, Egress: testRegistries}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.store.Close() })
	if r.cex, err = newContainerExecutor("runc", filepath.Join(r.cfg.DataDir, "runc"), filepath.Join(r.cfg.DataDir, "bundles"), r.sb.jails.fs.resolv, r.store, r.cfg.Logger); err != nil {
		t.Fatal(err)
	}
	return r.cex
}

// runContainer runs command in a container of jobtool's image on network,
// in a sandbox as the worker gives one, and returns its exit code and
// output.
func (r *jailRig) runContainer(t *testing.T, network string, command ...string) (int, string) {
	t.Helper()
	ex := r.containers(t)
	img, err := r.store.Get(context.Background(), r.ref)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Release()
	a := api.Assignment{AttemptRef: api.AttemptRef{BatchID: 1, JobID: 2, Attempt: 3}, Command: command, Network: network, Image: r.ref, CPU: 1, Memory: 256 << 20}
	bx, err := r.sb.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	defer bx.release(false)
	spec := Spec{Ref: a.AttemptRef, Command: command, Dir: bx.dir, UID: bx.uid(), GID: bx.uid(), Cgroup: bx.slot, Image: img, Network: network}
	if bx.jail != nil {
		spec.NetNS = bx.jail.netnsPath()
	}
	out := &syncBuffer{}
	h, err := ex.Start(context.Background(), spec, out)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return res.ExitCode, out.String()
}

// rigJob is a job started on the rig.
type rigJob struct {
	h   Handle
	out *syncBuffer
	bx  *box
}

// start starts a job of a (its command, network, limits) in a sandbox of
// its own.
func (r *jailRig) start(t *testing.T, a api.Assignment) *rigJob {
	t.Helper()
	if a.CPU == 0 {
		a.CPU, a.Memory = 1, 256<<20
	}
	bx, err := r.sb.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Ref: a.AttemptRef, Command: a.Command, Dir: bx.dir, UID: bx.uid(), GID: bx.uid(), Cgroup: bx.slot, Network: a.Network}
	if bx.jail != nil {
		spec.Start = bx.start
	}
	out := &syncBuffer{}
	h, err := r.ex.Start(context.Background(), spec, out)
	if err != nil {
		bx.release(false)
		t.Fatal(err)
	}
	j := &rigJob{h: h, out: out, bx: bx}
	t.Cleanup(func() { j.stop() })
	return j
}

// stop kills the job, waits for it and releases its sandbox.
func (j *rigJob) stop() {
	if j.bx == nil {
		return
	}
	j.h.Stop(0)
	j.h.Wait()
	j.bx.release(false)
	j.bx = nil
}

// run runs a job to its end and returns its exit code and output.
func (r *jailRig) run(t *testing.T, network string, command ...string) (int, string) {
	t.Helper()
	j := r.start(t, api.Assignment{Command: command, Network: network})
	res := waitResult(t, j.h)
	out := j.out.String()
	j.stop()
	return res.ExitCode, out
}

// serveLine listens on addr (port 0: any) and answers every connection
// with line; it returns the address it listens on.
func serveLine(t *testing.T, network, addr, line string) string {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, line)
			c.Close()
		}
	}()
	return l.Addr().String()
}

// A job sees only its own processes: another job's command line (a
// secret in it) and environment are not in its /proc, nor is the
// worker's; its /proc lists its own processes only.
func TestJailHidesOtherProcesses(t *testing.T) {
	r := newJailRig(t, nil)
	other := r.start(t, api.Assignment{Command: []string{"sh", "-c", "echo started; sleep 60; : secret-token-1234"}})
	other.out.waitFor(t, "started")
	var pid int
	for end := time.Now().Add(5 * time.Second); pid == 0 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		pid = findProcess(t, "secret-token-1234")
	}
	if pid == 0 {
		t.Fatal("the other job's sleep never ran")
	}
	code, out := r.run(t, "", r.tool, "probe", fmt.Sprintf("/proc/%d", pid), fmt.Sprintf("/proc/%d/cmdline", pid),
		fmt.Sprintf("/proc/%d/environ", pid), fmt.Sprintf("/proc/%d/cmdline", os.Getpid()))
	if code != 0 {
		t.Errorf("a job read another job's or the worker's /proc:\n%s", out)
	}
	code, out = r.run(t, "", "sh", "-c", "ls /proc | grep -E '^[0-9]+$' | while read p; do cat /proc/$p/status 2>/dev/null | grep '^Uid:'; done | sort -u; id -u")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("the job's /proc shows processes of other users (exit %d):\n%s", code, out)
	}
	uid := lines[1]
	if f := strings.Fields(lines[0]); len(f) < 2 || f[1] != uid {
		t.Errorf("the job (uid %s) sees processes of uid %q", uid, lines[0])
	}
}

// findProcess returns the pid of a process whose command line holds s.
func findProcess(t *testing.T, s string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			return pid
		}
	}
	return 0
}

// outside is a network namespace of the test's own joined to the host by
// a veth: "the world" beyond the host, as far as a job can tell. Its
// addresses are in 198.18.0.0/15 (set aside for tests), chosen at random
// so that parallel tests do not meet.
type outside struct {
	host   netip.Addr // the host's side
	addr   netip.Addr // the outside's
	server netip.Addr // a second address of the outside's (a "server")
	veth   string
	ns     int // the namespace
}

// dial connects to addr from the outside, as a machine of the world would.
func (o *outside) dial(addr string) error {
	done := make(chan error)
	goLocked(func() {
		if err := unix.Setns(o.ns, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
		}
		done <- err
	})
	return <-done
}

// newOutside makes the namespace, with listeners on its addresses
// answering with their names, and routes extra (more addresses, such as
// a metadata server's, each with a listener on port 53 too) to it;
// everything goes when the test ends.
func newOutside(t *testing.T, extra ...netip.Addr) (*outside, map[netip.Addr]string) {
	t.Helper()
	var rnd [2]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	base := netip.AddrFrom4([4]byte{198, 18 + rnd[0]&1, rnd[1], 0})
	o := &outside{host: base.Next(), addr: base.Next().Next(), server: base.Next().Next().Next(), veth: "dvt" + hex.EncodeToString(rnd[:])}
	listeners := map[netip.Addr]string{}
	ready := make(chan error)
	addrs := append([]netip.Addr{o.addr, o.server}, extra...)
	var nsFD int
	goLocked(func() {
		fd, err := newNetns()
		if err != nil {
			ready <- err
			return
		}
		nsFD = fd
		ready <- nil
		if err := <-ready; err != nil {
			return
		}
		eth, err := netlink.LinkByName("eth0")
		if err == nil {
			err = netlink.LinkSetUp(eth)
		}
		for _, a := range addrs {
			if err == nil {
				bits := 32
				if a == o.addr {
					bits = 29
				}
				err = netlink.AddrAdd(eth, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, 32)}})
			}
		}
		if err == nil {
			err = netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: o.host.AsSlice()})
		}
		listen := func(ap netip.AddrPort) {
			var l net.Listener
			if l, err = net.Listen("tcp", ap.String()); err == nil {
				t.Cleanup(func() { l.Close() })
				if ap.Port() == 0 {
					listeners[ap.Addr()] = l.Addr().String()
				}
				go func() {
					for {
						c, err := l.Accept()
						if err != nil {
							return
						}
						fmt.Fprintln(c, "outside "+ap.Addr().String())
						c.Close()
					}
				}()
			}
		}
		for _, a := range addrs {
			if err == nil {
				listen(netip.AddrPortFrom(a, 0))
			}
		}
		// A nameserver on each extra address (the cloud's metadata
		// server is Google Cloud's resolver).
		for _, a := range extra {
			if err == nil {
				listen(netip.AddrPortFrom(a, 53))
			}
		}
		ready <- err
	})
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	o.ns = nsFD
	t.Cleanup(func() { unix.Close(nsFD) })
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: o.veth}, PeerName: "eth0", PeerNamespace: netlink.NsFd(nsFD)}
	if err := netlink.LinkAdd(veth); err != nil {
		ready <- err
		t.Fatal(err)
	}
	t.Cleanup(func() { netlink.LinkDel(veth) })
	if err := netlink.AddrAdd(veth, &netlink.Addr{IPNet: &net.IPNet{IP: o.host.AsSlice(), Mask: net.CIDRMask(29, 32)}}); err != nil {
		ready <- err
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		ready <- err
		t.Fatal(err)
	}
	ready <- nil
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	for _, a := range extra {
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: veth.Attrs().Index, Dst: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}, Gw: o.addr.AsSlice()}); err != nil {
			t.Fatal(err)
		}
	}
	return o, listeners
}

// hostAddr is an IPv4 address of the host's default-route interface.
func hostAddr(t *testing.T) netip.Addr {
	t.Helper()
	routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			l, err := netlink.LinkByIndex(r.LinkIndex)
			if err != nil {
				t.Fatal(err)
			}
			addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
			if err != nil || len(addrs) == 0 {
				t.Fatalf("no address on %s: %v", l.Attrs().Name, err)
			}
			a, _ := netip.AddrFromSlice(addrs[0].IP)
			return a.Unmap()
		}
	}
	t.Fatal("no default route")
	return netip.Addr{}
}

// On the bridge, a job reaches the world through NAT, but not the host on
// any of its addresses (a loopback service, one on every address, the
// bridge's own address), not the servers the worker knows (wherever they
// are), not 169.254.0.0/16 (the cloud's metadata), and not another job.
func TestJailBridge(t *testing.T) {
	var rnd [2]byte
	rand.Read(rnd[:])
	metadata := netip.AddrFrom4([4]byte{169, 254, rnd[0], rnd[1] | 1})
	o, listening := newOutside(t, metadata)
	// The jobs' nameserver is the metadata server, as on Google Cloud.
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+metadata.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newJailRig(t, func(c *Config) {
		c.Servers = []string{"http://" + o.server.String() + ":4646"}
		c.JobResolvConf = resolv
	})
	loopback := serveLine(t, "tcp", "127.0.0.1:0", "host loopback")
	anyAddr := serveLine(t, "tcp", ":0", "host any")
	_, anyPort, _ := net.SplitHostPort(anyAddr)
	world := listening[o.addr]

	// The outside itself is reached, and so is the nameserver's port
	// 53 (its other ports are not: see below); the job sees the
	// nameserver in its resolv.conf.
	nameserver := netip.AddrPortFrom(metadata, 53).String()
	code, out := r.run(t, "", "sh", "-c", "cat /etc/resolv.conf; "+r.tool+" dial "+world+" "+nameserver)
	if code != 2 || !strings.Contains(out, "outside "+o.addr.String()) || !strings.Contains(out, "reached "+nameserver) || !strings.Contains(out, "nameserver "+metadata.String()) {
		t.Fatalf("a job on the bridge did not reach the world (%s) and its nameserver (%s):\n%s", world, nameserver, out)
	}
	bridgeIP := r.sb.jails.bridge.gateway
	refused := []string{
		loopback,
		net.JoinHostPort(hostAddr(t).String(), anyPort),
		net.JoinHostPort(bridgeIP.String(), anyPort),
		net.JoinHostPort(o.host.String(), anyPort),
		listening[o.server],
		listening[metadata],
	}
	code, out = r.run(t, "", append([]string{r.tool, "dial"}, refused...)...)
	if code != 0 {
		t.Errorf("a job on the bridge reached %d of the host's, the servers' and the metadata addresses:\n%s", code, out)
	}
	// From the host, all of them answer.
	for _, a := range append(refused[1:], world) {
		if c, err := net.DialTimeout("tcp", a, 2*time.Second); err != nil {
			t.Errorf("the test cannot reach %s itself: %v", a, err)
		} else {
			c.Close()
		}
	}

	// Two jobs on the bridge do not reach each other.
	srv := r.start(t, api.Assignment{Command: []string{r.tool, "serve", "0.0.0.0:7777", "the other job"}})
	srv.out.waitFor(t, "listening")
	other := netip.AddrPortFrom(srv.bx.jail.addr(), 7777).String()
	code, out = r.run(t, "", r.tool, "dial", other)
	if code != 0 {
		t.Errorf("a job on the bridge reached another job at %s:\n%s", other, out)
	}
	// The host still reaches the job (the worker could, to check it).
	if c, err := net.DialTimeout("tcp", other, 2*time.Second); err != nil {
		t.Errorf("the host cannot reach a job at %s: %v", other, err)
	} else {
		c.Close()
	}
	// Nor does the world open a connection to a job.
	if err := o.dial(other); err == nil {
		t.Errorf("the outside opened a connection to a job at %s", other)
	}
}

// Network "none" has loopback only; network "host" is the host's. Both
// get the jail's /proc and filter like the bridge.
func TestJailNoneAndHost(t *testing.T) {
	o, listening := newOutside(t)
	r := newJailRig(t, nil)
	loopback := serveLine(t, "tcp", "127.0.0.1:0", "host loopback")

	code, out := r.run(t, api.NetworkNone, "cat", "/proc/net/dev")
	if code != 0 || !strings.Contains(out, "lo:") || strings.Count(out, ":") != 1 {
		t.Errorf("network none has other interfaces than lo (exit %d):\n%s", code, out)
	}
	code, out = r.run(t, api.NetworkNone, r.tool, "dial", listening[o.addr], loopback)
	if code != 0 {
		t.Errorf("a job on network none reached something:\n%s", out)
	}
	host, err := os.ReadFile("/proc/net/dev")
	if err != nil {
		t.Fatal(err)
	}
	code, out = r.run(t, api.NetworkHost, "cat", "/proc/net/dev")
	if code != 0 || strings.Count(out, ":") != strings.Count(string(host), ":") || !strings.Contains(out, o.veth+":") {
		t.Errorf("network host sees %q, the host has %q", out, host)
	}
	code, out = r.run(t, api.NetworkHost, r.tool, "dial", loopback)
	if code != 1 || !strings.Contains(out, "host loopback") {
		t.Errorf("a job on network host did not reach the host's loopback:\n%s", out)
	}
	code, out = r.run(t, api.NetworkHost, "sh", "-c", "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; ls /proc | grep -c '^[0-9]'")
	if code != 0 || !strings.Contains(out, "NoNewPrivs:\t1") || !strings.Contains(out, "Seccomp:\t2") {
		t.Errorf("a job on network host is not under no_new_privs and the filter:\n%s", out)
	}
}

// A process job gains no privilege: no user namespace (neither
// unshare -Ur nor clone), no keyring, userfaultfd, io_uring or perf
// events; no_new_privs and a seccomp filter are on, and a setuid program
// gains nothing.
func TestJailRefusesPrivilege(t *testing.T) {
	r := newJailRig(t, nil)
	code, out := r.run(t, "", "unshare", "-Ur", "id")
	if code == 0 || strings.Contains(out, "uid=0") {
		t.Errorf("unshare -Ur in a job (exit %d):\n%s", code, out)
	}
	code, out = r.run(t, "", r.tool, "deny", "clone-user", "keyctl", "userfaultfd", "io_uring", "perf_event")
	if code != 0 {
		t.Errorf("a job made system calls the filter refuses:\n%s", out)
	}
	code, out = r.run(t, "", "grep", "-E", "^(NoNewPrivs|Seccomp|CapEff|CapBnd):", "/proc/self/status")
	if code != 0 || !strings.Contains(out, "NoNewPrivs:\t1") || !strings.Contains(out, "Seccomp:\t2") || !strings.Contains(out, "CapEff:\t0000000000000000") {
		t.Errorf("a job's status:\n%s", out)
	}
	// A copy of id made setuid root by the worker still runs as the job.
	suid := filepath.Join(r.cfg.JobsDir, "suid-id")
	if b, err := os.ReadFile("/usr/bin/id"); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(suid, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	code, out = r.run(t, "", suid, "-u")
	if code != 0 || strings.TrimSpace(out) == "0" {
		t.Errorf("a setuid-root program in a job ran as %q (exit %d)", out, code)
	}
}

// forkBomb is a fork bomb that keeps as many processes as it can: each
// forks a copy of itself and waits for it, again and again, so the chain
// grows until a fork fails and regrows whenever a link dies.
const forkBomb = "b() { while :; do b & wait; done; }; b"

// A fork bomb is held to the job's max_processes (here 64, the worker's
// -max-processes when the job names none), counted by the kernel and on
// the host, and other jobs still start meanwhile.
func TestJailForkBomb(t *testing.T) {
	r := newJailRig(t, func(c *Config) { c.MaxProcesses = 64 })
	bomb := r.start(t, api.Assignment{Command: []string{"sh", "-c", forkBomb}})
	uid := bomb.bx.uid()
	// Sampled for 3 s, and on until it has reached half its limit: a
	// loaded machine forks slowly (the minute only bounds a bomb that
	// never ran).
	peak := 0
	for start := time.Now(); time.Since(start) < 3*time.Second || peak < 32 && time.Since(start) < time.Minute; time.Sleep(20 * time.Millisecond) {
		if n := countUserProcs(t, uid); n > peak {
			peak = n
		}
	}
	if peak > 64 || peak < 32 {
		t.Errorf("the fork bomb had up to %d processes; want its limit, 64 (and at least half of it, or it never ran)", peak)
	}
	code, out := r.run(t, "", "true")
	if code != 0 {
		t.Errorf("a job beside the fork bomb: exit %d %s", code, out)
	}
	// A job that names its own limit gets it.
	small := r.start(t, api.Assignment{Command: []string{"sh", "-c", forkBomb}, MaxProcesses: 10})
	time.Sleep(time.Second)
	if n := countUserProcs(t, small.bx.uid()); n > 10 {
		t.Errorf("a fork bomb with max_processes 10 had %d processes", n)
	}
}

// countUserProcs counts the threads of uid's processes on the host.
func countUserProcs(t *testing.T, uid int) int {
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
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var owner, threads int
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				switch f[0] {
				case "Uid:":
					owner, _ = strconv.Atoi(f[1])
				case "Threads:":
					threads, _ = strconv.Atoi(f[1])
				}
			}
		}
		if owner == uid {
			n += threads
		}
	}
	return n
}

// Jails are made once and reused: consecutive jobs on the bridge share
// one network namespace and address, and a job's start costs no new
// namespace.
func TestJailsAreReused(t *testing.T) {
	r := newJailRig(t, nil)
	seen := map[string]bool{}
	for range 5 {
		code, out := r.run(t, "", "sh", "-c", "readlink /proc/self/ns/net; cat /proc/net/fib_trie | grep -c 172")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		}
		seen[strings.Fields(out)[0]] = true
	}
	if len(seen) != 1 {
		t.Errorf("five jobs in a row ran in %d network namespaces: %v", len(seen), seen)
	}
	r.sb.jails.mu.Lock()
	live := r.sb.jails.live
	r.sb.jails.mu.Unlock()
	if live != 1 {
		t.Errorf("%d jails made for five jobs in a row", live)
	}
}

// int80Source is a program that makes keyctl through the 32-bit x86 ABI
// (int 0x80, where keyctl is call 288, not 250): a filter that checked
// only native numbers would let it through. It exits 1 if the call
// worked, 0 if it was refused.
const int80Source = `package main

import (
	"fmt"
	"os"
)

func int80(nr, a1, a2, a3 uint32) int32

func main() {
	r := int80(288, 0, 0xfffffffd, 1) // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, create)
	fmt.Println("keyctl through int 0x80:", r)
	if r >= 0 {
		os.Exit(1)
	}
}
`

const int80Asm = `#include "textflag.h"

TEXT ·int80(SB),NOSPLIT,$0-20
	MOVL nr+0(FP), AX
	MOVL a1+4(FP), BX
	MOVL a2+8(FP), CX
	MOVL a3+12(FP), DX
	INT $0x80
	MOVL AX, ret+16(FP)
	RET
`

// A system call through the 32-bit ABI kills the job: the filter, written
// for native numbers, would otherwise be bypassed. (The program works as
// an unprivileged user outside a job.)
func TestJailRefusesForeignABI(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the 32-bit ABI of amd64")
	}
	r := newJailRig(t, nil)
	src := t.TempDir()
	for name, text := range map[string]string{"go.mod": "module int80\n\ngo 1.22\n", "main.go": int80Source, "int80_amd64.s": int80Asm} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(r.cfg.JobsDir, "int80")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := exec.Command(bin)
	plain.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 300_999, Gid: 300_999, Groups: []uint32{}}}
	if out, err := plain.CombinedOutput(); plain.ProcessState == nil || plain.ProcessState.ExitCode() != 1 {
		t.Fatalf("outside a job the 32-bit keyctl did not work (%v): %s", err, out)
	}
	j := r.start(t, api.Assignment{Command: []string{bin}})
	res := waitResult(t, j.h)
	if res.Signal != syscall.SIGSYS {
		t.Errorf("a job's 32-bit system call: %+v, output %q; want it killed by SIGSYS", res, j.out.String())
	}
}

// A container runs under Docker's default seccomp profile and
// no_new_privs: no user namespace, no keyring; on the bridge it reaches
// the world but not the host or the metadata address, in the jail's
// network namespace; network none has loopback only.
func TestJailContainers(t *testing.T) {
	var rnd [2]byte
	rand.Read(rnd[:])
	metadata := netip.AddrFrom4([4]byte{169, 254, rnd[0], rnd[1] | 1})
	o, listening := newOutside(t, metadata)
	r := newJailRig(t, nil)
	anyAddr := serveLine(t, "tcp", ":0", "host any")
	_, anyPort, _ := net.SplitHostPort(anyAddr)

	code, out := r.runContainer(t, "", "jobtool", "deny", "clone-user", "keyctl", "userfaultfd", "io_uring", "perf_event")
	if code != 0 {
		t.Errorf("a container made system calls Docker's profile refuses:\n%s", out)
	}
	code, out = r.runContainer(t, "", "jobtool", "cat", "/proc/self/status")
	if code != 0 || !strings.Contains(out, "NoNewPrivs:\t1") || !strings.Contains(out, "Seccomp:\t2") {
		t.Errorf("a container's status:\n%s", out)
	}
	code, out = r.runContainer(t, "", "jobtool", "dial", listening[o.addr])
	if code != 1 || !strings.Contains(out, "outside "+o.addr.String()) {
		t.Errorf("a container on the bridge did not reach the world:\n%s", out)
	}
	code, out = r.runContainer(t, "", "jobtool", "dial", listening[metadata], net.JoinHostPort(hostAddr(t).String(), anyPort),
		net.JoinHostPort(r.sb.jails.bridge.gateway.String(), anyPort))
	if code != 0 {
		t.Errorf("a container on the bridge reached the host or the metadata address:\n%s", out)
	}
	code, out = r.runContainer(t, api.NetworkNone, "jobtool", "cat", "/proc/net/dev")
	if code != 0 || strings.Count(out, ":") != 1 || !strings.Contains(out, "lo:") {
		t.Errorf("a container on network none sees:\n%s", out)
	}
}

// A worker that dies leaves its bridge, veths and nftables table: the
// same worker removes them when it starts again, and another worker of
// the host when it leases the dead one's block. Blocks held by live
// workers are skipped; with none left, a worker says so.
func TestBridgeLeftoversAreRemoved(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bridges need root; the tests run as root in make test")
	}
	log := testlog.New(t)
	var rnd [1]byte
	rand.Read(rnd[:])
	cfg := bridgeConfig{Subnets: netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 31, rnd[0], 0}), 24), Block: 25, LeaseDir: t.TempDir()}
	open := func(node string) *bridge {
		t.Helper()
		c := cfg
		c.NodeID = node
		b, err := openBridge(c, log)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// crash drops a bridge's locks as the death of its process would,
	// and leaves everything else.
	crash := func(b *bridge) { b.lease.Close(); b.node.Close() }
	n1, n2, n3 := testNodeID(t), testNodeID(t), testNodeID(t)
	dev1, table1, _ := bridgeNames(n1)
	t.Cleanup(func() { removeBridge(bridgeNames(n1)) })
	b1 := open(n1)
	crash(b1)
	b1 = open(n1) // the same worker again
	if !linkExists(dev1) || !tableExists(t, table1) {
		t.Fatalf("the restarted worker has no bridge %s or table %s", dev1, table1)
	}
	block := b1.block
	crash(b1)
	t.Cleanup(func() { removeBridge(bridgeNames(n2)); removeBridge(bridgeNames(n3)) })
	b2 := open(n2)
	if linkExists(dev1) || tableExists(t, table1) {
		t.Errorf("the dead worker's bridge %s or table %s is still there", dev1, table1)
	}
	if b2.block != block {
		t.Errorf("the new worker leased %s, want the dead one's %s", b2.block, block)
	}
	b3 := open(n3)
	if b3.block == b2.block {
		t.Errorf("two live workers share block %s", b3.block)
	}
	c := cfg
	c.NodeID = testNodeID(t)
	if _, err := openBridge(c, log); err == nil || !strings.Contains(err.Error(), "every /25 block of "+cfg.Subnets.String()+" is held") {
		t.Errorf("a third worker on two blocks: %v", err)
	}
	b3.close()
	dev3, table3, _ := bridgeNames(n3)
	if linkExists(dev3) || tableExists(t, table3) {
		t.Errorf("a stopped worker left its bridge %s or table %s", dev3, table3)
	}
	b2.close()

	// Two workers die and come back in the other order (a dev agent
	// killed and started again): the first back takes the other's old
	// block, the second finds a record naming the first, which runs
	// again on another block: its bridge stays.
	b1, b2 = open(n1), open(n2)
	if b1.block == b2.block {
		t.Fatalf("two live workers share block %s", b1.block)
	}
	crash(b1)
	crash(b2)
	b2 = open(n2)
	defer b2.close()
	b1 = open(n1)
	defer b1.close()
	dev2, table2, _ := bridgeNames(n2)
	if !linkExists(dev1) || !tableExists(t, table1) || !linkExists(dev2) || !tableExists(t, table2) {
		t.Errorf("after both restarted: bridge %s %v, table %s %v, bridge %s %v, table %s %v", dev1, linkExists(dev1), table1, tableExists(t, table1),
			dev2, linkExists(dev2), table2, tableExists(t, table2))
	}

	// Two workers of one node on one host: the second is refused.
	c = cfg
	c.NodeID, c.NodeLockWait = n1, 200*time.Millisecond
	if _, err := openBridge(c, log); err == nil || !strings.Contains(err.Error(), "another worker of this host runs with node ID") {
		t.Errorf("a second worker with node %s: %v", n1[:8], err)
	}
}

func linkExists(name string) bool {
	_, err := netlink.LinkByName(name)
	return err == nil
}

func tableExists(t *testing.T, name string) bool {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == name {
			return true
		}
	}
	return false
}
