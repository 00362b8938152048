package images

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Egress says where a pull may connect. A pull is made by the worker, with
// the worker's network position, for a reference a job chose: without a
// rule a job that names "127.0.0.1:5998/x:1" (or a registry that redirects
// there, or whose token service is there, or whose name resolves there a
// second time) has the worker call a service of the host, the cloud's
// metadata server or the control plane, and reads the answer in its error.
// So every connection a pull makes (to the registry, its token service,
// each redirect's host) is checked at connect time against the address it
// really reaches: never the host's loopback, a link-local address (where
// clouds serve their metadata), an unspecified or multicast address, nor
// what Deny refuses (the worker's: the host's own addresses, the servers',
// the jobs' bridge deny list), whatever the job's network, unless the
// operator allowed that registry by name or its address by prefix.
type Egress struct {
	// AllowHosts are registries, as references name them (host or
	// host:port), that pulls reach wherever they are: the operator's.
	AllowHosts []string
	// AllowPrefixes are addresses pulls may reach even where the rule
	// refuses them.
	AllowPrefixes []netip.Prefix
	// Deny refuses more addresses, saying why.
	Deny func(netip.Addr) (why string, denied bool)
}

// RefusedError is a connection a pull may not make.
type RefusedError struct {
	Host string     // as the request named it
	Addr netip.Addr // the address refused
	Why  string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the worker does not connect to %s for a pull (%s is %s); an operator can allow a registry with the worker's -registry-allow", e.Host, e.Addr, e.Why)
}

// nat64 is the well-known NAT64 prefix: its addresses reach the IPv4
// address in their last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Check returns why a may not be reached, or "" if it may.
func (e *Egress) Check(a netip.Addr) string {
	a = a.Unmap()
	for _, p := range e.AllowPrefixes {
		if p.Contains(a) {
			return ""
		}
	}
	if nat64.Contains(a) {
		b := a.As16()
		if why := e.Check(netip.AddrFrom4([4]byte(b[12:]))); why != "" {
			return why + " (through NAT64)"
		}
	}
	switch {
	case a.IsLoopback():
		return "the host's loopback"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "link-local, where clouds serve their metadata"
	case a.IsUnspecified() || a.Is4() && a.As4()[0] == 0:
		return "an unspecified address, which reaches the host itself"
	case a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "a multicast or broadcast address"
	}
	if e.Deny != nil {
		if why, denied := e.Deny(a); denied {
			return why
		}
	}
	return ""
}

// allowedHost reports whether a dial to hostport (host:port) is to a
// registry the operator allowed by name: an entry with a port allows that
// port, one without any.
func (e *Egress) allowedHost(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	for _, a := range e.AllowHosts {
		h, p, err := net.SplitHostPort(a)
		if err != nil {
			h, p = a, ""
		}
		if strings.EqualFold(h, host) && (p == "" || p == port) {
			return true
		}
	}
	return false
}

// transport is the HTTP transport of pulls: the default one's settings,
// with every connection checked.
func (e *Egress) transport() *http.Transport {
	guarded := &net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		// The address checked is the one connected to: a name that
		// resolved to an allowed address and then to a refused one
		// (DNS rebinding) is refused at the second connection.
		ControlContext: func(ctx context.Context, network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("pull: cannot check the address %q: %w", address, err)
			}
			if why := e.Check(ap.Addr()); why != "" {
				return &RefusedError{Host: hostOf(ctx), Addr: ap.Addr().Unmap(), Why: why}
			}
			return nil
		},
	}
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	t.Proxy = e.proxy
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if e.allowedHost(addr) {
			return plain.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(withHost(ctx, addr), network, addr)
	}
	return t
}

// proxy is the environment's proxy (HTTPS_PROXY, ...), which the operator
// chose and a pull may reach; the proxy then connects where the request
// names, so the names a request through it names are checked here, as
// they resolve now.
func (e *Egress) proxy(req *http.Request) (*url.URL, error) {
	u, err := http.ProxyFromEnvironment(req)
	if u == nil || err != nil {
		return u, err
	}
	if e.allowedHost(req.URL.Host) {
		return u, nil
	}
	host := req.URL.Hostname()
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else {
		if addrs, err = net.DefaultResolver.LookupNetIP(req.Context(), "ip", host); err != nil {
			return nil, fmt.Errorf("pull through the proxy: resolve %s: %w", host, err)
		}
	}
	for _, a := range addrs {
		if why := e.Check(a); why != "" {
			return nil, &RefusedError{Host: req.URL.Host, Addr: a.Unmap(), Why: why}
		}
	}
	return u, nil
}

type hostKey struct{}

func withHost(ctx context.Context, hostport string) context.Context {
	return context.WithValue(ctx, hostKey{}, hostport)
}

func hostOf(ctx context.Context) string {
	h, _ := ctx.Value(hostKey{}).(string)
	return h
}

// refused finds a RefusedError in err.
func refused(err error) *RefusedError {
	var re *RefusedError
	if errors.As(err, &re) {
		return re
	}
	return nil
}
