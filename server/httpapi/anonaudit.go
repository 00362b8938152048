package httpapi

import (
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/drover-sched/drover/server/state"
)

// Callers without a valid token are strangers: what they send must not
// reach the Raft log in proportion to how much they send. Their audited
// requests are counted per address, method, route, status and minute,
// and each count goes to the log once, as one entry, when its minute
// is over (anonCounter); their failed attempts to authenticate are held to
// a rate per address (allowAnonymous).

// maxAnonKeys bounds the counts kept at once; the requests of further
// addresses are counted under otherAddresses.
const maxAnonKeys = 256

// otherAddresses stands for the addresses counted after maxAnonKeys.
const otherAddresses = "(other addresses)"

// anonWindow is the time one count covers.
const anonWindow = time.Minute

type anonKey struct {
	remote, method, route string
	status                int
	window                int64 // the window's start, unix ns
}

// anonCounter counts audited requests of callers without a valid token.
type anonCounter struct {
	mu     sync.Mutex
	counts map[anonKey]*state.AuditEntry
}

// add counts e (an entry already trimmed to the log's sizes); the first
// request of a count gives the entry its time, path and message.
func (c *anonCounter) add(e state.AuditEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[anonKey]*state.AuditEntry{}
	}
	k := anonKey{remote: e.Remote, method: e.Method, route: e.Route, status: e.Status, window: e.Time - e.Time%int64(anonWindow)}
	if cur := c.counts[k]; cur != nil {
		cur.Count++
		return
	}
	if len(c.counts) >= maxAnonKeys {
		k.remote = otherAddresses
		if cur := c.counts[k]; cur != nil {
			cur.Count++
			return
		}
		e.Remote, e.Path, e.Message = otherAddresses, "", ""
	}
	e.Count = 1
	c.counts[k] = &e
}

// due takes the counts whose window ended before now (all of them with
// all), oldest first.
func (c *anonCounter) due(now time.Time, all bool) []state.AuditEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []state.AuditEntry
	for k, e := range c.counts {
		if all || k.window+int64(anonWindow) <= now.UnixNano() {
			out = append(out, *e)
			delete(c.counts, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time < out[j].Time })
	return out
}

// maxAnonBuckets bounds the rate buckets of addresses: past it, further
// addresses share one bucket, so strangers cannot grow the map.
const maxAnonBuckets = 4096

// allowAnonymous takes one request of a caller that failed to
// authenticate from its address's bucket (an IPv6 address by its /64:
// one host holds a whole prefix), or returns a 429 error (and sets
// Retry-After).
func (s *Server) allowAnonymous(w http.ResponseWriter, r *http.Request) error {
	remote := s.remoteOf(r)
	key := remote
	if ip := net.ParseIP(remote); ip != nil && ip.To4() == nil {
		key = ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	if !s.anonLimits.roomFor("anon:"+key, maxAnonBuckets) {
		key = otherAddresses
	}
	return s.allowRateIn(&s.anonLimits, w, r, "anon:"+key, "address "+remote+" (without a valid token)",
		"max_anonymous_requests_per_second", s.cfg.Rates.AnonymousPerSecond)
}
