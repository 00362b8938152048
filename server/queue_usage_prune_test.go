package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
)

// TestQueueUsagePrunedPastRetention: a prune round at a given time
// deletes the queue samples older than QueueUsageRetention, and only
// those (one exactly at the limit stays), and counts them in
// drover_queue_usage_pruned_total. The round's clock is the test's: a
// thousand days ahead, so the round the leader ran at its start (on the
// real clock) has nothing of these samples to delete.
func TestQueueUsagePrunedPastRetention(t *testing.T) {
	const retention = 30 * 24 * time.Hour
	tc := startServer(t, "", func(c *Config) { c.QueueUsageRetention = retention })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(1000 * 24 * time.Hour).Truncate(time.Second)
	limit := now.Add(-retention).Unix()
	old := []history.QueueSample{
		{Queue: "org", At: limit - 400*24*3600, Seconds: 60, CPUMilli: 1000, Jobs: 1},
		{Queue: "org/tier1", At: limit - 31*24*3600, Seconds: 60, CPUMilli: 1000, Jobs: 1},
		{Queue: "org/tier1", At: limit - 1, Seconds: 60, CPUMilli: 1000, Jobs: 1},
	}
	kept := []history.QueueSample{
		{Queue: "org/tier1", At: limit, Seconds: 60, CPUMilli: 2000, Jobs: 2},
		{Queue: "org/tier1", At: now.Unix() - 60, Seconds: 60, CPUMilli: 3000, Jobs: 3},
	}
	if err := st.PutQueueUsage(ctx, append(old, kept...)); err != nil {
		t.Fatal(err)
	}
	before := metricValue(t, tc.srv, "drover_queue_usage_pruned_total")
	n, err := tc.srv.pruneQueueUsage(ctx, now)
	if err != nil || n != int64(len(old)) {
		t.Fatalf("the prune round deleted %d samples (%v), want the %d older than %v", n, err, len(old), retention)
	}
	got, err := st.QueueUsage(ctx, 0, now.Unix()+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(kept) || got[0] != kept[0] || got[1] != kept[1] {
		t.Fatalf("after the prune the store holds %+v, want %+v", got, kept)
	}
	if d := metricValue(t, tc.srv, "drover_queue_usage_pruned_total") - before; d != float64(len(old)) {
		t.Fatalf("drover_queue_usage_pruned_total rose by %v, want %d", d, len(old))
	}
	if n, err := tc.srv.pruneQueueUsage(ctx, now); err != nil || n != 0 {
		t.Fatalf("a second round deleted %d, %v", n, err)
	}
}

// TestQueueUsagePrunedAtLeaderStart: samples past the retention that a
// server's store holds when it starts are deleted by the round its
// leadership begins with, without waiting for the hourly one; the
// others stay.
func TestQueueUsagePrunedAtLeaderStart(t *testing.T) {
	dir := t.TempDir()
	st, err := history.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	day := int64(24 * 3600)
	retention := DefaultConfig().QueueUsageRetention
	oldAt := now - int64(retention/time.Second) - day
	recent := history.QueueSample{Queue: "org", At: now - day, Seconds: 60, CPUMilli: 1000, Jobs: 1}
	if err := st.PutQueueUsage(context.Background(), []history.QueueSample{
		{Queue: "org", At: oldAt, Seconds: 60, CPUMilli: 1000, Jobs: 1}, recent,
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	tc := startServer(t, dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	// The default retention keeps the longest window the reports take.
	if rec, err := tc.admin.RecommendQueues(ctx, 365, 95); err != nil || rec.Days != 365 {
		t.Fatalf("a 365-day recommendation with the default retention: %+v, %v", rec, err)
	}
	for {
		got, err := live.QueueUsage(ctx, 0, now+1)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 1 && got[0] == recent {
			break
		}
		if len(got) == 0 || got[len(got)-1] != recent {
			t.Fatalf("the store holds %+v: the recent sample is gone", got)
		}
		if ctx.Err() != nil {
			t.Fatalf("the leader's first prune left %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQueueUsageWindowsWithinRetention: drover queue recommend and queue
// slo take no window longer than the whole days of samples the server
// keeps, refusing one with the setting named, and without -days take 30
// or, when the server keeps fewer, those.
func TestQueueUsageWindowsWithinRetention(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.QueueUsageRetention = 20*24*time.Hour + 5*time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if rec, err := tc.admin.RecommendQueues(ctx, 0, 95); err != nil || rec.Days != 20 {
		t.Fatalf("a recommendation without days: %+v, %v; want 20 days", rec, err)
	}
	if rep, err := tc.admin.QueueSLO(ctx, 0, 0); err != nil || rep.Days != 20 {
		t.Fatalf("an SLO report without days: %+v, %v; want 20 days", rep, err)
	}
	if rec, err := tc.admin.RecommendQueues(ctx, 20, 95); err != nil || rec.Days != 20 {
		t.Fatalf("a 20-day recommendation: %+v, %v", rec, err)
	}
	want := "days 21 reaches back past the 20 days of queue usage this server keeps (server setting queue_usage_retention, 485h0m0s): ask for 20 or fewer"
	if _, err := tc.admin.RecommendQueues(ctx, 21, 95); !api.IsStatus(err, 400) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a 21-day recommendation: %v", err)
	}
	if _, err := tc.admin.QueueSLO(ctx, 21, 0); !api.IsStatus(err, 400) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a 21-day SLO report: %v", err)
	}
}

// TestQueueUsageRetentionBounds: a retention under a day (the shortest
// report) or over ten years is refused, naming the setting and its
// bounds.
func TestQueueUsageRetentionBounds(t *testing.T) {
	for _, tc := range []struct {
		retention time.Duration
		ok        bool
	}{
		{24 * time.Hour, true},
		{400 * 24 * time.Hour, true},
		{87600 * time.Hour, true},
		{24*time.Hour - time.Second, false},
		{0, false},
		{87600*time.Hour + time.Hour, false},
	} {
		cfg := TestConfig(t.TempDir(), testLogger(t))
		cfg.QueueUsageRetention = tc.retention
		err := cfg.Validate()
		if tc.ok && err != nil {
			t.Errorf("retention %v: %v", tc.retention, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "QueueUsageRetention (-queue-usage-retention) is "+tc.retention.String()+"; it must be between 24h (a day) and 87600h (ten years)")) {
			t.Errorf("retention %v: %v", tc.retention, err)
		}
	}
}
