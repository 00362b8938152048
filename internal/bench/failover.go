package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/testcluster"
)

// FailoverConfig is what `drover bench failover` measures.
type FailoverConfig struct {
	Binary      string // the drover executable the servers run
	Servers     int    // 3 or 5
	Kills       int
	RaftTimeout time.Duration // the servers' -raft-timeout
	Keep        bool          // keep the cluster's directory
	Notices     Printf
	// Killed, when set, hears of each kill: its number from 1, the leader
	// killed and how long until the next one acknowledged a write.
	Killed func(kill, leader int, took time.Duration)
}

// Failover kills the leader of a real cluster again and again and returns
// how long it took each time until a write was acknowledged by the next
// one.
func Failover(ctx context.Context, cfg FailoverConfig) ([]time.Duration, error) {
	c, cleanup, err := StartCluster(ctx, cfg.Binary, testcluster.Options{Servers: cfg.Servers, Net: "127.0.3."}, cfg.Keep, cfg.Notices,
		"-raft-timeout", cfg.RaftTimeout.String())
	if err != nil {
		return nil, err
	}
	defer cleanup()
	token, err := c.Token()
	if err != nil {
		return nil, err
	}
	write := func(cl *api.Client, key string) error {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cl.CreateBatch(wctx, &api.CreateBatchRequest{Name: "failover", IdempotencyKey: key,
			Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}}}})
		return err
	}
	var took []time.Duration
	for k := 0; k < cfg.Kills; k++ {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		leader, err := c.WaitLeader(wctx)
		cancel()
		if err != nil {
			return nil, err
		}
		if err := write(api.NewClient(c.HTTPAddrs(), token), fmt.Sprintf("before-%d", k)); err != nil {
			return nil, fmt.Errorf("write before kill %d: %w", k+1, err)
		}
		killed := time.Now()
		c.Servers[leader].Kill9()
		var d time.Duration
	wait:
		for {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if time.Since(killed) > time.Minute {
				return nil, fmt.Errorf("kill %d: no new leader within a minute", k+1)
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
		if cfg.Killed != nil {
			cfg.Killed(k+1, leader, d)
		}
		if err := c.Servers[leader].Start(); err != nil {
			return nil, err
		}
	}
	return took, nil
}

// CatchupConfig is what `drover bench catchup` measures.
type CatchupConfig struct {
	Binary   string
	Servers  int
	Jobs     int // distinct jobs to submit
	Bunch    int // jobs per request
	Keep     bool
	Progress Printf
	Notices  Printf
}

// CatchupResult is what Catchup measured.
type CatchupResult struct {
	Submit        time.Duration // the jobs' submission
	SnapshotBytes int64
	Snapshot      time.Duration // a snapshot's save through the API
	Restart       time.Duration // a restarted server catching up from its own snapshot and log
	Replacement   time.Duration // a server with an empty data dir catching up from the leader's snapshot and log
}

// Catchup fills a cluster with jobs, then measures a snapshot, a
// restarted server catching up from its own log, and a replacement with an
// empty data dir catching up from a snapshot plus log.
func Catchup(ctx context.Context, cfg CatchupConfig) (*CatchupResult, error) {
	say := cfg.Progress.printf
	c, cleanup, err := StartCluster(ctx, cfg.Binary, testcluster.Options{Servers: cfg.Servers, Net: "127.0.4."}, cfg.Keep, cfg.Notices,
		"-raft-snapshot-threshold", "64", "-raft-snapshot-interval", "2s", "-raft-trailing-logs", "64")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	cl, err := c.Client()
	if err != nil {
		return nil, err
	}
	var res CatchupResult
	start := time.Now()
	_, err = cl.Submit(ctx, &api.CreateBatchRequest{Name: "catchup"}, api.GeneratedJobs{N: cfg.Jobs, Make: func(i int) api.JobSpec {
		id := int64(i + 1)
		return api.JobSpec{JobID: id, Name: fmt.Sprint("job-", id), Command: []string{"sh", "-c", fmt.Sprint("echo ", id)}, CPU: 1, Memory: 1 << 30}
	}}, &api.SubmitOptions{BunchSize: cfg.Bunch})
	if err != nil {
		return nil, fmt.Errorf("submit: %w", err)
	}
	res.Submit = time.Since(start)
	say("submitted %d distinct jobs in %s", cfg.Jobs, res.Submit.Round(time.Millisecond))

	snapFile := filepath.Join(os.TempDir(), fmt.Sprintf("drover-bench-%d.snap", os.Getpid()))
	defer os.Remove(snapFile)
	f, err := os.Create(snapFile)
	if err != nil {
		return nil, err
	}
	start = time.Now()
	res.SnapshotBytes, err = cl.SnapshotSave(ctx, f)
	f.Close()
	if err != nil {
		return nil, err
	}
	res.Snapshot = time.Since(start)
	say("snapshot: %d bytes (%.0f bytes/job) in %s", res.SnapshotBytes, float64(res.SnapshotBytes)/float64(cfg.Jobs), res.Snapshot.Round(time.Millisecond))

	// Let the servers take their own Raft snapshots and compact their logs,
	// so the replacement below gets one.
	time.Sleep(5 * time.Second)

	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	leader, err := c.WaitLeader(wctx)
	cancel()
	if err != nil {
		return nil, err
	}
	follower := c.Servers[(leader+1)%len(c.Servers)]
	target, err := appliedIndex(ctx, c.Servers[leader], cl.Token())
	if err != nil {
		return nil, err
	}
	follower.Kill9()
	start = time.Now()
	if err := follower.Start(); err != nil {
		return nil, err
	}
	if res.Restart, err = waitCaughtUp(ctx, follower, cl.Token(), target, start); err != nil {
		return nil, err
	}
	say("restarted server caught up (own snapshot + log) in %s", res.Restart.Round(time.Millisecond))

	follower.Kill9()
	if err := os.RemoveAll(follower.DataDir); err != nil {
		return nil, err
	}
	start = time.Now()
	if err := follower.Start(); err != nil {
		return nil, err
	}
	if res.Replacement, err = waitCaughtUp(ctx, follower, cl.Token(), target, start); err != nil {
		return nil, err
	}
	say("replacement with an empty data dir caught up (snapshot from the leader + log) in %s", res.Replacement.Round(time.Millisecond))
	return &res, nil
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
