package history_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
)

func atkSLOBatch(id int64, workflow string, completed time.Time, met, cancelled bool) history.Batch {
	return history.Batch{Version: uint64(completed.Unix()), Batch: api.Batch{ID: id, Name: "n", User: "u", BillingProject: "p", State: api.BatchComplete,
		Attributes: map[string]string{api.WorkflowAttribute: workflow}, Queue: "org/tier1", SLOSeconds: 60, SLOMet: &met,
		Cancelled: cancelled, TimeCreated: completed.Add(-time.Minute), TimeCompleted: &completed}}
}

// TestAttack46EmbeddedSLORunsHostileAndReplaced: 1 KiB workflow names
// full of control characters come back as written; a batch stored again
// (retried, completing later; cancelled after completion) has one run,
// its latest; a discarded batch none; reopening the store (the backfill
// runs once) duplicates nothing; Hide, the limit and inverted or
// negative windows behave.
func TestAttack46EmbeddedSLORunsHostileAndReplaced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := history.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Unix(1_800_000_000, 0)
	names := map[int64]string{}
	for i := int64(1); i <= 300; i++ {
		w := fmt.Sprintf("\x1b[2J\x00\n\t%d", i) + strings.Repeat("\u202e", (api.MaxAttributeBytes-20)/3)
		names[i] = w
		if _, err := s.PutBatch(ctx, atkSLOBatch(i, w, base.Add(time.Duration(i)*time.Second), true, false), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Batch 5 retried: completes an hour later, missed.
	if _, err := s.PutBatch(ctx, atkSLOBatch(5, names[5], base.Add(time.Hour), false, false), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, 6); err != nil {
		t.Fatal(err)
	}
	check := func(s history.Store) {
		t.Helper()
		runs, more, err := s.SLORuns(ctx, history.SLOQuery{From: 0, To: base.Add(2 * time.Hour).Unix()}, 1000)
		if err != nil || more {
			t.Fatalf("%v %v", more, err)
		}
		seen := map[uint64]int{}
		for _, r := range runs {
			seen[r.Batch]++
			if r.Workflow != names[int64(r.Batch)] {
				t.Fatalf("batch %d's workflow came back as %q", r.Batch, r.Workflow)
			}
			if r.Batch == 5 && (r.Met || r.Completed != base.Add(time.Hour).Unix()) {
				t.Fatalf("batch 5 after its retry: %+v", r)
			}
		}
		if len(runs) != 299 || seen[6] != 0 || seen[5] != 1 {
			t.Fatalf("%d runs (batch 5 %d times, batch 6 %d), want 299", len(runs), seen[5], seen[6])
		}
		// Hidden batches count against no limit; more only when a visible
		// run is left.
		got, more, err := s.SLORuns(ctx, history.SLOQuery{From: 0, To: base.Add(2 * time.Hour).Unix(), Hide: func(b uint64) bool { return b%2 == 0 }}, 150)
		if err != nil || len(got) != 150 || more {
			t.Fatalf("odd batches: %d runs, more %v, %v", len(got), more, err)
		}
		if got, more, _ := s.SLORuns(ctx, history.SLOQuery{From: 0, To: base.Add(2 * time.Hour).Unix()}, 10); len(got) != 10 || !more {
			t.Fatalf("limit 10: %d, more %v", len(got), more)
		}
		for _, q := range []history.SLOQuery{{From: base.Add(time.Hour).Unix(), To: base.Unix()}, {From: -1 << 62, To: -1}, {From: base.Add(3 * time.Hour).Unix(), To: 1 << 62}} {
			if got, more, err := s.SLORuns(ctx, q, 10); len(got) != 0 || more || err != nil {
				t.Fatalf("window %+v: %d runs", q, len(got))
			}
		}
	}
	check(s)
	// Cancelled after completion: replaced, one row, cancelled.
	if _, err := s.PutBatch(ctx, atkSLOBatch(7, names[7], base.Add(7*time.Second), true, true), nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = history.OpenEmbedded(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
}
