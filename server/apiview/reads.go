package apiview

import (
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// Reads answers the API's reads of the state: each method is one read of
// the state (one read lock) turned into the API's types, with the
// signature of the state's method it wraps, so a handler reads
// s.reads.Batch(id) where it once read s.state.Batch(id).
type Reads struct {
	State *state.State
	// Now is the time costs and expiries are read at (time.Now when
	// nil).
	Now func() time.Time
}

func (r Reads) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Batch is a batch's status (state.State.Batch).
func (r Reads) Batch(id uint64) (api.Batch, bool) {
	b, ok := r.State.Batch(id)
	if !ok {
		return api.Batch{}, false
	}
	return Batch(&b, r.now()), true
}

// ListBatches is a page of the batches v sees (state.State.ListBatches).
func (r Reads) ListBatches(v state.Viewer, f state.BatchFilter, lastID uint64) api.BatchList {
	return BatchList(r.State.ListBatches(v, f, lastID), r.now())
}

// ListJobs is a page of a batch's jobs (state.State.ListJobs).
func (r Reads) ListJobs(batch uint64, f state.JobFilter, lastID uint32) (api.JobList, bool) {
	p, ok := r.State.ListJobs(batch, f, lastID)
	if !ok {
		return api.JobList{}, false
	}
	return JobList(p, r.now()), true
}

// Job is one job (state.State.Job).
func (r Reads) Job(batch uint64, id uint32) (api.Job, bool) {
	j, ok := r.State.Job(batch, id)
	if !ok {
		return api.Job{}, false
	}
	return Job(&j, r.now()), true
}

// Users lists the users not deleted (state.State.Users).
func (r Reads) Users() []api.User { return Users(r.State.Users()) }

// User is one user not deleted (state.State.User).
func (r Reads) User(name string) (api.User, bool) {
	u, ok := r.State.User(name)
	if !ok {
		return api.User{}, false
	}
	return User(&u), true
}

// Tokens lists tokens, expired or not at now (state.State.Tokens).
func (r Reads) Tokens(user string, now time.Time) []api.Token {
	return Tokens(r.State.Tokens(user), now)
}

// BillingProjects lists the billing projects viewer sees
// (state.State.BillingProjects).
func (r Reads) BillingProjects(viewer state.User) []api.BillingProject {
	return BillingProjects(r.State.BillingProjects(viewer), r.now())
}

// BillingProject is one billing project (state.State.BillingProject).
func (r Reads) BillingProject(name string) (api.BillingProject, bool) {
	p, ok := r.State.BillingProject(name)
	if !ok {
		return api.BillingProject{}, false
	}
	return BillingProject(&p, r.now()), true
}

// StoragePrefixes lists a billing project's storage prefixes
// (state.State.StoragePrefixes).
func (r Reads) StoragePrefixes(project string) ([]api.StoragePrefix, bool) {
	ps, ok := r.State.StoragePrefixes(project)
	if !ok {
		return nil, false
	}
	return StoragePrefixes(ps), true
}

// AuditLog lists audit entries (state.State.AuditLog).
func (r Reads) AuditLog(since time.Time, user string, limit int) []api.AuditEntry {
	return AuditEntries(r.State.AuditLog(since, user, limit))
}

// AuditPage reads a page of audit entries (state.State.AuditPage).
func (r Reads) AuditPage(q state.AuditQuery) []api.AuditEntry {
	return AuditEntries(r.State.AuditPage(q))
}

// Rates lists rates (state.State.Rates).
func (r Reads) Rates(now time.Time, all bool) []api.Rate { return Rates(r.State.Rates(now, all)) }

// CostByDay lists a billing project's cost by day, what its running
// attempts have cost up to now on today's (state.State.CostByDayAt).
func (r Reads) CostByDay(project string, from, to int32) []api.CostRow {
	return CostByDay(r.State.CostByDayAt(project, from, to, r.now()))
}
