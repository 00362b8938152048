package history_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/efficiency"
	"github.com/drover-sched/drover/history"
)

// attackStores runs f against the embedded store and the MySQL store.
func attackStores(t *testing.T, f func(t *testing.T, s history.Store)) {
	t.Run("embedded", func(t *testing.T) {
		s, err := history.OpenEmbedded(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
	t.Run("mysql", func(t *testing.T) {
		s, err := history.OpenMySQL(context.Background(), newDatabase(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		f(t, s)
	})
}

// attackRow is an efficiency row of one attempt of group name.
func attackRow(project, user string, day int32, name string) history.EfficiencyRow {
	var z efficiency.Summarizer
	z.Add(efficiency.Attempt{Day: day, Group: name, CPU: 1, Memory: 1 << 30, Seconds: 60, CPUSeconds: 30, PeakMemory: 1 << 20})
	return history.EfficiencyRow{BillingProject: project, Day: day, User: user, Summary: z.Summaries()[0].Summary}
}

// attackPut stores batch id of project and user at version with rows.
func attackPut(t *testing.T, s history.Store, id int64, project, user string, version uint64, rows ...history.EfficiencyRow) {
	t.Helper()
	b := history.Batch{Batch: api.Batch{ID: id, BillingProject: project, User: user}, Version: version, Timeline: 1}
	if w, err := s.PutBatch(context.Background(), b, nil, rows); err != nil || !w {
		t.Fatalf("put batch %d: written %v, %v", id, w, err)
	}
}

func attackQuery(t *testing.T, s history.Store, q history.EfficiencyQuery, limit int) ([]string, bool) {
	t.Helper()
	rows, more, err := s.Efficiency(context.Background(), q, limit)
	if err != nil {
		t.Fatalf("%+v: %v", q, err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s/%s/%d/%s", r.BillingProject, r.User, r.Day, r.Summary.Name))
	}
	return out, more
}

// TestAttackEffStoreOwnersAreExact: users and projects whose names are
// prefixes of each other (the embedded index keys are owner NUL day
// batch seq), or extend one by '-', '.', '_' or a letter, see only their
// own rows, by project, by user and by both; a name with a NUL in it (the
// API's names have none) matches no one's; days at the ends of what a
// report asks (year 1, the day before 1970, 1970-01-01, 9999-12-31) come
// back on their day only.
func TestAttackEffStoreOwnersAreExact(t *testing.T) {
	const (
		year1    = -719162
		year9999 = 2932896
	)
	days := []int32{year1, -1, 0, 20000, year9999}
	owners := []struct{ project, user string }{
		{"gen", "al"}, {"genomics", "alice"}, {"genomics-2", "alice.b"}, {"genomics.x", "alice-x"}, {"genomics_", "alice_"}, {"genomicsz", "alicez"},
	}
	attackStores(t, func(t *testing.T, s history.Store) {
		for i, o := range owners {
			var rows []history.EfficiencyRow
			for _, d := range days {
				rows = append(rows, attackRow(o.project, o.user, d, "job-of-"+o.user))
			}
			attackPut(t, s, int64(i+1), o.project, o.user, 1, rows...)
		}
		for _, o := range owners {
			var want []string
			for _, d := range days {
				want = append(want, fmt.Sprintf("%s/%s/%d/job-of-%s", o.project, o.user, d, o.user))
			}
			for _, q := range []history.EfficiencyQuery{
				{BillingProject: o.project, From: year1, To: year9999},
				{User: o.user, From: year1, To: year9999},
				{BillingProject: o.project, User: o.user, From: year1, To: year9999},
			} {
				if got, more := attackQuery(t, s, q, 1000); !reflect.DeepEqual(got, want) || more {
					t.Errorf("%+v: %q (more %v), want %q", q, got, more, want)
				}
			}
			for _, d := range days {
				want := []string{fmt.Sprintf("%s/%s/%d/job-of-%s", o.project, o.user, d, o.user)}
				if got, _ := attackQuery(t, s, history.EfficiencyQuery{User: o.user, From: d, To: d}, 1000); !reflect.DeepEqual(got, want) {
					t.Errorf("%s on day %d: %q, want %q", o.user, d, got, want)
				}
			}
		}
		// A user in another's project, and names no one has.
		for _, q := range []history.EfficiencyQuery{
			{BillingProject: "genomics", User: "al", From: year1, To: year9999},
			{BillingProject: "gen", User: "alice", From: year1, To: year9999},
			{User: "alic", From: year1, To: year9999},
			{BillingProject: "genomic", From: year1, To: year9999},
			{User: "alice\x00", From: year1, To: year9999},
			{User: "alice\x00\x80", From: year1, To: year9999},
			{BillingProject: "genomics\x00", From: year1, To: year9999},
		} {
			if got, _ := attackQuery(t, s, q, 1000); len(got) != 0 {
				t.Errorf("%q/%q: %q, want nothing", q.BillingProject, q.User, got)
			}
		}
	})
}

// TestAttackEffStoreLimitCountsTheOwnersRowsOnly: a project's report of
// one user reads up to limit of that user's rows, however many of other
// members' rows come first in the project's index.
func TestAttackEffStoreLimitCountsTheOwnersRowsOnly(t *testing.T) {
	attackStores(t, func(t *testing.T, s history.Store) {
		var bobs []history.EfficiencyRow
		for i := range 50 {
			bobs = append(bobs, attackRow("genomics", "bob", 100, fmt.Sprintf("b%d", i)))
		}
		attackPut(t, s, 1, "genomics", "bob", 1, bobs...)
		attackPut(t, s, 2, "genomics", "alice", 1, attackRow("genomics", "alice", 100, "a0"), attackRow("genomics", "alice", 101, "a1"))
		got, more := attackQuery(t, s, history.EfficiencyQuery{BillingProject: "genomics", User: "alice", From: 0, To: 200}, 1)
		if !reflect.DeepEqual(got, []string{"genomics/alice/100/a0"}) || !more {
			t.Fatalf("alice's first row: %q more %v", got, more)
		}
		got, more = attackQuery(t, s, history.EfficiencyQuery{BillingProject: "genomics", User: "alice", From: 0, To: 200}, 2)
		if len(got) != 2 || more {
			t.Fatalf("alice's two rows: %q more %v", got, more)
		}
	})
}

// TestAttackEffStoreReplaceAndDiscardLeaveNothingStale: a batch stored
// again with fewer rows (and on other days) keeps only its new rows in
// both indexes, an older version changes nothing, and a discarded batch
// leaves no row and no dangling index entry (the embedded store answers
// an index entry without its row with an error).
func TestAttackEffStoreReplaceAndDiscardLeaveNothingStale(t *testing.T) {
	attackStores(t, func(t *testing.T, s history.Store) {
		ctx := context.Background()
		attackPut(t, s, 7, "genomics", "alice", 5, attackRow("genomics", "alice", 10, "x"), attackRow("genomics", "alice", 11, "y"), attackRow("genomics", "alice", 12, "z"))
		attackPut(t, s, 8, "genomics", "bob", 5, attackRow("genomics", "bob", 11, "bob"))
		attackPut(t, s, 7, "genomics", "alice", 6, attackRow("genomics", "alice", 13, "w"))
		b := history.Batch{Batch: api.Batch{ID: 7, BillingProject: "genomics", User: "alice"}, Version: 4, Timeline: 1}
		if w, err := s.PutBatch(ctx, b, nil, []history.EfficiencyRow{attackRow("genomics", "alice", 10, "old")}); err != nil || w {
			t.Fatalf("an older version: written %v, %v", w, err)
		}
		want := []string{"genomics/bob/11/bob", "genomics/alice/13/w"}
		if got, _ := attackQuery(t, s, history.EfficiencyQuery{BillingProject: "genomics", From: 0, To: 100}, 100); !reflect.DeepEqual(got, want) {
			t.Fatalf("genomics after batch 7 was stored again: %q, want %q", got, want)
		}
		if got, _ := attackQuery(t, s, history.EfficiencyQuery{User: "alice", From: 0, To: 100}, 100); !reflect.DeepEqual(got, want[1:]) {
			t.Fatalf("alice after batch 7 was stored again: %q", got)
		}
		if err := s.Discard(ctx, 7); err != nil {
			t.Fatal(err)
		}
		if got, _ := attackQuery(t, s, history.EfficiencyQuery{BillingProject: "genomics", From: 0, To: 100}, 100); !slices.Equal(got, want[:1]) {
			t.Fatalf("genomics after batch 7 was discarded: %q", got)
		}
		if got, _ := attackQuery(t, s, history.EfficiencyQuery{User: "alice", From: 0, To: 100}, 100); len(got) != 0 {
			t.Fatalf("alice after batch 7 was discarded: %q", got)
		}
	})
}

// TestAttackEffStoreKeepsTheHistograms: a row's histograms come back
// bucket for bucket, the zero bucket and the top one included.
func TestAttackEffStoreKeepsTheHistograms(t *testing.T) {
	attackStores(t, func(t *testing.T, s history.Store) {
		var z efficiency.Summarizer
		for _, a := range []efficiency.Attempt{
			{Day: 5, Group: "g", CPU: 1, Memory: 1 << 30, Seconds: 60, CPUSeconds: 0, PeakMemory: 0},
			{Day: 5, Group: "g", CPU: 1, Memory: 1 << 30, Seconds: 1e-9, CPUSeconds: 60, PeakMemory: 1<<63 - 1},
			{Day: 5, Group: "g", CPU: 1, Memory: 1 << 30, Seconds: 1e6, CPUSeconds: 1e-9, PeakMemory: 1},
		} {
			z.Add(a)
		}
		row := history.EfficiencyRow{BillingProject: "p", User: "u", Day: 5, Summary: z.Summaries()[0].Summary}
		attackPut(t, s, 1, "p", "u", 1, row)
		rows, _, err := s.Efficiency(context.Background(), history.EfficiencyQuery{User: "u", From: 5, To: 5}, 10)
		if err != nil || len(rows) != 1 {
			t.Fatalf("%v %v", rows, err)
		}
		if !reflect.DeepEqual(rows[0].Summary.Cores, row.Summary.Cores) || !reflect.DeepEqual(rows[0].Summary.Peaks, row.Summary.Peaks) {
			t.Fatalf("stored %v %v, read %v %v", row.Summary.Cores, row.Summary.Peaks, rows[0].Summary.Cores, rows[0].Summary.Peaks)
		}
	})
}
