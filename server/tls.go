package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/internal/tlsutil"
)

// tlsSetup is the TLS of every hop. With -tls-cert the files are read
// again on SIGHUP (ReloadTLS): every config reads the ones in use at each
// handshake.
type tlsSetup struct {
	api        *tls.Config // the HTTPS API (nil: plain HTTP)
	peer       *tls.Config // this server as a client of the others' APIs (nil: plain HTTP)
	raftListen *tls.Config // Raft: the accepting side
	raftDial   *tls.Config // Raft: the dialling side
	live       *tlsutil.Live
}

// ownTLSDir is where a server without TLSCert keeps the CA and the
// certificate it made itself, under its data dir.
const ownTLSDir = "tls"

// loadTLS reads the certificates. Without TLSCert, a server that listens
// for Raft on the network (no injected transport, a RaftAddr) and is not
// Insecure makes a CA and a server certificate of its own in
// DataDir/tls, or reuses those it made before, and runs Raft over mutual
// TLS with them; its API stays plain HTTP. Otherwise nil: Raft in memory,
// or plain text with Insecure.
func loadTLS(cfg *Config, id string, log *slog.Logger) (*tlsSetup, error) {
	if cfg.TLSCert == "" {
		if cfg.Insecure || cfg.RaftTransport != nil || cfg.RaftAddr == "" {
			return nil, nil
		}
		files, made, err := tlsutil.EnsureOwnCA(filepath.Join(cfg.DataDir, ownTLSDir), id, time.Now())
		if err != nil {
			return nil, fmt.Errorf("raft TLS: %w", err)
		}
		if len(made) > 0 {
			log.Info("made a CA and a server certificate for Raft's mutual TLS (no -tls-cert given)", "files", made)
		}
		t := &tlsSetup{}
		if t.raftListen, t.raftDial, err = tlsutil.RaftConfigs(files.CA, files.Cert, files.Key); err != nil {
			return nil, fmt.Errorf("raft TLS: %w", err)
		}
		return t, nil
	}
	// Servers forwarding to this one present their certificates; API
	// clients must present one signed by TLSClientCA when it is set.
	var clientCAs []string
	if cfg.TLSClientCA != "" {
		clientCAs = append(clientCAs, cfg.TLSClientCA)
	}
	live, err := tlsutil.NewLive(cfg.TLSCert, cfg.TLSKey, cfg.CAFile, clientCAs...)
	if err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	t := &tlsSetup{live: live, api: live.APIConfig(cfg.TLSClientCA != ""), peer: live.ClientConfig()}
	t.raftListen, t.raftDial = live.RaftConfigs()
	return t, nil
}

// ReloadTLS reads -tls-cert, -tls-key, -ca-file and -tls-ca again and
// puts them in use for every handshake from now on (SIGHUP). Files that
// do not make a usable server certificate chaining to a CA of -ca-file
// are refused, and those in use stay.
func (s *Server) ReloadTLS() error {
	if s.tls == nil || s.tls.live == nil {
		return errors.New("this server has no -tls-cert to reload")
	}
	exp, err := s.tls.live.Reload()
	if err != nil {
		s.log.Error("TLS reload refused: the certificates in use stay", "err", err)
		return err
	}
	s.log.Info("TLS certificates reloaded", "cert_expires", exp.Cert.UTC().Format(time.RFC3339), "ca_expires", exp.CA.UTC().Format(time.RFC3339))
	s.warnExpiry(exp, time.Now())
	return nil
}

// tlsExpiryWarning is how long before a certificate expires the server
// starts warning.
const tlsExpiryWarning = 30 * 24 * time.Hour

// warnExpiry logs a warning when a certificate in use expires within
// tlsExpiryWarning.
func (s *Server) warnExpiry(exp tlsutil.Expiry, now time.Time) {
	for _, c := range []struct {
		what string
		at   time.Time
	}{{"the server certificate (-tls-cert)", exp.Cert}, {"a CA certificate of -ca-file", exp.CA}} {
		if left := c.at.Sub(now); left < tlsExpiryWarning {
			s.log.Warn("TLS certificate expires soon: make a new one and send the server SIGHUP (docs/operations.md, \"Rotating certificates\")",
				"certificate", c.what, "expires", c.at.UTC().Format(time.RFC3339), "left", left.Round(time.Hour).String())
		}
	}
}

// tlsExpiry says when the certificates in use expire (zero without
// -tls-cert).
func (s *Server) tlsExpiry() tlsutil.Expiry {
	if s.tls == nil || s.tls.live == nil {
		return tlsutil.Expiry{}
	}
	return s.tls.live.Expiry()
}

// tlsStreamLayer carries Raft over mutual TLS: a connection is accepted
// only from a peer whose certificate the cluster CA signed for a server,
// and a peer is dialled only if it proves the same.
type tlsStreamLayer struct {
	net.Listener // a tls.Listener
	advertise    net.Addr
	dial         *tls.Config
}

var _ raft.StreamLayer = (*tlsStreamLayer)(nil)

func (l *tlsStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), l.dial)
	if err != nil {
		return nil, fmt.Errorf("raft TLS to %s: %w", addr, err)
	}
	return conn, nil
}

func (l *tlsStreamLayer) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.Listener.Addr()
}

// newTLSTransport listens for Raft on addr over mutual TLS.
func newTLSTransport(addr string, advertise net.Addr, t *tlsSetup, logger hclog.Logger) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	layer := &tlsStreamLayer{Listener: tls.NewListener(ln, t.raftListen), advertise: advertise, dial: t.raftDial}
	if a, ok := layer.Addr().(*net.TCPAddr); !ok || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, errors.New("the raft address listens on all interfaces: set -raft-advertise to the address other servers reach")
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 8, Timeout: 10 * time.Second, Logger: logger,
	}), nil
}

// verifyRaftPeer is what autopilot asks before it makes a member a voter
// at addr: the member's Raft endpoint must complete mutual TLS with a
// server certificate from the cluster CA, and that certificate must name
// the member's ID when the ID already votes from another address (a
// certificate that names IDs must name this one in any case). So knowing
// the gossip key is not enough to move a server's vote.
func (s *Server) verifyRaftPeer(id, addr string, moved bool) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, s.tls.raftDial)
	if err != nil {
		return fmt.Errorf("raft TLS handshake with %s: %w", addr, err)
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return fmt.Errorf("%s presented no certificate", addr)
	}
	ids := tlsutil.ServerIDs(certs[0])
	switch {
	case slices.Contains(ids, id):
		return nil
	case len(ids) > 0:
		return fmt.Errorf("the certificate at %s names server %v, not %s", addr, ids, id)
	case moved:
		return fmt.Errorf("server %s asks to vote from a new address, %s, but its certificate names no server ID: "+
			"give it one made with `drover tls cert create -server -id %s`, or remove the old address with `drover operator raft remove-peer %s`", id, addr, id, id)
	}
	return nil
}

// apiTLS is the HTTPS API's configuration (nil: plain HTTP).
func (s *Server) apiTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.api
}

func (s *Server) peerTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.peer
}

// raftVerifier is autopilot's check of a member's Raft endpoint. It is nil
// only where Raft has no TLS: with Insecure (any member gossip sees is
// trusted, as the operator asked) or an injected transport (tests).
func (s *Server) raftVerifier() func(id, addr string, moved bool) error {
	if s.tls == nil {
		return nil
	}
	return s.verifyRaftPeer
}
