package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TestConfig returns a configuration for a single-server cluster on loopback
// with short timeouts, for tests in this and other packages.
func TestConfig(dataDir string, log *slog.Logger) *Config {
	cfg := DefaultConfig()
	cfg.DataDir = dataDir
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.Bootstrap = true
	cfg.WorkerSecret = "test-secret"
	cfg.HeartbeatTimeout = 200 * time.Millisecond
	cfg.ElectionTimeout = 200 * time.Millisecond
	cfg.LeaderLeaseTimeout = 100 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.LostTimeout = 5 * time.Second
	cfg.ApplyTimeout = 10 * time.Second
	cfg.Logger = log
	return cfg
}

// WaitReady waits until the server leads and its admin token exists, and
// returns the token.
func (s *Server) WaitReady(ctx context.Context) (string, error) {
	path := filepath.Join(s.cfg.DataDir, "root.token")
	for {
		if s.IsLeader() {
			if b, err := os.ReadFile(path); err == nil {
				return strings.TrimSpace(string(b)), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("server not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
