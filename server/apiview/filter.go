package apiview

import (
	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// BatchFilter compiles a batch query into a test on the state's batch
// records with the query's own rule (api.BatchQuery.Match, which the
// history store's batches pass too): the record is shown to it as the
// few fields of an api.Batch it reads, without the cost. nil: all.
func BatchFilter(q api.BatchQuery) state.BatchFilter {
	if len(q) == 0 {
		return nil
	}
	return func(r *state.BatchRecord) bool {
		b := api.Batch{
			Name: r.Name, User: r.User, BillingProject: r.BillingProject, Attributes: r.Attributes, Cancelled: r.Cancelled,
			NJobs: r.NJobs, NSucceeded: r.Count(state.Success), NFailed: r.Count(state.Failed), NError: r.Count(state.Error),
			State: api.BatchRunning,
		}
		if r.Completed != 0 {
			b.State = api.BatchComplete
		}
		return q.Match(&b)
	}
}

// JobFilter compiles a job query into a test on a batch's jobs with the
// query's own rule (api.JobQuery.Match, as for the history store's
// jobs); a job's name is made only for a query that tests it. nil: all.
func JobFilter(q api.JobQuery) state.JobFilter {
	if len(q) == 0 {
		return nil
	}
	names := false
	for _, t := range q {
		names = names || t.Key == "name"
	}
	return func(f *state.JobFacts) bool {
		j := api.Job{State: JobState(f.State), Attributes: f.Spec.Attributes}
		if names {
			j.Name = f.Name()
		}
		return q.Match(&j, f.Spec.Name)
	}
}
