package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-sched/drover/internal/tlsutil"
)

// TestTLSCommands: `tls ca create` and `tls cert create` make a CA and
// server, client and worker certificates it signs, each for its role; a
// key is never overwritten; a server that works with others refuses to
// start without TLS and says how to make the certificates.
func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) error {
		var out, errOut bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errOut}
		return m.Run(context.Background(), append(args, "-dir", dir))
	}
	if err := run("tls", "ca", "create"); err != nil {
		t.Fatal(err)
	}
	if err := run("tls", "ca", "create"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second CA over the first: %v", err)
	}
	ca := filepath.Join(dir, caCertFile)
	caKey := filepath.Join(dir, caKeyFile)
	if st, err := os.Stat(caKey); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v, %v", st, err)
	}
	for _, args := range [][]string{
		{"-server", "-id", "s1", "-additional-ipaddress", "10.0.0.1", "-additional-dnsname", "drover-1.example.com"},
		{"-client"}, {"-worker"}, {"-worker", "-name", "gpu-7"},
	} {
		if err := run(append([]string{"tls", "cert", "create", "-ca", ca, "-key", caKey}, args...)...); err != nil {
			t.Fatalf("cert create %v: %v", args, err)
		}
	}
	pool, err := tlsutil.LoadCAPool(ca)
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string) *x509.Certificate {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(data)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srv := load("drover-server-s1.pem")
	if _, err := srv.Verify(x509.VerifyOptions{Roots: pool, DNSName: tlsutil.ServerName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("server certificate: %v", err)
	}
	if ids := tlsutil.ServerIDs(srv); !slices.Equal(ids, []string{"s1"}) {
		t.Fatalf("server certificate names IDs %v", ids)
	}
	if srv.VerifyHostname("10.0.0.1") != nil || srv.VerifyHostname("drover-1.example.com") != nil {
		t.Fatalf("server certificate lacks the extra names: %v %v", srv.DNSNames, srv.IPAddresses)
	}
	if err := run("tls", "cert", "create", "-ca", ca, "-key", caKey, "-worker"); err == nil || !strings.Contains(err.Error(), "-name") {
		t.Fatalf("a second unnamed worker certificate: %v", err)
	}
	for _, name := range []string{"drover-client.pem", "drover-worker.pem", "drover-worker-gpu-7.pem"} {
		c := load(name)
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.VerifyHostname(tlsutil.ServerName) == nil {
			t.Fatalf("%s passes for a server", name)
		}
	}
	for _, bad := range [][]string{{}, {"-server", "-client"}, {"-client", "-id", "s1"}, {"-server", "-additional-ipaddress", "nope"}} {
		err := run(append([]string{"tls", "cert", "create", "-ca", ca, "-key", caKey}, bad...)...)
		if err == nil {
			t.Fatalf("cert create %v succeeded", bad)
		}
	}
	if err := run("tls", "cert", "create", "-client", "-ca", ca, "-key", caKey); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second client certificate over the first: %v", err)
	}

	// A server of a cluster without TLS.
	key := filepath.Join(t.TempDir(), "gossip.key")
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	if err := m.Run(context.Background(), []string{"operator", "gossip", "keyring", "generate"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(key, out.Bytes(), 0o600)
	err = m.Run(context.Background(), []string{"server", "-data-dir", t.TempDir(), "-http-addr", "127.0.0.1:0", "-raft-addr", "127.0.0.1:0",
		"-gossip-addr", "127.0.0.1:0", "-bootstrap-expect", "3", "-join", "127.0.0.1:1", "-gossip-key-file", key})
	if err == nil || !strings.Contains(err.Error(), "drover tls ca create") || !strings.Contains(err.Error(), "-insecure") {
		t.Fatalf("a 3-server bootstrap without TLS: %v", err)
	}
	// The metrics token comes from a flag or a file, not both; an empty
	// file is refused.
	empty := filepath.Join(t.TempDir(), "metrics.token")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for args, want := range map[string]string{
		"-metrics-token x -metrics-token-file " + empty: "not both",
		"-metrics-token-file " + empty:                  "metrics token file",
	} {
		err := m.Run(context.Background(), append([]string{"server", "-data-dir", t.TempDir(), "-http-addr", "127.0.0.1:0", "-raft-addr", "127.0.0.1:0"}, strings.Fields(args)...))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("server %s: %v, want an error naming %q", args, err, want)
		}
	}
}
