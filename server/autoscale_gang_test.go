package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/autoscaler/provider/sim"
)

// TestAutoscalerLaunchesAGangInOneCluster: a gang of four 4-core members
// on an empty fleet, with the cheaper config's cluster capped at two
// machines: the autoscaler launches all four machines in the other
// cluster, where the gang can start whole, none in the cheaper one (plain
// jobs of the same size take two there and two in the other: the split a
// gang could never use).
func TestAutoscalerLaunchesAGangInOneCluster(t *testing.T) {
	cloud := sim.New(sim.Options{Clock: wallClock{}, BootDelay: time.Hour})
	tc := startAutoscaled(t, cloud, nil, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}, {Name: "b", Region: "r"}},
		Autoscaler: &api.AutoscalerSettings{Enabled: true},
		LaunchConfigs: []api.LaunchConfig{
			{Name: "cheap", Cluster: "a", MachineType: "n2-standard-4", Zone: "r-a", CPU: 4, Memory: 16 << 30, PricePerHour: 200_000_000, MaxNodes: 2},
			{Name: "dear", Cluster: "b", MachineType: "n2-standard-4", Zone: "r-b", CPU: 4, Memory: 16 << 30, PricePerHour: 300_000_000},
		}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "mpi", Jobs: []api.JobSpec{{JobID: 1, Count: 4, Gang: true, Command: []string{"true"}, CPU: 4, Memory: 1 << 30}}}); err != nil {
		t.Fatal(err)
	}
	byCluster := map[string]int{}
	waitFor(t, "four machines for the gang", func() bool {
		insts, err := cloud.List(ctx)
		if err != nil {
			return false
		}
		clear(byCluster)
		for _, in := range insts {
			byCluster[in.Labels[provider.LabelCluster]]++
		}
		return len(insts) >= 4
	})
	// A little longer: nothing more is launched for the gang.
	time.Sleep(300 * time.Millisecond)
	insts, err := cloud.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clear(byCluster)
	for _, in := range insts {
		byCluster[in.Labels[provider.LabelCluster]]++
	}
	if byCluster["b"] != 4 || byCluster["a"] != 0 {
		t.Fatalf("machines by cluster %v; want the gang's 4 in cluster b alone", byCluster)
	}
}
