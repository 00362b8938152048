package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// noRaft is a server with no Raft state, for gossip alone.
type noRaft struct{}

func (noRaft) LastIndex() uint64                               { return 0 }
func (noRaft) AppliedIndex() uint64                            { return 0 }
func (noRaft) BootstrapCluster(raft.Configuration) raft.Future { return nil }
func (noRaft) GetConfiguration() raft.ConfigurationFuture      { return nil }
func (noRaft) AddVoter(raft.ServerID, raft.ServerAddress, uint64, time.Duration) raft.IndexFuture {
	return nil
}
func (noRaft) RemoveServer(raft.ServerID, uint64, time.Duration) raft.IndexFuture { return nil }

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAServerWithARemovedKeySaysSo: a server started with a gossip key
// the cluster no longer holds (a replacement after a rotation, given the
// old key file) is told apart from a network problem on both sides: the
// cluster's server says a server it cannot decrypt is trying to reach
// it, with its installed fingerprints; the new one says after a while
// that its key may be one the cluster removed.
func TestAServerWithARemovedKeySaysSo(t *testing.T) {
	joinHintAfter = time.Second
	defer func() { joinHintAfter = 10 * time.Second }()
	current, _ := GenerateGossipKey()
	removed, _ := GenerateGossipKey()
	start := func(id, key string, join []string, out *syncBuffer) *Cluster {
		k, err := ParseGossipKey(key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Start(Config{ID: id, GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:9", HTTPAddr: "127.0.0.1:9", GossipKeys: [][]byte{k},
			Join: join, GossipInterval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(out, nil))}, noRaft{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Shutdown)
		return c
	}
	var oldLog, newLog syncBuffer
	old := start("s1", current, nil, &oldLog)
	start("s4", removed, []string{old.GossipAddr()}, &newLog)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(oldLog.String(), "whose gossip key this server does not hold") || !strings.Contains(newLog.String(), "may hold one it removed") {
		if time.Now().After(deadline) {
			t.Fatalf("no hint on both sides.\nthe cluster's server:\n%s\nthe new one:\n%s", oldLog.String(), newLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if fp := KeyFingerprint(mustKey(t, current)); !strings.Contains(oldLog.String(), fp) {
		t.Fatalf("the hint does not name the installed key %s:\n%s", fp, oldLog.String())
	}
	// The metric behind the alert counts them.
	if n := old.Undecryptable(); n < 1 {
		t.Fatalf("undecryptable messages counted: %d", n)
	}
}

func mustKey(t *testing.T, s string) []byte {
	k, err := ParseGossipKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
