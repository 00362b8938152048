package server

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
)

// TestQueueReportAndRebalanceByCluster: a day of samples by cluster (east
// full, west nearly idle) gives each cluster's capacity and each tier's
// and queue's use in instance, vcore and memory hours, by the dominant
// resource; the rebalance proposes moving the batch tier from east to
// west with its reason, a member may read it but not make it, and the
// admin's -apply routes the queue there in one change. A job running in
// a cluster is sampled by cluster.
func TestQueueReportAndRebalanceByCluster(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.QueueSampleInterval = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters: []api.ClusterDecl{{Name: "east", Region: "r1"}, {Name: "west", Region: "r2"}},
		Queues:   []api.Queue{{Path: "org"}, {Path: "org/tier1", BillingProjects: []string{"default"}}, {Path: "org/tier3"}},
	}); err != nil {
		t.Fatal(err)
	}
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-24 * time.Hour).Unix()
	var samples []history.QueueSample
	for m := int64(0); m < 60; m++ {
		t0 := at + m*60
		samples = append(samples,
			history.QueueSample{Cluster: "east", At: t0, Seconds: 60, CPUMilli: 64_000, Memory: 256 << 30, Jobs: 4},
			history.QueueSample{Cluster: "west", At: t0, Seconds: 60, CPUMilli: 64_000, Memory: 256 << 30, Jobs: 4},
			history.QueueSample{Queue: "org/tier3", Cluster: "east", At: t0, Seconds: 60, CPUMilli: 24_000, Memory: 32 << 30},
			history.QueueSample{Queue: "org/tier1", Cluster: "east", At: t0, Seconds: 60, CPUMilli: 32_000, Memory: 64 << 30},
			history.QueueSample{Queue: "org/tier1", Cluster: "west", At: t0, Seconds: 60, CPUMilli: 8_000, Memory: 16 << 30})
	}
	if err := st.PutQueueUsage(ctx, samples); err != nil {
		t.Fatal(err)
	}
	rep, err := tc.admin.QueueReport(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Clusters) != 2 || rep.Clusters[0].Cluster != "east" {
		t.Fatalf("report %+v", rep)
	}
	east := rep.Clusters[0]
	if east.Capacity != (api.UsageHours{InstanceHours: 4, VcoreHours: 64, MemoryGiBHours: 256}) || east.All.UsageCapacity != 0.875 || east.All.Dominant != "vcore" ||
		east.All.Used.InstanceHours != 3.5 || len(east.Tiers) != 2 || east.Tiers[1].Name != "tier3" || east.Tiers[1].UsageCapacity != 0.375 {
		t.Fatalf("east %+v", east)
	}
	// The proposal: tier 3 (37.5% of east) fits in west (12.5% -> 50%);
	// tier 1 (50%) would take west past 60%.
	alice := tc.user("alice", "genomics")
	prop, err := alice.RebalanceQueues(ctx, &api.QueueRebalanceRequest{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(prop.Moves) != 1 || prop.Applied {
		t.Fatalf("proposal %+v", prop)
	}
	mv := prop.Moves[0]
	if mv.Queue != "org/tier3" || mv.From != "east" || mv.To != "west" || !slices.Equal(mv.HomeClusters, []string{"west"}) ||
		math.Abs(mv.ToAfter-0.5) > 1e-9 || mv.Reason == "" {
		t.Fatalf("move %+v", mv)
	}
	if _, err := alice.RebalanceQueues(ctx, &api.QueueRebalanceRequest{}, true); !api.IsStatus(err, 403) {
		t.Fatalf("a member applying: %v, want a 403", err)
	}
	if _, err := tc.admin.RebalanceQueues(ctx, &api.QueueRebalanceRequest{High: 0.5, Low: 0.6}, false); !api.IsStatus(err, 400) {
		t.Fatalf("low above high: %v, want a 400", err)
	}
	made, err := tc.admin.RebalanceQueues(ctx, &api.QueueRebalanceRequest{}, true)
	if err != nil || !made.Applied || len(made.Moves) != 1 {
		t.Fatalf("apply: %+v, %v", made, err)
	}
	if q, err := tc.admin.GetQueue(ctx, "org/tier3"); err != nil || !slices.Equal(q.HomeClusters, []string{"west"}) {
		t.Fatalf("tier 3 after the move: %+v, %v", q, err)
	}

	// A job in east is sampled there.
	if _, err := tc.admin.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 4, Memory: 8 << 30, Secret: tc.srv.cfg.WorkerSecret, Cluster: "east", Region: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.Submit(ctx, &api.CreateBatchRequest{BillingProject: "default"}, api.Jobs{
		{JobID: 1, Name: "j", Command: []string{"sleep", "60"}, CPU: 2, Memory: 1 << 30}}, nil); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Unix() - 5
	for {
		usage, err := st.QueueUsage(ctx, since, time.Now().Unix()+1)
		if err != nil {
			t.Fatal(err)
		}
		var leaf, capacity bool
		for _, u := range usage {
			leaf = leaf || (u.Queue == "org/tier1" && u.Cluster == "east" && u.CPUMilli == 2000 && u.Memory == 1<<30)
			capacity = capacity || (u.Queue == "" && u.Cluster == "east" && u.CPUMilli == 4000 && u.Jobs == 1)
		}
		if leaf && capacity {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the sampler recorded %+v", usage)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAutoApplyRebalances: a tree whose auto_apply rebalances moves its
// leaf off the full cluster in the same version as its other settings
// (route and settings in one step), once a quarter of the window is
// recorded; a rollback puts the route back.
func TestAutoApplyRebalances(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters: []api.ClusterDecl{{Name: "east", Region: "r1"}, {Name: "west", Region: "r2"}},
		Queues: []api.Queue{{Path: "org", AutoApply: &api.QueueAutoApply{Every: "24h", Days: 1, Rebalance: true}},
			{Path: "org/tier3", HomeClusters: []string{"east"}, BillingProjects: []string{"default"}}},
	}); err != nil {
		t.Fatal(err)
	}
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	put := func(hours int64) {
		at := time.Now().Add(-time.Duration(hours) * time.Hour).Unix()
		var samples []history.QueueSample
		for m := int64(0); m < hours*60; m++ {
			t0 := at + m*60
			samples = append(samples,
				history.QueueSample{Cluster: "east", At: t0, Seconds: 60, CPUMilli: 32_000, Memory: 128 << 30, Jobs: 2},
				history.QueueSample{Cluster: "west", At: t0, Seconds: 60, CPUMilli: 64_000, Memory: 256 << 30, Jobs: 4},
				history.QueueSample{Queue: "org/tier3", At: t0, Seconds: 60, CPUMilli: 28_000, Memory: 28 << 30, Jobs: 28},
				history.QueueSample{Queue: "org/tier3", Cluster: "east", At: t0, Seconds: 60, CPUMilli: 28_000, Memory: 28 << 30})
		}
		if err := st.PutQueueUsage(ctx, samples); err != nil {
			t.Fatal(err)
		}
	}
	put(2) // 2 hours: under a quarter of the day's window
	v, err := tc.admin.AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: "org"})
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := tc.admin.GetQueue(ctx, "org/tier3"); !slices.Equal(q.HomeClusters, []string{"east"}) {
		t.Fatalf("moved on 2 hours of samples (version %+v)", v)
	}
	put(8)
	v, err = tc.admin.AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: "org"})
	if err != nil {
		t.Fatal(err)
	}
	var moved *api.QueueSettingChange
	for i, c := range v.Changes {
		if c.Path == "org/tier3" {
			moved = &v.Changes[i]
		}
	}
	if moved == nil || !slices.Equal(moved.HomeClusters, []string{"west"}) || !slices.Equal(moved.HomeClustersBefore, []string{"east"}) || !strings.Contains(v.Note, "moved org/tier3 from east to west") {
		t.Fatalf("version %+v", v)
	}
	if q, _ := tc.admin.GetQueue(ctx, "org/tier3"); !slices.Equal(q.HomeClusters, []string{"west"}) || q.Guarantee.CPU == 0 {
		t.Fatalf("tier 3 after the step: %+v", q)
	}
	if _, err := tc.admin.RollbackQueues(ctx, &api.QueueRollbackRequest{Tree: "org", Version: v.Version}); err != nil {
		t.Fatal(err)
	}
	if q, _ := tc.admin.GetQueue(ctx, "org/tier3"); !slices.Equal(q.HomeClusters, []string{"east"}) {
		t.Fatalf("tier 3 after the rollback: %+v", q.HomeClusters)
	}
}
