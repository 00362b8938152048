package placement

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// SLO success, after Pinterest Monarch: within a window, a workflow run X
// times of which Y met their runtime SLO has an SLO success ratio of Y/X,
// and it is SLO-successful when that ratio is at least a threshold (90%).
// A tier is judged by the share of its workflows that are SLO-successful.
//
// A workflow is the batches of one billing project with one workflow
// name (a batch's workflow attribute, or its name). A run is a batch that
// completed, succeeded or failed; a batch cancelled (by a person, or by
// its project's spend limit) is no run: it is counted beside, as
// cancelled.

// WorkflowRun is one complete batch that named an SLO or a deadline.
type WorkflowRun struct {
	Project  string
	Workflow string
	// Queue is the leaf queue it ran in (empty: none).
	Queue string
	// Completed is when it completed, unix seconds.
	Completed int64
	// Met: it completed within its SLO and its deadline. Cancelled: it
	// is no run.
	Met, Cancelled bool
}

// DefaultSLOThreshold is the SLO success ratio from which a workflow is
// SLO-successful (Monarch's 90%).
const DefaultSLOThreshold = 0.9

// WorkflowSLO is one workflow's SLO success over a window. Queue and Tier
// are those of its latest run.
type WorkflowSLO struct {
	Project, Workflow string
	Queue, Tier       string
	Runs, Met         int64
	Cancelled         int64
	// Ratio is Met/Runs (0 without runs); Successful, Ratio at least the
	// threshold (never without runs).
	Ratio      float64
	Successful bool
}

// TierSLO is a tier's share of SLO-successful workflows: of its
// workflows with at least one run, how many are successful.
type TierSLO struct {
	Tier                  string
	Workflows, Successful int64
	// Ratio is Successful/Workflows (0 without workflows).
	Ratio                float64
	Runs, Met, Cancelled int64
}

// QueueRuns are the runs of one queue's batches.
type QueueRuns struct {
	Queue                string
	Runs, Met, Cancelled int64
}

// SLOTally is the SLO success of each workflow, tier and queue of a set of
// runs, each list in name order.
type SLOTally struct {
	Workflows []WorkflowSLO
	Tiers     []TierSLO
	Queues    []QueueRuns
}

// TierOf is the tier of a leaf queue: its own name, the last of its path
// (org/project/tier1: tier1). A batch in no queue is in tier "".
func TierOf(queue string) string {
	return queue[strings.LastIndex(queue, "/")+1:]
}

// TallySLO counts runs by workflow, tier and queue. The threshold is the
// ratio from which a workflow is SLO-successful (0: the default). The
// order of the runs does not matter.
func TallySLO(runs []WorkflowRun, threshold float64) SLOTally {
	if !(threshold > 0 && threshold <= 1) {
		threshold = DefaultSLOThreshold
	}
	type key struct{ project, workflow string }
	type acc struct {
		WorkflowSLO
		latest int64
	}
	wfs := map[key]*acc{}
	queues := map[string]*QueueRuns{}
	for _, r := range runs {
		k := key{r.Project, r.Workflow}
		w := wfs[k]
		if w == nil {
			w = &acc{WorkflowSLO: WorkflowSLO{Project: r.Project, Workflow: r.Workflow}, latest: -1 << 63}
			wfs[k] = w
		}
		// The latest run names the workflow's queue; of runs at the same
		// second, the greatest queue, so the answer does not depend on
		// the order of the runs.
		if r.Completed > w.latest || (r.Completed == w.latest && r.Queue > w.Queue) {
			w.latest, w.Queue = r.Completed, r.Queue
		}
		q := queues[r.Queue]
		if q == nil {
			q = &QueueRuns{Queue: r.Queue}
			queues[r.Queue] = q
		}
		switch {
		case r.Cancelled:
			w.Cancelled++
			q.Cancelled++
		case r.Met:
			w.Runs, w.Met = w.Runs+1, w.Met+1
			q.Runs, q.Met = q.Runs+1, q.Met+1
		default:
			w.Runs++
			q.Runs++
		}
	}
	var out SLOTally
	tiers := map[string]*TierSLO{}
	for _, k := range slices.SortedFunc(maps.Keys(wfs), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.project, b.project), cmp.Compare(a.workflow, b.workflow))
	}) {
		w := wfs[k].WorkflowSLO
		w.Tier = TierOf(w.Queue)
		if w.Runs > 0 {
			w.Ratio = float64(w.Met) / float64(w.Runs)
			w.Successful = w.Ratio >= threshold
		}
		out.Workflows = append(out.Workflows, w)
		t := tiers[w.Tier]
		if t == nil {
			t = &TierSLO{Tier: w.Tier}
			tiers[w.Tier] = t
		}
		t.Runs, t.Met, t.Cancelled = t.Runs+w.Runs, t.Met+w.Met, t.Cancelled+w.Cancelled
		if w.Runs > 0 {
			t.Workflows++
			if w.Successful {
				t.Successful++
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tiers)) {
		t := *tiers[name]
		if t.Workflows > 0 {
			t.Ratio = float64(t.Successful) / float64(t.Workflows)
		}
		out.Tiers = append(out.Tiers, t)
	}
	for _, name := range slices.Sorted(maps.Keys(queues)) {
		out.Queues = append(out.Queues, *queues[name])
	}
	return out
}
