package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// testCluster wraps a launched multi-process cluster for tests.
type testCluster struct {
	t *testing.T
	*testcluster.Cluster
	dir string
	tok string // the admin token, once every server knew it
}

// newCluster starts n servers on 127.0.1.1..n that bootstrap together, with
// transition logs for the history checker.
func newCluster(t *testing.T, n int, args ...string) *testCluster {
	t.Helper()
	return startCluster(t, testcluster.Options{Servers: n, Args: args})
}

func startCluster(t *testing.T, opts testcluster.Options) *testCluster {
	t.Helper()
	opts.Binary = droverBin
	opts.Dir = t.TempDir()
	opts.TransitionLogs = true
	lc, err := testcluster.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, Cluster: lc, dir: opts.Dir}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			c.dumpLogs()
		}
	})
	c.waitLeader(60 * time.Second)
	return c
}

func (c *testCluster) waitLeader(limit time.Duration) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	i, err := c.WaitLeader(ctx)
	if err != nil {
		c.dumpLogs()
		c.t.Fatal(err)
	}
	return i
}

// token waits (briefly) for the first leader to write the admin token and
// for every running server to know it.
func (c *testCluster) token() string {
	c.t.Helper()
	if c.tok != "" {
		return c.tok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tok, err := c.WaitToken(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	c.tok = tok
	return tok
}

// client talks to every server, as a user would configure DROVER_ADDR.
func (c *testCluster) client() *api.Client { return c.NewClient(c.HTTPAddrs(), c.token()) }

func (c *testCluster) startWorker(name string, cores float64) {
	c.t.Helper()
	if _, err := c.StartWorker(name, cores, "16GiB"); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) dumpLogs() {
	for _, f := range c.Logs() {
		data, _ := os.ReadFile(f)
		if len(data) > 20000 {
			data = data[len(data)-20000:]
		}
		c.t.Logf("==> %s\n%s", filepath.Base(f), strings.TrimRight(string(data), "\n"))
	}
}

// waitBatch waits until a batch satisfies cond, failing after limit.
func waitBatch(t *testing.T, c *api.Client, id int64, limit time.Duration, what string, cond func(*api.Batch) bool) *api.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		b, err := c.GetBatch(ctx, id)
		if err == nil && cond(b) {
			return b
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (last: %+v, %v)", what, b, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
