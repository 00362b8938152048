package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// Live is a server's certificate, key and CAs, read from their files at
// start and again on Reload (SIGHUP), so certificates and CAs rotate
// without a restart. The tls.Configs it hands out read the current ones
// at each handshake: connections made before a reload keep what they
// were made with.
type Live struct {
	certFile, keyFile, caFile string
	clientCAFiles             []string // CAs of API clients besides caFile
	cur                       atomic.Pointer[material]
}

type material struct {
	pair    tls.Certificate
	roots   *x509.CertPool // caFile: servers' certificates
	clients *x509.CertPool // caFile and clientCAFiles: API callers'
	expires Expiry
}

// Expiry is when the certificates in use expire.
type Expiry struct {
	Cert time.Time // the server's certificate
	CA   time.Time // the first of caFile's CA certificates to expire
}

// NewLive reads the files; the certificate must be a server's (it names
// ServerName) and chain to a CA of caFile.
func NewLive(certFile, keyFile, caFile string, clientCAFiles ...string) (*Live, error) {
	l := &Live{certFile: certFile, keyFile: keyFile, caFile: caFile, clientCAFiles: clientCAFiles}
	m, err := l.read()
	if err != nil {
		return nil, err
	}
	l.cur.Store(m)
	return l, nil
}

// Reload reads the files again and, if they hold a usable certificate,
// key and CAs, puts them in use; otherwise what was in use stays, and
// the error says why.
func (l *Live) Reload() (Expiry, error) {
	m, err := l.read()
	if err != nil {
		return l.cur.Load().expires, err
	}
	l.cur.Store(m)
	return m.expires, nil
}

// Expiry says when the certificates in use expire.
func (l *Live) Expiry() Expiry { return l.cur.Load().expires }

func (l *Live) read() (*material, error) {
	pair, err := loadPair(l.certFile, l.keyFile)
	if err != nil {
		return nil, err
	}
	if pair.Leaf == nil || pair.Leaf.VerifyHostname(ServerName) != nil {
		return nil, fmt.Errorf("certificate %s is not a server certificate (it does not name %s); make one with `drover tls cert create -server`", l.certFile, ServerName)
	}
	roots, caExpiry, err := readCAs(l.caFile)
	if err != nil {
		return nil, err
	}
	inter := x509.NewCertPool()
	for _, c := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(c); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("certificate %s does not chain to a CA of %s (%w): during a CA rotation, put the new CA in %s beside the old one first", l.certFile, l.caFile, err, l.caFile)
	}
	clients, err := LoadCAPool(append([]string{l.caFile}, l.clientCAFiles...)...)
	if err != nil {
		return nil, err
	}
	return &material{pair: pair, roots: roots, clients: clients, expires: Expiry{Cert: pair.Leaf.NotAfter, CA: caExpiry}}, nil
}

// readCAs reads a PEM bundle of CA certificates, and when the first of
// them expires.
func readCAs(path string) (*x509.CertPool, time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	var first time.Time
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("CA file %s: %w", path, err)
		}
		pool.AddCert(c)
		if first.IsZero() || c.NotAfter.Before(first) {
			first = c.NotAfter
		}
	}
	if first.IsZero() {
		return nil, time.Time{}, fmt.Errorf("CA file %s holds no PEM certificate", path)
	}
	return pool, first, nil
}

// APIConfig serves the HTTPS API: clients present a certificate from
// caFile or clientCAFiles, required when require is set, verified if
// given otherwise.
func (l *Live) APIConfig(require bool) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if require {
		auth = tls.RequireAndVerifyClientCert
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: auth}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := l.cur.Load()
		// net/http adds its protocols (h2, http/1.1) to base before it
		// serves: the clone carries them.
		c := base.Clone()
		c.GetConfigForClient = nil
		c.Certificates, c.ClientCAs = []tls.Certificate{m.pair}, m.clients
		return c, nil
	}
	return base
}

// RaftConfigs are the two sides of Raft's mutual TLS (see RaftConfigs),
// with the files in use at each handshake.
func (l *Live) RaftConfigs() (listen, dial *tls.Config) {
	serverOnly := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].VerifyHostname(ServerName) != nil {
			return errors.New("the peer's certificate is not a drover server's")
		}
		return nil
	}
	listen = &tls.Config{MinVersion: tls.VersionTLS12}
	listen.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m := l.cur.Load()
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{m.pair},
			ClientCAs: m.roots, ClientAuth: tls.RequireAndVerifyClientCert, VerifyConnection: serverOnly}, nil
	}
	return listen, l.ClientConfig()
}

// ClientConfig dials other servers (their Raft and their APIs): it
// presents the certificate in use and verifies theirs against the CAs in
// use, as a server's (it names ServerName).
func (l *Live) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := l.cur.Load()
			return &m.pair, nil
		},
		// The roots change on a reload, and a tls.Config's RootCAs cannot:
		// the chain is verified here instead, against the current ones,
		// exactly as the standard check would.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: l.cur.Load().roots, Intermediates: inter, DNSName: ServerName})
			return err
		},
	}
}
