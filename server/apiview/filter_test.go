package apiview_test

import (
	"slices"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// TestFilters: the API's batch and job queries select the state's
// records as they select the history store's (api's Match on both): by
// state (done and bad included), name (an array's, or one of its jobs'),
// attribute, user.
func TestFilters(t *testing.T) {
	h := state.NewHarness(t, nil)
	w := h.Activate("w", 4, 8)
	tagged := &state.Spec{Name: "tagged", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30, Attributes: map[string]string{"shard": "7"}}
	b := h.CreateBatch(
		state.JobEntry{First: 1, Count: 3, Spec: &state.Spec{Name: "arr", Array: true, Command: []string{"x"}, CPUMilli: 1000, Memory: 1}},
		state.JobEntry{First: 4, Count: 1, Spec: tagged})
	h.RunAll([]uint32{w}, func(_ uint64, j uint32) state.Outcome {
		if j == 2 {
			return state.OutcomeFailed
		}
		return state.OutcomeSuccess
	})
	cases := map[string][]uint32{
		"":                       {1, 2, 3, 4},
		"state=failed":           {2},
		"state=success":          {1, 3, 4},
		"state=bad":              {2},
		"state=done":             {1, 2, 3, 4},
		"state=running":          nil,
		"name=arr":               {1, 2, 3},
		"name=arr[2]":            {3},
		"name=tagged":            {4},
		"attr:shard=7":           {4},
		"attr:shard=8":           nil,
		"attr:shard":             {4},
		"state=success name=arr": {1, 3},
	}
	for q, want := range cases {
		terms, err := api.ParseJobQuery(q)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		list, _ := h.S.ListJobs(b, apiview.JobFilter(terms), 0)
		var got []uint32
		for _, j := range list.Jobs {
			got = append(got, j.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("job filter %q: got %v, want %v", q, got, want)
		}
	}
	for _, bad := range []string{"state=nope", "colour=red", "attr:"} {
		if _, err := api.ParseJobQuery(bad); err == nil {
			t.Errorf("job filter %q accepted", bad)
		}
		if _, err := api.ParseBatchQuery(bad); err == nil {
			t.Errorf("batch filter %q accepted", bad)
		}
	}
	for q, n := range map[string]int{"": 1, "state=complete": 1, "state=running": 0, "state=failure": 1, "state=success": 0, "user=root": 1, "user=x": 0,
		"billing_project=default": 1, "billing_project=other": 0, "state=cancelled": 0} {
		terms, err := api.ParseBatchQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(h.S.ListBatches(state.Viewer{Name: "root", Admin: true}, apiview.BatchFilter(terms), 0).Batches); got != n {
			t.Errorf("batch filter %q: %d batches, want %d", q, got, n)
		}
	}
}
