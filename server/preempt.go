package server

import (
	"context"
	"time"

	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// runPreemption decides, every PreemptInterval on the leader, whether
// queues that wait take capacity back (scheduler.Preempt), and records
// the attempts to stop as one Preempt entry: their workers are told on
// their next sync. The clocks of how long each queue has waited are the
// leader's own (view.Timers): a new leader starts them afresh.
func (s *Server) runPreemption(ctx context.Context) {
	timers := view.NewTimers()
	every(ctx, s.cfg.PreemptInterval, func() {
		if err := s.preemptOnce(timers, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("preemption round failed", "err", err)
		}
	})
}

// preemptOnce runs one decision and applies it.
func (s *Server) preemptOnce(timers *view.Timers, now time.Time) error {
	in := view.Preemption(s.state, now.UnixNano(), timers)
	if in == nil {
		return nil
	}
	start := time.Now()
	out := scheduler.Preempt(in)
	s.metrics.preemptSeconds.Observe(time.Since(start).Seconds())
	timers.Update(in, out)
	if len(out.Victims) == 0 {
		return nil
	}
	cmd := &state.Preempt{Now: now.UnixNano()}
	for _, v := range out.Victims[:min(len(out.Victims), state.MaxPreemptPerEntry)] {
		cmd.Attempts = append(cmd.Attempts, state.PreemptAttempt{AttemptID: state.AttemptID{Batch: v.Batch, Job: v.Job, Attempt: v.Attempt.Attempt}, Reason: v.Reason})
	}
	res, err := s.raft.Apply(cmd)
	if err != nil {
		return err
	}
	n := res.(*state.PreemptResult).Stopping
	for _, v := range out.Victims[:len(cmd.Attempts)] {
		s.metrics.preempted.WithLabelValues(v.Kind).Inc()
	}
	s.log.Info("preempting attempts for queues that wait", "attempts", n, "first_for", out.Victims[0].For, "reason", out.Victims[0].Reason)
	return nil
}
