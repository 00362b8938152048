package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// forwardedHeader marks a request one server passed to another, so a
// request is never forwarded twice (leadership moved in between).
const forwardedHeader = "X-Drover-Forwarded-By"

type targetKey struct{}

func (s *Server) newProxy() *httputil.ReverseProxy {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 256
	transport.ResponseHeaderTimeout = 0
	return &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(targetKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(forwardedHeader, s.id)
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left, or leadership moved (see forward)
			}
			target := r.Context().Value(targetKey{}).(*url.URL)
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf(
				"no cluster leader reachable: the leader at %s does not answer (%v); if it failed, a new one is elected within seconds as long as a quorum remains (%s)",
				target.Host, err, s.quorumReport()))
		},
	}
}

// leaderHTTP returns the leader's HTTP address, or an explanation of why
// there is none.
func (s *Server) leaderHTTP() (string, error) {
	_, id := s.raft.raft.LeaderWithID()
	if id == "" {
		return "", fmt.Errorf("no cluster leader: %s", s.quorumReport())
	}
	if string(id) == s.id {
		return "", fmt.Errorf("this server is becoming the leader; retry in a moment")
	}
	if s.cluster != nil {
		if m, ok := s.cluster.member(string(id)); ok && m.meta.HTTP != "" {
			return m.meta.HTTP, nil
		}
	}
	return "", fmt.Errorf("the leader (%s) is not known to gossip yet; retry in a moment", id)
}

// quorumReport says how many servers this one can see, for "no leader"
// errors.
func (s *Server) quorumReport() string {
	f := s.raft.raft.GetConfiguration()
	if err := f.Error(); err != nil || len(f.Configuration().Servers) == 0 {
		return "the cluster is not bootstrapped yet (waiting for -bootstrap-expect servers to join)"
	}
	voters := len(f.Configuration().Servers)
	alive := 1
	if s.cluster != nil {
		for _, srv := range f.Configuration().Servers {
			if m, ok := s.cluster.member(string(srv.ID)); ok && m.alive && string(srv.ID) != s.id {
				alive++
			}
		}
	}
	need := voters/2 + 1
	if alive < need {
		return fmt.Sprintf("no quorum: only %d of %d servers are reachable and %d are needed; writes and consistent reads fail until a majority is back",
			alive, voters, need)
	}
	return fmt.Sprintf("%d of %d servers look reachable, %d are needed; an election may be under way", alive, voters, need)
}

// forward passes a request to the leader and relays its answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request) {
	if by := r.Header.Get(forwardedHeader); by != "" {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("leadership moved while %s forwarded this request; retry", by))
		return
	}
	addr, err := s.leaderHTTP()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	target := &url.URL{Scheme: "http", Host: addr}
	// If leadership moves while the leader holds the request (it froze,
	// or died without closing the connection), give up on it: the client
	// retries and reaches the new leader.
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), targetKey{}, target))
	defer cancel()
	moved := s.leaderMoves.wait()
	go func() {
		select {
		case <-moved:
			cancel()
		case <-ctx.Done():
		}
	}()
	sw := &statusWriter{ResponseWriter: w}
	s.proxy.ServeHTTP(sw, r.WithContext(ctx))
	if sw.code == 0 && r.Context().Err() == nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("leadership moved while the leader at %s held this request; retry", addr))
	}
}

// broadcast wakes every waiter each time something happens.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// wait returns a channel closed at the next fire.
func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) fire() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// leaderCheck coalesces VerifyLeader calls: a consistent read needs a
// verification that started after the read arrived, and one verification
// serves every read waiting for it.
type leaderCheck struct {
	mu   sync.Mutex
	call *verifyCall
}

type verifyCall struct {
	started time.Time
	done    chan struct{}
	err     error
}

// verifyLeader confirms with a quorum that this server still leads, so a read
// served now is not stale (a deposed leader that has not noticed yet fails).
func (s *Server) verifyLeader(ctx context.Context) error {
	arrived := time.Now()
	for {
		s.check.mu.Lock()
		c := s.check.call
		finished := false
		if c != nil {
			select {
			case <-c.done:
				finished = true
			default:
			}
		}
		switch {
		case c != nil && !c.started.Before(arrived):
			// Started after we arrived: its answer is good for us.
		case c == nil || finished:
			c = &verifyCall{started: time.Now(), done: make(chan struct{})}
			s.check.call = c
			go func(c *verifyCall) {
				c.err = s.raft.raft.VerifyLeader().Error()
				close(c.done)
			}(c)
		default:
			// One is in flight but began before we arrived: wait for it
			// to finish, then start (or join) a newer one.
			s.check.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		s.check.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
