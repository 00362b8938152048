package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/server/apiview"
)

// Attacks on queue settings regenerated from history: the endpoints
// queue-history, queue-auto-apply, queue-rollback and the leader's
// auto_apply loop, with real servers.

func atkPutQueues(t *testing.T, c *api.Client, qs ...api.Queue) {
	t.Helper()
	for _, q := range qs {
		if _, err := c.PutQueue(context.Background(), &q); err != nil {
			t.Fatalf("put %s: %v", q.Path, err)
		}
	}
}

// atkSamples records ten hours of use of each queue, minute by minute,
// two days ago.
func atkSamples(t *testing.T, tc *testCluster, cores map[string]int64) {
	t.Helper()
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-48 * time.Hour).Unix()
	var samples []history.QueueSample
	for m := int64(0); m < 600; m++ {
		for q, c := range cores {
			samples = append(samples, history.QueueSample{Queue: q, At: at + 60*m, Seconds: 60, CPUMilli: c * 1000, Jobs: c})
		}
	}
	if err := st.PutQueueUsage(context.Background(), samples); err != nil {
		t.Fatal(err)
	}
}

// atkTreeWithUse: top queues org (weight 4, among its siblings) and
// other (weight 1); org's leaves used 8 and 2 cores.
func atkTreeWithUse(t *testing.T, tc *testCluster) {
	atkPutQueues(t, tc.admin,
		api.Queue{Path: "org", Weight: 4, AutoApply: &api.QueueAutoApply{Every: "24h"}},
		api.Queue{Path: "org/tier1", Weight: 1, Guarantee: api.Quota{CPU: 4}, BillingProjects: []string{"default"}},
		api.Queue{Path: "org/tier3", Weight: 1, Guarantee: api.Quota{CPU: 1}},
		api.Queue{Path: "other", Weight: 1},
		api.Queue{Path: "other/x", Weight: 1},
	)
	atkSamples(t, tc, map[string]int64{"org": 10, "org/tier1": 8, "org/tier3": 2, "other": 1, "other/x": 1})
}

// TestAttack46AutoApplyKeepsTopQueueWeight: org weighs 4 against its
// sibling top queue other. Regenerate runs the recommendation over org's
// tree alone, in which org has no sibling, so the weight it recommends
// for org is 1, and each regeneration steps org's weight toward 1: its
// share against other erodes by max_change every run, on a comparison
// the recommendation never made.
func TestAttack46AutoApplyKeepsTopQueueWeight(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	atkTreeWithUse(t, tc)
	v, err := tc.admin.AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: "org"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("version %d %s: %+v (%s)", v.Version, v.Kind, v.Changes, v.Note)
	q, err := tc.admin.GetQueue(ctx, "org")
	if err != nil {
		t.Fatal(err)
	}
	if q.Weight != 4 {
		t.Fatalf("org's weight among the top queues went 4 -> %d by a regeneration of org's own tree", q.Weight)
	}
}

// TestAttack46AutoApplyRecordsWho: a regeneration an admin asks for is
// recorded (version and audit entry) under the admin's name, as a
// rollback is, so the audit log filtered by user finds it and drover
// queue history does not print "by by root".
func TestAttack46AutoApplyRecordsWho(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	atkTreeWithUse(t, tc)
	v, err := tc.admin.AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: "org"})
	if err != nil || !v.Applied {
		t.Fatalf("%+v %v", v, err)
	}
	rb, err := tc.admin.RollbackQueues(ctx, &api.QueueRollbackRequest{Tree: "org", Version: v.Version})
	if err != nil {
		t.Fatal(err)
	}
	if rb.By != "root" {
		t.Errorf("the rollback is by %q", rb.By)
	}
	if v.By != "root" {
		t.Errorf("the regeneration root asked for is recorded as by %q", v.By)
	}
	entries, err := tc.admin.Audit(ctx, "1h", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Route, "queue ") && e.User != "root" {
			t.Errorf("audit entry %q %q is by user %q", e.Route, e.Message, e.User)
		}
	}
}

