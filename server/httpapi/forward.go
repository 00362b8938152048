package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
)

// forwardedHeader marks a request one server passed to another, so a
// request is never forwarded twice (leadership moved in between).
const forwardedHeader = "X-Drover-Forwarded-By"

type targetKey struct{}

// newProxy builds the reverse proxy that passes requests to the leader.
func (s *Server) newProxy() *httputil.ReverseProxy {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 256
	transport.ResponseHeaderTimeout = 0
	if s.cfg.PeerTLS != nil {
		transport.TLSClientConfig = s.cfg.PeerTLS.Clone()
	}
	return &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(targetKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(forwardedHeader, s.cfg.ID)
			pr.SetXForwarded() // the leader's audit log names the client
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left, or leadership moved (see forward)
			}
			target := r.Context().Value(targetKey{}).(*url.URL)
			s.writeErr(w, codedf(http.StatusServiceUnavailable,
				"no cluster leader reachable: the leader at %s does not answer (%w); if it failed, a new one is elected within seconds as long as a quorum remains (%s)",
				target.Host, err, s.quorumReport()))
		},
	}
}

// leaderHTTP returns the leader's HTTP address, or an explanation of why
// there is none.
func (s *Server) leaderHTTP() (string, error) {
	_, id := s.raft.LeaderWithID()
	if id == "" {
		return "", fmt.Errorf("no cluster leader: %s", s.quorumReport())
	}
	if string(id) == s.cfg.ID {
		return "", fmt.Errorf("this server is becoming the leader; retry in a moment")
	}
	if s.members != nil {
		if m, ok := s.members.Member(string(id)); ok && m.HTTP != "" {
			return m.HTTP, nil
		}
	}
	return "", fmt.Errorf("the leader (%s) is not known to gossip yet; retry in a moment", id)
}

// quorumReport says how many servers this one can see, for "no leader"
// errors.
func (s *Server) quorumReport() string {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil || len(f.Configuration().Servers) == 0 {
		return "the cluster is not bootstrapped yet (waiting for -bootstrap-expect servers to join)"
	}
	voters := len(f.Configuration().Servers)
	alive := 1
	if s.members != nil {
		for _, srv := range f.Configuration().Servers {
			if m, ok := s.members.Member(string(srv.ID)); ok && m.Alive && string(srv.ID) != s.cfg.ID {
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
		s.writeErr(w, codedf(http.StatusServiceUnavailable, "leadership moved while %s forwarded this request; retry", by))
		return
	}
	addr, err := s.leaderHTTP()
	if err != nil {
		s.writeErr(w, codedErr(http.StatusServiceUnavailable, err))
		return
	}
	target := &url.URL{Scheme: s.peerScheme, Host: addr}
	// If leadership moves while the leader holds the request (it froze,
	// or died without closing the connection), give up on it: the client
	// retries and reaches the new leader.
	ctx, cancel := context.WithCancel(context.WithValue(r.Context(), targetKey{}, target))
	defer cancel()
	moved := s.node.LeaderMoved()
	go func() {
		select {
		case <-moved:
			cancel()
		case <-ctx.Done():
		}
	}()
	noWriteDeadline(w) // the leader bounds its own answer
	sw := &statusWriter{ResponseWriter: w}
	s.proxy.ServeHTTP(sw, r.WithContext(ctx))
	if sw.code == 0 && r.Context().Err() == nil {
		s.writeErr(w, codedf(http.StatusServiceUnavailable, "leadership moved while the leader at %s held this request; retry", addr))
	}
}
