package history

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestSLORunOf: what a finished batch counts as in the SLO report.
func TestSLORunOf(t *testing.T) {
	done := time.Unix(1_800_000_000, 0)
	met, missed := true, false
	base := api.Batch{ID: 4, Name: "align-2026-11-29", BillingProject: "gen", State: api.BatchComplete, TimeCompleted: &done,
		SLOSeconds: 600, SLOMet: &met, Queue: "org/gen/tier1", NJobs: 10}
	cases := []struct {
		name           string
		edit           func(b *api.Batch)
		ok, run, meets bool
		workflow       string
	}{
		{"met", func(*api.Batch) {}, true, true, true, "align-2026-11-29"},
		{"named by its workflow attribute", func(b *api.Batch) { b.Attributes = map[string]string{"workflow": "align"} }, true, true, true, "align"},
		{"missed", func(b *api.Batch) { b.SLOMet = &missed }, true, true, false, "align-2026-11-29"},
		{"cancelled by a person", func(b *api.Batch) { b.Cancelled, b.NCancelled = true, 3 }, true, false, true, "align-2026-11-29"},
		{"cancelled once every job had ended: the run stands", func(b *api.Batch) { b.Cancelled = true }, true, true, true, "align-2026-11-29"},
		{"cancelled by its own cancel_after_n_failures: a failed run", func(b *api.Batch) {
			b.Cancelled, b.CancelAfterNFailures, b.NFailed, b.NCancelled, b.SLOMet = true, 2, 2, 5, &missed
		}, true, true, false, "align-2026-11-29"},
		{"no SLO", func(b *api.Batch) { b.SLOMet = nil }, false, false, false, ""},
		{"not complete", func(b *api.Batch) { b.State, b.TimeCompleted = api.BatchRunning, nil }, false, false, false, ""},
	}
	for _, c := range cases {
		b := base
		c.edit(&b)
		r, ok := SLORunOf(&b)
		if ok != c.ok || (ok && (r.Cancelled == c.run || r.Met != c.meets || r.Workflow != c.workflow || r.Batch != 4 || r.Completed != done.Unix())) {
			t.Errorf("%s: %+v, %t", c.name, r, ok)
		}
	}
}
