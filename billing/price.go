package billing

import (
	"math"
	"math/big"
	"math/bits"

	"github.com/drover-sched/drover/money"
)

// priceDen is what a Price's unit divides a nano-dollar an hour by: 1000
// (cores in thousandths) × 2^30 (memory in bytes, priced by the GiB), so
// that a rate in nano-dollars per unit-hour times any quantity is an
// integer number of units and an attempt's price is exact.
const priceDen = 1000 << 30

// costDen divides a Price times nanoseconds into nano-dollars: priceDen ×
// 3.6e12 ns an hour (costDenHi × 2^30).
var costDen = new(big.Int).Mul(big.NewInt(priceDen), big.NewInt(3_600_000_000_000))

// Price is what holding something costs an hour, exactly: an integer
// count of a nano-dollar an hour divided by 1000 × 2^30, held in 128 bits
// (Hi, Lo). No price rounds: only what it comes to over a time does
// (Cost), once.
//
// It cannot overflow for what the API accepts: a rate is at most
// MaxPricePerUnitHr (10^15 nano-dollars, under 2^50); cores at most
// api.MaxCPU (4096, 2^22 thousandths) and GPUs api.MaxGPUs (64) give
// terms under 2^50 × 2^22 × 2^30 = 2^102 and 2^50 × 2^6 × 2^40 = 2^96;
// memory in bytes (an int64, under 2^63) times 1000 gives a term under
// 2^50 × 2^63 × 2^10 = 2^123. Four terms sum under 2^125. Book.Price
// saturates at 2^128-1 all the same.
type Price struct{ Hi, Lo uint64 }

// PriceOf is the exact Price of a rate held once (one unit).
func PriceOf(r money.Rate) Price {
	if r <= 0 {
		return Price{}
	}
	hi, lo := bits.Mul64(uint64(r), priceDen)
	return Price{hi, lo}
}

// priceOfWide packs a non-negative wide into a Price, saturating.
func priceOfWide(v wide) Price {
	if v.negative() {
		return Price{}
	}
	if v[2] != 0 || v[3] != 0 {
		return Price{math.MaxUint64, math.MaxUint64}
	}
	return Price{Hi: v[1], Lo: v[0]}
}

// Int is p as a big.Int (a fresh one).
func (p Price) Int() *big.Int {
	v := new(big.Int).SetUint64(p.Hi)
	v.Lsh(v, 64)
	return v.Or(v, new(big.Int).SetUint64(p.Lo))
}

// IsZero reports whether p costs nothing.
func (p Price) IsZero() bool { return p.Hi == 0 && p.Lo == 0 }

// Rate is p rounded to the nano-dollar an hour (halves up), for display.
func (p Price) Rate() money.Rate {
	if p.Hi == 0 {
		q := p.Lo / priceDen
		if p.Lo%priceDen >= priceDen/2 {
			q++
		}
		return money.Rate(q) // below 2^64 / priceDen
	}
	q := roundDiv(p.Int(), big.NewInt(priceDen))
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return money.Rate(q.Int64())
}

// roundDiv is n/d rounded half up, for n >= 0 and d > 0.
func roundDiv(n, d *big.Int) *big.Int {
	q := new(big.Int).Lsh(n, 1)
	q.Add(q, d)
	return q.Quo(q, new(big.Int).Lsh(d, 1))
}

// Cost is what perHour costs from start to end (unix ns; nothing when end
// is not after start): the exact product rounded once, halves up, to the
// nano-dollar. The product of a Price (under 2^128) and a duration (under
// 2^63) fits a wide.
func Cost(perHour Price, start, end int64) money.Amount {
	if end <= start || perHour.IsZero() {
		return 0
	}
	d := uint64(end) - uint64(start)
	if d > math.MaxInt64 {
		d = math.MaxInt64
	}
	return money.Amount(wideOf(perHour).mul(int64(d)).amount())
}
