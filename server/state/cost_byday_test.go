package state

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
)

// TestCostByDayCountsRunningAttemptsToday: the report by day has what the
// running attempts have cost up to now on now's day, so a project whose
// every attempt runs today costs something today (the billing page said
// "in these days $0.01" of one), and its days add up to what the project
// has cost; an attempt that ends moves its cost from running to the day
// it ended; a span without today has no running cost.
func TestCostByDayCountsRunningAttemptsToday(t *testing.T) {
	h := newHarness(t)
	h.Must(&SetRates{Now: h.Tick(), Rates: []RateEntry{{Resource: "compute", Price: 3600 * money.DollarPerHour}}}) // $1 a core-second
	inst := h.Activate("w", 8, 32)
	sp := spec("j", 2)
	sp.CPUMilli = 1000
	b := h.CreateBatch(entry(1, 2, sp))
	start := h.Tick()
	h.Must(&Plan{Now: start, Placements: h.Planner(h.S, start), Reserve: true})
	h.Must(&Events{Now: start, Events: []Event{
		{Instance: inst, Batch: b, Job: 1, Attempt: 1, Started: true, Start: start},
		{Instance: inst, Batch: b, Job: 2, Attempt: 1, Started: true, Start: start},
	}})
	today := int32(start / (24 * 3600e9))

	// Nothing has ended: every cent is running, today.
	now := time.Unix(0, start).Add(10 * time.Second)
	days := h.S.CostByDayAt("default", today-1, today, now)
	if len(days) != 1 || days[0].Day != today || days[0].Cost != 0 || days[0].Running != 20*money.Dollar {
		t.Fatalf("two running attempts for 10 s at $1 a second, by day: %+v, want today $0 ended and $20 running", days)
	}
	if c := h.S.ProjectCost("default", now); days[0].Cost+days[0].Running != c {
		t.Fatalf("the days add up to %v; the project has cost %v", days[0].Cost+days[0].Running, c)
	}
	if days := h.S.CostByDay("default", today-1, today); len(days) != 0 {
		t.Fatalf("CostByDay counts the ended attempts only: %+v", days)
	}

	// Job 1 ends after 4 s: $4 ended today, job 2's $10 running.
	end := start + int64(4*time.Second)
	h.Must(&Events{Now: end, Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeSuccess, Start: start, End: end}}})
	days = h.S.CostByDayAt("default", today-1, today, now)
	if len(days) != 1 || days[0].Cost != 4*money.Dollar || days[0].Running != 10*money.Dollar {
		t.Fatalf("by day after job 1 ended: %+v, want today $4 ended and $10 running", days)
	}

	// Read tomorrow: job 1's $4 stays on the day it ended, job 2's cost
	// so far is on tomorrow's row.
	tomorrow := time.Unix(0, start).Add(24 * time.Hour)
	days = h.S.CostByDayAt("default", today, today+1, tomorrow)
	running := h.S.ProjectCost("default", tomorrow) - 4*money.Dollar
	if len(days) != 2 || days[0].Day != today || days[0].Cost != 4*money.Dollar || days[0].Running != 0 ||
		days[1].Day != today+1 || days[1].Cost != 0 || days[1].Running != running {
		t.Fatalf("by day, read tomorrow: %+v, want $4 ended today and %v running tomorrow", days, running)
	}
	// A span that ends before the day of the read has nothing running.
	if days := h.S.CostByDayAt("default", today-1, today, tomorrow); len(days) != 1 || days[0].Running != 0 {
		t.Fatalf("by day up to yesterday: %+v, want no running cost", days)
	}
}
