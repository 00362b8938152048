package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/testkit/bench"
)

// runBenchFailover kills the leader of a real cluster again and again and
// measures how long it takes until a write is acknowledged by the next one.
func (m *Main) runBenchFailover(ctx context.Context, args []string) error {
	fs := m.newFlags("failover", "[flags]")
	servers := fs.Int("servers", 3, "servers in the cluster (3 or 5)")
	kills := fs.Int("kills", 20, "leader kills to measure")
	raftTimeout := fs.Duration("raft-timeout", 500*time.Millisecond, "the servers' -raft-timeout")
	multiplier := fs.Int("raft-multiplier", 0, "the servers' -raft-multiplier instead of -raft-timeout (1 to 10)")
	wanFlag := fs.Bool("wan", false, "each server in a region of its own, 30 to 80 ms apart one way (network namespaces and a fault proxy: needs root)")
	keep := fs.Bool("keep", false, "keep the cluster's directory (logs) afterwards")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *servers < 3 || *kills < 1 {
		return usagef("need -servers >= 3 and -kills >= 1")
	}
	if *multiplier != 0 {
		t, err := server.TimingsFor(*multiplier)
		if err != nil {
			return usagef("%v", err)
		}
		*raftTimeout = t.ElectionTimeout
	}
	drover, err := droverBinary()
	if err != nil {
		return err
	}
	took, err := bench.Failover(ctx, bench.FailoverConfig{Binary: drover, Servers: *servers, Kills: *kills, RaftTimeout: *raftTimeout, Keep: *keep,
		WAN: *wanFlag, RaftMultiplier: *multiplier,
		Notices: m.linesTo(false, false),
		Killed: func(k, leader int, d time.Duration) {
			if !*asJSON {
				fmt.Fprintf(m.Stdout, "kill %2d: leader s%d killed; a write was acknowledged by the next leader after %s\n", k, leader, d.Round(time.Millisecond))
			}
		}})
	if err != nil {
		return err
	}
	ms := bench.Millis(took)
	res := map[string]any{
		"bench": "failover", "servers": *servers, "kills": *kills, "raft_timeout": raftTimeout.String(), "wan": *wanFlag,
		"failover_ms": ms, "median_ms": bench.Median(ms), "worst_ms": bench.Max(ms),
		"median_election_timeouts": bench.Median(ms) / float64(raftTimeout.Milliseconds()),
		"worst_election_timeouts":  bench.Max(ms) / float64(raftTimeout.Milliseconds()),
	}
	if !*asJSON {
		where := "one machine"
		if *wanFlag {
			where = "regions 30-80 ms apart"
		}
		fmt.Fprintf(m.Stdout, "failover: median %.0f ms, worst %.0f ms over %d leader kills (%d servers, %s, election timeout %s: median %.1f, worst %.1f election timeouts)\n",
			bench.Median(ms), bench.Max(ms), *kills, *servers, where, raftTimeout, res["median_election_timeouts"], res["worst_election_timeouts"])
	}
	return json.NewEncoder(m.Stdout).Encode(res)
}

// runBenchCatchup fills a cluster with jobs, then measures a snapshot, a
// restarted server catching up from its own log, and a replacement with an
// empty data dir catching up from a snapshot plus log.
func (m *Main) runBenchCatchup(ctx context.Context, args []string) error {
	fs := m.newFlags("catchup", "[flags]")
	servers := fs.Int("servers", 3, "servers in the cluster")
	jobs := fs.Int("jobs", 1_000_000, "distinct jobs to submit")
	bunch := fs.Int("bunch", 10_000, "jobs per request")
	keep := fs.Bool("keep", false, "keep the cluster's directory afterwards")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *servers < 3 || *jobs < 1 || *bunch < 1 {
		return usagef("need -servers >= 3, -jobs >= 1 and -bunch >= 1")
	}
	drover, err := droverBinary()
	if err != nil {
		return err
	}
	r, err := bench.Catchup(ctx, bench.CatchupConfig{Binary: drover, Servers: *servers, Jobs: *jobs, Bunch: *bunch, Keep: *keep,
		Progress: m.linesTo(true, *asJSON), Notices: m.linesTo(false, false)})
	if err != nil {
		return err
	}
	res := map[string]any{
		"bench": "catchup", "servers": *servers, "jobs": *jobs, "submit_s": r.Submit.Seconds(),
		"snapshot_bytes": r.SnapshotBytes, "snapshot_s": r.Snapshot.Seconds(),
		"snapshot_bytes_per_million_jobs": float64(r.SnapshotBytes) * 1e6 / float64(*jobs),
		"snapshot_s_per_million_jobs":     r.Snapshot.Seconds() * 1e6 / float64(*jobs),
		"restart_catchup_s":               r.Restart.Seconds(), "replacement_catchup_s": r.Replacement.Seconds(),
	}
	return json.NewEncoder(m.Stdout).Encode(res)
}
