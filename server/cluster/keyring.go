package cluster

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
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
