package worker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The worker's identity lives in its data dir, as a Nomad client's does: a
// node ID made on first start and kept, so a restarted worker is known as
// the same node whatever its name, and two workers with their own data
// dirs are two nodes even on one host with one name.
const (
	nodeIDFile   = "node-id"
	tokenFile    = "instance-token" // the last activation's token (0600)
	lockFile     = "lock"
	nodeIDLength = 32 // hex digits
)

// identity is a worker's node ID and the lock that keeps a second process
// off its data dir.
type identity struct {
	dir    string
	nodeID string
	lock   *os.File
}

// claimIdentity locks the data dir and returns its node ID, making one on
// first use. A second process on the same data dir is refused: it would
// claim the same node ID.
func claimIdentity(dir string) (*identity, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create worker data dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open worker lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(f.Name())
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if pid := strings.TrimSpace(string(holder)); pid != "" {
				who = "process " + pid
			}
			return nil, fmt.Errorf("data dir %s is in use by another drover worker (%s): each worker needs its own -data-dir", dir, who)
		}
		return nil, fmt.Errorf("lock worker data dir %s: %w", dir, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	id := &identity{dir: dir, lock: f}
	if id.nodeID, err = loadOrMakeNodeID(filepath.Join(dir, nodeIDFile)); err != nil {
		id.release()
		return nil, err
	}
	return id, nil
}

func loadOrMakeNodeID(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(raw))
		if len(s) != nodeIDLength {
			return "", fmt.Errorf("%s holds %q, not a node ID; delete it to make a new one", path, s)
		}
		if _, err := hex.DecodeString(s); err != nil {
			return "", fmt.Errorf("%s holds %q, not a node ID; delete it to make a new one", path, s)
		}
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read node ID: %w", err)
	}
	b := make([]byte, nodeIDLength/2)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make node ID: %w", err)
	}
	s := hex.EncodeToString(b)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write node ID: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write node ID: %w", err)
	}
	return s, nil
}

// previousToken returns the token of the last activation, if kept.
func (id *identity) previousToken() string {
	raw, _ := os.ReadFile(filepath.Join(id.dir, tokenFile))
	return strings.TrimSpace(string(raw))
}

// keepToken remembers an activation's token, so the next start proves it
// is the same worker.
func (id *identity) keepToken(tok string) error {
	path := filepath.Join(id.dir, tokenFile)
	if err := os.WriteFile(path+".tmp", []byte(tok+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func (id *identity) release() {
	if id.lock != nil {
		id.lock.Close() // closing drops the flock
		id.lock = nil
	}
}
