package money

import (
	"math"
	"math/bits"
	"time"
)

// MaxRate is the largest Rate; sums of rates saturate at it.
const MaxRate Rate = math.MaxInt64

// Add returns r+s, saturating at ±MaxRate instead of wrapping: the sum of
// what machines cost an hour, checked against a cap, can never pass it by
// overflow.
func (r Rate) Add(s Rate) Rate { return Rate(Amount(r).Add(Amount(s))) }

// Sub returns r-s, saturating as Add does.
func (r Rate) Sub(s Rate) Rate {
	if s == math.MinInt64 {
		return MaxRate
	}
	return r.Add(-s)
}

// Over is what r costs over d: r × d rounded once to the nearest
// nano-dollar (halves up), exact for any rate and duration (the product
// is taken in 128 bits); nothing for a negative rate or duration, and
// MaxAmount past it.
func (r Rate) Over(d time.Duration) Amount {
	if r <= 0 || d <= 0 {
		return 0
	}
	q, ok := mulDivRound(uint64(r), uint64(d), uint64(time.Hour))
	if !ok || q > uint64(MaxAmount) {
		return MaxAmount
	}
	return Amount(q)
}

// Per is r for one of units, given r for scale of them (a machine's
// price for 8000 thousandths of a core, per 1000 of them: a core-hour),
// rounded to the nearest nano-dollar (halves up): for people and for
// estimates. Compare prices per unit with ComparePer, which does not
// round. Zero or fewer units: MaxRate.
func (r Rate) Per(units, scale int64) Rate {
	if units <= 0 {
		return MaxRate
	}
	if r <= 0 || scale <= 0 {
		return 0
	}
	q, ok := mulDivRound(uint64(r), uint64(scale), uint64(units))
	if !ok || q > uint64(MaxRate) {
		return MaxRate
	}
	return Rate(q)
}

// ComparePer compares two prices per unit, a for aUnits and b for bUnits
// (a machine's price for its cores), exactly: a×bUnits against b×aUnits
// in 128 bits, no division. Zero or fewer units is dearer than any price
// (a machine with no cores buys none); two such compare equal. Rates are
// taken as at least zero.
func ComparePer(a Rate, aUnits int64, b Rate, bUnits int64) int {
	switch {
	case aUnits <= 0 && bUnits <= 0:
		return 0
	case aUnits <= 0:
		return 1
	case bUnits <= 0:
		return -1
	}
	ah, al := bits.Mul64(uint64(max(a, 0)), uint64(bUnits))
	bh, bl := bits.Mul64(uint64(max(b, 0)), uint64(aUnits))
	switch {
	case ah != bh:
		return cmpUint(ah, bh)
	default:
		return cmpUint(al, bl)
	}
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// mulDivRound is a×b/d rounded to the nearest (halves up), for d > 0;
// false when the quotient does not fit 64 bits.
func mulDivRound(a, b, d uint64) (uint64, bool) {
	hi, lo := bits.Mul64(a, b)
	if hi >= d {
		return 0, false
	}
	q, rem := bits.Div64(hi, lo, d)
	// rem >= d - rem, without overflow: round half up.
	if rem >= d-rem {
		if q == math.MaxUint64 {
			return 0, false
		}
		q++
	}
	return q, true
}

// Buys is how many units a budget of r an hour buys at price an hour for
// per units (a machine's price for its thousandths of a core), rounded
// down, exactly: r × per / price in 128 bits. Nothing for no budget; a
// price of zero or less, or a quotient past an int64, is math.MaxInt64.
func (r Rate) Buys(price Rate, per int64) int64 {
	if r <= 0 || per <= 0 {
		return 0
	}
	if price <= 0 {
		return math.MaxInt64
	}
	hi, lo := bits.Mul64(uint64(r), uint64(per))
	if hi >= uint64(price) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(price))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// Cent is a hundredth of a dollar, and CentPerHour a hundredth of a
// dollar an hour: what figures for people round to.
const (
	Cent        Amount = 10_000_000
	CentPerHour Rate   = 10_000_000
)

// Round is a rounded to a multiple of unit (halves away from zero), for
// figures people read ($324.64); sums are taken before, never of these.
func (a Amount) Round(unit Amount) Amount { return Amount(roundTo(int64(a), int64(unit))) }

// Round is r rounded to a multiple of unit, as Amount's.
func (r Rate) Round(unit Rate) Rate { return Rate(roundTo(int64(r), int64(unit))) }

func roundTo(v, unit int64) int64 {
	if unit <= 1 {
		return v
	}
	q, rem := v/unit, v%unit
	switch {
	case rem >= 0 && rem >= unit-rem:
		q++
	case rem < 0 && -rem >= unit+rem:
		q--
	}
	if q > math.MaxInt64/unit || q < -math.MaxInt64/unit {
		return v
	}
	return q * unit
}
