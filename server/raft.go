package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// nodeID returns the configured node ID, or the one saved in the data dir,
// or a new one (saved for the next start).
func nodeID(cfg *Config) (string, error) {
	if cfg.NodeID != "" {
		return cfg.NodeID, nil
	}
	path := filepath.Join(cfg.DataDir, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !os.IsNotExist(err) {
		return "", fmt.Errorf("read node id: %w", err)
	}
	host, _ := os.Hostname()
	buf := make([]byte, 4)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	id := fmt.Sprintf("%s-%s", strings.Split(host, ".")[0], hex.EncodeToString(buf))
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("save node id: %w", err)
	}
	return id, nil
}

type raftParts struct {
	raft      *raft.Raft
	store     *raftboltdb.BoltStore
	transport *raft.NetworkTransport
	snaps     *raft.FileSnapshotStore
}

func (s *Server) setupRaft() (*raftParts, error) {
	cfg := s.cfg
	dir := filepath.Join(cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create raft dir: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.id)
	rc.Logger = newHclog(s.log, "raft", hclog.Info)
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	}
	if cfg.CommitTimeout > 0 {
		rc.CommitTimeout = cfg.CommitTimeout
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 512

	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		return nil, fmt.Errorf("open raft log %s: %w", filepath.Join(dir, "raft.db"), err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, rc.Logger)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	var advertise net.Addr
	if cfg.RaftAdvertise != "" {
		if advertise, err = net.ResolveTCPAddr("tcp", cfg.RaftAdvertise); err != nil {
			store.Close()
			return nil, fmt.Errorf("resolve raft advertise address %q: %w", cfg.RaftAdvertise, err)
		}
	}
	transport, err := raft.NewTCPTransportWithLogger(cfg.RaftAddr, advertise, 8, 10*time.Second, rc.Logger)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("listen for raft on %s: %w", cfg.RaftAddr, err)
	}
	parts := &raftParts{store: store, transport: transport, snaps: snaps}
	if cfg.Bootstrap {
		existing, err := raft.HasExistingState(store, store, snaps)
		if err != nil {
			parts.close()
			return nil, fmt.Errorf("check raft state: %w", err)
		}
		if !existing {
			conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: transport.LocalAddr()}}}
			if err := raft.BootstrapCluster(rc, store, store, snaps, transport, conf); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				parts.close()
				return nil, fmt.Errorf("bootstrap raft: %w", err)
			}
		}
	}
	r, err := raft.NewRaft(rc, s.fsm, store, store, snaps, transport)
	if err != nil {
		parts.close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	parts.raft = r
	return parts, nil
}

func (p *raftParts) close() {
	if p.transport != nil {
		p.transport.Close()
	}
	if p.store != nil {
		p.store.Close()
	}
}
