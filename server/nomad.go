package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-sched/drover/jobspec/nomadspec"
	"github.com/drover-sched/drover/server/nomadview"
	"github.com/drover-sched/drover/server/state"
)

// runNomadPeriodic launches the periodic Nomad jobs that are due, each
// once: the time of a launch is in the state (a template's NextLaunch),
// and a launch is a Raft entry made only if that time is still the next
// one, so a new leader launches what the old one had not and nothing
// twice. A launch missed while no server led is made once when one leads
// again; its next is counted from then.
func (s *Server) runNomadPeriodic(ctx context.Context) {
	every(ctx, time.Second, func() {
		now := time.Now()
		for _, rec := range s.state.NomadDue(now.UnixNano(), 100) {
			if err := s.launchPeriodic(&rec, now); err != nil && ctx.Err() == nil {
				s.log.Warn("periodic Nomad job not launched", "namespace", rec.Namespace, "job", rec.ID, "err", err)
			}
		}
	})
}

// launchPeriodic launches one due periodic job on behalf of the user who
// registered it.
func (s *Server) launchPeriodic(rec *state.NomadJob, now time.Time) error {
	at := time.Unix(0, rec.NextLaunch)
	reg := nomadview.Registered{Rec: *rec}
	spec, err := reg.Spec()
	if err != nil {
		return err
	}
	next := int64(0)
	if spec.Periodic != nil {
		n, err := nomadspec.NextLaunch(spec.Periodic, now)
		if err != nil {
			return err
		}
		if !n.IsZero() {
			next = n.UnixNano()
		}
	}
	cmd := &state.LaunchNomadJob{Now: now.UnixNano(), Parent: state.NomadKey{Namespace: rec.Namespace, ID: rec.ID}, At: rec.NextLaunch, Next: next}
	child, tr, err := nomadview.Child(rec, nomadview.Launch{At: at, Now: now})
	if err == nil {
		// Admitted as the user who registered the job, as a batch of
		// theirs would be (its limits, its project's spend limit).
		var create *state.CreateBatch
		if create, err = s.api.BatchCommand(rec.User, &tr.Batch); err == nil {
			var data []byte
			if data, err = json.Marshal(child); err == nil {
				cmd.Child = state.RegisterNomadJob{Now: now.UnixNano(), Namespace: rec.Namespace, ID: *child.ID, User: rec.User, Project: rec.Project,
					Spec: data, Parent: rec.ID, Batch: create}
			}
		}
	}
	launchErr := err
	if launchErr != nil {
		// The launch cannot be made: its time passes all the same.
		cmd.Skip = true
	}
	res, err := s.raft.Apply(cmd)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	if launchErr != nil {
		return fmt.Errorf("its launch due %s was skipped: %w", at.UTC().Format(time.RFC3339), launchErr)
	}
	if nr, ok := res.(*state.NomadResult); ok {
		if nr.Skipped {
			s.log.Info("periodic Nomad job's launch skipped: its last child runs (prohibit_overlap)", "job", rec.ID, "due", at)
		} else {
			s.log.Info("periodic Nomad job launched", "job", rec.ID, "child", nr.Job.ID, "due", at)
		}
	}
	return nil
}

// runNomadGC purges the Nomad jobs whose batches all left the state (see
// state.NomadForgettable), a thousand at a time, so that the Nomad jobs
// kept follow the servers' retention rather than grow to their bound.
func (s *Server) runNomadGC(ctx context.Context) {
	every(ctx, 30*time.Second, func() {
		for _, k := range s.state.NomadForgettable(1000) {
			if ctx.Err() != nil {
				return
			}
			if _, err := s.raft.Apply(&state.DeregisterNomadJob{Now: time.Now().UnixNano(), Namespace: k.Namespace, ID: k.ID, GC: true, Purge: true}); err != nil {
				s.log.Warn("purge a finished Nomad job", "namespace", k.Namespace, "job", k.ID, "err", err)
				return
			}
		}
	})
}
