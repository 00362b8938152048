package token

import "testing"

func TestNewIsRandomAndHashIsStable(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New()
	if len(a) != 64 || a == b {
		t.Fatalf("tokens %q and %q: want two different 64-character tokens", a, b)
	}
	// SHA-256 of "abc", as the data dirs of format v1 store it.
	if got := Hash("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("Hash(abc) = %s", got)
	}
}

// TestDeriveIsKeyedAndBound: a derived token is the same for the same
// secret and fields, has New's form, and changes with the secret and with
// any field (a field cannot slide into the next).
func TestDeriveIsKeyedAndBound(t *testing.T) {
	a := Derive("secret", "join", "drover-5-0", "key")
	if !Valid(a) || a != Derive("secret", "join", "drover-5-0", "key") {
		t.Fatalf("Derive gave %q, then something else", a)
	}
	for _, other := range []string{Derive("secret2", "join", "drover-5-0", "key"), Derive("secret", "join", "drover-5-1", "key"),
		Derive("secret", "join", "drover-5-0key"), Derive("secret", "join", "drover-5-", "0", "key")} {
		if other == a {
			t.Fatalf("another secret or other fields derived the same token %s", a)
		}
	}
	// HMAC-SHA256 of "join\x00m" keyed by "k" (RFC 2104; Python's hmac gives the same).
	if got := Derive("k", "join", "m"); got != "3b368484197762a5e004ac56386fc123debba799fdf7965826444bf3b9a1b92c" {
		t.Fatalf("Derive(k, join, m) = %s", got)
	}
}
