package httpapi

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/drover-sched/drover/internal/tlsutil"
)

// RateLimits bound the requests one token may make to one server, so one
// client cannot take a server's time from everyone else. A token bucket per
// user and per worker instance refills at the rate and holds twice a
// second's worth. Zero: no limit.
type RateLimits struct {
	UserPerSecond   float64
	WorkerPerSecond float64
	// AnonymousPerSecond bounds, per client address, the requests that
	// fail to authenticate (no token, an unknown or expired one, a wrong
	// worker secret or metrics token).
	AnonymousPerSecond float64
}

// limiters holds a token bucket per authenticated caller. Buckets are
// created only after a token was checked, so strangers cannot grow the
// map, and a bucket idle for a minute is dropped (it would be full again
// anyway).
type limiters struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// take takes one request from key's bucket (refilling at perSecond) and
// returns how long to wait when it is empty.
func (l *limiters) take(key string, perSecond float64, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	if now.Sub(l.lastSweep) > time.Minute {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > time.Minute {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[key]
	if b == nil {
		burst := max(1, int(math.Ceil(2*perSecond)))
		b = &bucket{lim: rate.NewLimiter(rate.Limit(perSecond), burst)}
		l.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// roomFor reports whether key has a bucket or a new one would keep the
// buckets at most max.
func (l *limiters) roomFor(key string, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.buckets[key]
	return ok || len(l.buckets) < max
}

// allowRate takes one request of who (a user or worker, for messages) from
// its bucket, or returns a 429 error (and sets Retry-After). Requests relayed by another
// server of the cluster (a log gathered from peers) are not counted again:
// the server that received them counted them.
func (s *Server) allowRate(w http.ResponseWriter, r *http.Request, key, who, setting string, perSecond float64) error {
	return s.allowRateIn(&s.limits, w, r, key, who, setting, perSecond)
}

// allowRateIn is allowRate with the buckets of l.
func (s *Server) allowRateIn(l *limiters, w http.ResponseWriter, r *http.Request, key, who, setting string, perSecond float64) error {
	if perSecond <= 0 || s.fromPeer(r) {
		return nil
	}
	wait, ok := l.take(key, perSecond, time.Now())
	if ok {
		return nil
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return codedf(http.StatusTooManyRequests, "%s sent more than %g requests per second to this server (server setting %s); retry after %ds",
		who, perSecond, setting, secs)
}

// fromPeer reports whether r was sent by another server of the cluster: it
// names a member in the forwarding header and comes from that member's
// host.
func (s *Server) fromPeer(r *http.Request) bool {
	id := r.Header.Get(forwardedHeader)
	if id == "" || s.members == nil {
		return false
	}
	m, ok := s.members.Member(id)
	if !ok || m.HTTP == "" {
		return false
	}
	peerHost, _, err := net.SplitHostPort(m.HTTP)
	if err != nil {
		return false
	}
	from, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || from != peerHost {
		return false
	}
	if r.TLS != nil {
		// Over TLS, a server proves it is one with its certificate.
		return len(r.TLS.VerifiedChains) > 0 && r.TLS.VerifiedChains[0][0].VerifyHostname(tlsutil.ServerName) == nil
	}
	return true
}
