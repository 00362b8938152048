package state

import "testing"

// TestApplyRechecksWhereAJobMayGo: a plan is applied only where placement's
// rule lets each job go, whatever the leader proposed (a leader behind the
// log, or one with a bug): the job's regions and clusters, its pool, its
// worker labels, its GPUs' type and count, the cluster enabled. Each case
// forges a plan onto a worker the rule forbids and must see it rejected,
// then the same job placed where the rule allows it.
func TestApplyRechecksWhereAJobMayGo(t *testing.T) {
	for _, c := range []struct {
		name   string
		where  *Where
		worker Activate // the forbidden worker
	}{
		{"another region", &Where{Regions: []string{"east"}}, Activate{Region: "west", Cluster: "w", Pool: "default"}},
		{"another pool", &Where{Pool: "highmem"}, Activate{Region: "east", Cluster: "e", Pool: "default"}},
		{"no GPUs", &Where{GPUType: "a100", GPUs: 1}, Activate{Region: "east", Cluster: "e", Pool: "default"}},
		{"GPUs of another type", &Where{GPUType: "a100", GPUs: 1}, Activate{Region: "east", Cluster: "e", Pool: "default", GPUType: "t4", GPUs: 8}},
		{"too few GPUs in all", &Where{GPUType: "a100", GPUs: 4}, Activate{Region: "east", Cluster: "e", Pool: "default", GPUType: "a100", GPUs: 2}},
		{"a disabled cluster", nil, Activate{Region: "east", Cluster: "off", Pool: "default"}},
		{"a cluster the job does not name", &Where{Clusters: []string{"e"}}, Activate{Region: "east", Cluster: "e2", Pool: "highmem"}},
		{"without the label", &Where{Labels: []string{"rack=r1"}}, Activate{Region: "east", Cluster: "e", Pool: "highmem"}},
		{"another value of the label", &Where{Labels: []string{"rack=r1", "ssd=true"}}, Activate{Region: "east", Cluster: "e", Pool: "highmem", Labels: StringMap{"rack": "r2", "ssd": "true"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			bad := c.worker
			bad.Now, bad.Name, bad.CPUMilli, bad.Memory, bad.TokenHash, bad.NodeID = h.Tick(), "bad", 16000, 16<<30, "tok-bad", "bad"
			badID := h.Must(&bad).(*ActivateResult).Instance
			h.Must(&SetCluster{Now: h.Tick(), Name: "off", Create: true, Region: "east", Disabled: true})
			good := Activate{Now: h.Tick(), Name: "good", CPUMilli: 16000, Memory: 16 << 30, TokenHash: "tok-good", NodeID: "good",
				Region: "east", Cluster: "e", Pool: "highmem", GPUType: "a100", GPUs: 8, Labels: StringMap{"rack": "r1", "ssd": "true"}}
			goodID := h.Must(&good).(*ActivateResult).Instance
			sp := spec("j", 1)
			sp.Where = c.where
			b := h.CreateBatch(entry(1, 2, sp))
			res := h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 2, badID)}}).(*PlanResult)
			if res.Placed != 0 || res.Rejected != 2 {
				t.Fatalf("forbidden worker: placed %d rejected %d, want every job rejected", res.Placed, res.Rejected)
			}
			res = h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(b, 1, 2, goodID)}}).(*PlanResult)
			if res.Placed != 2 {
				t.Fatalf("allowed worker: placed %d rejected %d, want 2 placed", res.Placed, res.Rejected)
			}
		})
	}
}
