package worker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// bridge is the network of a worker's jobs in mode api.NetworkBridge: a
// Linux bridge of the worker's own, holding a block of addresses leased
// host-wide (so the workers of one host never share one), a veth into each
// job's network namespace, and an nftables table of the worker's own that
// masquerades the jobs' traffic out of the host and refuses what they may
// not reach: any address of the host itself (its loopback services, the
// servers' ports when a server runs there), the servers named in
// Config.Servers wherever they are, the cloud's metadata address
// (169.254.0.0/16) and Config.BridgeDeny; other jobs (the bridge's ports
// are isolated from each other, and traffic from the bridge back into it
// is refused); and connections from outside to a job. Several workers of
// a host each own a bridge, a block and a table, named after their node
// ID: a worker removes what it owns when it stops, and what a crashed
// worker left when it starts again (same node) or when another worker
// leases the crashed one's block.
type bridge struct {
	log     *slog.Logger
	name    string // the bridge device, "drover-" and 8 digits of the node ID
	table   string // the nftables table (family inet)
	prefix  string // host sides of the veths: prefix + a number
	block   netip.Prefix
	gateway netip.Addr // the block's first address, the bridge's own
	mtu     int
	node    *os.File // the lock on the node's name: held while the worker lives
	lease   *os.File // the lock on the block
	record  string   // the lease's record, naming the bridge and table

	mu       sync.Mutex
	next     netip.Addr   // the next address never handed out
	free     []netip.Addr // addresses given back
	nextVeth int
}

// bridgeConfig is what a worker's bridge is made from.
type bridgeConfig struct {
	NodeID   string
	Subnets  netip.Prefix   // the host's job addresses, split in blocks
	Block    int            // a block's prefix length
	LeaseDir string         // where the host's workers lease blocks
	Deny     []netip.Prefix // destinations refused besides the host's own addresses
	Servers  []string       // the control plane's addresses (URLs or host:port)
	// DNS are the jobs' nameservers: port 53 of each stays open even
	// where a refused prefix holds it (on Google Cloud the resolver is
	// the metadata server, 169.254.169.254).
	DNS []netip.Addr
	// NodeLockWait is how long a worker waits for its node's lock, which
	// the process it replaces may hold for a moment as it exits
	// (nodeLockWait when zero).
	NodeLockWait time.Duration
}

// bridgeNames returns the names a worker's bridge uses: its device, its
// nftables table and the prefix of its veths (all within the kernel's 15
// bytes for an interface name).
func bridgeNames(nodeID string) (dev, table, veth string) {
	return "drover-" + nodeID[:8], "drover_" + nodeID[:12], "dv" + nodeID[:6] + "-"
}

