// Package tlsutil makes drover's certificates (a cluster CA and server,
// client and worker certificates signed by it, the way `nomad tls` does)
// and the crypto/tls configurations every hop uses: the HTTPS API, the
// mutual TLS of Raft, and the clients (CLI, workers, servers forwarding to
// the leader) that verify the servers.
package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
)

// ServerName is named by every server certificate: clients and Raft peers
// verify a server against it, so a client or worker certificate from the
// same CA cannot pass for a server.
const ServerName = api.TLSServerName

// IDName is the name a server certificate carries for a server ID.
func IDName(id string) string { return id + "." + ServerName }

// Role is what a certificate is for.
type Role string

// Roles.
const (
	RoleServer Role = "server" // serves the API and Raft; also a client of the other servers
	RoleClient Role = "client" // the CLI, when the API asks for client certificates
	RoleWorker Role = "worker" // a worker, idem
)

// CA is a certificate authority's certificate and key, PEM-encoded.
type CA struct{ Cert, Key []byte }

// CreateCA makes a self-signed CA valid for days.
func CreateCA(name string, days int) (CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return CA{}, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return CA{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"drover"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.AddDate(0, 0, days),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return CA{}, fmt.Errorf("create CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return CA{}, err
	}
	return CA{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Key: keyPEM}, nil
}

// CertRequest describes a certificate to make.
type CertRequest struct {
	Role Role
	// ID is the server ID a server certificate names (IDName), which
	// autopilot checks before it moves that server to a new Raft
	// address; "" names none.
	ID       string
	DNSNames []string
	IPs      []net.IP
	Days     int
}

// Cert is a certificate and its key, PEM-encoded.
type Cert struct{ Cert, Key []byte }

// CreateCert makes a certificate signed by ca.
func CreateCert(ca CA, req CertRequest) (Cert, error) {
	caCert, caKey, err := ca.parse()
	if err != nil {
		return Cert{}, err
	}
	if req.Days <= 0 {
		return Cert{}, errors.New("a certificate needs a validity of at least one day")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Cert{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return Cert{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.AddDate(0, 0, req.Days),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     slices.Clone(req.DNSNames),
		IPAddresses:  slices.Clone(req.IPs),
	}
	switch req.Role {
	case RoleServer:
		tmpl.Subject = pkix.Name{CommonName: ServerName, Organization: []string{"drover"}}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = append(tmpl.DNSNames, ServerName, "localhost")
		if req.ID != "" {
			tmpl.Subject.CommonName = IDName(req.ID)
			tmpl.DNSNames = append(tmpl.DNSNames, IDName(req.ID))
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IPv4(127, 0, 0, 1), net.IPv6loopback)
	case RoleClient, RoleWorker:
		if req.ID != "" {
			return Cert{}, fmt.Errorf("only a server certificate names a server ID")
		}
		tmpl.Subject = pkix.Name{CommonName: string(req.Role) + ".drover", Organization: []string{"drover"}}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		for _, n := range tmpl.DNSNames {
			if n == ServerName || strings.HasSuffix(n, "."+ServerName) {
				return Cert{}, fmt.Errorf("a %s certificate cannot name %s: that name makes a server", req.Role, n)
			}
		}
	default:
		return Cert{}, fmt.Errorf("certificate role %q is not server, client or worker", req.Role)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Cert{}, fmt.Errorf("sign certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return Cert{}, err
	}
	return Cert{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Key: keyPEM}, nil
}

func (ca CA) parse() (*x509.Certificate, any, error) {
	b, _ := pem.Decode(ca.Cert)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, errors.New("the CA certificate is not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, nil, errors.New("the CA certificate is not a CA")
	}
	pair, err := tls.X509KeyPair(ca.Cert, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("the CA key does not go with the CA certificate: %w", err)
	}
	return cert, pair.PrivateKey, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial number: %w", err)
	}
	return n, nil
}

// LoadCAPool reads the PEM CA certificates of one or more files.
func LoadCAPool(paths ...string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		if !pool.AppendCertsFromPEM(data) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", path)
		}
	}
	return pool, nil
}

func loadPair(certFile, keyFile string) (tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}

// ServerConfig is the HTTPS API's: it serves certFile; with clientCAFile,
// every client must present a certificate signed by that CA.
func ServerConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	pair, err := loadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if clientCAFile != "" {
		pool, err := LoadCAPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// ClientConfig verifies servers against caFile (which must name
// ServerName) and, with certFile, presents that certificate: the API
// client's configuration, which servers use to reach each other too.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	return api.TLSConfig(caFile, certFile, keyFile)
}

// RaftConfigs are the two sides of Raft's mutual TLS: each server presents
// its certificate and accepts only peers whose certificate the CA signed
// for a server (it names ServerName).
func RaftConfigs(caFile, certFile, keyFile string) (listen, dial *tls.Config, err error) {
	pool, err := LoadCAPool(caFile)
	if err != nil {
		return nil, nil, err
	}
	pair, err := loadPair(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	if pair.Leaf == nil || pair.Leaf.VerifyHostname(ServerName) != nil {
		return nil, nil, fmt.Errorf("certificate %s is not a server certificate (it does not name %s); make one with `drover tls cert create -server`", certFile, ServerName)
	}
	listen = &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair},
		ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || cs.PeerCertificates[0].VerifyHostname(ServerName) != nil {
				return errors.New("the peer's certificate is not a drover server's")
			}
			return nil
		},
	}
	dial = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: ServerName}
	return listen, dial, nil
}

// ServerIDs returns the server IDs a certificate names.
func ServerIDs(cert *x509.Certificate) []string {
	var ids []string
	for _, n := range cert.DNSNames {
		if id, ok := strings.CutSuffix(n, "."+ServerName); ok && id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}
