package ui

import (
	"testing"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// TestBillingTotalIsTheExactSumOfTheDays: the billing page's "in these
// days" total is the exact sum of the by-day rows, ended and running
// (today's row has the running attempts' cost), formatted once: three
// days of 4 micro-dollars and today's 4 running read $0.000016, and three
// days of $1.004 read $3.01 where adding what the rows show would say
// $3.00.
func TestBillingTotalIsTheExactSumOfTheDays(t *testing.T) {
	sum := funcs["sumCost"].(func(*api.ProjectCost) money.Amount)
	small := &api.ProjectCost{Rows: []api.CostRow{
		{Day: "2026-11-22", Cost: 4 * money.Microdollar}, {Day: "2026-11-23", Cost: 4 * money.Microdollar},
		{Day: "2026-11-24", Cost: 4 * money.Microdollar, Running: 4 * money.Microdollar},
	}}
	if got := dollars(sum(small)); got != "$0.000016" {
		t.Errorf("total of the small days: %s, want $0.000016", got)
	}
	dollar := 1004 * money.Dollar / 1000
	large := &api.ProjectCost{Rows: []api.CostRow{{Day: "2026-11-22", Cost: dollar}, {Day: "2026-11-23", Cost: dollar}, {Day: "2026-11-24", Running: dollar}}}
	if got := dollars(sum(large)); got != "$3.01" {
		t.Errorf("total of three days of $1.004: %s, want $3.01", got)
	}
	if got := sum(nil); got != 0 {
		t.Errorf("no report: %s", got)
	}
}
