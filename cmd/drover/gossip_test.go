package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sched/drover/server/cluster"
)

// TestGossipKeyCommands: `operator gossip keyring generate` prints a key a
// server reads from -gossip-key-file; a server that would gossip with
// others without one refuses to start and says how to make one.
func TestGossipKeyCommands(t *testing.T) {
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	if err := m.Run(context.Background(), []string{"operator", "gossip", "keyring", "generate"}); err != nil {
		t.Fatalf("generate: %v (%s)", err, errOut.String())
	}
	key := strings.TrimSpace(out.String())
	file := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(file, []byte("# the cluster's key\n"+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := cluster.ReadGossipKeyFile(file)
	if err != nil || len(keys) != 1 || len(keys[0]) != cluster.GossipKeySize {
		t.Fatalf("key file of %q: %d keys, %v", key, len(keys), err)
	}
	bad := filepath.Join(t.TempDir(), "bad.key")
	os.WriteFile(bad, []byte(key+"\nnot-base64!\n"), 0o600)
	if _, err := cluster.ReadGossipKeyFile(bad); err == nil || !strings.Contains(err.Error(), "bad.key:2") {
		t.Fatalf("a bad second line: %v", err)
	}

	err = m.Run(context.Background(), []string{"server", "-data-dir", t.TempDir(), "-http-addr", "127.0.0.1:0", "-raft-addr", "127.0.0.1:0",
		"-gossip-addr", "127.0.0.1:0", "-bootstrap-expect", "3", "-join", "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "drover operator gossip keyring generate") {
		t.Fatalf("a 3-server bootstrap without a key: %v", err)
	}
}
