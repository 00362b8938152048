package placementspec

import (
	"encoding/json"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestFormatQueuesReadsBack: what FormatQueues writes, Parse reads back to
// the same queues, every setting included.
func TestFormatQueuesReadsBack(t *testing.T) {
	zero, four, mem := 0.0, 4.5, int64(3<<30+7)
	want := []api.Queue{
		{Path: "org", Weight: 3, Guarantee: api.Quota{CPU: 100, Memory: 1 << 40, GPUs: map[string]int{"a100": 4, "t4": 2}},
			LendLimit: &api.Limit{CPU: &four, Memory: &mem}, MaxRunning: api.MaxRunning{Jobs: 1000, CPU: 50.5}, Strategy: "pack",
		},
		{Path: "org/t1", Guarantee: api.Quota{CPU: 40}, BorrowLimit: &api.Limit{CPU: &zero, GPUs: map[string]int{"a100": 0}},
			ReclaimGrace: "1m0s", PreemptAfter: "30s", PreemptThreshold: 0.8, AllowPreemptionFrom: []string{"org/t3"},
			HomeClusters: []string{"east-a", "west-b"}, BillingProjects: []string{"p1"}, AllowProjects: []string{"p3"}},
		{Path: "org/t3", Preemptible: true, MinRuntime: "10m0s", BillingProjects: []string{"p3"}},
	}
	src := FormatQueues(want)
	cfg, diags := Parse("recommended.hcl", src)
	if diags.HasErrors() {
		t.Fatalf("%s\n%s", diags, src)
	}
	got, _ := json.Marshal(cfg.Queues)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Fatalf("read back:\n%s\nwant:\n%s\nfrom:\n%s", got, exp, src)
	}
}
