// Package spendtrace rebuilds what a billing project's attempts cost over
// time from their records in the API, for tests of spend limits: when the
// cost reached a limit, and how long after that the last attempt stopped.
// It reads what the servers recorded (each attempt's price and its end,
// and its cost, which gives the start it was charged from), not the
// servers' own sums, so a test can check those against it.
package spendtrace

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-sched/drover/api"
)

// Trace is the charged attempts of some batches.
type Trace struct {
	Charges []Charge
}

// Charge is one attempt's price and the time it was charged for.
type Charge struct {
	PerSecond  float64
	Start, End time.Time
}

// Read collects every ended attempt with a price of the batches; an
// attempt still running is an error (read once the batches are stopped).
func Read(ctx context.Context, c *api.Client, batches ...int64) (Trace, error) {
	var tr Trace
	for _, id := range batches {
		jobs, err := c.AllJobs(ctx, id, "")
		if err != nil {
			return tr, fmt.Errorf("jobs of batch %d: %w", id, err)
		}
		for _, j := range jobs {
			for _, a := range j.Attempts {
				if a.StartTime != nil && a.EndTime == nil {
					return tr, fmt.Errorf("job %d/%d attempt %d still runs", id, j.JobID, a.Attempt)
				}
				if a.Cost == nil || a.EndTime == nil || a.PricePerHour <= 0 {
					continue
				}
				ps := a.PricePerHour.Dollars() / 3600
				d := time.Duration(a.Cost.Dollars() / ps * float64(time.Second))
				tr.Charges = append(tr.Charges, Charge{PerSecond: ps, Start: a.EndTime.Add(-d), End: *a.EndTime})
			}
		}
	}
	return tr, nil
}

// At is what the attempts had cost by t.
func (tr Trace) At(t time.Time) float64 {
	var sum float64
	for _, c := range tr.Charges {
		end := c.End
		if t.Before(end) {
			end = t
		}
		if end.After(c.Start) {
			sum += c.PerSecond * end.Sub(c.Start).Seconds()
		}
	}
	return sum
}

// Crossing is when the cost first reached limit, to a millisecond (zero:
// never). The attempts' costs are rebuilt in floating point from amounts
// the servers summed exactly, so a project stopped exactly at its limit
// can sum to a hair below it: a cost within a billionth of the limit has
// reached it.
func (tr Trace) Crossing(limit float64) time.Time {
	limit -= limit * 1e-9
	var lo, hi time.Time
	for _, c := range tr.Charges {
		if lo.IsZero() || c.Start.Before(lo) {
			lo = c.Start
		}
		if c.End.After(hi) {
			hi = c.End
		}
	}
	if lo.IsZero() || tr.At(hi) < limit {
		return time.Time{}
	}
	for hi.Sub(lo) > time.Millisecond {
		mid := lo.Add(hi.Sub(lo) / 2)
		if tr.At(mid) >= limit {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// LastEnd is when the last attempt stopped.
func (tr Trace) LastEnd() time.Time {
	var last time.Time
	for _, c := range tr.Charges {
		if c.End.After(last) {
			last = c.End
		}
	}
	return last
}

// ShortOfLimit is how far below its limit a project may be stopped (see
// Held).
const ShortOfLimit = 0.05

// Held checks a project's final cost against its limit: at most the
// fraction over of the limit past it, and the last attempt stopped within
// within of the moment the attempts' cost reached the limit. It returns
// what it measured, for a test's log, and what is wrong, or nil.
//
// A project may also stop a little short of its limit: the leader
// counts an attempt as running, and costing, until its worker reports
// its end, so attempts that ended but were not reported yet make the
// leader stop the project early by what they would have cost meanwhile
// (on a loaded machine, a few tenths of a second of a worker's cores).
// Stopping within ShortOfLimit of the limit is holding it; further short
// of it is an error.
func (tr Trace) Held(limit, cost, over float64, within time.Duration) (measured string, err error) {
	crossed := tr.Crossing(limit)
	if crossed.IsZero() {
		if reached := tr.At(tr.LastEnd()); reached >= (1-ShortOfLimit)*limit {
			return fmt.Sprintf("limit $%g: stopped at $%.2f (final cost $%.2f), %.2f%% short of it: attempts that had ended were still counted as running",
				limit, reached, cost, 100*(1-reached/limit)), nil
		}
		return "", fmt.Errorf("the project never reached its $%g limit (cost $%.2f): more than %g%% short of it", limit, cost, 100*ShortOfLimit)
	}
	late := tr.LastEnd().Sub(crossed).Round(time.Millisecond)
	measured = fmt.Sprintf("limit $%g: final cost $%.2f (%.1f%% over); the last of %d attempts stopped %s after the crossing",
		limit, cost, 100*(cost/limit-1), len(tr.Charges), late)
	var errs []error
	if cost > (1+over)*limit {
		errs = append(errs, fmt.Errorf("the project spent $%.2f against a $%g limit: more than %g%% over", cost, limit, 100*over))
	}
	if late > within {
		errs = append(errs, fmt.Errorf("the last attempt stopped %s after the project crossed its limit; want within %s", late, within))
	}
	return measured, errors.Join(errs...)
}