// openBridge locks the node's name, removes what an earlier run of this
// node left, leases a block, makes the bridge and its table, and turns
// IPv4 forwarding on.
func openBridge(cfg bridgeConfig, log *slog.Logger) (_ *bridge, err error) {
	b := &bridge{log: log}
	b.name, b.table, b.prefix = bridgeNames(cfg.NodeID)
	if err := os.MkdirAll(cfg.LeaseDir, 0o700); err != nil {
		return nil, fmt.Errorf("job bridge lease dir: %w", err)
	}
	// The node's lock first: from here until close, no other worker of
	// the host takes this bridge for a dead one's.
	lockWait := cfg.NodeLockWait
	if lockWait == 0 {
		lockWait = nodeLockWait
	}
	for wait := time.Now().Add(lockWait); ; {
		if b.node, err = lockNode(cfg.LeaseDir, b.name); err != nil {
			return nil, err
		}
		if b.node != nil {
			break
		}
		if time.Now().After(wait) {
			return nil, fmt.Errorf("job bridge: another worker of this host runs with node ID %s... (it holds %s); give each worker a data dir of its own", cfg.NodeID[:8], nodeLockPath(cfg.LeaseDir, b.name))
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if err := removeBridge(b.name, b.table, b.prefix); err != nil {
		return nil, fmt.Errorf("remove the bridge an earlier run left: %w", err)
	}
	if err := b.leaseBlock(cfg); err != nil {
		return nil, err
	}
	b.gateway = b.block.Addr().Next()
	b.next = b.gateway.Next()
	if b.mtu, err = defaultMTU(); err != nil {
		return nil, err
	}
	if err := b.makeDevice(); err != nil {
		return nil, err
	}
	deny := append([]netip.Prefix{}, cfg.Deny...)
	deny = append(deny, serverPrefixes(cfg.Servers, log)...)
	if err := b.makeTable(deny, cfg.DNS); err != nil {
		return nil, err
	}
	if err := enableForwarding(log); err != nil {
		return nil, err
	}
	log.Info("job bridge ready", "bridge", b.name, "subnet", b.block, "table", "inet "+b.table, "deny", deny, "dns", cfg.DNS)
	return b, nil
}

// nodeLockWait is bridgeConfig.NodeLockWait's default.
const nodeLockWait = 10 * time.Second

// nodeLockPath is the file whose lock says the worker owning bridge dev
// is alive.
func nodeLockPath(leaseDir, dev string) string {
	return filepath.Join(leaseDir, "node-"+dev)
}

// lockNode takes the lock of the worker owning bridge dev (an open file
// description lock on the whole of its file, dropped by the kernel when
// the worker dies). It returns nil, nil when a live worker holds it.
func lockNode(leaseDir, dev string) (*os.File, error) {
	if dev == "" || strings.ContainsAny(dev, "/\x00") || dev == "." || dev == ".." {
		return nil, fmt.Errorf("job bridge: a lease names the bridge %q", dev)
	}
	f, err := os.OpenFile(nodeLockPath(leaseDir, dev), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("job bridge node lock: %w", err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, nil
		}
		return nil, fmt.Errorf("job bridge node lock: %w", err)
	}
	return f, nil
}

// leaseBlock takes the first block of cfg.Subnets that no other worker of
// the host holds (an open file description lock on the block's byte of a
// shared file) and that no route or address of the host overlaps. A block
// whose lease is free but whose record names another bridge was held by a
// worker that died: its bridge and table go first, unless that worker
// runs again (its node's lock is held), having removed its leftovers
// itself and made its bridge anew on another block.
func (b *bridge) leaseBlock(cfg bridgeConfig) error {
	if !cfg.Subnets.Addr().Is4() || cfg.Block < cfg.Subnets.Bits() || cfg.Block > 30 {
		return fmt.Errorf("job bridge: blocks of /%d in %s: the subnets are IPv4 and a block is /%d to /30", cfg.Block, cfg.Subnets, cfg.Subnets.Bits())
	}
	f, err := os.OpenFile(filepath.Join(cfg.LeaseDir, "blocks"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("job bridge leases: %w", err)
	}
	taken, err := hostPrefixes()
	if err != nil {
		f.Close()
		return err
	}
	n := 1 << (cfg.Block - cfg.Subnets.Bits())
	base := binary.BigEndian.Uint32(cfg.Subnets.Masked().Addr().AsSlice())
	size := uint32(1) << (32 - cfg.Block)
	for i := range n {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(i), Len: 1}
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
				continue // another worker's
			}
			f.Close()
			return fmt.Errorf("lease a job bridge block: %w", err)
		}
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], base+uint32(i)*size)
		block := netip.PrefixFrom(netip.AddrFrom4(a), cfg.Block)
		record := filepath.Join(cfg.LeaseDir, "block-"+strconv.Itoa(i))
		if old, err := os.ReadFile(record); err == nil {
			if rec := strings.Fields(string(old)); len(rec) == 3 && rec[0] != b.name {
				if err := b.removeDead(cfg.LeaseDir, rec, block); err != nil {
					b.log.Warn("cannot remove a dead worker's job bridge; skipping its block", "bridge", rec[0], "err", err)
					unlockByte(f, i)
					continue
				}
			}
			taken, _ = hostPrefixes()
		}
		if overlapsAny(block, taken) {
			unlockByte(f, i)
			continue
		}
		if err := os.WriteFile(record, []byte(b.name+" "+b.table+" "+b.prefix+"\n"), 0o600); err != nil {
			f.Close()
			return fmt.Errorf("job bridge lease: %w", err)
		}
		b.lease, b.record, b.block = f, record, block
		return nil
	}
	f.Close()
	return fmt.Errorf("job bridge: every /%d block of %s is held by another worker of this host or overlaps one of its networks; give -bridge-subnets more room", cfg.Block, cfg.Subnets)
}

// removeDead removes the bridge, table and veths a lease's record names,
// holding the lock of their worker's node while it does, unless that
// worker lives.
func (b *bridge) removeDead(leaseDir string, rec []string, block netip.Prefix) error {
	lock, err := lockNode(leaseDir, rec[0])
	if err != nil {
		return err
	}
	if lock == nil {
		b.log.Info("a stale lease names a worker that runs again elsewhere; keeping its bridge", "bridge", rec[0], "subnet", block)
		return nil
	}
	defer lock.Close()
	b.log.Info("removing the job bridge of a worker that is gone", "bridge", rec[0], "table", rec[1], "subnet", block)
	return removeBridge(rec[0], rec[1], rec[2])
}

