// Package token makes the bearer tokens users and workers present and the
// hashes the replicated state keeps instead of them.
package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
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

// Derive makes a token from a secret and the fields it is for: HMAC-SHA256
// keyed by the secret over the fields (joined by NUL), hex encoded, so it
// has the form New gives. Whoever holds the secret makes the same token for
// the same fields, and nobody else can: the autoscaler's join tokens are
// derived so that every server that leads mints a machine's one token
// again when it repeats the machine's launch, and a machine's token tells
// nothing of the secret or of another machine's token. The first field
// should name the purpose, so tokens of two purposes never coincide.
func Derive(secret string, fields ...string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strings.Join(fields, "\x00")))
	return hex.EncodeToString(mac.Sum(nil))
}
