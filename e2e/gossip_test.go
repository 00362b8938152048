package e2e

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// TestGossipRotationRightAfterADeath rotates the gossip key a moment after
// a server is killed (SIGKILL), with gossip at its default probe interval
// (1 s), when gossip has not yet declared the server dead (that takes it
// 4 to 24 s): install returns at once, and successfully, naming the
// server unreachable instead of waiting 10 s for it and failing; use is
// not refused for it; list shows it. The server, started again, takes the
// new keyring through Raft and gossips with it, and the old key goes.
func TestGossipRotationRightAfterADeath(t *testing.T) {
	c := newCluster(t, 3, "-gossip-interval", "1s")
	ctx := context.Background()
	env := []string{"DROVER_ADDR=" + c.HTTPAddrs(), "DROVER_TOKEN=" + c.token()}
	cl := c.client()
	keyring := func() *api.GossipKeyring {
		t.Helper()
		k, err := cl.Operator().GossipKeyring(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	waitFor(t, "every server to tell its keys", 30*time.Second, func() bool {
		k := keyring()
		return len(k.Servers) == 3 && len(k.Keys) == 1 && k.Keys[0].Installed == 3
	})
	old := keyring().Keys[0].Key
	leader := c.waitLeader(30 * time.Second)
	victim := c.Servers[(leader+1)%3]
	victim.Kill9()
	time.Sleep(200 * time.Millisecond)

	next := strings.TrimSpace(runCLI(t, nil, "operator", "gossip", "keyring", "generate").must(t, 0).stdout)
	start := time.Now()
	out := runCLI(t, env, "operator", "gossip", "keyring", "install", next)
	if out.code != 0 || !strings.Contains(out.stdout, "unreachable: "+victim.ID()) {
		t.Fatalf("install %s after the kill of %s: exit %d\n%s%s", time.Since(start).Round(time.Millisecond), victim.ID(), out.code, out.stdout, out.stderr)
	}
	t.Logf("install returned %s after the kill: %s", time.Since(start).Round(time.Millisecond), firstLine([]byte(out.stdout)))
	if k := keyring(); !slices.Contains(k.Unreachable, victim.ID()) || len(k.Pending) != 0 {
		t.Fatalf("the keyring lists pending %v, unreachable %v; want %s unreachable", k.Pending, k.Unreachable, victim.ID())
	}
	runCLI(t, env, "operator", "gossip", "keyring", "use", next).must(t, 0)
	// The leader's view of reachable voters, behind the alert. It is read
	// from whichever server leads when asked: on a loaded machine the
	// leadership can move meanwhile, and a new leader learns of the dead
	// server at its first failed heartbeat.
	waitFor(t, "the leader to count 2 reachable voters with one killed", 30*time.Second, func() bool {
		return metricOf(t, c.Servers[c.waitLeader(30*time.Second)], "drover_raft_reachable_voters") == 2
	})

	// Back, it takes the keyring through Raft and gossips with it.
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, victim.ID()+" to hold the new keyring", time.Minute, func() bool {
		k := keyring()
		if len(k.Pending)+len(k.Unreachable) > 0 || len(k.Servers) != 3 {
			return false
		}
		for _, s := range k.Servers {
			if s.ID == victim.ID() && len(s.Keys) == 2 && s.Keys[0] == k.Keys[0].Fingerprint && k.Keys[0].Key == next {
				return true
			}
		}
		return false
	})
	runCLI(t, env, "operator", "gossip", "keyring", "remove", old).must(t, 0)
	waitFor(t, "the leader to reach every voter", 30*time.Second, func() bool {
		return metricOf(t, c.Servers[c.waitLeader(30*time.Second)], "drover_raft_reachable_voters") == 3
	})
	k := keyring()
	if len(k.Keys) != 1 || k.Keys[0].Key != next || k.Keys[0].Installed != 3 {
		t.Fatalf("after remove: %+v", k)
	}
}

// metricOf reads one unlabelled gauge or counter from a server's /metrics.
func metricOf(t *testing.T, s *testcluster.Server, name string) float64 {
	t.Helper()
	resp, err := s.HTTPClient(5 * time.Second).Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s has no %s", s.ID(), name)
	return 0
}
