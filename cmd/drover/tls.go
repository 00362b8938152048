package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/drover-sched/drover/internal/tlsutil"
	"github.com/drover-sched/drover/server/state"
)

// Default file names, as `nomad tls` names its own (and as a server that
// made its own CA names them in its data dir).
const (
	caCertFile = tlsutil.CACertFile
	caKeyFile  = tlsutil.CAKeyFile
)

func (m opsCmds) runTLS(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("drover tls needs ca or cert: tls ca create, tls cert create -server|-client|-worker")
	}
	switch args[0] {
	case "ca":
		return m.sub(ctx, "tls ca", args[1:], map[string]func(context.Context, []string) error{"create": m.runTLSCACreate})
	case "cert":
		return m.sub(ctx, "tls cert", args[1:], map[string]func(context.Context, []string) error{"create": m.runTLSCertCreate})
	}
	return usagef("unknown command 'drover tls %s'; use ca or cert", args[0])
}

// runTLSCACreate makes the cluster's CA in the current (or -dir)
// directory.
func (m opsCmds) runTLSCACreate(_ context.Context, args []string) error {
	fs := m.newFlags("tls ca create", "[-dir D] [-days N]")
	dir := fs.String("dir", ".", "directory the CA's files are written to")
	days := fs.Int("days", 5*365, "how long the CA is valid, in days")
	name := fs.String("name", "drover cluster CA", "the CA's common name")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *days < 1 {
		return usagef("-days must be at least 1")
	}
	ca, err := tlsutil.CreateCA(*name, *days)
	if err != nil {
		return err
	}
	certPath, keyPath := filepath.Join(*dir, caCertFile), filepath.Join(*dir, caKeyFile)
	if err := writeNew(certPath, ca.Cert, 0o644); err != nil {
		return err
	}
	if err := writeNew(keyPath, ca.Key, 0o600); err != nil {
		return err
	}
	safef(m.Stdout, "==> CA certificate saved to: %s\n==> CA key saved to: %s\n", certPath, keyPath)
	return nil
}

// runTLSCertCreate makes a server, client or worker certificate signed by
// the CA.
func (m opsCmds) runTLSCertCreate(_ context.Context, args []string) error {
	fs := m.newFlags("tls cert create", "-server [-id ID] | -client | -worker [flags]")
	server := fs.Bool("server", false, "a server certificate: serves the API and Raft, names "+tlsutil.ServerName)
	client := fs.Bool("client", false, "a client certificate, for the CLI when servers run with -tls-ca")
	worker := fs.Bool("worker", false, "a worker certificate, for workers when servers run with -tls-ca")
	id := fs.String("id", "", "with -server: the server ID (-node-id) the certificate names; autopilot moves a server's vote to a new address only for a certificate that names its ID")
	name := fs.String("name", "", "with -client or -worker: a name for its files (drover-worker-NAME.pem), so one directory holds several")
	caPath := fs.String("ca", caCertFile, "the CA certificate")
	keyPath := fs.String("key", caKeyFile, "the CA key")
	dir := fs.String("dir", ".", "directory the certificate and key are written to")
	days := fs.Int("days", 365, "how long the certificate is valid, in days")
	var dnsNames, ips multiFlag
	fs.Var(&dnsNames, "additional-dnsname", "another DNS name the certificate is valid for (repeatable)")
	fs.Var(&ips, "additional-ipaddress", "another IP address the certificate is valid for (repeatable)")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	var role tlsutil.Role
	n := 0
	for r, on := range map[tlsutil.Role]bool{tlsutil.RoleServer: *server, tlsutil.RoleClient: *client, tlsutil.RoleWorker: *worker} {
		if on {
			role, n = r, n+1
		}
	}
	if n != 1 {
		return usagef("drover tls cert create needs exactly one of -server, -client or -worker")
	}
	if *id != "" && role != tlsutil.RoleServer {
		return usagef("-id names a server: it goes with -server")
	}
	if *name != "" && role == tlsutil.RoleServer {
		return usagef("-name goes with -client or -worker; a server certificate is named by its -id")
	}
	if *name != "" && !state.ValidName(*name) {
		return usagef("-name %q: use 1-63 letters, digits, '_', '.' or '-'", *name)
	}
	req := tlsutil.CertRequest{Role: role, ID: *id, DNSNames: dnsNames, Days: *days}
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return usagef("-additional-ipaddress %q is not an IP address", s)
		}
		req.IPs = append(req.IPs, ip)
	}
	caCert, err := os.ReadFile(*caPath)
	if err != nil {
		return fmt.Errorf("read the CA certificate (make one with `drover tls ca create`): %w", err)
	}
	caKey, err := os.ReadFile(*keyPath)
	if err != nil {
		return fmt.Errorf("read the CA key: %w", err)
	}
	cert, err := tlsutil.CreateCert(tlsutil.CA{Cert: caCert, Key: caKey}, req)
	if err != nil {
		return err
	}
	certName, keyName := tlsutil.CertFiles(role, *id+*name)
	certOut, keyOut := filepath.Join(*dir, certName), filepath.Join(*dir, keyName)
	if err := writeNew(certOut, cert.Cert, 0o644); err != nil {
		return err
	}
	if err := writeNew(keyOut, cert.Key, 0o600); err != nil {
		return err
	}
	safef(m.Stdout, "==> %s certificate saved to: %s\n==> %s key saved to: %s\n", role, certOut, role, keyOut)
	return nil
}

// writeNew writes a file that must not exist yet: a key is never
// overwritten by mistake.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s already exists; move it away first (or, for another client or worker certificate, name it with -name)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
