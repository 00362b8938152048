package server

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/apiview"
)

// maxWorkflowSeries bounds the workflows the SLO metric carries: a
// workflow's name is a tenant's, and each is a series.
const maxWorkflowSeries = 1000

// runSLOMetrics reads, every SLOInterval on the leader, the SLO report of
// the last SLOWindow (what drover queue slo reports, with the default
// threshold) into the metrics: each tier's share of SLO-successful
// workflows, and, when /metrics is behind -metrics-token (the names are
// tenants', which the API shows only to their projects' members), each
// workflow's success ratio, for the workflows with the most runs. The
// series leave with the leadership.
func (s *Server) runSLOMetrics(ctx context.Context) {
	defer s.metrics.workflowSLO.Reset()
	defer s.metrics.tierSLO.Reset()
	every(ctx, s.cfg.SLOInterval, func() {
		if err := s.sloMetricsOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("SLO metrics", "err", err)
		}
	})
}

func (s *Server) sloMetricsOnce(ctx context.Context, now time.Time) error {
	var st history.Store
	if s.history != nil {
		var err error
		if st, err = s.history.Store(); err != nil {
			return err
		}
	}
	runs, _, err := apiview.SLORuns(ctx, s.state, st, now.Add(-s.cfg.SLOWindow), now.Add(time.Second), api.MaxSLORuns)
	if err != nil {
		return err
	}
	wr := make([]placement.WorkflowRun, len(runs))
	for i := range runs {
		wr[i] = runs[i].WorkflowRun
	}
	tally := placement.TallySLO(wr, placement.DefaultSLOThreshold)
	wfs := slices.DeleteFunc(tally.Workflows, func(w placement.WorkflowSLO) bool { return w.Runs == 0 })
	slices.SortStableFunc(wfs, func(a, b placement.WorkflowSLO) int { return cmp.Compare(b.Runs, a.Runs) })
	s.metrics.workflowSLO.Reset()
	if s.cfg.MetricsToken == "" {
		wfs = nil // workflow names are tenants': only behind -metrics-token
	}
	for _, w := range wfs[:min(len(wfs), maxWorkflowSeries)] {
		s.metrics.workflowSLO.WithLabelValues(w.Project, w.Workflow, w.Tier).Set(w.Ratio)
	}
	s.metrics.tierSLO.Reset()
	for _, t := range tally.Tiers {
		if t.Workflows > 0 {
			s.metrics.tierSLO.WithLabelValues(t.Tier).Set(t.Ratio)
		}
	}
	return nil
}
