package server

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// runPreemption decides, every PreemptInterval on the leader, whether
// queues that wait take capacity back (leader.Preemptor), and records the
// attempts to stop as one Preempt entry: their workers are told on their
// next sync. The clocks of how long each queue has waited are the
// leader's own: a new leader starts them afresh.
func (s *Server) runPreemption(ctx context.Context) {
	p := leader.NewPreemptor()
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
		s.waiting.setQueues(nil)
		return nil
	}
	s.metrics.preemptSeconds.Observe(time.Since(start).Seconds())
	s.waiting.setQueues(queueWaits(in, out, p.Timers))
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

// queueWaits words, for job why, what a preemption round found of each
// leaf queue that waits: when its guarantee is reclaimed from borrowers,
// when it preempts for its fair share.
func queueWaits(in *scheduler.PreemptInput, out *scheduler.PreemptOutput, timers *view.Timers) map[string][]api.Waiting {
	m := map[string][]api.Waiting{}
	at := func(since, after int64) string {
		t := time.Unix(0, since+after).UTC()
		if since+after <= in.Now {
			return "now (its attempts told to stop give their cores back as they end)"
		}
		return "at " + t.Format("15:04:05 UTC") + fmt.Sprintf(" (in %s)", time.Duration(since+after-in.Now).Round(time.Second))
	}
	for i := range in.Queues {
		q := &in.Queues[i]
		if out.Short[i] {
			g := q.Guarantee
			guaranteed := func(k int) bool { return k < len(g) && g[k] > 0 }
			m[q.Name] = append(m[q.Name], api.Waiting{Reason: "reclaim", Message: fmt.Sprintf(
				"queue %s holds %s of its guarantee of %s: what borrowing queues hold of it is reclaimed %s",
				q.Name, in.Amount(q.Used, guaranteed), in.Amount(g, guaranteed), at(timers.Short[q.Name], q.ReclaimGraceNs))})
		}
		if out.Starved[i] {
			dom := in.Dominant(out.FairShare[i])
			m[q.Name] = append(m[q.Name], api.Waiting{Reason: "preempt", Message: fmt.Sprintf(
				"queue %s holds %s, below %g of its fair share of %s: it preempts from preemptible queues above their share %s",
				q.Name, in.Amount(q.Used, func(k int) bool { return k == dom }), float64(q.Threshold())/1000,
				in.Amount(out.FairShare[i], func(k int) bool { return k == dom }), at(timers.Starved[q.Name], q.AfterNs))})
		}
	}
	return m
}

// runQueueSampler records, every QueueSampleInterval on the leader, what
// each queue in use holds, in the history store: the time units Monarch's
// percentile algorithm reads (drover queue recommend). A store that does
// not answer loses that interval's samples, nothing else.
func (s *Server) runQueueSampler(ctx context.Context) {
	every(ctx, s.cfg.QueueSampleInterval, func() {
		if s.history == nil {
			return
		}
		now := time.Now()
		var samples []history.QueueSample
		for _, q := range s.state.Queues() {
			if q.UsedJobs > 0 {
				samples = append(samples, history.QueueSample{Queue: q.Path, At: now.Unix(), Seconds: max(int64(s.cfg.QueueSampleInterval/time.Second), 1),
					CPUMilli: q.UsedMilli, Memory: q.UsedMemory, Jobs: q.UsedJobs})
			}
		}
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
