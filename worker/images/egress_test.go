package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Egress.Check: the host's loopback, link-local, unspecified, multicast
// and broadcast addresses (also through IPv4-mapped and NAT64 forms) and
// what Deny says are refused; the rest, and what AllowPrefixes lists,
// are not.
func TestEgressCheck(t *testing.T) {
	e := Egress{
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")},
		Deny: func(a netip.Addr) (string, bool) {
			return "a server's address", a == netip.MustParseAddr("10.0.0.9")
		},
	}
	for addr, refused := range map[string]bool{
		"127.0.0.1":        true,
		"127.9.9.9":        true,
		"::1":              true,
		"::ffff:127.0.0.1": true,
		"64:ff9b::7f00:1":  true, // 127.0.0.1 through NAT64
		"169.254.169.254":  true,
		"fe80::1":          true,
		"0.0.0.0":          true,
		"0.1.2.3":          true,
		"::":               true,
		"224.0.0.1":        true,
		"255.255.255.255":  true,
		"10.0.0.9":         true,
		"10.0.0.8":         false,
		"192.168.1.10":     false,
		"8.8.8.8":          false,
		"2001:db8::1":      false,
		"127.0.0.2":        false, // allowed by prefix
	} {
		why := e.Check(netip.MustParseAddr(addr))
		if (why != "") != refused {
			t.Errorf("Check(%s) = %q, want refused %v", addr, why, refused)
		}
	}
}

// service is a server of the host that is not a registry: it answers every
// request with a secret and counts them.
func service(t *testing.T) (addr string, hits *atomic.Int64) {
	t.Helper()
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(500)
		fmt.Fprint(w, "SECRET-of-the-host")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), hits
}

// A pull of a reference that names a service of the host's loopback, by
// address or by a name that resolves there, never connects to it, and its
// error says why without anything the service could have said. Without
// the rule the worker asked the service for /v2/ and the job's error
// carried its answer.
func TestPullRefusesTheHost(t *testing.T) {
	addr, hits := service(t)
	_, port, _ := net.SplitHostPort(addr)
	s := openStore(t, t.TempDir(), "test", func(c *Config) { c.Egress = Egress{} })
	for _, ref := range []string{addr + "/internal/x:1", "localhost:" + port + "/internal/x:1", "LOCALHOST:" + port + "/internal/x:1", "[::1]:" + port + "/internal/x:1"} {
		_, err := s.Get(context.Background(), ref)
		checkPullError(t, err, ref, ReasonRefused, true, "does not connect", "loopback", "-registry-allow")
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error carries the service's answer: %v", ref, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's service was asked %d times", n)
	}
}

// A registry the operator allowed by name may answer anything, but where it
// sends the pull (a redirect, a token service) is checked again: a
// redirect to the host's loopback is not followed, nor is a token realm
// there, and a registry's error answer reaches the job as its status
// alone.
func TestPullFollowsOnlyAllowedDestinations(t *testing.T) {
	target, hits := service(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/v2/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(200)
		case strings.HasPrefix(r.URL.Path, "/v2/redirect/"):
			http.Redirect(w, r, "http://"+target+"/latest/meta-data/", http.StatusFound)
		default:
			w.WriteHeader(500)
			fmt.Fprint(w, `{"errors":[{"code":"UNKNOWN","message":"SECRET-of-the-registry"}]}`)
		}
	})
	reg := httptest.NewServer(mux)
	t.Cleanup(reg.Close)
	host := reg.Listener.Addr().String()
	// A registry whose token service is the host's service.
	realm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="http://`+target+`/token",service="x"`)
		w.WriteHeader(401)
	}))
	t.Cleanup(realm.Close)
	realmHost := realm.Listener.Addr().String()
	s := openStore(t, t.TempDir(), "test", func(c *Config) { c.Egress = Egress{AllowHosts: []string{host, realmHost}} })
	for _, c := range []struct {
		ref    string
		reason Reason
		words  []string
	}{
		{host + "/redirect/x:1", ReasonRefused, []string{"does not connect", "loopback"}},
		{realmHost + "/realm/x:1", ReasonRefused, []string{"does not connect", "loopback"}},
		{host + "/other/x:1", ReasonTransient, []string{"HTTP 500 Internal Server Error"}},
	} {
		ref := c.ref
		_, err := s.Get(context.Background(), ref)
		checkPullError(t, err, ref, c.reason, c.reason != ReasonTransient, c.words...)
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error carries an answer's body: %v", ref, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host's service was reached %d times through the registry", n)
	}
}

// A pull that a registry holds ends at PullTimeout, with a message that
// names the worker's setting; the registry's stall does not hold the job.
func TestPullTimeout(t *testing.T) {
	release := make(chan struct{})
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); reg.Close() })
	s := openStore(t, t.TempDir(), "test", func(c *Config) { c.PullTimeout = 300 * time.Millisecond })
	ref := reg.Listener.Addr().String() + "/slow/x:1"
	begin := time.Now()
	_, err := s.Get(context.Background(), ref)
	checkPullError(t, err, ref, ReasonTimeout, false, "not done after 300ms", "-pull-timeout")
	if took := time.Since(begin); took > time.Minute {
		t.Errorf("the pull took %s", took)
	}
	var pe *PullError
	if !errors.As(err, &pe) {
		t.Fatal(err)
	}
	// A caller that gives up first is not a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(ctx, ref); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled Get: %v", err)
	}
}
