// Package bench runs drover's benchmarks (`drover bench sched`, `e2e`,
// `failover`, `catchup`): it starts real clusters of the drover binary
// (testkit/testcluster) or the dev agent, drives them with simulated
// workers and submitters, profiles them and reduces what it measured to
// figures. The CLI parses the flags into a config, calls Run..., and
// prints the result; the statistics are plain functions tested here.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/drover-sched/drover/testkit/testcluster"
)

// Printf is where a benchmark writes a line (without its newline) of
// progress or a notice (nil: nowhere).
type Printf func(format string, a ...any)

func (p Printf) printf(format string, a ...any) {
	if p != nil {
		p(format, a...)
	}
}

// ErrServerExited is returned when a server exits while the cluster
// starts, which StartCluster retries: another process may have taken a
// port it was given.
var ErrServerExited = errors.New("a server exited while the cluster started")

// StartCluster launches servers of binary in a temporary directory (kept
// with keep) and waits until they have a leader and every server knows the
// admin token. notices hears of retries and of the kept directory.
func StartCluster(ctx context.Context, binary string, opts testcluster.Options, keep bool, notices Printf, args ...string) (*testcluster.Cluster, func(), error) {
	var err error
	// Ports are picked free but not held until the servers bind them;
	// another process on the machine (parallel tests) may take one in
	// between, and the server then exits at once. Start again with new
	// ports when that happens.
	for try := 1; try <= 3; try++ {
		var c *testcluster.Cluster
		var cleanup func()
		c, cleanup, err = startCluster(ctx, binary, opts, keep, notices, args...)
		if err == nil {
			return c, cleanup, nil
		}
		if !errors.Is(err, ErrServerExited) {
			return nil, nil, err
		}
		notices.printf("bench: %v; starting the cluster again", err)
	}
	return nil, nil, err
}

func startCluster(ctx context.Context, binary string, opts testcluster.Options, keep bool, notices Printf, args ...string) (*testcluster.Cluster, func(), error) {
	dir, err := os.MkdirTemp("", "drover-bench-")
	if err != nil {
		return nil, nil, err
	}
	opts.Binary, opts.Dir, opts.Args = binary, dir, args
	c, err := testcluster.Start(opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	cleanup := func() {
		c.Stop()
		if keep {
			notices.printf("kept %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	exited := make(chan string, 1)
	go func() {
		for wctx.Err() == nil {
			for _, s := range c.Servers {
				if !s.Running() {
					exited <- s.ID() + ": " + lastLogLine(s.Log())
					cancel()
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	if _, err := c.WaitLeader(wctx); err != nil {
		cleanup()
		select {
		case why := <-exited:
			return nil, nil, fmt.Errorf("%w (%s)", ErrServerExited, why)
		default:
		}
		return nil, nil, err
	}
	// Benchmarks ask every server for its memory and peers with the admin
	// token: wait until every server has applied the admin's creation.
	if _, err := c.WaitToken(wctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	return c, cleanup, nil
}

// lastLogLine is the last line of a log file, for an error message.
func lastLogLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return lines[len(lines)-1]
}
