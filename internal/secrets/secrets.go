// Package secrets seals the small secrets servers keep in the replicated
// state (billing projects' storage credentials) with AES-256-GCM under
// keys each server reads from a file of its own, so that the Raft log,
// snapshots and raft.db hold only ciphertext: a copy of them, or of a
// snapshot an operator saved, gives nothing away without the key file.
//
// A key file holds one or more keys, base64, one a line: the first seals,
// all open (each sealed value names its key by an ID), which is how keys
// are rotated.
package secrets

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of a key: AES-256.
const KeySize = 32

// version is the first byte of a sealed value; idSize bytes of the key's
// ID and the GCM nonce follow, then the ciphertext with its tag.
const (
	version = 1
	idSize  = 8
)

// ErrUnknownKey is returned by Open for a value sealed under a key the
// keyring does not hold (a server given another key file than the one
// that sealed it).
var ErrUnknownKey = errors.New("sealed with a key this server does not have")

// Keyring seals with its first key and opens with any of its keys. It is
// safe for concurrent use.
type Keyring struct {
	keys []key
}

type key struct {
	id   [idSize]byte
	aead cipher.AEAD
}

// NewKeyring makes a keyring of raw keys, the first sealing.
func NewKeyring(raw [][]byte) (*Keyring, error) {
	if len(raw) == 0 {
		return nil, errors.New("a secrets keyring needs at least one key")
	}
	k := &Keyring{}
	for i, r := range raw {
		if len(r) != KeySize {
			return nil, fmt.Errorf("secrets key %d is %d bytes; it is %d (make one with `drover operator secrets-key generate`)", i+1, len(r), KeySize)
		}
		block, err := aes.NewCipher(r)
		if err != nil {
			return nil, fmt.Errorf("secrets key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("secrets key %d: %w", i+1, err)
		}
		id := keyID(r)
		for _, o := range k.keys {
			if o.id == id {
				return nil, fmt.Errorf("secrets key %d is in the file twice", i+1)
			}
		}
		k.keys = append(k.keys, key{id: id, aead: aead})
	}
	return k, nil
}

// keyID names a key without revealing it.
func keyID(raw []byte) [idSize]byte {
	sum := sha256.Sum256(append([]byte("drover-secrets-key-id:"), raw...))
	var id [idSize]byte
	copy(id[:], sum[:])
	return id
}

// KeyIDs are the keys' IDs (hex), the sealing key's first.
func (k *Keyring) KeyIDs() []string {
	out := make([]string, len(k.keys))
	for i, key := range k.keys {
		out[i] = hex.EncodeToString(key.id[:])
	}
	return out
}

// Seal encrypts plaintext under the first key, bound to context (what the
// secret belongs to, say a project and a prefix): a sealed value opens
// only with the same context, so it cannot be moved to another owner.
func (k *Keyring) Seal(plaintext, context []byte) ([]byte, error) {
	key := k.keys[0]
	out := make([]byte, 1+idSize+key.aead.NonceSize(), 1+idSize+key.aead.NonceSize()+len(plaintext)+key.aead.Overhead())
	out[0] = version
	copy(out[1:], key.id[:])
	nonce := out[1+idSize:]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return key.aead.Seal(out, nonce, plaintext, context), nil
}

// Open decrypts a value Seal made with the same context.
func (k *Keyring) Open(sealed, context []byte) ([]byte, error) {
	id, ok := KeyIDOf(sealed)
	if !ok {
		return nil, errors.New("open: not a sealed value")
	}
	for _, key := range k.keys {
		if hex.EncodeToString(key.id[:]) != id {
			continue
		}
		head := 1 + idSize + key.aead.NonceSize()
		if len(sealed) < head+key.aead.Overhead() {
			return nil, errors.New("open: sealed value is cut short")
		}
		plain, err := key.aead.Open(nil, sealed[1+idSize:head], sealed[head:], context)
		if err != nil {
			return nil, fmt.Errorf("open: %w (altered, or sealed for another owner)", err)
		}
		return plain, nil
	}
	return nil, fmt.Errorf("open: key %s: %w", id, ErrUnknownKey)
}

// KeyIDOf returns the ID of the key a value was sealed under.
func KeyIDOf(sealed []byte) (string, bool) {
	if len(sealed) < 1+idSize || sealed[0] != version {
		return "", false
	}
	return hex.EncodeToString(sealed[1 : 1+idSize]), true
}

// GenerateKey returns a new random key.
func GenerateKey() ([]byte, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate secrets key: %w", err)
	}
	return raw, nil
}

// FormatKey writes a key as a line of its file.
func FormatKey(raw []byte) string { return base64.StdEncoding.EncodeToString(raw) }

// ReadKeyFile reads a keyring: base64 keys, one a line, the first
// sealing; blank lines and lines starting with '#' are skipped.
func ReadKeyFile(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secrets key file: %w", err)
	}
	var raw [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		r, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("secrets key file %s, line %d: not base64", path, line)
		}
		raw = append(raw, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read secrets key file %s: %w", path, err)
	}
	k, err := NewKeyring(raw)
	if err != nil {
		return nil, fmt.Errorf("secrets key file %s: %w", path, err)
	}
	return k, nil
}

// EnsureKeyFile reads the keyring at path, first writing one new key
// there (mode 0600) when the file does not exist; created says whether it
// did. A single server keeps its key in its data dir this way.
func EnsureKeyFile(path string) (k *Keyring, created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		k, err := ReadKeyFile(path)
		return k, false, err
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("secrets key file: %w", err)
	}
	raw, err := GenerateKey()
	if err != nil {
		return nil, false, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secrets-key-*")
	if err != nil {
		return nil, false, fmt.Errorf("write secrets key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = fmt.Fprintf(tmp, "# drover secrets key: seals billing projects' storage credentials in the state; keep it with the data dir's backups, apart from them\n%s\n", FormatKey(raw))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A hard link fails if another process made the file meanwhile:
		// every server of this data dir then uses that one.
		err = os.Link(tmp.Name(), path)
	}
	created = err == nil
	if err != nil && !errors.Is(err, os.ErrExist) {
		return nil, false, fmt.Errorf("write secrets key file: %w", err)
	}
	k, err = ReadKeyFile(path)
	return k, created && err == nil, err
}
