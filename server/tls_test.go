package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/tlsutil"
)

// testPKI is a cluster CA and certificates signed by it (and one CA more,
// a stranger's), as files.
type testPKI struct {
	dir     string
	ca      tlsutil.CA
	CA      string // the cluster CA's certificate file
	OtherCA string // a stranger's CA
	other   tlsutil.CA
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	var err error
	if p.ca, err = tlsutil.CreateCA("test CA", 1); err != nil {
		t.Fatal(err)
	}
	if p.other, err = tlsutil.CreateCA("a stranger's CA", 1); err != nil {
		t.Fatal(err)
	}
	p.CA, p.OtherCA = p.write(t, "ca.pem", p.ca.Cert), p.write(t, "other-ca.pem", p.other.Cert)
	return p
}

func (p *testPKI) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cert makes a certificate; stranger signs it with the other CA.
func (p *testPKI) cert(t *testing.T, name string, req tlsutil.CertRequest, stranger bool) (certFile, keyFile string) {
	t.Helper()
	ca := p.ca
	if stranger {
		ca = p.other
	}
	if req.Days == 0 {
		req.Days = 1
	}
	c, err := tlsutil.CreateCert(ca, req)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", c.Cert), p.write(t, name+"-key.pem", c.Key)
}

// TestRaftRefusesPeersWithoutTheClusterCert: Raft's mutual TLS lets in a
// peer with a server certificate from the cluster CA and nobody else: not
// a client without a certificate, not a server certificate from another
// CA, not a worker certificate from the cluster CA.
func TestRaftRefusesPeersWithoutTheClusterCert(t *testing.T) {
	p := newTestPKI(t)
	cert, key := p.cert(t, "s1", tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s1"}, false)
	setup, err := loadTLS(&Config{TLSCert: cert, TLSKey: key, CAFile: p.CA}, "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := newHclog(testLogger(t), "raft", 0)
	trans, err := newTLSTransport("127.0.0.1:0", nil, setup, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	// Answer every RPC the transport hands over.
	go func() {
		for rpc := range trans.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
		}
	}()
	addr := trans.LocalAddr()

	// peer tries an AppendEntries from a transport with these files.
	peer := func(certFile, keyFile, caFile string) error {
		s, err := loadTLS(&Config{TLSCert: certFile, TLSKey: keyFile, CAFile: caFile}, "s1", nil)
		if err != nil {
			return err
		}
		tr, err := newTLSTransport("127.0.0.1:0", nil, s, logger)
		if err != nil {
			return err
		}
		defer tr.Close()
		var resp raft.AppendEntriesResponse
		return tr.AppendEntries("s1", addr, &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("x")}, Term: 7}, &resp)
	}
	goodCert, goodKey := p.cert(t, "s2", tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s2"}, false)
	if err := peer(goodCert, goodKey, p.CA); err != nil {
		t.Fatalf("a server with a certificate from the cluster CA: %v", err)
	}
	strangerCert, strangerKey := p.cert(t, "stranger", tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s2"}, true)
	if err := peer(strangerCert, strangerKey, p.OtherCA); err == nil {
		t.Fatal("a server whose certificate another CA signed got a Raft RPC through")
	}
	if err := peer(strangerCert, strangerKey, p.CA); err == nil {
		t.Fatal("a server whose certificate another CA signed (trusting ours) got a Raft RPC through")
	}
	workerCert, workerKey := p.cert(t, "worker", tlsutil.CertRequest{Role: tlsutil.RoleWorker}, false)
	if _, err := loadTLS(&Config{TLSCert: workerCert, TLSKey: workerKey, CAFile: p.CA}, "s1", nil); err == nil || !strings.Contains(err.Error(), "not a server certificate") {
		t.Fatalf("a worker certificate as a server's: %v", err)
	}
	// The raw handshakes: no certificate at all, and a worker's.
	pool, _ := tlsutil.LoadCAPool(p.CA)
	wpair, _ := tls.LoadX509KeyPair(workerCert, workerKey)
	for name, conf := range map[string]*tls.Config{
		"no certificate":       {RootCAs: pool, ServerName: tlsutil.ServerName},
		"a worker certificate": {RootCAs: pool, ServerName: tlsutil.ServerName, Certificates: []tls.Certificate{wpair}},
	} {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", string(addr), conf)
		if err == nil {
			// TLS 1.3: the server's verdict on our certificate comes
			// with the first read.
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = conn.Write([]byte{0})
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: the Raft port took the connection (%v)", name, err)
		}
	}
}

// TestAutopilotChecksTheRaftCertificate: before autopilot makes a member a
// voter, its Raft endpoint must prove it is a server of the cluster, and
// to move an existing server's vote to a new address its certificate must
// name that server's ID.
func TestAutopilotChecksTheRaftCertificate(t *testing.T) {
	p := newTestPKI(t)
	cert, key := p.cert(t, "leader", tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s0"}, false)
	setup, err := loadTLS(&Config{TLSCert: cert, TLSKey: key, CAFile: p.CA}, "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{tls: setup}
	endpoint := func(name string, req tlsutil.CertRequest, stranger bool) string {
		c, k := p.cert(t, name, req, stranger)
		var listen *tls.Config
		if stranger {
			// A server refuses to start with a certificate that does not
			// chain to its -ca-file: the stranger is built by hand.
			var err error
			if listen, _, err = tlsutil.RaftConfigs(p.CA, c, k); err != nil {
				t.Fatal(err)
			}
		} else {
			st, err := loadTLS(&Config{TLSCert: c, TLSKey: k, CAFile: p.CA}, "s1", nil)
			if err != nil {
				t.Fatal(err)
			}
			listen = st.raftListen
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", listen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { _ = conn.(*tls.Conn).Handshake(); conn.Close() }()
			}
		}()
		return ln.Addr().String()
	}
	named := endpoint("s1", tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s1"}, false)
	other := endpoint("s9", tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s9"}, false)
	anonymous := endpoint("any", tlsutil.CertRequest{Role: tlsutil.RoleServer}, false)
	stranger := endpoint("stranger", tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s1"}, true)
	for _, c := range []struct {
		what  string
		addr  string
		moved bool
		ok    bool
	}{
		{"a new server whose certificate names it", named, false, true},
		{"a moved server whose certificate names it", named, true, true},
		{"a new server whose certificate names no ID", anonymous, false, true},
		{"a moved server whose certificate names no ID", anonymous, true, false},
		{"a server whose certificate names another ID", other, false, false},
		{"a moved server whose certificate names another ID", other, true, false},
		{"a certificate from another CA", stranger, false, false},
		{"nothing listening", "127.0.0.1:1", false, false},
	} {
		err := s.verifyRaftPeer("s1", c.addr, c.moved)
		if (err == nil) != c.ok {
			t.Errorf("%s: verify says %v, want ok=%v", c.what, err, c.ok)
		}
	}
}

// TestHTTPSNeedsTheCA: with TLS on, curl without the cluster's CA fails to
// reach the API, and with it succeeds; a server started with a client CA
// also wants a client certificate. The Go client verifies alike.
func TestHTTPSNeedsTheCA(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (the Makefile's deps install it): ", err)
	}
	p := newTestPKI(t)
	cert, key := p.cert(t, "s", tlsutil.CertRequest{Role: tlsutil.RoleServer, ID: "s"}, false)
	clientCert, clientKey := p.cert(t, "client", tlsutil.CertRequest{Role: tlsutil.RoleClient}, false)
	start := func(clientCA string) (*Server, string) {
		cfg := TestConfig(t.TempDir(), testLogger(t))
		cfg.TLSCert, cfg.TLSKey, cfg.CAFile, cfg.TLSClientCA = cert, key, p.CA, clientCA
		cfg.RaftAddr = "127.0.0.1:0"
		s, tok, err := StartReady(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(context.Background()) })
		return s, tok
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(curl, append([]string{"-sS", "--max-time", "10"}, args...)...).CombinedOutput()
		return string(out), err
	}
	s, tok := start("")
	url := "https://" + s.HTTPAddr() + "/api/v1/whoami"
	if out, err := run("-H", "Authorization: Bearer "+tok, url); err == nil {
		t.Fatalf("curl without the CA got through: %s", out)
	} else if !strings.Contains(out, "certificate") {
		t.Fatalf("curl without the CA failed, but not on the certificate: %s", out)
	}
	if out, err := run("--cacert", p.OtherCA, "-H", "Authorization: Bearer "+tok, url); err == nil {
		t.Fatalf("curl trusting another CA got through: %s", out)
	}
	out, err := run("--cacert", p.CA, "-H", "Authorization: Bearer "+tok, url)
	if err != nil || !strings.Contains(out, `"admin":true`) {
		t.Fatalf("curl with the CA: %v: %s", err, out)
	}
	if out, err := run("http://" + s.HTTPAddr() + "/api/v1/health"); err == nil && !strings.Contains(out, "HTTPS") {
		t.Fatalf("plain HTTP to the HTTPS API: %s", out)
	}
	// The Go client.
	if _, err := api.NewTLSClient(s.HTTPAddr(), tok, nil).Whoami(context.Background()); err == nil {
		t.Fatal("the API answered a client that does not speak TLS")
	}
	conf, err := api.TLSConfig(p.OtherCA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = api.NewTLSClient(s.HTTPAddr(), tok, conf).Whoami(context.Background())
	var te *api.TLSError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "DROVER_CACERT") {
		t.Fatalf("a client trusting another CA: %v", err)
	}
	conf, _ = api.TLSConfig(p.CA, "", "")
	if u, err := api.NewTLSClient(s.HTTPAddr(), tok, conf).Whoami(context.Background()); err != nil || !u.Admin {
		t.Fatalf("a client with the CA: %+v, %v", u, err)
	}

	// Client certificates required.
	s2, tok2 := start(p.CA)
	url2 := "https://" + s2.HTTPAddr() + "/api/v1/whoami"
	if out, err := run("--cacert", p.CA, "-H", "Authorization: Bearer "+tok2, url2); err == nil {
		t.Fatalf("curl without a client certificate got through: %s", out)
	}
	out, err = run("--cacert", p.CA, "--cert", clientCert, "--key", clientKey, "-H", "Authorization: Bearer "+tok2, url2)
	if err != nil || !strings.Contains(out, `"admin":true`) {
		t.Fatalf("curl with a client certificate: %v: %s", err, out)
	}
	_, err = api.NewTLSClient(s2.HTTPAddr(), tok2, conf).Whoami(context.Background())
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "DROVER_CLIENT_CERT") {
		t.Fatalf("a client without a certificate: %v", err)
	}
	withCert, _ := api.TLSConfig(p.CA, clientCert, clientKey)
	if u, err := api.NewTLSClient(s2.HTTPAddr(), tok2, withCert).Whoami(context.Background()); err != nil || !u.Admin {
		t.Fatalf("a client with a certificate: %+v, %v", u, err)
	}
}

// TestRefusalsNameFlags: a server that would work with others in the
// clear is refused with the flags to pass, not the config's Go fields.
func TestRefusalsNameFlags(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.GossipAddr, cfg.BootstrapExpect = t.TempDir(), "127.0.0.1:0", 3
	err := cfg.Validate()
	if err == nil {
		t.Fatal("a 3-server config without TLS or gossip keys validated")
	}
	msg := err.Error()
	for _, want := range []string{"-gossip-key-file", "-tls-cert", "-insecure"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not name %s:\n%s", want, msg)
		}
	}
	for _, field := range []string{"(GossipKeys)", "(Insecure)", "TLSCert", "CAFile"} {
		if strings.Contains(msg, field) {
			t.Errorf("the refusal names the Go field %s:\n%s", field, msg)
		}
	}
}
