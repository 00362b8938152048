package bench

import (
	"fmt"
	"net/netip"

	"github.com/drover-sched/drover/testkit/regions"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// wanPorts are the servers' HTTP, Raft and gossip ports in their regions.
var wanPorts = [3]int{7001, 7002, 7003}

// WANLatency is the one-way latency between the regions of servers a and
// b (ms): 30, 60 and 80 between three, as between us-east, us-central and
// us-west.
func WANLatency(a, b int) int {
	if a > b {
		a, b = b, a
	}
	switch [2]int{a, b} {
	case [2]int{0, 1}:
		return 30
	case [2]int{0, 2}:
		return 60
	case [2]int{1, 2}:
		return 80
	}
	return 30 + 10*(a+b)
}

// wan puts each server of opts in a region of its own (a network
// namespace: needs root), WANLatency apart, with jitter of a tenth; the
// bench process (its simulated workers and clients) reaches every server
// without delay. The returned func removes the regions.
func wan(opts *testcluster.Options) (func(), error) {
	if why := regions.Available(); why != "" {
		return nil, fmt.Errorf("-wan: %s (the regions are network namespaces)", why)
	}
	cfg := regions.DefaultConfig()
	cfg.Prefix, cfg.Subnet, cfg.ProxyBase = "drvb", netip.MustParsePrefix("10.79.0.0/24"), 33000
	cfg.Regions = opts.Servers
	cfg.Ports = []uint16{uint16(wanPorts[0]), uint16(wanPorts[1]), uint16(wanPorts[2])}
	n, err := regions.Up(cfg)
	if err != nil {
		return nil, err
	}
	for a := range n.Regions {
		for b := a + 1; b < len(n.Regions); b++ {
			ms := WANLatency(a, b)
			if err := n.Latency(a, b, ms, ms/10); err != nil {
				n.Close()
				return nil, err
			}
		}
	}
	opts.IPs = nil
	for _, r := range n.Regions {
		opts.IPs = append(opts.IPs, r.IPs[0].String())
	}
	ports := wanPorts
	opts.Ports = &ports
	opts.Wrap = func(i int) []string { return n.Regions[i].Wrap() }
	return n.Close, nil
}
