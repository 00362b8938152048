package httpapi

import (
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestQueueIsCheckedBeforeTheLog: a queue with an unknown strategy, a bad
// GPU type, an amount, count or duration out of bounds is refused by the
// API, naming the field, before any command is made of it.
func TestQueueIsCheckedBeforeTheLog(t *testing.T) {
	neg := -1.0
	for _, c := range []struct {
		q    api.Queue
		want string
	}{
		{api.Queue{Path: "t", Strategy: strings.Repeat("x", 1<<20)}, "unknown placement strategy"},
		{api.Queue{Path: "t", Guarantee: api.Quota{GPUs: map[string]int{"a 100": 1}}}, "use letters, digits"},
		{api.Queue{Path: "bad name"}, "use letters, digits"},
		{api.Queue{Path: "a/b/c/d/e/f/g/h/i"}, "queues nest at most 8 levels"},
		{api.Queue{Path: "t", Guarantee: api.Quota{CPU: 2e9}}, "queue t: guarantee: cpu must be between 0 and 1000000000 cores"},
		{api.Queue{Path: "t", BorrowLimit: &api.Limit{CPU: &neg}}, "queue t: borrow_limit: cpu must be between 0"},
		{api.Queue{Path: "t", MaxRunning: api.MaxRunning{Jobs: -3}}, "queue t: max_running"},
		{api.Queue{Path: "t", PreemptAfter: "forever"}, "queue t: preempt_after \"forever\" must be a duration"},
		{api.Queue{Path: "t", MinRuntime: "9000h"}, "queue t: min_runtime \"9000h\" must be a duration between 0s and 720h"},
		{api.Queue{Path: "t", PreemptThreshold: 1.5}, "queue t: preempt_threshold must be between 0 and 1"},
		{api.Queue{Path: "t", Weight: 2_000_000}, "queue t: weight 2000000 must be between 1 and 1000000"},
	} {
		if _, err := queueFromAPI(c.q); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("queue %.40q: %v, want an error with %q", c.q.Path+c.q.Strategy, err, c.want)
		}
	}
	zero := 0.0
	q, err := queueFromAPI(api.Queue{Path: "org/ok", Strategy: "pack", BillingProjects: []string{"p"}, Guarantee: api.Quota{CPU: 8},
		BorrowLimit: &api.Limit{CPU: &zero}, PreemptAfter: "5m", MaxRunning: api.MaxRunning{Jobs: 10, CPU: 2.5}})
	if err != nil {
		t.Fatalf("a good queue: %v", err)
	}
	if quota := q.Queue.Quota(); quota.CPUMilli != 8000 || quota.Memory != 0 || quota.MaxJobs != 10 || quota.MaxMilli != 2500 || q.Preemption.AfterNs != 300e9 {
		t.Fatalf("a good queue converts to %+v (quota %+v)", q, quota)
	}
}

// TestPlacementConfigIsCheckedBeforeTheLog: cluster groups (their names,
// strategies and number) and a cluster's group name are checked by the
// API, naming the problem.
func TestPlacementConfigIsCheckedBeforeTheLog(t *testing.T) {
	many := make([]api.ClusterGroup, maxPlacementItems+1)
	for i := range many {
		many[i].Name = "g"
	}
	for _, c := range []struct {
		cfg  api.PlacementConfig
		want string
	}{
		{api.PlacementConfig{Groups: []api.ClusterGroup{{Name: "gpu", Strategy: strings.Repeat("x", 1<<20)}}}, "unknown placement strategy"},
		{api.PlacementConfig{Groups: []api.ClusterGroup{{Name: "a b"}}}, "use letters, digits"},
		{api.PlacementConfig{Groups: many}, "at most 1000"},
		{api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r", Group: strings.Repeat("g", 200)}}}, "must be 1 to"},
	} {
		if _, err := placementFromAPI(&c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config: %v, want an error with %q", err, c.want)
		}
	}
	ok := api.PlacementConfig{Groups: []api.ClusterGroup{{Name: "gpu", Strategy: "pack"}}, Clusters: []api.ClusterDecl{{Name: "a", Region: "r", Group: "gpu"}}}
	c, err := placementFromAPI(&ok)
	if err != nil || len(c.Groups) != 1 || c.Groups[0].Strategy != "pack" || c.Clusters[0].Group != "gpu" {
		t.Fatalf("a good config: %+v %v", c, err)
	}
}

// TestProviderSettingsAreCheckedBeforeTheLog: a cluster's provider and its
// settings are bounded by the API.
func TestProviderSettingsAreCheckedBeforeTheLog(t *testing.T) {
	many := map[string]string{}
	for i := 0; i < 40; i++ {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, c := range []struct {
		decl api.ClusterDecl
		want string
	}{
		{api.ClusterDecl{Name: "a", Region: "r", Provider: "aws"}, "unknown provider"},
		{api.ClusterDecl{Name: "a", Region: "r", Provider: "nomad", ProviderSettings: many}, "at most 32 provider settings"},
		{api.ClusterDecl{Name: "a", Region: "r", Provider: "nomad", ProviderSettings: map[string]string{"address": strings.Repeat("x", 2000)}}, "at most 64 bytes and its value 1024"},
	} {
		if _, err := placementFromAPI(&api.PlacementConfig{Clusters: []api.ClusterDecl{c.decl}}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.decl.Provider, err, c.want)
		}
	}
}
