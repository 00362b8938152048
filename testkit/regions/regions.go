// Package regions lays out regions on one machine for failover drills:
// each region a network namespace joined to a bridge in the host's
// through a veth pair, a fault proxy (Shopify's toxiproxy, in process) on
// every TCP path from one region to another for WAN latency and jitter,
// and nftables in each region for partitions, one-way cuts and packet
// loss. The kernel here has no netem qdisc, so delay lives in userspace;
// loss and cuts are the kernel's.
//
// How a path is built: a process in region A dials a service of region B
// at B's address; A's nftables output chain rewrites the destination
// (DNAT) to the proxy for A→B and that service on the host's bridge
// address, and the proxy dials B. The drop rules sit in a chain hooked
// before the DNAT, so they see where a packet was meant to go. UDP (gossip
// probes) goes straight over the bridge: it sees cuts and loss, not
// latency.
//
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for the namespaces).
package regions

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Config lays out the regions.
type Config struct {
	// Prefix names what is made: the bridge Prefix+"br", the namespaces
	// Prefix+"-r1"... (at most 8 bytes).
	Prefix string
	// Regions is how many (2 to 9).
	Regions int
	// Subnet is a /24 of the host's unused addresses: region i (1-based)
	// gets .i and .10+i, the host .254 on the bridge.
	Subnet netip.Prefix
	// Ports are the TCP ports of the services regions reach in each
	// other (the proxies carry these).
	Ports []uint16
	// ProxyBase is the first host port the proxies listen on.
	ProxyBase uint16
}

// DefaultConfig is three regions in 10.77.0.0/24.
func DefaultConfig() Config {
	return Config{Prefix: "drv", Regions: 3, Subnet: netip.MustParsePrefix("10.77.0.0/24"), ProxyBase: 31000}
}

// Validate checks a layout.
func (c Config) Validate() error {
	switch {
	case c.Prefix == "" || len(c.Prefix) > 8:
		return fmt.Errorf("regions: prefix %q: 1 to 8 bytes", c.Prefix)
	case c.Regions < 2 || c.Regions > 9:
		return fmt.Errorf("regions: %d regions: 2 to 9", c.Regions)
	case !c.Subnet.Addr().Is4() || c.Subnet.Bits() != 24:
		return fmt.Errorf("regions: subnet %s: an IPv4 /24", c.Subnet)
	case len(c.Ports) == 0:
		return errors.New("regions: no service ports to proxy")
	case int(c.ProxyBase)+c.Regions*c.Regions*2*len(c.Ports) > 65535:
		return fmt.Errorf("regions: proxy ports from %d do not fit", c.ProxyBase)
	}
	return nil
}

// Net is the regions laid out.
type Net struct {
	cfg     Config
	Host    netip.Addr // the host's address on the bridge
	Regions []*Region

	srv     *toxiproxy.ApiServer
	mu      sync.Mutex
	proxies map[pathKey][]*toxiproxy.Proxy // from region, to region: every address and port
	toxics  map[*toxiproxy.Proxy][]string
}

type pathKey struct{ from, to int }

// Region is one namespace.
type Region struct {
	Index int    // 0-based
	Name  string // "r1"...
	// IPs are the region's addresses: a server listens on one; the
	// second is for a replacement.
	IPs  []netip.Addr
	Path string // the namespace's bind mount (nsenter --net=Path)
	ns   netns.NsHandle
	nft  *nftables.Conn
	tab  *nftables.Table
	drop *nftables.Chain
}

// Wrap returns argv run inside the region's network namespace.
func (r *Region) Wrap(argv ...string) []string {
	return append([]string{"nsenter", "--net=" + r.Path, "--"}, argv...)
}