// TestAttack46AutoApplyHugeMaxRunningBlocksTheLoop: tree a has a queue
// with max_running jobs of 2^41 (PutQueue accepts any count >= 0). Its
// regeneration is refused as out of bounds though it would leave that
// setting unchanged, so a can never be regenerated, by the endpoint or
// the schedule; and the leader's loop returns on that error before it
// gets to tree b, which is never regenerated either.
func TestAttack46AutoApplyHugeMaxRunningBlocksTheLoop(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.AutoApplyTick = 50 * time.Millisecond })
	ctx := context.Background()
	atkPutQueues(t, tc.admin,
		api.Queue{Path: "a", AutoApply: &api.QueueAutoApply{Every: "1s"}},
		api.Queue{Path: "a/t", MaxRunning: api.MaxRunning{Jobs: 1 << 41}},
		api.Queue{Path: "b", AutoApply: &api.QueueAutoApply{Every: "1s"}},
		api.Queue{Path: "b/t"},
	)
	if _, err := tc.admin.AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: "a"}); err != nil {
		t.Errorf("regenerating tree a (nothing to change): %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := tc.admin.QueueHistory(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		if h.LastRun != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tree b (auto_apply every 1s) was never regenerated in 5 s: the loop stops at tree a's error every tick")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAttack46AutoApplyEndpointsGuarded: users who are not admins cannot
// regenerate or roll back; hostile trees and versions are refused with
// bounded messages; queue-history names nothing but queues.
func TestAttack46AutoApplyEndpointsGuarded(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	atkTreeWithUse(t, tc)
	v, err := tc.admin.AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: "org", DryRun: true})
	if err != nil || v.Applied || v.Kind != "dry_run" {
		t.Fatalf("dry run: %+v %v", v, err)
	}
	if q, _ := tc.admin.GetQueue(ctx, "org/tier1"); q.Guarantee.CPU != 4 {
		t.Fatalf("a dry run changed org/tier1: %+v", q)
	}
	alice := userToken(t, tc.user("alice", "default"))
	for _, r := range []struct{ path, body string }{
		{"/api/v1/queue-auto-apply", `{"tree":"org"}`},
		{"/api/v1/queue-auto-apply", `{"tree":"org","dry_run":true}`},
		{"/api/v1/queue-rollback", `{"tree":"org","version":1}`},
	} {
		if code, _ := tc.raw("POST", r.path, alice, r.body); code != http.StatusForbidden {
			t.Errorf("alice POST %s %s: %d, want 403", r.path, r.body, code)
		}
	}
	admin := userToken(t, tc.admin)
	for _, r := range []struct {
		path, body string
		code       int
	}{
		{"/api/v1/queue-auto-apply", `{"tree":"org/tier1"}`, 400},
		{"/api/v1/queue-auto-apply", `{"tree":""}`, 400},
		{"/api/v1/queue-auto-apply", `{"tree":"` + strings.Repeat("a", 100000) + `"}`, 400},
		{"/api/v1/queue-auto-apply", `{"tree":"\u001b[2J"}`, 400},
		{"/api/v1/queue-auto-apply", `{"tree":"nope"}`, 404},
		{"/api/v1/queue-rollback", `{"tree":"org","version":0}`, 404},
		{"/api/v1/queue-rollback", `{"tree":"org","version":18446744073709551615}`, 404},
		{"/api/v1/queue-rollback", `{"tree":"org","version":-1}`, 400},
		{"/api/v1/queue-rollback", `{"tree":"org","version":` + "1" + `}`, 409}, // the dry run
		{"/api/v1/queue-rollback", `{"tree":"org/tier1","version":1}`, 404},
		{"/api/v1/queue-rollback", `{"tree":"../etc","version":1}`, 404}, // ".." is a valid queue name
		{"/api/v1/queue-rollback", `{"tree":"a b","version":1}`, 400},
	} {
		code, msg := tc.raw("POST", r.path, admin, r.body)
		if code != r.code {
			t.Errorf("POST %s %.60s: %d %.200s, want %d", r.path, r.body, code, msg, r.code)
		}
		if len(msg) > 600 {
			t.Errorf("POST %s: a %d-byte message", r.path, len(msg))
		}
	}
	for _, q := range []string{"tree=org/tier1", "tree=" + strings.Repeat("a", 5000), "tree=%1b"} {
		code, _ := tc.raw("GET", "/api/v1/queue-history?"+q, alice, "")
		if code != 200 && code != 400 {
			t.Errorf("queue-history?%.40s: %d", q, code)
		}
	}
}

