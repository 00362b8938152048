package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/why"
)

// Attacks on the room held for gangs first in line, through the API and
// job why (helper review).

// TestAttackGangHoldsWhyThroughTheAPI: two 4-core workers, one full of
// bob's one-core jobs; alice, first in line (she runs nothing), waits with
// a gang of two 4-core members: room is held for it on both workers, and
// job why says so (gang_room, held on 2 workers, room for 1 member now);
// bob's next job is kept off the idle worker's held room and told so
// (held_for_gang). A regression test of the wiring: the scheduler's
// holds, the round's reasons, job why.
func TestAttackGangHoldsWhyThroughTheAPI(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "genomics")
	w1 := newSimWorker(t, tc, "sim-h1", 4)
	w2 := newSimWorker(t, tc, "sim-h2", 4)
	one := func(id, n int64) api.JobSpec {
		return api.JobSpec{JobID: id, Name: "one", Count: n, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}
	}
	b1, err := bob.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{one(1, 4)}})
	if err != nil {
		t.Fatal(err)
	}
	// Bob's four jobs start (best fit: all on one worker).
	var got int
	for end := time.Now().Add(30 * time.Second); got < 4 && time.Now().Before(end); {
		for _, w := range []*simWorker{w1, w2} {
			res := w.sync(200 * time.Millisecond)
			for _, a := range res.Assign {
				w.known = append(w.known, a.AttemptRef)
				w.events = append(w.events, api.AttemptEvent{AttemptRef: a.AttemptRef, Kind: api.EventStarted, StartTime: time.Now()})
			}
			got += len(res.Assign)
		}
	}
	if got != 4 {
		t.Fatalf("bob's jobs: %d of 4 assigned", got)
	}
	w1.sync(0)
	w2.sync(0)
	_ = b1
	ga, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "ranks", Count: 2, Command: []string{"true"}, CPU: 4, Memory: 1 << 20, Gang: true}}})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := bob.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{one(1, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	var gangWhy, jobWhy string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		g, err := alice.JobWhy(ctx, ga.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		j, err := bob.JobWhy(ctx, b2.ID, 1)
		if err != nil {
			t.Fatal(err)
		}
		gangWhy, jobWhy = whyText(g), whyText(j)
		if strings.Contains(gangWhy, "gang_room: ") && strings.Contains(jobWhy, "held_for_gang: ") {
			break
		}
	}
	if !strings.Contains(gangWhy, "room is held for it on 2 workers, which other jobs may not take, and grows there as their jobs end (room for 1 of them now)") {
		t.Errorf("alice's gang, job why:\n%s", gangWhy)
	}
	if !strings.Contains(jobWhy, "held_for_gang: waiting for room: 1 of the 2 workers large enough") {
		t.Errorf("bob's job, job why:\n%s", jobWhy)
	}
	// Nothing of bob's lands on the held worker meanwhile.
	for _, w := range []*simWorker{w1, w2} {
		if res := w.sync(500 * time.Millisecond); len(res.Assign) != 0 {
			t.Fatalf("bob's job assigned into the room held for alice's gang: %+v", res.Assign)
		}
	}
}

// TestAttackGangHoldWhyGrammar: with one worker of the room a job could
// use held for a gang, job why says "1 of the 2 workers large enough have
// room for it" (the verb is the plural's whatever the count); and "room
// is held for it on 1 worker" is right.
func TestAttackGangHoldWhyGrammar(t *testing.T) {
	in := &scheduler.Input{}
	out := &scheduler.Output{Users: []scheduler.UserResult{{Name: "bob"}}, Unplaced: []scheduler.Unplaced{
		{User: "bob", Batch: 7, First: 1, Count: 1, CPUMilli: 1000, Memory: 1 << 20, Why: scheduler.Explanation{Instances: 2,
			Filtered: []scheduler.ReasonCount{{Reason: scheduler.ReasonCPUFree, Instances: 1}, {Reason: scheduler.ReasonGangHeld, Instances: 1}}}},
	}}
	w := why.Round(out, in, nil)[7]
	if len(w) != 1 || w[0].Reason != "held_for_gang" {
		t.Fatalf("reasons %+v", w)
	}
	if strings.Contains(w[0].Message, "1 of the 2 workers large enough have room") {
		t.Fatalf("job why: %q (1 worker ... has room)", w[0].Message)
	}
}
