package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/testcluster"
)

func (m *Main) runBench(ctx context.Context, args []string) error {
	return m.sub(ctx, "bench", args, map[string]func(context.Context, []string) error{
		"failover": m.runBenchFailover, "catchup": m.runBenchCatchup, "sched": m.runBenchSched, "e2e": m.runBenchE2E,
		"autoscale": m.runBenchAutoscale,
	})
}

// benchCluster launches servers of this very binary in a temporary
// directory (kept with -keep).
func (m *Main) benchCluster(ctx context.Context, opts testcluster.Options, keep bool, args ...string) (*testcluster.Cluster, func(), error) {
	var err error
	// Ports are picked free but not held until the servers bind them;
	// another process on the machine (parallel tests) may take one in
	// between, and the server then exits at once. Start again with new
	// ports when that happens.
	for try := 1; try <= 3; try++ {
		var c *testcluster.Cluster
		var cleanup func()
		c, cleanup, err = m.startBenchCluster(ctx, opts, keep, args...)
		if err == nil {
			return c, cleanup, nil
		}
		if !errors.Is(err, errServerExited) {
			return nil, nil, err
		}
		safef(m.Stderr, "bench: %v; starting the cluster again\n", err)
	}
	return nil, nil, err
}

var errServerExited = errors.New("a server exited while the cluster started")

func (m *Main) startBenchCluster(ctx context.Context, opts testcluster.Options, keep bool, args ...string) (*testcluster.Cluster, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "drover-bench-")
	if err != nil {
		return nil, nil, err
	}
	opts.Binary, opts.Dir, opts.Args = self, dir, args
	c, err := testcluster.Start(opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	cleanup := func() {
		c.Stop()
		if keep {
			safef(m.Stderr, "kept %s\n", dir)
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
			return nil, nil, fmt.Errorf("%w (%s)", errServerExited, why)
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

func durationsMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d.Microseconds()) / 1000
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// runBenchFailover kills the leader of a real cluster again and again and
// measures how long it takes until a write is acknowledged by the next one.
func (m *Main) runBenchFailover(ctx context.Context, args []string) error {
	fs := m.newFlags("bench failover", "[flags]")
	servers := fs.Int("servers", 3, "servers in the cluster (3 or 5)")
	kills := fs.Int("kills", 20, "leader kills to measure")
	raftTimeout := fs.Duration("raft-timeout", 500*time.Millisecond, "the servers' -raft-timeout")
	keep := fs.Bool("keep", false, "keep the cluster's directory (logs) afterwards")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *servers < 3 || *kills < 1 {
		return usagef("need -servers >= 3 and -kills >= 1")
	}
	c, cleanup, err := m.benchCluster(ctx, testcluster.Options{Servers: *servers, Net: "127.0.3."}, *keep, "-raft-timeout", raftTimeout.String())
	if err != nil {
		return err
	}
	defer cleanup()
	token, err := c.Token()
	if err != nil {
		return err
	}
	write := func(cl *api.Client, key string) error {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cl.CreateBatch(wctx, &api.CreateBatchRequest{Name: "failover", IdempotencyKey: key,
			Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}}}})
		return err
	}
	var took []time.Duration
	for k := 0; k < *kills; k++ {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		leader, err := c.WaitLeader(wctx)
		cancel()
		if err != nil {
			return err
		}
		if err := write(api.NewClient(c.HTTPAddrs(), token), fmt.Sprintf("before-%d", k)); err != nil {
			return fmt.Errorf("write before kill %d: %w", k+1, err)
		}
		killed := time.Now()
		c.Servers[leader].Kill9()
		var d time.Duration
	wait:
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if time.Since(killed) > time.Minute {
				return fmt.Errorf("kill %d: no new leader within a minute", k+1)
			}
			for _, s := range c.Servers {
				if s.Index == leader || !s.Running() || !s.IsReadyLeader() {
					continue
				}
				one := c.NewClient(s.URL(), token)
				one.RetryUnavailable, one.RetryUnreachable = 0, 0
				if write(one, fmt.Sprintf("after-%d", k)) == nil {
					d = time.Since(killed)
					break wait
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, d)
		if !*asJSON {
			safef(m.Stdout, "kill %2d: leader s%d killed; a write was acknowledged by the next leader after %s\n", k+1, leader, d.Round(time.Millisecond))
		}
		if err := c.Servers[leader].Start(); err != nil {
			return err
		}
	}
	ms := durationsMs(took)
	res := map[string]any{
		"bench": "failover", "servers": *servers, "kills": *kills, "raft_timeout": raftTimeout.String(),
		"failover_ms": ms, "median_ms": median(ms), "worst_ms": maxOf(ms),
	}
	if !*asJSON {
		safef(m.Stdout, "failover: median %.0f ms, worst %.0f ms over %d leader kills (%d servers, raft timeout %s)\n",
			median(ms), maxOf(ms), *kills, *servers, raftTimeout)
	}
	return json.NewEncoder(m.Stdout).Encode(res)
}

