package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// runAutoApply regenerates, every AutoApplyTick on the leader, each tree
// whose auto_apply is due: its last regeneration (Raft state, so a new
// leader keeps the schedule) is at least its every ago. Each is one
// AutoApplyQueues entry (httpapi.Regenerate).
func (s *Server) runAutoApply(ctx context.Context) {
	every(ctx, s.cfg.AutoApplyTick, func() {
		if err := s.autoApplyOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("queue auto_apply", "err", err)
		}
	})
}

func (s *Server) autoApplyOnce(ctx context.Context, now time.Time) error {
	if s.history == nil {
		return nil
	}
	queues := s.state.Queues()
	due := apiview.DueTrees(s.state, queues, now)
	if len(due) == 0 {
		return nil
	}
	st, err := s.history.Store()
	if err != nil {
		return err
	}
	var errs []error
	for _, tree := range due {
		cmd, err := apiview.Regenerate(ctx, queues, s.state.Clusters(), st, tree, now, "drover auto_apply")
		if err == nil {
			var res any
			if res, err = s.raft.Apply(cmd); err == nil {
				s.logRegenerated(tree, res)
				continue
			}
		}
		// One tree that cannot be regenerated holds no other back.
		errs = append(errs, fmt.Errorf("tree %s: %w", tree, err))
	}
	return errors.Join(errs...)
}

func (s *Server) logRegenerated(tree string, res any) {
	if ar, ok := res.(*state.AutoApplyResult); ok && ar.Version.Seq > 0 {
		v := ar.Version
		s.log.Info("queue settings regenerated on schedule", "tree", tree, "version", v.Seq, "kind", v.Kind, "changes", len(v.After), "note", v.Note)
	}
}
