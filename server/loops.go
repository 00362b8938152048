package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/state"
)

// runScheduler runs scheduling rounds on the leader: whenever jobs become
// Ready or resources are freed, and at least every ScheduleInterval. Each
// round is one Plan entry in the log.
func (s *Server) runScheduler(ctx context.Context) {
	// One OS thread for every round, so its CPU clock measures the rounds
	// (drover_scheduler_round_cpu_seconds).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tick := time.NewTicker(s.cfg.ScheduleInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.schedTrigger:
		case <-tick.C:
		}
		for ctx.Err() == nil {
			full, err := s.scheduleOnce()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("scheduling round failed", "err", err)
				}
				break
			}
			if !full {
				break
			}
		}
	}
}

// scheduleOnce runs one round and reports whether it hit MaxPlacements (so
// there may be more to place right away).
func (s *Server) scheduleOnce() (bool, error) {
	cpu0, cpuOK := threadCPU()
	rd := s.scheduler.Round(s.state)
	if rd.Out == nil {
		s.waiting.Set(nil)
		return false, nil
	}
	out := rd.Out
	s.metrics.decideSeconds.Observe(rd.Decided.Seconds())
	s.metrics.schedRounds.Inc()
	s.metrics.schedSeconds.Observe(time.Since(rd.Start).Seconds())
	if cpu1, ok := threadCPU(); ok && cpuOK {
		s.metrics.roundCPUSeconds.Observe((cpu1 - cpu0).Seconds())
	}
	s.metrics.observeUnplaced(out)
	s.waiting.SetRound(out, rd.View.Input, rd.View.Records)
	if rd.Plan == nil {
		return false, nil
	}
	res, err := s.raft.Apply(rd.Plan)
	if err != nil {
		return false, err
	}
	pr := res.(*state.PlanResult)
	s.metrics.placements.Add(float64(pr.Placed))
	s.metrics.rejected.Add(float64(pr.Rejected))
	return out.Jobs >= s.cfg.MaxPlacements, nil
}

// runLiveness retires instances that have not synced within LostTimeout;
// their running jobs go back to Ready and run elsewhere.
func (s *Server) runLiveness(ctx context.Context) {
	every(ctx, min(s.cfg.LostTimeout/4, time.Second), func() {
		now := time.Now()
		for _, id := range s.state.ActiveInstances() {
			silent := s.live.silentFor(id, now)
			if silent < s.cfg.LostTimeout {
				continue
			}
			reason := fmt.Sprintf("no contact for %s", silent.Round(time.Second))
			if _, err := s.raft.Apply(&state.Retire{Now: now.UnixNano(), Instance: id, Reason: reason, MaxLost: uint8(s.cfg.MaxLostAttempts)}); err != nil {
				if ctx.Err() == nil {
					s.log.Warn("retire lost instance", "instance", id, "err", err)
				}
				continue
			}
			s.log.Warn("instance lost; its jobs will run elsewhere", "instance", id, "reason", reason)
			s.live.forget(id)
		}
	})
}

// runInstanceRetention removes retired instances once the retention
// window (Config.Retention, as for complete batches) has passed since
// they retired and nothing held refers to them: without it every worker
// incarnation a cluster ever ran (each restart, each machine the
// autoscaler made) would stay in memory and in every snapshot. It looks
// every quarter of the window, at least every minute and at most every
// second (a look with retired instances due walks the held jobs).
func (s *Server) runInstanceRetention(ctx context.Context) {
	for {
		window := time.Duration(s.retention.Load())
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(max(window/4, time.Second), time.Minute)):
		}
		if err := s.forgetRetired(window); err != nil && ctx.Err() == nil {
			s.log.Warn("forget retired instances", "err", err)
		}
	}
}

// forgetRetired removes the retired instances that are due, in commands
// of at most state.MaxForgetInstances.
func (s *Server) forgetRetired(window time.Duration) error {
	for {
		now := time.Now()
		before := now.Add(-window).UnixNano()
		due := s.state.RetiredDue(before, state.MaxForgetInstances)
		if len(due) == 0 {
			return nil
		}
		res, err := s.raft.Apply(&state.ForgetInstances{Now: now.UnixNano(), Before: before, Instances: due})
		if err != nil {
			return fmt.Errorf("forget %d retired instances: %w", len(due), err)
		}
		fr, _ := res.(*state.ForgetInstancesResult)
		if fr == nil || len(fr.Forgotten) == 0 {
			return nil
		}
		s.log.Info("retired instances left the state", "instances", len(fr.Forgotten), "first", fr.Forgotten[0])
		if len(due) < state.MaxForgetInstances {
			return nil
		}
	}
}

// runUpdateExpiry discards open updates that have received no bunch for
// UpdateIdleTimeout: a client that reserved job IDs and went away must not
// hold them, and its user's open-update allowance, for ever.
func (s *Server) runUpdateExpiry(ctx context.Context) {
	reason := fmt.Sprintf("no bunch or commit for %s (server setting update_idle_timeout)", s.cfg.UpdateIdleTimeout)
	every(ctx, min(s.cfg.UpdateIdleTimeout/4, time.Minute), func() {
		now := time.Now()
		before := now.Add(-s.cfg.UpdateIdleTimeout).UnixNano()
		idle := s.state.IdleUpdates(before, 1000)
		if len(idle) == 0 {
			return
		}
		res, err := s.raft.Apply(&state.ExpireUpdates{Now: now.UnixNano(), Before: before, Reason: reason, Updates: idle})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("expire idle updates", "err", err)
			}
			return
		}
		s.log.Info("discarded idle updates", "count", res.(*state.ExpireResult).Discarded, "idle_for", s.cfg.UpdateIdleTimeout)
	})
}