// runBenchCatchup fills a cluster with jobs, then measures a snapshot, a
// restarted server catching up from its own log, and a replacement with an
// empty data dir catching up from a snapshot plus log.
func (m *Main) runBenchCatchup(ctx context.Context, args []string) error {
	fs := m.newFlags("bench catchup", "[flags]")
	servers := fs.Int("servers", 3, "servers in the cluster")
	jobs := fs.Int("jobs", 1_000_000, "distinct jobs to submit")
	bunch := fs.Int("bunch", 10_000, "jobs per request")
	keep := fs.Bool("keep", false, "keep the cluster's directory afterwards")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *servers < 3 || *jobs < 1 || *bunch < 1 {
		return usagef("need -servers >= 3, -jobs >= 1 and -bunch >= 1")
	}
	say := func(format string, a ...any) {
		if !*asJSON {
			safef(m.Stdout, format+"\n", a...)
		}
	}
	c, cleanup, err := m.benchCluster(ctx, testcluster.Options{Servers: *servers, Net: "127.0.4."}, *keep,
		"-raft-snapshot-threshold", "64", "-raft-snapshot-interval", "2s", "-raft-trailing-logs", "64")
	if err != nil {
		return err
	}
	defer cleanup()
	cl, err := c.Client()
	if err != nil {
		return err
	}
	start := time.Now()
	_, err = cl.Submit(ctx, &api.CreateBatchRequest{Name: "catchup"}, api.GeneratedJobs{N: *jobs, Make: func(i int) api.JobSpec {
		id := int64(i + 1)
		return api.JobSpec{JobID: id, Name: fmt.Sprint("job-", id), Command: []string{"sh", "-c", fmt.Sprint("echo ", id)}, CPU: 1, Memory: 1 << 30}
	}}, &api.SubmitOptions{BunchSize: *bunch})
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	submit := time.Since(start)
	say("submitted %d distinct jobs in %s", *jobs, submit.Round(time.Millisecond))

	snapFile := filepath.Join(os.TempDir(), fmt.Sprintf("drover-bench-%d.snap", os.Getpid()))
	defer os.Remove(snapFile)
	f, err := os.Create(snapFile)
	if err != nil {
		return err
	}
	start = time.Now()
	size, err := cl.SnapshotSave(ctx, f)
	f.Close()
	if err != nil {
		return err
	}
	snapTook := time.Since(start)
	say("snapshot: %d bytes (%.0f bytes/job) in %s", size, float64(size)/float64(*jobs), snapTook.Round(time.Millisecond))

	// Let the servers take their own Raft snapshots and compact their logs,
	// so the replacement below gets one.
	time.Sleep(5 * time.Second)

	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	leader, err := c.WaitLeader(wctx)
	cancel()
	if err != nil {
		return err
	}
	follower := c.Servers[(leader+1)%len(c.Servers)]
	target, err := appliedIndex(ctx, c.Servers[leader], cl.Token())
	if err != nil {
		return err
	}
	follower.Kill9()
	start = time.Now()
	if err := follower.Start(); err != nil {
		return err
	}
	restartTook, err := waitCaughtUp(ctx, follower, cl.Token(), target, start)
	if err != nil {
		return err
	}
	say("restarted server caught up (own snapshot + log) in %s", restartTook.Round(time.Millisecond))

	follower.Kill9()
	if err := os.RemoveAll(follower.DataDir); err != nil {
		return err
	}
	start = time.Now()
	if err := follower.Start(); err != nil {
		return err
	}
	replaceTook, err := waitCaughtUp(ctx, follower, cl.Token(), target, start)
	if err != nil {
		return err
	}
	say("replacement with an empty data dir caught up (snapshot from the leader + log) in %s", replaceTook.Round(time.Millisecond))
	res := map[string]any{
		"bench": "catchup", "servers": *servers, "jobs": *jobs, "submit_s": submit.Seconds(),
		"snapshot_bytes": size, "snapshot_s": snapTook.Seconds(),
		"snapshot_bytes_per_million_jobs": float64(size) * 1e6 / float64(*jobs),
		"snapshot_s_per_million_jobs":     snapTook.Seconds() * 1e6 / float64(*jobs),
		"restart_catchup_s":               restartTook.Seconds(), "replacement_catchup_s": replaceTook.Seconds(),
	}
	return json.NewEncoder(m.Stdout).Encode(res)
}

func appliedIndex(ctx context.Context, s *testcluster.Server, token string) (uint64, error) {
	one := s.NewClient(token)
	one.RetryUnavailable, one.RetryUnreachable = 0, 0
	p, err := one.Peers(ctx)
	if err != nil {
		return 0, err
	}
	return p.AppliedIndex, nil
}

// waitCaughtUp waits until a server is ready and has applied target.
func waitCaughtUp(ctx context.Context, s *testcluster.Server, token string, target uint64, start time.Time) (time.Duration, error) {
	for {
		if h, err := s.Health(); err == nil && h.Ready {
			if idx, err := appliedIndex(ctx, s, token); err == nil && idx >= target {
				return time.Since(start), nil
			}
		}
		if time.Since(start) > 10*time.Minute {
			return 0, fmt.Errorf("server %s did not catch up within 10 minutes", s.ID())
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