// unlockByte drops the lease of block i.
func unlockByte(f *os.File, i int) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Start: int64(i), Len: 1}
	_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

// hostPrefixes lists the host's IPv4 routes and addresses (default routes
// aside): a job block must overlap none of them.
func hostPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	routes, err := dumpAll(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("list the host's routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		if p, ok := prefixOf(r.Dst); ok && p.Bits() > 0 {
			out = append(out, p)
		}
	}
	addrs, err := dumpAll(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, fmt.Errorf("list the host's addresses: %w", err)
	}
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// dumpAttempts bounds how often a netlink dump is asked again when the
// kernel says another change interrupted it.
const dumpAttempts = 20

// dumpAll runs a netlink dump until the kernel reports it complete. A dump
// that another process's link, address or route change interrupts comes back
// with netlink.ErrDumpInterrupted and results that may miss entries; on a
// host where other workers and jobs' namespaces come and go, that is a
// matter of timing, not a failure, so the dump is asked again.
func dumpAll[T any](dump func() ([]T, error)) ([]T, error) {
	var err error
	for range dumpAttempts {
		var out []T
		if out, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return nil, fmt.Errorf("%w (asked %d times while the host's network kept changing)", err, dumpAttempts)
}

// prefixOf converts a net.IPNet.
func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones).Masked(), true
}

// overlapsAny tells whether p overlaps one of ps.
func overlapsAny(p netip.Prefix, ps []netip.Prefix) bool {
	for _, q := range ps {
		if p.Overlaps(q) {
			return true
		}
	}
	return false
}

// defaultMTU is the MTU of the interface of the host's default route (the
// way out), 1500 without one: jobs' packets must fit through it.
func defaultMTU() (int, error) {
	routes, err := dumpAll(func() ([]netlink.Route, error) { return netlink.RouteList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return 0, fmt.Errorf("list the host's routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil && l.Attrs().MTU > 0 {
				return l.Attrs().MTU, nil
			}
		}
	}
	return 1500, nil
}

// makeDevice makes the bridge with the block's first address. Its MAC is
// fixed (a bridge otherwise takes its lowest port's, which changes as jobs
// come and go, and every job's neighbour cache would go stale).
func (b *bridge) makeDevice() error {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: b.name, MTU: b.mtu, HardwareAddr: macOf(b.gateway)}}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("make the job bridge %s: %w", b.name, err)
	}
	// No IPv6 on the host side: a job's link-local address would be
	// one more way to the host.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+b.name+"/disable_ipv6", []byte("1"), 0)
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: b.gateway.AsSlice(), Mask: net.CIDRMask(b.block.Bits(), 32)}}
	if err := netlink.AddrAdd(br, addr); err != nil {
		return fmt.Errorf("address the job bridge %s: %w", b.name, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("bring the job bridge %s up: %w", b.name, err)
	}
	return nil
}

// macOf is the MAC address drover gives the interface holding a: locally
// administered, the address's four bytes last, so an address handed to the
// next job keeps its MAC (neighbour caches stay right).
func macOf(a netip.Addr) net.HardwareAddr {
	b := a.As4()
	return net.HardwareAddr{0x02, 0xd7, b[0], b[1], b[2], b[3]}
}

// serverPrefixes resolves the control plane's addresses to the IPv4
// addresses jobs may not reach. A name that does not resolve now is
// logged and skipped.
func serverPrefixes(servers []string, log *slog.Logger) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range serverAddrs(servers, "ip4", log) {
		out = append(out, netip.PrefixFrom(a, 32))
	}
	return out
}

