package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// FailoverConfig is what `drover bench failover` measures.
type FailoverConfig struct {
	Binary      string // the drover executable the servers run
	Servers     int    // 3 or 5
	Kills       int
	RaftTimeout time.Duration // the servers' -raft-timeout
	// WAN puts each server in a region of its own, WANLatency apart, and
	// gives them RaftMultiplier (when set) instead of RaftTimeout.
	WAN            bool
	RaftMultiplier int
	Keep           bool // keep the cluster's directory
	Notices        Printf
	// Killed, when set, hears of each kill: its number from 1, the leader
	// killed and how long until the next one acknowledged a write.
	Killed func(kill, leader int, took time.Duration)
}

// Failover kills the leader of a real cluster again and again and returns
// how long it took each time until a write was acknowledged by the next
// one.
func Failover(ctx context.Context, cfg FailoverConfig) ([]time.Duration, error) {
	opts := testcluster.Options{Servers: cfg.Servers, Net: "127.0.3."}
	timing := []string{"-raft-timeout", cfg.RaftTimeout.String()}
	if cfg.RaftMultiplier > 0 {
		timing = []string{"-raft-multiplier", fmt.Sprint(cfg.RaftMultiplier)}
	}
	if cfg.WAN {
		down, err := wan(&opts)
		if err != nil {
			return nil, err
		}
		defer down()
	}
	c, cleanup, err := StartCluster(ctx, cfg.Binary, opts, cfg.Keep, cfg.Notices, timing...)
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
