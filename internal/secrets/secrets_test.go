package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustKeyring(t *testing.T, n int) (*Keyring, [][]byte) {
	t.Helper()
	var raw [][]byte
	for range n {
		r, err := GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, r)
	}
	k, err := NewKeyring(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k, raw
}

// TestSealOpen: a sealed value holds no trace of the plaintext, opens
// only with its context and its key, and not once altered.
func TestSealOpen(t *testing.T) {
	k, raw := mustKeyring(t, 1)
	secret := []byte("AKIDEXAMPLE/wJalrXUtnFEMI-secret")
	ctx := []byte("projA\x00s3://b/projA")
	sealed, err := k.Seal(secret, ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) || bytes.Contains(sealed, []byte("wJalr")) {
		t.Fatal("the sealed value holds the plaintext")
	}
	again, _ := k.Seal(secret, ctx)
	if bytes.Equal(sealed, again) {
		t.Fatal("two seals of one value are the same bytes: the nonce is not fresh")
	}
	got, err := k.Open(sealed, ctx)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := k.Open(sealed, []byte("projB\x00s3://b/projA")); err == nil {
		t.Fatal("opened with another project's context")
	}
	bad := bytes.Clone(sealed)
	bad[len(bad)-1] ^= 1
	if _, err := k.Open(bad, ctx); err == nil {
		t.Fatal("opened an altered value")
	}
	if _, err := k.Open(sealed[:20], ctx); err == nil {
		t.Fatal("opened a cut value")
	}
	other, _ := mustKeyring(t, 1)
	if _, err := other.Open(sealed, ctx); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("another key: %v", err)
	}
	if id, ok := KeyIDOf(sealed); !ok || id != k.KeyIDs()[0] || strings.Contains(id, FormatKey(raw[0])) {
		t.Fatalf("key id %q %v", id, ok)
	}
}

// TestRotation: a keyring whose new key comes first seals with it and
// still opens what the old key sealed.
func TestRotation(t *testing.T) {
	old, oldRaw := mustKeyring(t, 1)
	sealed, _ := old.Seal([]byte("v"), nil)
	newRaw, _ := GenerateKey()
	both, err := NewKeyring([][]byte{newRaw, oldRaw[0]})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := both.Open(sealed, nil); err != nil || string(got) != "v" {
		t.Fatalf("old value: %q %v", got, err)
	}
	fresh, _ := both.Seal([]byte("w"), nil)
	if id, _ := KeyIDOf(fresh); id != both.KeyIDs()[0] || id == old.KeyIDs()[0] {
		t.Fatalf("sealed with %s, want the new key %s", id, both.KeyIDs()[0])
	}
	if _, err := NewKeyring([][]byte{newRaw, newRaw}); err == nil {
		t.Fatal("a key twice was accepted")
	}
	if _, err := NewKeyring([][]byte{[]byte("short")}); err == nil || !strings.Contains(err.Error(), "is 5 bytes") {
		t.Fatalf("short key: %v", err)
	}
}

// TestKeyFile: EnsureKeyFile makes a private file once and reads it after;
// ReadKeyFile skips comments and names a bad line.
func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	k1, created, err := EnsureKeyFile(path)
	if err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	k2, created, err := EnsureKeyFile(path)
	if err != nil || created || k2.KeyIDs()[0] != k1.KeyIDs()[0] {
		t.Fatalf("second: %v %v %v", created, err, k2.KeyIDs())
	}
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("# comment\n\nnot base64!\n"), 0o600)
	if _, err := ReadKeyFile(bad); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("bad file: %v", err)
	}
	empty := filepath.Join(dir, "empty.key")
	os.WriteFile(empty, []byte("# nothing\n"), 0o600)
	if _, err := ReadKeyFile(empty); err == nil || !strings.Contains(err.Error(), "at least one key") {
		t.Fatalf("empty file: %v", err)
	}
}
