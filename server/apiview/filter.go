package apiview

import (
	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// BatchFilter compiles a batch query (api.ParseBatchQuery) into a test
// on the state's batch records: one test per term, each with api's rule
// for its term (Term.MatchAttr, api.BatchStateMatches: the history
// store's batches pass the same). A listing walks every batch the viewer
// sees under the state's read lock, so a term reads the record's fields
// and builds nothing. nil: all.
func BatchFilter(q api.BatchQuery) state.BatchFilter {
	var preds []func(*state.BatchRecord) bool
	for _, t := range q {
		switch {
		case t.IsAttr():
			preds = append(preds, func(b *state.BatchRecord) bool { return t.MatchAttr(b.Attributes) })
		case t.Key == "billing_project":
			preds = append(preds, func(b *state.BatchRecord) bool { return b.BillingProject == t.Value })
		case t.Key == "user":
			preds = append(preds, func(b *state.BatchRecord) bool { return b.User == t.Value })
		case t.Key == "name":
			preds = append(preds, func(b *state.BatchRecord) bool { return b.Name == t.Value })
		case t.Key == "state":
			preds = append(preds, func(b *state.BatchRecord) bool {
				return api.BatchStateMatches(t.Value, b.Completed != 0, b.Cancelled, b.Count(state.Success) == b.NJobs,
					b.Count(state.Failed)+b.Count(state.Error) > 0)
			})
		}
	}
	return allOf(preds)
}

// JobFilter compiles a job query (api.ParseJobQuery) into a test on a
// batch's jobs, one test per term with api's rule for it
// (Term.MatchAttr, api.JobStateMatches); a job's name is made only for a
// name term that its spec's name does not already match. nil: all.
func JobFilter(q api.JobQuery) state.JobFilter {
	var preds []func(*state.JobFacts) bool
	for _, t := range q {
		switch {
		case t.IsAttr():
			preds = append(preds, func(j *state.JobFacts) bool { return t.MatchAttr(j.Spec.Attributes) })
		case t.Key == "state":
			preds = append(preds, func(j *state.JobFacts) bool { return api.JobStateMatches(t.Value, JobState(j.State)) })
		case t.Key == "name":
			preds = append(preds, func(j *state.JobFacts) bool { return j.Spec.Name == t.Value || j.Name() == t.Value })
		case t.Key == "group":
			preds = append(preds, func(j *state.JobFacts) bool { return api.InJobGroup(j.GroupPath, t.Value) })
		}
	}
	return allOf(preds)
}

// allOf is the test that every one of preds passes (nil for none: all
// pass).
func allOf[T any](preds []func(*T) bool) func(*T) bool {
	if len(preds) == 0 {
		return nil
	}
	return func(x *T) bool {
		for _, p := range preds {
			if !p(x) {
				return false
			}
		}
		return true
	}
}
