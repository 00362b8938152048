package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/jobspec/placementspec"
	"github.com/drover-sched/drover/testkit/simworker"
)

// TestQueueRecommendFromRecordedHistory: thirty days of recorded usage in
// the history store, minute by minute, as the leader's sampler writes it:
// a tier-1 queue in use 240 hours (100 at 10 cores, 80 at 20, 36 at 30,
// 12 at 40, 12 at 80) and vacant the rest. drover queue recommend gives
// the seed's worked example: 95% of 240 hours is 228, covered at 40 cores,
// not the peak of 80; the parent guarantees its children's sum; the tree
// it prints applies as it is; and the leader's sampler records what runs.
func TestQueueRecommendFromRecordedHistory(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.QueueSampleInterval = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range []api.Queue{
		{Path: "org", Guarantee: api.Quota{CPU: 10}},
		{Path: "org/tier1", Weight: 1, PreemptAfter: "2m", BillingProjects: []string{"default"}},
		{Path: "org/tier3", Preemptible: true},
	} {
		if _, err := tc.admin.PutQueue(ctx, &q); err != nil {
			t.Fatal(err)
		}
	}
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	at := now - 29*24*3600
	var samples []history.QueueSample
	for _, u := range []struct{ hours, cores int64 }{{36, 30}, {100, 10}, {12, 80}, {80, 20}, {12, 40}} {
		for m := int64(0); m < u.hours*60; m++ {
			samples = append(samples, history.QueueSample{Queue: "org/tier1", At: at, Seconds: 60, CPUMilli: u.cores * 1000, Jobs: u.cores})
			samples = append(samples, history.QueueSample{Queue: "org/tier3", At: at, Seconds: 60, CPUMilli: 5000, Jobs: 50})
			at += 60
		}
		at += 3600 * 24 // vacant between units
	}
	if err := st.PutQueueUsage(ctx, samples); err != nil {
		t.Fatal(err)
	}
	rec, err := tc.admin.RecommendQueues(ctx, 30, 95)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.QueueRecommendation{}
	for _, q := range rec.Queues {
		got[q.Path] = q
	}
	t1, t3, org := got["org/tier1"], got["org/tier3"], got["org"]
	if t1.HoursInUse != 240 || t1.HoursCovered != 228 || t1.Guarantee != 40 || t1.PeakCPU != 80 || t1.MaxRunningJobs != 96 {
		t.Fatalf("tier 1: %+v, want 40 cores covering 228 of 240 hours", t1)
	}
	if t3.Guarantee != 5 || org.Guarantee != 45 || org.CurrentGuarantee != 10 || t1.Weight != 8 || t3.Weight != 1 {
		t.Fatalf("tier 3 %+v, org %+v", t3, org)
	}
	// The tree it prints, with the suggestions in, applies as it is.
	cfg, diags := placementspec.Parse("recommended.hcl", placementspec.FormatQueues(rec.Tree))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if err := tc.admin.ApplyPlacement(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if q, err := tc.admin.GetQueue(ctx, "org/tier1"); err != nil || q.Guarantee.CPU != 40 || q.Weight != 8 || q.PreemptAfter != "2m0s" || len(q.BillingProjects) != 1 {
		t.Fatalf("tier 1 after apply: %+v %v", q, err)
	}
	// What runs is recorded, minute by minute in production.
	if _, err := tc.admin.Workers().Activate(ctx, &api.ActivateRequest{Name: "w", CPU: 4, Memory: 8 << 30, Secret: tc.srv.cfg.WorkerSecret}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.Submit(ctx, &api.CreateBatchRequest{BillingProject: "default"}, api.Jobs{
		{JobID: 1, Name: "j", Count: 2, Command: []string{"sleep", "60"}, CPU: 1, Memory: 1 << 30}}, nil); err != nil {
		t.Fatal(err)
	}
	for {
		usage, err := st.QueueUsage(ctx, now-5, time.Now().Unix()+1)
		if err != nil {
			t.Fatal(err)
		}
		var recorded []string
		for _, u := range usage {
			if u.CPUMilli == 2000 && u.Jobs == 2 {
				recorded = append(recorded, u.Queue)
			}
		}
		if strings.Join(recorded, ",") == "org,org/tier1" || strings.HasPrefix(strings.Join(recorded, ","), "org,org/tier1") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the sampler recorded %+v", usage)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQueueSLOReport: batches with an SLO or a deadline say, once
// complete, whether they met it; the report counts the runs of each queue
// and tier the history store holds (Monarch's SLO success ratio) with the
// queue's usage of its guarantee, and the leader counts them in metrics.
func TestQueueSLOReport(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.QueueSampleInterval = 50 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, q := range []api.Queue{
		{Path: "org", Guarantee: api.Quota{CPU: 2}},
		{Path: "org/tier1", Guarantee: api.Quota{CPU: 2}, BillingProjects: []string{"default"}},
	} {
		if _, err := tc.admin.PutQueue(ctx, &q); err != nil {
			t.Fatal(err)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	dist, _ := simworker.ParseDist("1s")
	go func() {
		_ = simworker.Run(wctx, simworker.Config{Servers: tc.url, Secret: tc.srv.cfg.WorkerSecret, Name: "w",
			Cores: 2, Memory: 16 << 30, Duration: dist, SyncWait: 100 * time.Millisecond, Rec: simworker.NewRecorder()})
	}()
	soon := time.Now().Add(300 * time.Millisecond)
	var ids []int64
	for _, req := range []api.CreateBatchRequest{
		{BillingProject: "default", SLOSeconds: 600},     // met
		{BillingProject: "default", Deadline: &soon},     // missed: it runs a second
		{BillingProject: "default"},                      // no SLO: not counted
		{BillingProject: "default", SLOSeconds: 1e9 + 1}, // refused
	} {
		b, err := tc.admin.Submit(ctx, &req, api.Jobs{{JobID: 1, Name: "j", Command: []string{"sleep", "1"}, CPU: 1, Memory: 1 << 30}}, nil)
		if req.SLOSeconds > api.MaxSLOSeconds {
			if err == nil || !strings.Contains(err.Error(), "slo_seconds") {
				t.Fatalf("an SLO past a year: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	for _, id := range ids {
		for {
			b, err := tc.admin.GetBatch(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if b.State == api.BatchComplete {
				if (id == ids[0]) != (b.SLOMet != nil && *b.SLOMet) || (id == ids[2]) != (b.SLOMet == nil) {
					t.Fatalf("batch %d: slo_met %v", id, b.SLOMet)
				}
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("batch %d did not complete", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for {
		rep, err := tc.admin.QueueSLO(ctx, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		var t1, tier api.QueueSLO
		for _, q := range rep.Queues {
			if q.Queue == "org/tier1" {
				t1 = q
			}
		}
		for _, q := range rep.Tiers {
			if q.Queue == "tier1" {
				tier = q
			}
		}
		if t1.Runs == 2 {
			if t1.Met != 1 || t1.SuccessRatio != 0.5 || tier.Runs != 2 || tier.Met != 1 || t1.CoreHours <= 0 || t1.UsageCapacity <= 0 {
				t.Fatalf("tier 1 %+v, tier %+v", t1, tier)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the report: %+v", rep)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
