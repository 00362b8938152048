package billing

import (
	"fmt"
	"math"
	"time"
)

// Epoch is where the hours of a Budget's sums start: recent, so the
// difference that gives a project's live cost loses no precision.
var Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// Hours converts a time (unix ns) to hours since Epoch.
func Hours(t int64) float64 { return float64(t-Epoch) / 3600e9 }

// Budget is a billing project's spend limit and what its attempts have
// cost, kept as sums so its cost at any time is O(1): Accrued for the
// attempts that ended, and for those running the sum of their prices and
// of price × start. The state keeps these sums as attempts start and end;
// the scheduler gets a copy for each round.
type Budget struct {
	Limit         float64 // dollars (0: none)
	Accrued       float64 // dollars, the ended attempts
	RunPrice      float64 // dollars an hour, the running attempts
	RunPriceStart float64 // Σ price × start (Hours) of the running attempts
}

// Cost is what the project has cost by now: its ended attempts, and its
// running ones from their starts to now.
func (b Budget) Cost(now int64) float64 {
	return b.Accrued + max(b.RunPrice*Hours(now)-b.RunPriceStart, 0)
}

// Reached reports whether the project has spent its limit by now. It is
// the one rule of spend limits: a project that has reached its limit may
// start no new attempt (the scheduler's rounds, the re-check as a plan is
// applied, a job's own machine), its open batches are cancelled, and its
// new work is refused with 402.
func (b Budget) Reached(now int64) bool {
	return b.Limit > 0 && b.Cost(now) >= b.Limit
}

// maxCrossingHours bounds the crossings Crossing computes (about a
// century from Epoch): past it, a time no longer fits an int64 of
// nanoseconds, and no server will be waiting for it.
const maxCrossingHours = 1e6

// Crossing returns the first time at which Reached holds if the attempts
// running now keep running at their prices: the leader stops the
// project's work then, instead of waiting for a periodic check. ok is
// false when it never will (no limit, or nothing running that costs);
// a project that reached its limit already may get any time up to now.
// Starts and ends move it: an attempt that starts brings it closer, one
// that ends puts it off.
func (b Budget) Crossing() (at int64, ok bool) {
	if b.Limit <= 0 {
		return 0, false
	}
	if b.RunPrice <= 0 {
		// Nothing running: reached already, or never at these prices.
		if b.Accrued >= b.Limit {
			return math.MinInt64, true
		}
		return 0, false
	}
	// Accrued + RunPrice×h - RunPriceStart = Limit.
	h := (b.Limit - b.Accrued + b.RunPriceStart) / b.RunPrice
	if !(h < maxCrossingHours) {
		return 0, false
	}
	h = max(h, -maxCrossingHours)
	t := Epoch + int64(math.Ceil(h*3600e9))
	// The float sums round: step past the last nanosecond that does not
	// reach the limit, so Reached(at) holds.
	for step := int64(1); !b.Reached(t); step *= 2 {
		t += step
	}
	return t, true
}

// LimitReason says that a project reached its spend limit, in the words
// batch cancellations and waiting jobs give.
func LimitReason(project string, limit, spent float64) string {
	return fmt.Sprintf("billing project %s reached its spend limit of $%.2f (spent $%.2f)", project, limit, spent)
}
