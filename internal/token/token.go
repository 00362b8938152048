// Package token makes the bearer tokens users and workers present and the
// hashes the replicated state keeps instead of them.
package token

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// New returns a fresh random token: 32 bytes, hex encoded.
func New() (string, error) {
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// Valid reports whether s has the form New gives (64 hex digits): a token
// a client made for itself must be as strong as one a server makes.
func Valid(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// Hash is how tokens are stored: only their SHA-256 is replicated.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
