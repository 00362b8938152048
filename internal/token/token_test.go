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