// every calls fn at each tick of period until ctx ends.
func every(ctx context.Context, period time.Duration, fn func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fn()
	}
}

func (s *Server) triggerSchedule() {
	select {
	case s.schedTrigger <- struct{}{}:
	default:
	}
}

// monitorLeadership starts the leader loops when this server becomes leader
// and stops them when it is not any more. It alone starts and stops them,
// and it stops them before it returns: Shutdown waits for it, so no loop
// can start after the server began to stop.
func (s *Server) monitorLeadership(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	defer s.stopLeading()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.raft.raft.LeaderCh():
		case <-tick.C:
		}
		isLeader := s.raft.raft.State() == raft.Leader
		if !isLeader && !s.ready.Load() {
			s.checkFollowerReady()
		}
		if isLeader == s.IsLeader() {
			continue
		}
		if isLeader {
			s.startLeading(ctx)
		} else {
			s.stopLeading()
		}
	}
}

func (s *Server) startLeading(parent context.Context) {
	// Everything committed by earlier leaders must be applied before the
	// loops read the state.
	if err := s.raft.raft.Barrier(s.cfg.ApplyTimeout).Error(); err != nil {
		s.log.Warn("leader barrier failed; will retry", "err", err)
		return
	}
	if parent.Err() != nil {
		return
	}
	s.ready.Store(true)
	ctx, cancel := context.WithCancel(parent)
	s.leaderMu.Lock()
	s.leading = true
	s.leaderCancel = cancel
	s.leaderMu.Unlock()
	s.metrics.isLeader.Set(1)
	s.log.Info("leading the cluster", "index", s.state.Index())

	s.live.reset(s.state.ActiveInstances(), time.Now())

	if s.cluster != nil {
		s.leaderWG.Add(1)
		go func() { defer s.leaderWG.Done(); s.cluster.RunAutopilot(ctx) }()
	}
	s.leaderWG.Add(16)
	go func() { defer s.leaderWG.Done(); s.runQueueSampler(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runAutoApply(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runSLOMetrics(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runQueueUsagePrune(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runPreemption(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runExporter(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runInstanceRetention(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runSpendLimits(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runCallbacks(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runAutoscaler(ctx) }()
	go func() { defer s.leaderWG.Done(); s.bootstrapAdmin(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runScheduler(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runLiveness(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runUpdateExpiry(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runNomadPeriodic(ctx) }()
	go func() { defer s.leaderWG.Done(); s.runNomadGC(ctx) }()
	s.triggerSchedule()
}

// checkFollowerReady marks a follower ready once it has applied everything
// the leader has told it is committed.
func (s *Server) checkFollowerReady() {
	if addr, _ := s.raft.raft.LeaderWithID(); addr == "" {
		return
	}
	commit, err := strconv.ParseUint(s.raft.raft.Stats()["commit_index"], 10, 64)
	if err != nil {
		return
	}
	if commit == 0 {
		// A follower learns the leader's commit index from the entries
		// it is sent. One that a leader sent a snapshot (a replacement
		// with an empty data dir) and then nothing more, the cluster
		// being idle, would never learn it: the leader sends what follows
		// a snapshot right after it, so what it committed is the
		// snapshot. (A server restarted from its own snapshot is not
		// helped: it waits for the leader's entries.)
		commit = s.installed.Load()
		if commit == 0 {
			return
		}
	}
	if s.raft.raft.AppliedIndex() >= commit {
		s.ready.Store(true)
		s.log.Info("caught up with the leader", "index", commit)
	}
}

func (s *Server) stopLeading() {
	s.leaderMu.Lock()
	cancel := s.leaderCancel
	wasLeading := s.leading
	s.leading = false
	s.leaderCancel = nil
	s.leaderMu.Unlock()
	s.waiting.Set(nil)
	if cancel != nil {
		cancel()
	}
	s.leaderWG.Wait()
	if wasLeading {
		s.metrics.isLeader.Set(0)
		s.log.Info("no longer leading")
	}
}

// bootstrapAdmin creates the admin user on a fresh cluster and writes its
// token to <data-dir>/root.token. The file is written before the command is
// committed so that a crash in between cannot leave an admin nobody can log
// in as.
func (s *Server) bootstrapAdmin(ctx context.Context) {
	for !s.state.HasUsers() {
		if s.tryBootstrapAdmin(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *Server) tryBootstrapAdmin(ctx context.Context) bool {
	tok, err := token.New()
	if err != nil {
		s.log.Error("generate admin token", "err", err)
		return false
	}
	path := filepath.Join(s.cfg.DataDir, "root.token")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		s.log.Error("write admin token", "err", err)
		return false
	}
	res, err := s.raft.Apply(&state.Bootstrap{
		Now: time.Now().UnixNano(), Admin: s.cfg.AdminName, TokenHash: token.Hash(tok),
		DefaultProject: s.cfg.DefaultBillingProject, Timeline: state.NewTimeline(),
	})
	if err != nil {
		os.Remove(tmp)
		if ctx.Err() == nil {
			s.log.Error("bootstrap admin", "err", err)
		}
		return false
	}
	if !res.(*state.BootstrapResult).Created {
		os.Remove(tmp)
		return true
	}
	if err := os.Rename(tmp, path); err != nil {
		s.log.Error("write admin token", "err", err)
		return true
	}
	s.log.Info("created admin user; its token is in "+path, "user", s.cfg.AdminName)
	return true
}
