package tlsutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEnsureOwnCA: the first start makes a CA and a server certificate,
// later starts reuse them; a new server ID gets a new certificate from the
// same CA, an expiring CA or an unreadable one is replaced, and what is
// made is a server certificate Raft's mutual TLS accepts.
func TestEnsureOwnCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	now := time.Now()
	files, made, err := EnsureOwnCA(dir, "s1", now)
	if err != nil || len(made) != 4 {
		t.Fatalf("first start: made %v, %v", made, err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("dir: %v %v", st.Mode(), err)
	}
	for _, f := range []string{files.CAKey, files.Key} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("key %s: %v %v", f, st.Mode(), err)
		}
	}
	if _, _, err := RaftConfigs(files.CA, files.Cert, files.Key); err != nil {
		t.Fatalf("the certificate made is no Raft server's: %v", err)
	}
	caPEM, _ := os.ReadFile(files.CA)
	if _, made, err := EnsureOwnCA(dir, "s1", now.Add(24*time.Hour)); err != nil || len(made) != 0 {
		t.Fatalf("second start: made %v, %v", made, err)
	}
	// Another ID: a certificate naming it, from the same CA.
	files2, made, err := EnsureOwnCA(dir, "s2", now)
	if err != nil || len(made) != 2 || made[0] != files2.Cert {
		t.Fatalf("new ID: made %v, %v", made, err)
	}
	if b, _ := os.ReadFile(files.CA); string(b) != string(caPEM) {
		t.Fatal("a new ID replaced the CA")
	}
	// Within 30 days of the end: all anew.
	if _, made, err := EnsureOwnCA(dir, "s2", now.AddDate(0, 0, ownDays-20)); err != nil || len(made) != 4 {
		t.Fatalf("near expiry: made %v, %v", made, err)
	}
	// An unreadable CA: replaced.
	os.WriteFile(files.CA, []byte("not a certificate"), 0o644)
	if _, made, err := EnsureOwnCA(dir, "s2", now); err != nil || len(made) != 4 {
		t.Fatalf("broken CA: made %v, %v", made, err)
	}
	if _, _, err := EnsureOwnCA(dir, "", now); err == nil {
		t.Fatal("no ID accepted")
	}
}
