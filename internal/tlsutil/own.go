package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The files `drover tls` writes, named as `nomad tls` names its own. A
// server that makes its own CA (EnsureOwnCA) uses the same names, so
// `drover tls cert create -server` run in that directory signs with it.
const (
	CACertFile = "drover-agent-ca.pem"
	CAKeyFile  = "drover-agent-ca-key.pem"
)

// CertFiles are the file names of a certificate of role (naming server
// ID id, "" none) and of its key, as `drover tls cert create` writes them.
func CertFiles(role Role, id string) (cert, key string) {
	base := "drover-" + string(role)
	if id != "" {
		base += "-" + id
	}
	return base + ".pem", base + "-key.pem"
}

// What EnsureOwnCA makes is valid for ownDays; it makes a new one
// renewBefore the end.
const (
	ownDays     = 10 * 365
	renewBefore = 30 * 24 * time.Hour
)

// OwnFiles are the paths of a CA and a server certificate a server made
// for itself.
type OwnFiles struct {
	CA, CAKey, Cert, Key string
}

// EnsureOwnCA gives a server started without a certificate of the
// operator's the means to run Raft over mutual TLS all the same: in dir
// (created 0700) it keeps a CA and a server certificate for server id
// signed by it, and returns their files. What is there and valid for
// another 30 days from now is kept; a missing, expired, foreign or
// unreadable CA is replaced (and the certificate with it), a certificate
// that does not name id or will expire is made anew. made lists the files
// written, for the server's log.
//
// The CA key stays in dir: it is what lets an operator sign the
// certificates of more servers later (docs/operations.md).
func EnsureOwnCA(dir, id string, now time.Time) (files OwnFiles, made []string, err error) {
	if id == "" {
		return OwnFiles{}, nil, errors.New("own CA: the server ID is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return OwnFiles{}, nil, fmt.Errorf("own CA: %w", err)
	}
	certName, keyName := CertFiles(RoleServer, id)
	files = OwnFiles{
		CA: filepath.Join(dir, CACertFile), CAKey: filepath.Join(dir, CAKeyFile),
		Cert: filepath.Join(dir, certName), Key: filepath.Join(dir, keyName),
	}
	ca, caOK := readCA(files.CA, files.CAKey, now)
	if !caOK {
		if ca, err = CreateCA("drover server CA ("+id+")", ownDays); err != nil {
			return OwnFiles{}, nil, fmt.Errorf("own CA: %w", err)
		}
		if err := writeFiles(files.CA, ca.Cert, 0o644, files.CAKey, ca.Key); err != nil {
			return OwnFiles{}, nil, fmt.Errorf("own CA: %w", err)
		}
		made = append(made, files.CA, files.CAKey)
	}
	if caOK && certValid(ca, files.Cert, files.Key, id, now) {
		return files, made, nil
	}
	cert, err := CreateCert(ca, CertRequest{Role: RoleServer, ID: id, Days: ownDays})
	if err != nil {
		return OwnFiles{}, nil, fmt.Errorf("own CA: server certificate: %w", err)
	}
	if err := writeFiles(files.Cert, cert.Cert, 0o644, files.Key, cert.Key); err != nil {
		return OwnFiles{}, nil, fmt.Errorf("own CA: %w", err)
	}
	return files, append(made, files.Cert, files.Key), nil
}

// readCA reads a CA and its key and reports whether they go together and
// the CA is valid for another renewBefore.
func readCA(certFile, keyFile string, now time.Time) (CA, bool) {
	certPEM, err1 := os.ReadFile(certFile)
	keyPEM, err2 := os.ReadFile(keyFile)
	if err1 != nil || err2 != nil {
		return CA{}, false
	}
	ca := CA{Cert: certPEM, Key: keyPEM}
	cert, _, err := ca.parse()
	if err != nil || now.Before(cert.NotBefore) || now.Add(renewBefore).After(cert.NotAfter) {
		return CA{}, false
	}
	return ca, true
}

// certValid reports whether the certificate and key files hold a server
// certificate for id that ca signed and that is valid for another
// renewBefore.
func certValid(ca CA, certFile, keyFile, id string, now time.Time) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil || pair.Leaf == nil {
		return false
	}
	b, _ := pem.Decode(ca.Cert)
	root, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(root)
	_, err = pair.Leaf.Verify(x509.VerifyOptions{
		Roots: pool, DNSName: ServerName, CurrentTime: now.Add(renewBefore),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	return err == nil && !now.Before(pair.Leaf.NotBefore) && slices.Contains(ServerIDs(pair.Leaf), id)
}

// writeFiles writes a certificate (perm) and its key (0600), each replaced
// whole through a temporary file renamed into place. A crash between the
// two leaves a key and a certificate that do not go together, which the
// next start finds and replaces.
func writeFiles(certFile string, cert []byte, perm os.FileMode, keyFile string, key []byte) error {
	for _, f := range []struct {
		path string
		data []byte
		perm os.FileMode
	}{{keyFile, key, 0o600}, {certFile, cert, perm}} {
		tmp := f.path + ".tmp"
		_ = os.Remove(tmp) // WriteFile keeps an existing file's mode
		if err := os.WriteFile(tmp, f.data, f.perm); err != nil {
			return err
		}
		if err := os.Rename(tmp, f.path); err != nil {
			return err
		}
	}
	return nil
}
