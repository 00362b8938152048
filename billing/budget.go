package billing

import (
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/drover-sched/drover/money"
)

// Epoch is where the times of a Running's sums start: recent, so the sums
// stay small.
var Epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// Running is what a set of running attempts costs, kept as two exact sums
// so that its cost at any time is O(1) and the same whatever order the
// attempts started and ended in: Σ price, and Σ price × (start - Epoch).
// It holds no pointers (a count and two fixed 256-bit integers), so a
// copy handed to a reader (the scheduler's round) stays as it was while
// the state's own changes.
//
// The sums fit: a Price is below 2^128 and there are fewer than 2^63
// attempts, so Σ price is below 2^191; a start is within 2^63 ns of
// Epoch, so Σ price × (start - Epoch) is below 2^254, and so is Σ price ×
// (now - Epoch) in Cost.
type Running struct {
	n          int
	price, pts wide
}

// Add puts an attempt of price p that started at start in r.
func (r *Running) Add(p Price, start int64) {
	r.n++
	r.price = r.price.add(wideOf(p))
	r.pts = r.pts.add(wideOf(p).mul(start - Epoch))
}

// Remove takes out of r an attempt Add put in.
func (r *Running) Remove(p Price, start int64) {
	r.n--
	if r.n == 0 {
		*r = Running{}
		return
	}
	r.price = r.price.sub(wideOf(p))
	r.pts = r.pts.sub(wideOf(p).mul(start - Epoch))
}

// Len is the number of attempts in r.
func (r Running) Len() int { return r.n }

// Costs reports whether anything in r costs money.
func (r Running) Costs() bool { return !r.price.isZero() }

// Cost is what r's attempts have cost from their starts to now, the exact
// sum rounded once (halves up) to the nano-dollar.
func (r Running) Cost(now int64) money.Amount {
	if !r.Costs() {
		return 0
	}
	return money.Amount(r.price.mul(now - Epoch).sub(r.pts).amount())
}

// Equal reports whether r and o hold the same sums (the invariant checks
// compare the state's sums with its charges').
func (r Running) Equal(o Running) bool { return r == o }

// Budget is a billing project's spend limit and what its attempts have
// cost: Accrued for the attempts that ended, and Run for those running.
// The state keeps these as attempts start and end; the scheduler gets a
// copy for each round.
type Budget struct {
	Limit   money.Amount // 0: none
	Accrued money.Amount // the ended attempts
	Run     Running      // the running attempts
}

// Cost is what the project has cost by now: its ended attempts, and its
// running ones from their starts to now.
func (b Budget) Cost(now int64) money.Amount {
	return b.Accrued.Add(b.Run.Cost(now))
}

// Reached reports whether the project has spent its limit by now. It is
// the one rule of spend limits: a project that has reached its limit may
// start no new attempt (the scheduler's rounds, the re-check as a plan is
// applied, a job's own machine), its open batches are cancelled, and its
// new work is refused with 402.
func (b Budget) Reached(now int64) bool {
	return b.Limit > 0 && b.Cost(now) >= b.Limit
}

// Crossing returns the first time at which Reached holds if the attempts
// running now keep running at their prices: the leader stops the
// project's work then, instead of waiting for a periodic check. ok is
// false when it never will (no limit, nothing running that costs, or not
// within an int64 of nanoseconds); a project that reached its limit
// already gets math.MinInt64. Starts and ends move it: an attempt that
// starts brings it closer, one that ends puts it off.
func (b Budget) Crossing() (at int64, ok bool) {
	if b.Limit <= 0 {
		return 0, false
	}
	k := int64(b.Limit) - int64(b.Accrued)
	if k <= 0 {
		return math.MinInt64, true
	}
	if !b.Run.Costs() {
		return 0, false
	}
	// Run.Cost(t) >= k, Cost rounding halves up, holds when the exact
	// Σ price × (t - start) >= (k - 1/2) × costDen: t - Epoch >=
	// ((2k-1) × costDen / 2 + Σ price × (start - Epoch)) / Σ price.
	need := new(big.Int).Mul(big.NewInt(2*k-1), costDen)
	need.Add(need, big.NewInt(1))
	need.Rsh(need, 1) // ceil((2k-1) × costDen / 2)
	need.Add(need, b.Run.pts.big())
	h := ceilDiv(need, b.Run.price.big())
	h.Add(h, big.NewInt(Epoch))
	if !h.IsInt64() {
		if h.Sign() < 0 {
			return math.MinInt64, true
		}
		return 0, false
	}
	return h.Int64(), true
}

// ceilDiv is n/d rounded up, for d > 0.
func ceilDiv(n, d *big.Int) *big.Int {
	q, m := new(big.Int).QuoRem(n, d, new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// LimitReason says that a project reached its spend limit, in the words
// batch cancellations and waiting jobs give, with amounts as every page
// shows them (money.Amount.Display): a $0.001 limit reads "$0.001".
func LimitReason(project string, limit, spent money.Amount) string {
	return fmt.Sprintf("billing project %s reached its spend limit of %s (spent %s)", project, limit.Display(), spent.Display())
}