// Up lays the regions out. What an earlier run left under the same
// names is removed first.
func Up(cfg Config) (_ *Net, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base := cfg.Subnet.Masked().Addr().As4()
	addr := func(last byte) netip.Addr { a := base; a[3] = last; return netip.AddrFrom4(a) }
	n := &Net{cfg: cfg, Host: addr(254), proxies: map[pathKey][]*toxiproxy.Proxy{}, toxics: map[*toxiproxy.Proxy][]string{}}
	n.cleanup()
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: cfg.Prefix + "br"}}
	if err := netlink.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("regions: add bridge: %w", err)
	}
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(n.Host, 24))}); err != nil {
		return nil, fmt.Errorf("regions: bridge address: %w", err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("regions: bridge up: %w", err)
	}
	for i := 0; i < cfg.Regions; i++ {
		r := &Region{Index: i, Name: fmt.Sprintf("r%d", i+1), IPs: []netip.Addr{addr(byte(i + 1)), addr(byte(11 + i))}}
		if err := n.addRegion(r, br); err != nil {
			return nil, err
		}
		n.Regions = append(n.Regions, r)
	}
	n.srv = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	n.srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	for _, from := range n.Regions {
		for _, to := range n.Regions {
			if from == to {
				continue
			}
			if err := n.addPath(from, to); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range n.Regions {
		if err := r.nft.Flush(); err != nil {
			return nil, fmt.Errorf("regions: %s's rules: %w", r.Name, err)
		}
	}
	return n, nil
}

func (n *Net) nsName(i int) string { return fmt.Sprintf("%s-r%d", n.cfg.Prefix, i+1) }

// cleanup removes the bridge and namespaces of these names.
func (n *Net) cleanup() {
	if l, err := netlink.LinkByName(n.cfg.Prefix + "br"); err == nil {
		_ = netlink.LinkDel(l)
	}
	for i := 0; i < 9; i++ {
		_ = netns.DeleteNamed(n.nsName(i))
		if l, err := netlink.LinkByName(fmt.Sprintf("%sh%d", n.cfg.Prefix, i+1)); err == nil {
			_ = netlink.LinkDel(l)
		}
	}
}

// addRegion makes the namespace, its veth pair and its rule table.
func (n *Net) addRegion(r *Region, br *netlink.Bridge) error {
	// NewNamed moves the calling thread into the new namespace: do it on
	// a locked thread and move back.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := netns.Get()
	if err != nil {
		return fmt.Errorf("regions: this namespace: %w", err)
	}
	defer home.Close()
	r.ns, err = netns.NewNamed(n.nsName(r.Index))
	if serr := netns.Set(home); serr != nil {
		return fmt.Errorf("regions: back to the host's namespace: %w", serr)
	}
	if err != nil {
		return fmt.Errorf("regions: namespace %s: %w", n.nsName(r.Index), err)
	}
	r.Path = "/var/run/netns/" + n.nsName(r.Index)
	hostSide := fmt.Sprintf("%sh%d", n.cfg.Prefix, r.Index+1)
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostSide, MasterIndex: br.Index}, PeerName: "eth0",
		PeerNamespace: netlink.NsFd(int(r.ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("regions: veth of %s: %w", r.Name, err)
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		return fmt.Errorf("regions: veth of %s up: %w", r.Name, err)
	}
	h, err := netlink.NewHandleAt(r.ns)
	if err != nil {
		return fmt.Errorf("regions: netlink in %s: %w", r.Name, err)
	}
	defer h.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("regions: %s in %s: %w", name, r.Name, err)
		}
		if name == "eth0" {
			for _, ip := range r.IPs {
				if err := h.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(ip, 24))}); err != nil {
					return fmt.Errorf("regions: address %s in %s: %w", ip, r.Name, err)
				}
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("regions: %s up in %s: %w", name, r.Name, err)
		}
	}
	r.nft, err = nftables.New(nftables.WithNetNSFd(int(r.ns)))
	if err != nil {
		return fmt.Errorf("regions: nftables in %s: %w", r.Name, err)
	}
	r.tab = r.nft.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "drover_regions"})
	// Drops first (raw priority, before the DNAT), then the DNAT to the
	// proxies.
	r.drop = r.nft.AddChain(&nftables.Chain{Name: "drop", Table: r.tab, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRaw})
	r.nft.AddChain(&nftables.Chain{Name: "wan", Table: r.tab, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	return r.nft.Flush()
}

// addPath starts a proxy for each address and port of to, and has from
// reach them through it.
func (n *Net) addPath(from, to *Region) error {
	wan := &nftables.Chain{Name: "wan", Table: from.tab}
	for a, ip := range to.IPs {
		for k, port := range n.cfg.Ports {
			listen := n.cfg.ProxyBase + uint16(((from.Index*n.cfg.Regions+to.Index)*len(to.IPs)+a)*len(n.cfg.Ports)+k)
			p := toxiproxy.NewProxy(n.srv, fmt.Sprintf("%s-%s-%d-%d", from.Name, to.Name, a, port),
				netip.AddrPortFrom(n.Host, listen).String(), netip.AddrPortFrom(ip, port).String())
			if err := p.Start(); err != nil {
				return fmt.Errorf("regions: proxy %s to %s:%d: %w", from.Name, ip, port, err)
			}
			n.proxies[pathKey{from.Index, to.Index}] = append(n.proxies[pathKey{from.Index, to.Index}], p)
			dst := ip.As4()
			host := n.Host.As4()
			from.nft.AddRule(&nftables.Rule{Table: from.tab, Chain: wan, Exprs: []expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dst[:]},
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
				&expr.Immediate{Register: 1, Data: host[:]},
				&expr.Immediate{Register: 2, Data: binary.BigEndian.AppendUint16(nil, listen)},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2},
			}})
		}
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Latency delays what region a sends to b, and what b sends to a, by ms
// each way (give or take jitter ms): a round trip between them takes
// about 2×ms. It replaces the latency set on that path before.
func (n *Net) Latency(a, b, ms, jitter int) error {
	for _, k := range []pathKey{{a, b}, {b, a}} {
		for _, p := range n.path(k) {
			for _, d := range []string{"upstream", "downstream"} {
				if err := n.setToxic(p, "latency-"+d, "latency", d, map[string]any{"latency": ms, "jitter": jitter}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (n *Net) path(k pathKey) []*toxiproxy.Proxy {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proxies[k]
}

func (n *Net) setToxic(p *toxiproxy.Proxy, name, kind, stream string, attrs map[string]any) error {
	_ = p.Toxics.RemoveToxic(context.Background(), name)
	b, _ := json.Marshal(map[string]any{"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attrs})
	if _, err := p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		return fmt.Errorf("regions: %s on %s: %w", name, p.Name, err)
	}
	n.mu.Lock()
	n.toxics[p] = append(n.toxics[p], name)
	n.mu.Unlock()
	return nil
}

// Isolate cuts region i off from every other (not from the host: a
// test still reaches it), both ways, as a partition does.
func (n *Net) Isolate(i int) error {
	for j := range n.Regions {
		if j != i {
			if err := n.OneWay(i, j); err != nil {
				return err
			}
			if err := n.OneWay(j, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// OneWay drops every packet region from sends to region to, whoever
// opened the connection; what to sends to from still arrives.
func (n *Net) OneWay(from, to int) error {
	f := n.Regions[from]
	for _, ip := range n.Regions[to].IPs {
		f.nft.AddRule(&nftables.Rule{Table: f.tab, Chain: f.drop, Exprs: append(matchDst(ip), &expr.Verdict{Kind: expr.VerdictDrop})})
	}
	if err := f.nft.Flush(); err != nil {
		return fmt.Errorf("regions: cut %s to %s: %w", f.Name, n.Regions[to].Name, err)
	}
	// Connections to opened through its proxies: their replies leave
	// from towards the host, past the drop rule; the proxy drops them.
	for _, p := range n.path(pathKey{to, from}) {
		if err := n.setToxic(p, "cut-downstream", "timeout", "downstream", map[string]any{"timeout": 0}); err != nil {
			return err
		}
	}
	return nil
}

// Loss drops pct percent of the packets each region sends out of its
// namespace, at random (0 turns it off).
func (n *Net) Loss(pct int) error {
	if pct < 0 || pct > 100 {
		return fmt.Errorf("regions: loss %d%%", pct)
	}
	for _, r := range n.Regions {
		r.nft.AddRule(&nftables.Rule{Table: r.tab, Chain: r.drop, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("eth0")},
			&expr.Numgen{Register: 1, Modulus: 100, Type: unix.NFT_NG_RANDOM},
			// numgen leaves a host-order u32 below 100: its first byte
			// compares as the whole number.
			&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: []byte{byte(pct), 0, 0, 0}},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
		if err := r.nft.Flush(); err != nil {
			return fmt.Errorf("regions: loss in %s: %w", r.Name, err)
		}
	}
	return nil
}

// Heal lifts every cut and loss (latency stays).
func (n *Net) Heal() error {
	for _, r := range n.Regions {
		r.nft.FlushChain(r.drop)
		if err := r.nft.Flush(); err != nil {
			return fmt.Errorf("regions: heal %s: %w", r.Name, err)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for p, names := range n.toxics {
		var keep []string
		for _, name := range names {
			if name == "cut-downstream" {
				_ = p.Toxics.RemoveToxic(context.Background(), name)
				continue
			}
			keep = append(keep, name)
		}
		n.toxics[p] = keep
	}
	return nil
}

// Close stops the proxies and removes the namespaces and the bridge.
func (n *Net) Close() {
	n.mu.Lock()
	for _, ps := range n.proxies {
		for _, p := range ps {
			p.Stop()
		}
	}
	n.proxies = map[pathKey][]*toxiproxy.Proxy{}
	n.mu.Unlock()
	for _, r := range n.Regions {
		if r.nft != nil {
			_ = r.nft.CloseLasting()
		}
		r.ns.Close()
	}
	n.cleanup()
}

func matchDst(ip netip.Addr) []expr.Any {
	a := ip.As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]},
	}
}

func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// Available says why regions cannot be laid out here ("" when they can).
func Available() string {
	if os.Geteuid() != 0 {
		return "needs root"
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return "no network namespaces"
	}
	return ""
}

// Do runs f on a thread inside the region's namespace: sockets f opens
// belong to the region (a listener stays there after f returns).
func (r *Region) Do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := netns.Get()
	if err != nil {
		return err
	}
	defer home.Close()
	if err := netns.Set(r.ns); err != nil {
		return fmt.Errorf("regions: enter %s: %w", r.Name, err)
	}
	ferr := f()
	if err := netns.Set(home); err != nil {
		// The thread cannot go back: let it die with the goroutine.
		runtime.LockOSThread()
		return fmt.Errorf("regions: leave %s: %w", r.Name, err)
	}
	return ferr
}
