package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestEfficiencyOverAPeriod: once batches finish, the history store keeps
// what each group of their jobs asked for and used, and a report over a
// period adds a user's, or a billing project's, across batches: alice's
// two batches of an over-asking "align" are one group of 6 attempts with
// one suggestion; her project's report adds bob's jobs and sums by user;
// days without attempts report nothing. Only a project's members read its
// report, only an admin another user's outside a project, and a period
// longer than a report covers is refused, naming the limit.
func TestEfficiencyOverAPeriod(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "genomics")
	carol := tc.user("carol", "physics")
	w := newSimWorker(t, tc, "sim-eff", 16)
	run := func(c *api.Client, project, name string, count int64, peak int64) int64 {
		t.Helper()
		b, err := c.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: project, Jobs: []api.JobSpec{
			{JobID: 1, Name: name, Count: count, Command: []string{"true"}, CPU: 2, Memory: 4 << 30}}})
		if err != nil {
			t.Fatal(err)
		}
		res := w.sync(5 * time.Second)
		if int64(len(res.Assign)) != count {
			t.Fatalf("assigned %d of %d", len(res.Assign), count)
		}
		start := time.Now()
		time.Sleep(20 * time.Millisecond)
		w.events = nil
		for _, as := range res.Assign {
			w.events = append(w.events, api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventStarted, StartTime: start},
				api.AttemptEvent{AttemptRef: as.AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: start, EndTime: time.Now(),
					Usage: &api.Usage{CPUSeconds: 0.001, PeakMemory: peak}})
		}
		w.sync(0)
		return b.ID
	}
	run(alice, "genomics", "align", 4, 300<<20)
	run(alice, "genomics", "align", 2, 250<<20)
	run(bob, "genomics", "call", 1, 3<<30)
	run(carol, "physics", "sim", 3, 100<<20)
	waitUntil(t, "the batches to be stored in the history", 30*time.Second, func() bool {
		_, waiting := tc.srv.State().ExportQueue(1)
		return waiting == 0 && tc.srv.history.Status().ExportedBatches == 4
	})

	mine, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if mine.User != "alice" || mine.Batches != 2 || len(mine.Groups) != 1 || len(mine.Projects) != 1 || mine.Projects[0].Name != "genomics" {
		t.Fatalf("alice's own report: %+v", mine)
	}
	g := mine.Groups[0]
	if g.Name != "align" || g.User != "alice" || g.BillingProject != "genomics" || g.Attempts != 6 || g.CPU != 2 || g.Memory != 4<<30 {
		t.Fatalf("alice's align across her two batches: %+v", g)
	}
	// p95 of the peaks is 300 MiB (at most 4.4% above, from a
	// histogram); × 1.2 rounds up to 512 MiB.
	if g.PeakMemoryP95 < 300<<20 || g.PeakMemoryP95 > 314<<20 || g.SuggestedMemory != 512<<20 || g.SuggestedCPU >= 2 || g.WastedCoreHours <= 0 {
		t.Fatalf("alice's align asks 2 cores and 4 GiB and uses little of either: %+v", g)
	}
	if mine.Total.Attempts != 6 || mine.Total.Cost != g.Cost {
		t.Fatalf("alice's total %+v, her group %+v", mine.Total, g)
	}

	proj, err := bob.PeriodEfficiency(ctx, api.EfficiencyQuery{BillingProject: "genomics"})
	if err != nil {
		t.Fatal(err)
	}
	if proj.Batches != 3 || proj.Total.Attempts != 7 || len(proj.Groups) != 2 || len(proj.Users) != 2 ||
		proj.Users[0].Name != "alice" || proj.Users[0].Attempts != 6 || proj.Users[1].Name != "bob" || proj.Users[1].Attempts != 1 {
		t.Fatalf("genomics' report: %+v", proj)
	}
	for _, g := range proj.Groups {
		if g.Name == "call" && (g.User != "bob" || g.SuggestedMemory != 4<<30) {
			t.Fatalf("bob's call peaks at 3 GiB: 3.6 GiB rounds up to 4 GiB, what it asks: %+v", g)
		}
	}
	one, err := bob.PeriodEfficiency(ctx, api.EfficiencyQuery{BillingProject: "genomics", User: "alice"})
	if err != nil || one.Total.Attempts != 6 || len(one.Users) != 1 {
		t.Fatalf("alice's jobs in genomics, read by bob: %+v %v", one, err)
	}
	if other, err := tc.admin.PeriodEfficiency(ctx, api.EfficiencyQuery{User: "carol"}); err != nil || other.Total.Attempts != 3 || other.Projects[0].Name != "physics" {
		t.Fatalf("carol's report, read by an admin: %+v %v", other, err)
	}
	past := time.Now().UTC().AddDate(0, 0, -40)
	if old, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{From: past.Format(time.DateOnly), To: past.AddDate(0, 0, 5).Format(time.DateOnly)}); err != nil ||
		len(old.Groups) != 0 || old.Total.Attempts != 0 || old.Batches != 0 {
		t.Fatalf("days before any attempt: %+v %v", old, err)
	}
	if old, err := alice.PeriodEfficiency(ctx, api.EfficiencyQuery{To: past.Format(time.DateOnly)}); err != nil || old.From != past.AddDate(0, 0, -30).Format(time.DateOnly) {
		t.Fatalf("to= alone, in the past: %+v %v; want the 30 days before it", old, err)
	}

	for _, c := range []struct {
		who    *api.Client
		q      api.EfficiencyQuery
		status int
		says   string
	}{
		{carol, api.EfficiencyQuery{BillingProject: "genomics"}, http.StatusForbidden, `not in billing project "genomics"`},
		{carol, api.EfficiencyQuery{BillingProject: "genomics", User: "carol"}, http.StatusForbidden, `not in billing project "genomics"`},
		{bob, api.EfficiencyQuery{User: "alice"}, http.StatusForbidden, "only an admin"},
		{alice, api.EfficiencyQuery{BillingProject: "nowhere"}, http.StatusNotFound, `"nowhere" does not exist`},
		{alice, api.EfficiencyQuery{From: "2024-01-01", To: "2026-01-01"}, http.StatusBadRequest, "at most 366"},
		{alice, api.EfficiencyQuery{From: "yesterday"}, http.StatusBadRequest, "not a day"},
		{alice, api.EfficiencyQuery{User: strings.Repeat("x", api.MaxNameBytes+1)}, http.StatusBadRequest, "the limit is 256"},
	} {
		_, err := c.who.PeriodEfficiency(ctx, c.q)
		if !api.IsStatus(err, c.status) || err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want HTTP %d saying %q", c.q, err, c.status, c.says)
		}
	}
}
