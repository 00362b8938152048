package cluster

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// GossipKeySize is the size of the keys drover makes (AES-256); memberlist
// also accepts 16 and 24 bytes (AES-128 and AES-192).
const GossipKeySize = 32

// GenerateGossipKey returns a new random gossip key, base64-encoded as key
// files hold it.
func GenerateGossipKey() (string, error) {
	key := make([]byte, GossipKeySize)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate gossip key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(key), nil
}

// ParseGossipKey decodes a base64 gossip key and checks its size.
func ParseGossipKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("a gossip key is base64 (make one with `drover operator gossip keyring generate`): %w", err)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("a gossip key is 16, 24 or 32 bytes (AES-128, -192 or -256), not %d; make one with `drover operator gossip keyring generate`", len(key))
}

// ReadGossipKeyFile reads a key file: one base64 key per line, the first
// the one gossip is encrypted with (the primary), the others also
// accepted; blank lines and lines starting with # are skipped.
func ReadGossipKeyFile(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gossip key file: %w", err)
	}
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := ParseGossipKey(line)
		if err != nil {
			return nil, fmt.Errorf("gossip key file %s:%d: %w", path, n, err)
		}
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gossip key file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip key file %s holds no key; make one with `drover operator gossip keyring generate > %s`", path, path)
	}
	return keys, nil
}

// KeyFingerprint names a key without showing it: the first 8 hex digits of
// its SHA-256. Servers tell each other their keys' fingerprints over gossip.
func KeyFingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

// Keyring returns the keys this server gossips with, primary first (nil
// when gossip is plain).
func (c *Cluster) Keyring() [][]byte {
	if c.keyring == nil {
		return nil
	}
	return c.keyring.GetKeys()
}

// fingerprints are this server's keys' fingerprints, primary first.
func (c *Cluster) fingerprints() []string {
	keys := c.Keyring()
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = KeyFingerprint(k)
	}
	return out
}

// ErrPlainGossip: keys cannot be rotated on a server that started without
// one.
var ErrPlainGossip = errors.New("gossip on this server is not encrypted: keys can only be rotated on servers started with -gossip-key-file")

// SetKeyring makes keys (primary first) this server's gossip keyring:
// new keys are installed, the first is used to send, the others are
// removed. The keyring is saved to KeyringFile, which the server reads
// instead of its -gossip-key-file when it starts again, and the servers
// are told the new fingerprints over gossip.
func (c *Cluster) SetKeyring(keys [][]byte) error {
	if c.keyring == nil {
		return ErrPlainGossip
	}
	if len(keys) == 0 {
		return errors.New("a gossip keyring needs a key")
	}
	before := c.fingerprints()
	for _, k := range keys {
		if err := c.keyring.AddKey(k); err != nil {
			return fmt.Errorf("install gossip key %s: %w", KeyFingerprint(k), err)
		}
	}
	if err := c.keyring.UseKey(keys[0]); err != nil {
		return fmt.Errorf("use gossip key %s: %w", KeyFingerprint(keys[0]), err)
	}
	for _, k := range c.keyring.GetKeys() {
		if !slices.ContainsFunc(keys, func(w []byte) bool { return bytes.Equal(w, k) }) {
			if err := c.keyring.RemoveKey(k); err != nil {
				return fmt.Errorf("remove gossip key %s: %w", KeyFingerprint(k), err)
			}
		}
	}
	after := c.fingerprints()
	if slices.Equal(before, after) {
		return nil
	}
	if c.cfg.KeyringFile != "" {
		if err := writeKeyFile(c.cfg.KeyringFile, c.keyring.GetKeys()); err != nil {
			return err
		}
	}
	c.log.Info("gossip keyring changed", "keys", after, "was", before)
	if err := c.ml.UpdateNode(5 * time.Second); err != nil {
		// The others learn the new fingerprints with the next push-pull.
		c.log.Debug("tell the servers about the new gossip keyring", "err", err)
	}
	return nil
}

// writeKeyFile saves keys, primary first, in the key file format, so that
// a crash mid-write leaves the old file.
func writeKeyFile(path string, keys [][]byte) error {
	var b strings.Builder
	b.WriteString("# drover gossip keyring: the first key encrypts, all are accepted.\n")
	b.WriteString("# Written by the server when keys are rotated; it is read instead of -gossip-key-file.\n")
	for _, k := range keys {
		b.WriteString(base64.StdEncoding.EncodeToString(k))
		b.WriteByte('\n')
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("save gossip keyring: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save gossip keyring: %w", err)
	}
	return nil
}
