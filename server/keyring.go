package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/drover-sched/drover/server/cluster"
)

// keyringFile is where a server keeps its gossip keyring once keys were
// rotated (`drover operator gossip keyring`); it is read instead of
// -gossip-key-file when the server starts.
const keyringFile = "gossip.keyring"

// savedKeyring returns the keyring saved in the data dir (nil when there
// is none).
func savedKeyring(dataDir string) ([][]byte, error) {
	path := filepath.Join(dataDir, keyringFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	keys, err := cluster.ReadGossipKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("saved gossip keyring (delete it to start from -gossip-key-file again): %w", err)
	}
	return keys, nil
}

// keyringChanged is the state's Keyring hook: it wakes runKeyring.
func (s *Server) keyringChanged() {
	select {
	case s.keyringWake <- struct{}{}:
	default:
	}
}

// runKeyring makes this server's gossip keyring the one last committed to
// the log, each time it changes. A server that is still catching up waits
// until it has (the entries it replays are older keyrings), and one that
// was down through a rotation gets the keys through Raft, whose transport
// does not depend on gossip.
func (s *Server) runKeyring(ctx context.Context) {
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.keyringWake:
		case <-retry.C:
		}
		raw := s.state.GossipKeyring()
		if len(raw) == 0 {
			continue
		}
		if !s.Ready() {
			retry.Reset(200 * time.Millisecond)
			continue
		}
		if slices.EqualFunc(raw, s.cluster.Keyring(), func(a, b []byte) bool { return string(a) == string(b) }) {
			continue
		}
		if err := s.cluster.SetKeyring(raw); err != nil {
			s.log.Error("apply the cluster's gossip keyring", "err", err)
			retry.Reset(5 * time.Second)
		}
	}
}
