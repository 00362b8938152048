package history

import (
	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/placement"
)

// SLORun is a finished batch as the SLO report counts it: one row per
// complete batch that named an SLO or a deadline, written with the batch
// (PutBatch) and removed with it (Discard).
type SLORun struct {
	Batch uint64
	placement.WorkflowRun
}

// SLOQuery selects the runs that completed in [From, To) (unix seconds).
type SLOQuery struct {
	From, To int64
	// Hide, when set, leaves out the runs of the batches it names (a
	// discarded timeline's), as if they were not stored.
	Hide func(batch uint64) bool `json:"-"`
}

// SLORunOf is the run a batch counts as, if it counts: it is complete and
// names an SLO or a deadline (api.Batch.SLOMet is set). A batch cancelled
// is counted as cancelled, no run, unless its own
// cancel_after_n_failures cancelled it (that is a failed run) or the
// cancel came after all its jobs had ended (that changes nothing).
func SLORunOf(b *api.Batch) (SLORun, bool) {
	if b.SLOMet == nil || b.State != api.BatchComplete || b.TimeCompleted == nil {
		return SLORun{}, false
	}
	// A cancel that cancelled none of its jobs (it came once they had
	// all ended) leaves the run as it was.
	byFailures := b.CancelAfterNFailures > 0 && b.NFailed+b.NError >= b.CancelAfterNFailures
	if b.NCancelled == 0 {
		byFailures = true
	}
	return SLORun{Batch: uint64(b.ID), WorkflowRun: placement.WorkflowRun{
		Project:   b.BillingProject,
		Workflow:  api.Workflow(b.Attributes, b.Name),
		Queue:     b.Queue,
		Completed: b.TimeCompleted.Unix(),
		Met:       *b.SLOMet,
		Cancelled: b.Cancelled && !byFailures,
	}}, true
}
