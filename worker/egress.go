package worker

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"

	"github.com/drover-sched/drover/worker/images"
)

// pullEgress is where the worker's image pulls may connect (see
// images.Egress): not to the host's own addresses, the servers' or the
// jobs' bridge deny list (nor, by images' own rule, loopback and
// link-local addresses), whatever the job's network, but for the
// registries the operator allowed (Config.RegistryAllow: CIDRs,
// addresses, or registry hosts by name; InsecureRegistries are allowed
// by name too).
func pullEgress(cfg *Config, log *slog.Logger) images.Egress {
	var e images.Egress
	for _, a := range cfg.RegistryAllow {
		if p, err := netip.ParsePrefix(a); err == nil {
			e.AllowPrefixes = append(e.AllowPrefixes, p.Masked())
		} else if ad, err := netip.ParseAddr(a); err == nil {
			e.AllowPrefixes = append(e.AllowPrefixes, netip.PrefixFrom(ad.Unmap(), ad.Unmap().BitLen()))
		} else {
			e.AllowHosts = append(e.AllowHosts, a)
		}
	}
	servers := serverAddrs(cfg.Servers, "ip", log)
	deny := slices.Clone(cfg.BridgeDeny)
	e.Deny = func(a netip.Addr) (string, bool) {
		if slices.Contains(servers, a) {
			return "a server's address", true
		}
		for _, p := range deny {
			if p.Contains(a) {
				return "in the worker's -bridge-deny " + p.String(), true
			}
		}
		if isHostAddr(a) {
			return "an address of this host", true
		}
		return "", false
	}
	return e
}

// isHostAddr reports whether a is an address of one of the host's
// interfaces (read at each call: they change).
func isHostAddr(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: refuse
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if h, ok := netip.AddrFromSlice(n.IP); ok && h.Unmap() == a {
				return true
			}
		}
	}
	return false
}
