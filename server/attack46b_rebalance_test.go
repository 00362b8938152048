package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
)

// Attacks (helper 46b) on the report by cluster, queue rebalance and
// auto_apply's rebalancing step, against a real server.

// atkUse is one leaf's use of one cluster, as a share of a 64-core,
// 256 GiB cluster of 4 workers.
type atkUse struct {
	queue, cluster string
	share          float64
}

// atkPutHours stores hourly samples over the last hours: each cluster's
// capacity (4 workers, 64 cores, 256 GiB) and each use, by cluster and
// whole.
func atkPutHours(t *testing.T, tc *testCluster, hours int64, clusters []string, uses []atkUse) {
	t.Helper()
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Duration(hours) * time.Hour).Unix()
	var samples []history.QueueSample
	for h := range hours {
		t0 := at + h*3600
		for _, c := range clusters {
			samples = append(samples, history.QueueSample{Cluster: c, At: t0, Seconds: 3600, CPUMilli: 64_000, Memory: 256 << 30, Jobs: 4})
		}
		for _, u := range uses {
			milli := int64(u.share * 64_000)
			samples = append(samples,
				history.QueueSample{Queue: u.queue, Cluster: u.cluster, At: t0, Seconds: 3600, CPUMilli: milli, Memory: 1 << 30},
				history.QueueSample{Queue: u.queue, At: t0, Seconds: 3600, CPUMilli: milli, Memory: 1 << 30, Jobs: milli / 1000})
		}
	}
	if err := st.PutQueueUsage(context.Background(), samples); err != nil {
		t.Fatal(err)
	}
}

func atkCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAttack46bRebalanceOntoDisabledCluster: west is disabled (its
// workers still active, so the sampler still records their capacity,
// idle since nothing is placed there). Rebalance sees an empty cluster
// and routes east's queue to it: its jobs then wait until an operator
// enables west.
func TestAttack46bRebalanceOntoDisabledCluster(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := atkCtx(t)
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters: []api.ClusterDecl{{Name: "east", Region: "r1"}, {Name: "west", Region: "r1"}},
		Queues:   []api.Queue{{Path: "org"}, {Path: "org/tier3", BillingProjects: []string{"default"}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.DisableCluster(ctx, "west", &api.ClusterStateRequest{Reason: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	atkPutHours(t, tc, 10, []string{"east", "west"}, []atkUse{{"org/tier3", "east", 0.5}, {"org/gone", "east", 0.4}})
	prop, err := tc.admin.RebalanceQueues(ctx, &api.QueueRebalanceRequest{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range prop.Moves {
		if m.To == "west" {
			t.Errorf("proposed moving %s onto disabled cluster west: %s", m.Queue, m.Reason)
		}
	}
}

// TestAttack46bRebalanceOntoRemovedCluster: "gone" was removed (the
// server refuses to remove a cluster a queue is routed to), but its
// capacity samples are still in the window; rebalance routes a queue
// there and -apply makes it so: its jobs wait for ever.
func TestAttack46bRebalanceOntoRemovedCluster(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := atkCtx(t)
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters: []api.ClusterDecl{{Name: "east", Region: "r1"}, {Name: "gone", Region: "r1"}},
		Queues:   []api.Queue{{Path: "org"}, {Path: "org/tier3", BillingProjects: []string{"default"}}},
	}); err != nil {
		t.Fatal(err)
	}
	atkPutHours(t, tc, 10, []string{"east", "gone"}, []atkUse{{"org/tier3", "east", 0.5}, {"org/gone", "east", 0.4}})
	if err := tc.admin.DeleteCluster(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	made, err := tc.admin.RebalanceQueues(ctx, &api.QueueRebalanceRequest{}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range made.Moves {
		if m.To == "gone" {
			t.Errorf("moved %s onto removed cluster gone (applied %v): %s", m.Queue, made.Applied, m.Reason)
		}
	}
	if q, err := tc.admin.GetQueue(ctx, "org/tier3"); err != nil || slices.Contains(q.HomeClusters, "gone") {
		t.Errorf("org/tier3 routed to %v (err %v): a cluster that does not exist", q.HomeClusters, err)
	}
}

// TestAttack46bRebalanceInheritedHomeClusters: org/batch routes its
// leaves to east and north; its leaf tier3 names none of its own.
// Rebalance reads the leaf's own home clusters (none: "any") and pins
// it to west alone, losing north: "a queue routed to several clusters
// moves only its From".
func TestAttack46bRebalanceInheritedHomeClusters(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := atkCtx(t)
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters: []api.ClusterDecl{{Name: "east", Region: "r1"}, {Name: "north", Region: "r1"}, {Name: "west", Region: "r1"}},
		Queues: []api.Queue{{Path: "org"}, {Path: "org/batch", HomeClusters: []string{"east", "north"}},
			{Path: "org/batch/tier3", BillingProjects: []string{"default"}}, {Path: "org/other"}},
	}); err != nil {
		t.Fatal(err)
	}
	atkPutHours(t, tc, 10, []string{"east", "north", "west"}, []atkUse{
		{"org/batch/tier3", "east", 0.5}, {"org/other", "east", 0.4}, {"org/other", "north", 0.5}})
	prop, err := tc.admin.RebalanceQueues(ctx, &api.QueueRebalanceRequest{}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range prop.Moves {
		if m.Queue == "org/batch/tier3" && !slices.Contains(m.HomeClusters, "north") {
			t.Errorf("moved %s from %s to %s with home clusters %v: it was routed to east and north (its parent's), north is lost", m.Queue, m.From, m.To, m.HomeClusters)
		}
	}
	if len(prop.Moves) == 0 {
		t.Fatalf("no move proposed: %+v", prop)
	}
}

// TestAttack46bRollbackRoutesToRemovedCluster: a step moves tier 3 off
// east; east, no queue routed to it any more, is removed; a rollback of
// the step routes tier 3 back to east, which does not exist (the
// server's own rule refuses to remove a cluster a queue is routed to).
func TestAttack46bRollbackRoutesToRemovedCluster(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := atkCtx(t)
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters: []api.ClusterDecl{{Name: "east", Region: "r1"}, {Name: "west", Region: "r1"}},
		Queues: []api.Queue{{Path: "org", AutoApply: &api.QueueAutoApply{Every: "24h", Days: 1, Rebalance: true}},
			{Path: "org/tier3", HomeClusters: []string{"east"}, BillingProjects: []string{"default"}}},
	}); err != nil {
		t.Fatal(err)
	}
	atkPutHours(t, tc, 10, []string{"east", "west"}, []atkUse{{"org/tier3", "east", 0.5}, {"org/gone", "east", 0.4}})
	v, err := tc.admin.AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: "org"})
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := tc.admin.GetQueue(ctx, "org/tier3"); !slices.Equal(q.HomeClusters, []string{"west"}) {
		t.Fatalf("the step did not move tier 3: %+v, note %s", q.HomeClusters, v.Note)
	}
	if err := tc.admin.DeleteCluster(ctx, "east"); err != nil {
		t.Fatal(err)
	}
	_, err = tc.admin.RollbackQueues(ctx, &api.QueueRollbackRequest{Tree: "org", Version: v.Version})
	q, _ := tc.admin.GetQueue(ctx, "org/tier3")
	if err == nil && slices.Contains(q.HomeClusters, "east") {
		t.Errorf("the rollback routed tier 3 to removed cluster east: home clusters %v", q.HomeClusters)
	}
}

// TestAttack46bRebalanceDaysPastRetention: the report refuses a window
// past the days of samples the server keeps; the rebalance (GET and
// POST) takes it.
func TestAttack46bRebalanceDaysPastRetention(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.QueueUsageRetention = 30 * 24 * time.Hour })
	ctx := atkCtx(t)
	if _, err := tc.admin.QueueReport(ctx, 60); !api.IsStatus(err, 400) {
		t.Fatalf("report over 60 days with 30 kept: %v, want a 400", err)
	}
	if _, err := tc.admin.RebalanceQueues(ctx, &api.QueueRebalanceRequest{Days: 60}, false); !api.IsStatus(err, 400) {
		t.Errorf("rebalance over 60 days with 30 kept: %v, want a 400 as the report's", err)
	}
}

// TestAttack46bReportByClusterBounds: by and days are checked; a
// member may read the report; a by other than cluster is refused with
// its value cut.
func TestAttack46bReportByClusterBounds(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := atkCtx(t)
	alice := tc.user("alice", "genomics")
	if _, err := alice.QueueReport(ctx, 7); err != nil {
		t.Fatalf("a member's report: %v", err)
	}
	for _, q := range []string{"by=queue", "by=" + strings.Repeat("x", 5000), "days=0", "days=366", "days=-1", "days=1e3", "days=NaN"} {
		var out api.QueueReport
		err := alice.Do(ctx, "GET", "/api/v1/queue-report?"+q, nil, &out)
		if !api.IsStatus(err, 400) {
			t.Errorf("%.40s: %v, want a 400", q, err)
		} else if len(err.Error()) > 400 {
			t.Errorf("%.40s: error of %d bytes", q, len(err.Error()))
		}
	}
	for _, q := range []string{"high=NaN", "low=NaN", "high=Inf", "high=0.5&low=0.5", "high=1.5", "low=-0.1", "max_moves=1001", "days=366"} {
		var out api.QueueRebalance
		if err := alice.Do(ctx, "GET", "/api/v1/queue-rebalance?"+q, nil, &out); !api.IsStatus(err, 400) {
			t.Errorf("rebalance %s: %v, want a 400", q, err)
		}
	}
}