// serverAddrs resolves the control plane's addresses (network "ip4", or
// "ip" for both families). A name that does not resolve now is logged
// and skipped.
func serverAddrs(servers []string, network string, log *slog.Logger) []netip.Addr {
	var out []netip.Addr
	for _, s := range servers {
		host := s
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			host = u.Hostname()
		} else if h, _, err := net.SplitHostPort(s); err == nil {
			host = h
		}
		if a, err := netip.ParseAddr(host); err == nil {
			if a = a.Unmap(); network != "ip4" || a.Is4() {
				out = append(out, a)
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, network, host)
		cancel()
		if err != nil {
			log.Warn("cannot resolve a server's address; jobs (and pulls) are not kept from it", "server", s, "err", err)
			continue
		}
		for _, a := range addrs {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func (b *bridge) makeTable(deny []netip.Prefix, dns []netip.Addr) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: b.table})
	// Before the filter chains of other tables: a refusal in any base
	// chain is final, whatever another table accepts.
	early := nftables.ChainPriorityRef(*nftables.ChainPriorityFilter - 10)
	input := c.AddChain(&nftables.Chain{Name: "input", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: early})
	forward := c.AddChain(&nftables.Chain{Name: "forward", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: early})
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	reject := &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}
	rule := func(ch *nftables.Chain, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs})
	}
	// Jobs reach nothing of the host itself, on any of its addresses
	// (they answer what the host opened).
	rule(input, append(append(ifname(unix.NFT_META_IIFNAME, b.name, true), ctState(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, true)...),
		&expr.Verdict{Kind: expr.VerdictAccept})...)
	rule(input, append(ifname(unix.NFT_META_IIFNAME, b.name, true), reject)...)
	// Nor each other through the host.
	rule(forward, append(append(ifname(unix.NFT_META_IIFNAME, b.name, true), ifname(unix.NFT_META_OIFNAME, b.name, true)...), reject)...)
	// Nor the refused destinations, but for the jobs' nameservers'
	// port 53.
	for _, a := range dns {
		if !a.Is4() || !overlapsAny(netip.PrefixFrom(a, 32), deny) {
			continue
		}
		for _, proto := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			rule(forward, append(append(append(ifname(unix.NFT_META_IIFNAME, b.name, true), ipMatch(16, netip.PrefixFrom(a, 32))...),
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 53}}),
				&expr.Verdict{Kind: expr.VerdictAccept})...)
		}
	}
	for _, p := range deny {
		if !p.Addr().Is4() {
			continue
		}
		rule(forward, append(append(ifname(unix.NFT_META_IIFNAME, b.name, true), ipMatch(16, p)...), reject)...)
	}
	// Nothing from outside opens a connection to a job: only replies
	// (and errors about them) come in.
	rule(forward, append(append(ifname(unix.NFT_META_OIFNAME, b.name, true), ctState(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED, false)...),
		&expr.Verdict{Kind: expr.VerdictDrop})...)
	// The rest leaves with the host's address.
	rule(post, append(append(ipMatch(12, b.block), ifname(unix.NFT_META_OIFNAME, b.name, false)...), &expr.Masq{})...)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table inet %s: %w", b.table, err)
	}
	return nil
}

// ifname matches the input or output interface's name (key
// NFT_META_IIFNAME or NFT_META_OIFNAME), or, with is false, any other.
func ifname(key uint32, name string, is bool) []expr.Any {
	data := make([]byte, unix.IFNAMSIZ)
	copy(data, name)
	op := expr.CmpOpEq
	if !is {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKey(key), Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: data},
	}
}

// ipMatch matches IPv4 packets whose address at offset off of the network
// header (12: source, 16: destination) is in p.
func ipMatch(off uint32, p netip.Prefix) []expr.Any {
	mask := net.CIDRMask(p.Bits(), 32)
	a := p.Masked().Addr().As4()
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]},
	}
}

// ctState matches packets whose conntrack state is one of states (or,
// with in false, none of them).
func ctState(states uint32, in bool) []expr.Any {
	native := func(v uint32) []byte {
		b := make([]byte, 4)
		binary.NativeEndian.PutUint32(b, v)
		return b
	}
	op := expr.CmpOpNeq
	if !in {
		op = expr.CmpOpEq
	}
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native(states), Xor: native(0)},
		&expr.Cmp{Op: op, Register: 1, Data: native(0)},
	}
}

// enableForwarding turns IPv4 forwarding on, without which no job packet
// leaves the host. It stays on when the worker stops: other workers, or
// other software of the host, may route too.
func enableForwarding(log *slog.Logger) error {
	const knob = "/proc/sys/net/ipv4/ip_forward"
	b, err := os.ReadFile(knob)
	if err != nil {
		return fmt.Errorf("read %s: %w", knob, err)
	}
	if bytes.Equal(bytes.TrimSpace(b), []byte("1")) {
		return nil
	}
	if err := os.WriteFile(knob, []byte("1"), 0); err != nil {
		return fmt.Errorf("turn IPv4 forwarding on for the job bridge: %w", err)
	}
	log.Info("turned IPv4 forwarding on (net.ipv4.ip_forward = 1) for the jobs' bridge")
	return nil
}

// jailNet is a job namespace's place on the bridge.
type jailNet struct {
	addr netip.Addr
	veth string // the host side
}

