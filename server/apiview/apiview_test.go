package apiview_test

import (
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// TestNamesAreTheWire: the state names its job states and outcomes
// itself, and keeps its own words for host networking and its bound on a
// batch's jobs (it does not import api); the API shows those names,
// workers report outcomes by them, jobs name their network by them and
// the API refuses a batch past the same bound, so each must be api's.
func TestNamesAreTheWire(t *testing.T) {
	if state.NetworkHost != api.NetworkHost {
		t.Errorf("the state's host network is %q, the API's %q", state.NetworkHost, api.NetworkHost)
	}
	if state.MaxJobsPerBatch != api.MaxJobsPerBatch {
		t.Errorf("the state bounds a batch at %d jobs, the API at %d", int64(state.MaxJobsPerBatch), int64(api.MaxJobsPerBatch))
	}
	if state.MaxJobGroups != api.MaxJobGroups || state.MaxJobGroupsPerRequest != api.MaxJobGroupsPerRequest || state.MaxJobGroupDepth != api.MaxJobGroupDepth {
		t.Errorf("the state bounds job groups at %d a batch, %d a request, %d deep; the API at %d, %d, %d",
			state.MaxJobGroups, state.MaxJobGroupsPerRequest, state.MaxJobGroupDepth, api.MaxJobGroups, api.MaxJobGroupsPerRequest, api.MaxJobGroupDepth)
	}
	if state.MaxGangSize != api.MaxGangSize {
		t.Errorf("the state bounds a gang at %d members, the API at %d", state.MaxGangSize, api.MaxGangSize)
	}
	if state.PageGroups != api.JobGroupsPerPage {
		t.Errorf("a page of jobs carries %d job groups, the API says %d", state.PageGroups, api.JobGroupsPerPage)
	}
	if state.MaxRetryRanges != api.MaxRetryRanges {
		t.Errorf("the state bounds a retry at %d ranges, the API at %d", state.MaxRetryRanges, api.MaxRetryRanges)
	}
	states := map[state.JobState]string{
		state.Pending: api.JobPending, state.Ready: api.JobReady, state.Creating: api.JobCreating, state.Running: api.JobRunning,
		state.Success: api.JobSuccess, state.Failed: api.JobFailed, state.Cancelled: api.JobCancelled, state.Error: api.JobError,
	}
	for st, want := range states {
		if got := apiview.JobState(st); got != want {
			t.Errorf("state %d shows as %q, the API's word is %q", st, got, want)
		}
		if back, ok := state.ParseJobState(want); !ok || back != st {
			t.Errorf("%q parses to %v, %v", want, back, ok)
		}
	}
	if n := len(state.StateNames()); n != len(states) {
		t.Errorf("the state has %d job states, the API %d", n, len(states))
	}
	outcomes := map[state.Outcome]string{
		state.OutcomeSuccess: api.OutcomeSuccess, state.OutcomeFailed: api.OutcomeFailed, state.OutcomeError: api.OutcomeError,
		state.OutcomeCancelled: api.OutcomeCancelled, state.OutcomePreempted: api.OutcomePreempted,
	}
	for o, want := range outcomes {
		if got := o.String(); got != want {
			t.Errorf("outcome %d shows as %q, the API's word is %q", o, got, want)
		}
		if back, ok := state.ParseOutcome(want); !ok || back != o {
			t.Errorf("a worker's %q parses to %v, %v", want, back, ok)
		}
	}
}