// TestAttack46AutoApplyOverwritesAConcurrentChange: the leader's loop
// reads the queues once, then for each due tree reads 30 days of usage
// and applies an AutoApplyQueues of absolute settings. An admin who
// changes a queue in between (here: org/tier1's guarantee 4 -> 100
// cores) has the change silently reverted to the step computed from the
// old value (5 cores): a 95% cut in one regeneration whose max_change is
// 25%, and a lost update. The entry carries no "before" to check against
// the state at apply.
func TestAttack46AutoApplyOverwritesAConcurrentChange(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	atkTreeWithUse(t, tc)
	st, err := tc.srv.history.Store()
	if err != nil {
		t.Fatal(err)
	}
	read := tc.srv.state.Queues() // what the loop read
	cmd, err := apiview.Regenerate(ctx, read, tc.srv.state.Clusters(), st, "org", time.Now(), "drover auto_apply")
	if err != nil {
		t.Fatal(err)
	}
	atkPutQueues(t, tc.admin, api.Queue{Path: "org", Weight: 4, Guarantee: api.Quota{CPU: 200}, AutoApply: &api.QueueAutoApply{Every: "24h"}},
		api.Queue{Path: "org/tier1", Weight: 1, Guarantee: api.Quota{CPU: 100}, BillingProjects: []string{"default"}})
	if _, err := tc.srv.raft.Apply(cmd); err != nil {
		t.Logf("the stale regeneration was refused: %v", err)
	}
	q, err := tc.admin.GetQueue(ctx, "org/tier1")
	if err != nil {
		t.Fatal(err)
	}
	if q.Guarantee.CPU < 75 {
		t.Fatalf("the admin set org/tier1's guarantee to 100 cores; a regeneration computed before that left it at %g (max_change 25%%)", q.Guarantee.CPU)
	}
}

// TestAttack46AutoApplyLongNoteRefused: a new tree of 300 queues with
// auto_apply has no samples yet. Regenerate's note lists every queue
// "kept for want of samples", uncut; past MaxVersionNote (4 KiB) the
// whole entry is refused as invalid: the tree can never be regenerated
// (by the endpoint or the schedule) while enough of its queues are idle.
func TestAttack46AutoApplyLongNoteRefused(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	cfg := &api.PlacementConfig{Queues: []api.Queue{{Path: "org", AutoApply: &api.QueueAutoApply{Every: "24h"}}}}
	for i := range 300 {
		cfg.Queues = append(cfg.Queues, api.Queue{Path: fmt.Sprintf("org/team-%03d", i)})
	}
	if err := tc.admin.ApplyPlacement(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	atkSamples(t, tc, map[string]int64{"org": 2, "org/team-000": 2})
	v, err := tc.admin.AutoApplyQueues(ctx, &api.QueueAutoApplyRequest{Tree: "org"})
	if err != nil {
		t.Fatalf("regenerating a tree of 300 queues, 299 without samples: %v", err)
	}
	t.Logf("version %d %s, note of %d bytes", v.Version, v.Kind, len(v.Note))
}
