package state

import (
	"fmt"

	"github.com/drover-sched/drover/api"
)

// Filters are parsed by the api package (api.ParseBatchQuery,
// api.ParseJobQuery: the history store reads the same terms) and compiled
// here into tests on the state's own records.

// BatchFilter selects batches.
type BatchFilter func(b *Batch) bool

// JobFilter selects jobs of one batch.
type JobFilter func(b *Batch, id uint32, j *job, g *group) bool

// ParseBatchFilter compiles a batch filter string.
func ParseBatchFilter(q string) (BatchFilter, error) {
	terms, err := api.ParseBatchQuery(q)
	if err != nil {
		return nil, err
	}
	return CompileBatchQuery(terms), nil
}

// CompileBatchQuery turns parsed terms into a test on batches.
func CompileBatchQuery(terms api.BatchQuery) BatchFilter {
	var preds []BatchFilter
	for _, t := range terms {
		switch {
		case t.IsAttr():
			preds = append(preds, func(b *Batch) bool { return t.MatchAttr(b.Attributes) })
		case t.Key == "billing_project":
			preds = append(preds, func(b *Batch) bool { return b.BillingProject == t.Value })
		case t.Key == "user":
			preds = append(preds, func(b *Batch) bool { return b.User == t.Value })
		case t.Key == "name":
			preds = append(preds, func(b *Batch) bool { return b.Name == t.Value })
		case t.Key == "state":
			preds = append(preds, func(b *Batch) bool {
				return api.BatchStateMatches(t.Value, b.Completed != 0, b.Cancelled, b.counts[Success] == b.nJobs, b.counts[Failed]+b.counts[Error] > 0)
			})
		}
	}
	return func(b *Batch) bool {
		for _, p := range preds {
			if !p(b) {
				return false
			}
		}
		return true
	}
}

// ParseJobFilter compiles a job filter string.
func ParseJobFilter(q string) (JobFilter, error) {
	terms, err := api.ParseJobQuery(q)
	if err != nil {
		return nil, err
	}
	return CompileJobQuery(terms), nil
}

// CompileJobQuery turns parsed terms into a test on a batch's jobs.
func CompileJobQuery(terms api.JobQuery) JobFilter {
	var preds []JobFilter
	for _, t := range terms {
		switch {
		case t.IsAttr():
			preds = append(preds, func(_ *Batch, _ uint32, _ *job, g *group) bool { return t.MatchAttr(g.spec.Attributes) })
		case t.Key == "state":
			preds = append(preds, func(_ *Batch, _ uint32, j *job, _ *group) bool { return api.JobStateMatches(t.Value, j.state.String()) })
		case t.Key == "name":
			preds = append(preds, func(_ *Batch, id uint32, _ *job, g *group) bool {
				return g.spec.Name == t.Value || jobName(g, id) == t.Value
			})
		}
	}
	return func(b *Batch, id uint32, j *job, g *group) bool {
		for _, p := range preds {
			if !p(b, id, j, g) {
				return false
			}
		}
		return true
	}
}

func jobName(g *group, id uint32) string {
	if g.spec.Array {
		return fmt.Sprintf("%s[%d]", g.spec.Name, id-g.first)
	}
	return g.spec.Name
}
