package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testcluster"
)

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
	res.SnapshotBytes, err = cl.Operator().SnapshotSave(ctx, f)
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
	if res.Restart, err = restartCaughtUp(ctx, follower, cl.Token(), target, false); err != nil {
		return nil, err
	}
	say("restarted server caught up (own snapshot + log) in %s", res.Restart.Round(time.Millisecond))
	if res.Replacement, err = restartCaughtUp(ctx, follower, cl.Token(), target, true); err != nil {
		return nil, err
	}
	say("replacement with an empty data dir caught up (snapshot from the leader + log) in %s", res.Replacement.Round(time.Millisecond))
	return &res, nil
}

func appliedIndex(ctx context.Context, s *testcluster.Server, token string) (uint64, error) {
	one := s.NewClient(token)
	one.RetryUnavailable, one.RetryUnreachable = 0, 0
	p, err := one.Operator().Peers(ctx)
	if err != nil {
		return 0, err
	}
	return p.AppliedIndex, nil
}

// restartCaughtUp kills a server, starts it again (with wipe, from an
// empty data dir) and returns how long it took from the start until it
// was ready and had applied target.
func restartCaughtUp(ctx context.Context, s *testcluster.Server, token string, target uint64, wipe bool) (time.Duration, error) {
	s.Kill9()
	if wipe {
		if err := os.RemoveAll(s.DataDir); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := s.Start(); err != nil {
		return 0, err
	}
	return waitCaughtUp(ctx, s, token, target, start)
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