// attach connects the network namespace nsFD to the bridge: a veth pair
// whose host side is an isolated port of the bridge and whose other side,
// eth0, is made in the namespace with the next free address and a MAC
// derived from it. The namespace's side is configured by configure, from
// inside.
func (b *bridge) attach(nsFD int) (*jailNet, error) {
	b.mu.Lock()
	var addr netip.Addr
	if n := len(b.free); n > 0 {
		addr, b.free = b.free[n-1], b.free[:n-1]
	} else if b.block.Contains(b.next.Next()) { // the last is the broadcast
		addr, b.next = b.next, b.next.Next()
	}
	b.nextVeth++
	name := b.prefix + strconv.FormatInt(int64(b.nextVeth), 36)
	b.mu.Unlock()
	if !addr.IsValid() {
		return nil, fmt.Errorf("the job bridge's %s has no free address: more jobs run on this worker than the block holds (-bridge-block)", b.block)
	}
	br, err := netlink.LinkByName(b.name)
	if err != nil {
		b.putAddr(addr)
		return nil, fmt.Errorf("job bridge %s: %w", b.name, err)
	}
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: name, MTU: b.mtu, MasterIndex: br.Attrs().Index},
		PeerName:         "eth0",
		PeerHardwareAddr: macOf(addr),
		PeerNamespace:    netlink.NsFd(nsFD),
		PeerMTU:          uint32(b.mtu),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		b.putAddr(addr)
		return nil, fmt.Errorf("make the job's veth %s: %w", name, err)
	}
	jn := &jailNet{addr: addr, veth: name}
	if err := netlink.LinkSetIsolated(veth, true); err != nil {
		b.detach(jn)
		return nil, fmt.Errorf("isolate the job's veth %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		b.detach(jn)
		return nil, fmt.Errorf("bring the job's veth %s up: %w", name, err)
	}
	return jn, nil
}

// configure sets up eth0 in the calling thread's network namespace: jn's
// address in the block, up, the default route through the bridge.
func (b *bridge) configure(jn *jailNet) error {
	eth, err := netlink.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("the job's eth0: %w", err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: jn.addr.AsSlice(), Mask: net.CIDRMask(b.block.Bits(), 32)}}
	if err := netlink.AddrAdd(eth, addr); err != nil {
		return fmt.Errorf("address the job's eth0: %w", err)
	}
	if err := netlink.LinkSetUp(eth); err != nil {
		return fmt.Errorf("bring the job's eth0 up: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: b.gateway.AsSlice()}); err != nil {
		return fmt.Errorf("route the job's traffic through the bridge: %w", err)
	}
	return nil
}

// detach removes a namespace's veth pair (both sides go) and gives its
// address back.
func (b *bridge) detach(jn *jailNet) {
	if l, err := netlink.LinkByName(jn.veth); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			b.log.Warn("remove a job's veth", "veth", jn.veth, "err", err)
			return // its address stays out of use
		}
	}
	b.putAddr(jn.addr)
}

// putAddr gives an address back.
func (b *bridge) putAddr(a netip.Addr) {
	b.mu.Lock()
	b.free = append(b.free, a)
	b.mu.Unlock()
}

// close removes the table and the bridge and drops the lease.
func (b *bridge) close() {
	if err := removeBridge(b.name, b.table, b.prefix); err != nil {
		b.log.Warn("remove the job bridge", "bridge", b.name, "err", err)
	}
	if b.lease != nil {
		os.Remove(b.record)
		b.lease.Close()
		b.lease = nil
	}
	if b.node != nil {
		b.node.Close()
		b.node = nil
	}
}

// removeBridge deletes the nftables table, the veths whose names start
// with vethPrefix and the bridge device, those that exist.
func removeBridge(dev, table, vethPrefix string) error {
	var errs []error
	if c, err := nftables.New(); err != nil {
		errs = append(errs, fmt.Errorf("nftables: %w", err))
	} else if tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet); err != nil {
		errs = append(errs, fmt.Errorf("list nftables tables: %w", err))
	} else {
		for _, t := range tables {
			if t.Name == table {
				c.DelTable(t)
				if err := c.Flush(); err != nil {
					errs = append(errs, fmt.Errorf("delete nftables table inet %s: %w", table, err))
				}
			}
		}
	}
	links, err := dumpAll(netlink.LinkList)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list links: %w", err))...)
	}
	for _, l := range links {
		if n := l.Attrs().Name; n == dev || strings.HasPrefix(n, vethPrefix) {
			if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
				errs = append(errs, fmt.Errorf("delete link %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}
