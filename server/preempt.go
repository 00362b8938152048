package server

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/why"
)

// runPreemption decides, every PreemptInterval on the leader, whether
// queues that wait take capacity back (leader.Preemptor), and records the
// attempts to stop as one Preempt entry: their workers are told on their
// next sync. The clocks of how long each queue has waited are the
// leader's own: a new leader starts them afresh.
func (s *Server) runPreemption(ctx context.Context) {
	p := leader.NewPreemptor()
	p.Holds = s.scheduler.Holds
	every(ctx, s.cfg.PreemptInterval, func() {
		if err := s.preemptOnce(p, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("preemption round failed", "err", err)
		}
	})
}

// preemptOnce runs one decision and applies it.
func (s *Server) preemptOnce(p *leader.Preemptor, now time.Time) error {
	start := time.Now()
	cmd, in, out := p.Round(s.state, now)
	if in == nil {
		s.waiting.SetQueues(nil)
		return nil
	}
	s.metrics.preemptSeconds.Observe(time.Since(start).Seconds())
	s.waiting.SetQueues(why.Queues(in, out, p.Timers))
	if cmd == nil {
		return nil
	}
	res, err := s.raft.Apply(cmd)
	if err != nil {
		return err
	}
	for _, v := range out.Victims[:len(cmd.Attempts)] {
		s.metrics.preempted.WithLabelValues(v.Kind).Inc()
	}
	s.log.Info("preempting attempts for queues that wait", "attempts", res.(*state.PreemptResult).Stopping, "first_for", out.Victims[0].For, "reason", out.Victims[0].Reason)
	return nil
}

// runQueueSampler records, every QueueSampleInterval on the leader, what
// each queue in use holds, in the history store: the time units Monarch's
// percentile algorithm reads (drover queue recommend). A round writes
// one sample a queue in use, so at most placement.MaxQueues (the bound on
// the queue tree), and runQueueUsagePrune deletes them once past their
// retention. A store that does not answer loses that interval's
// samples, nothing else.
func (s *Server) runQueueSampler(ctx context.Context) {
	every(ctx, s.cfg.QueueSampleInterval, func() {
		if s.history == nil {
			return
		}
		samples := apiview.QueueSamples(s.state.Queues(), s.state.Clusters(), time.Now(), int64(s.cfg.QueueSampleInterval/time.Second))
		if len(samples) == 0 {
			return
		}
		st, err := s.history.Store()
		if err == nil {
			err = st.PutQueueUsage(ctx, samples)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("recording queue usage", "err", err)
		}
	})
}

// queueUsagePruneInterval is how often the leader deletes the queue
// samples past QueueUsageRetention: an hour's samples more are nothing
// beside the retention's days, and each prune deletes about an hour's.
const queueUsagePruneInterval = time.Hour

// runQueueUsagePrune deletes from the history store, at the start of
// this leadership and every queueUsagePruneInterval after, the queue
// samples older than QueueUsageRetention, so the samples kept are
// bounded: at most one a queue a second over the retention, and in
// practice one a queue in use each QueueSampleInterval. A store that is
// not connected yet (MySQL opens in the background) or fails is tried
// again a minute later; only a failed prune is logged.
func (s *Server) runQueueUsagePrune(ctx context.Context) {
	if s.history == nil {
		return
	}
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = queueUsagePruneInterval
		if _, err := s.history.raw(); err != nil {
			wait = time.Minute // the history status says why; no warning each minute
			continue
		}
		if _, err := s.pruneQueueUsage(ctx, time.Now()); err != nil {
			wait = time.Minute
			if ctx.Err() == nil {
				s.log.Warn("pruning queue usage; trying again in a minute", "err", err)
			}
		}
	}
}

// pruneQueueUsage deletes the queue samples older than
// QueueUsageRetention at now, counts them and logs how many went.
func (s *Server) pruneQueueUsage(ctx context.Context, now time.Time) (int64, error) {
	st, err := s.history.raw()
	if err != nil {
		return 0, err
	}
	before := now.Add(-s.cfg.QueueUsageRetention)
	n, err := st.PruneQueueUsage(ctx, before.Unix())
	s.metrics.queueUsagePruned.Add(float64(n))
	if n > 0 {
		s.log.Info("deleted queue samples past their retention", "samples", n, "before", before.UTC().Format(time.RFC3339),
			"retention", s.cfg.QueueUsageRetention)
	}
	if err != nil {
		return n, fmt.Errorf("delete queue samples before %s: %w", before.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}
