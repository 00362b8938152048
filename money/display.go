package money

import (
	"math/big"
	"strconv"
	"strings"
)

// Display is a for people, as every page, command and sentence shows an
// amount: to the cent from a dollar up ("$1,234.56"), and below a dollar
// with as many more places as give it two significant digits ("$0.50",
// "$0.014", "$0.000043", "$0.001"), so that no amount but zero reads
// "$0.00" and what a short attempt cost is seen. It rounds once, halves
// away from zero, from the exact amount: show a total by formatting the
// exact sum, never by adding what Display printed. An Amount counts
// nano-dollars, so nine places show any amount but zero; below a
// nano-dollar there is none to show.
func (a Amount) Display() string { return display(int64(a), 2) }

// Display is r for people, without the unit of time (add "/h"): to a
// hundredth of a cent ("$0.0353", "$9.2150"), and below that with as many
// more places as give it two significant digits ("$0.000012"), rounded
// as Amount's.
func (r Rate) Display() string { return display(int64(r), 4) }

// Times is r times x (what a unit costs an hour times the units held:
// 0.25 cores at $0.1412 a core-hour), the exact product rounded once to
// the nano-dollar an hour, halves away from zero, saturating at ±MaxRate.
func (r Rate) Times(x *big.Rat) Rate {
	p := new(big.Rat).Mul(x, new(big.Rat).SetInt64(int64(r)))
	n := nearest(p)
	if !n.IsInt64() {
		if n.Sign() < 0 {
			return -MaxRate
		}
		return MaxRate
	}
	return Rate(n.Int64())
}

// nearest is the integer nearest to r, halves away from zero.
func nearest(r *big.Rat) *big.Int {
	if r.IsInt() {
		return new(big.Int).Set(r.Num())
	}
	// num/den + 1/2 away from zero, truncated: (2|num| + den) / 2den.
	q := new(big.Int).Abs(r.Num())
	q.Lsh(q, 1).Add(q, r.Denom())
	q.Quo(q, new(big.Int).Lsh(r.Denom(), 1))
	if r.Sign() < 0 {
		q.Neg(q)
	}
	return q
}

// display prints v nano-dollars with at least minPlaces decimal places,
// and more (up to all nine) while fewer than two significant digits show;
// the places past minPlaces lose their trailing zeros.
func display(v int64, minPlaces int) string {
	u := uint64(v)
	if v < 0 {
		u = uint64(-v) // MinInt64 wraps to itself: its uint64 is right
	}
	p, q := minPlaces, uint64(0)
	for ; u != 0; p++ {
		// u rounded to p places, halves up (away from zero: u is the
		// magnitude), counted in units of 10^-p dollars. u is at most
		// 2^63, so u + unit/2 cannot overflow.
		unit := pow10(places - p)
		if q = (u + unit/2) / unit; q >= 10 || p == places {
			break
		}
	}
	scale := pow10(p)
	whole, frac := q/scale, q%scale
	s := "$" + thousands(whole)
	if p > 0 {
		f := strconv.FormatUint(frac, 10)
		f = strings.Repeat("0", p-len(f)) + f
		// Past the places always shown, trailing zeros say nothing:
		// "$0.001", not "$0.0010".
		f = f[:minPlaces] + strings.TrimRight(f[minPlaces:], "0")
		s += "." + f
	}
	if v < 0 {
		s = "-" + s
	}
	return s
}

// pow10 is 10^n for 0 <= n <= 19.
func pow10(n int) uint64 {
	r := uint64(1)
	for range n {
		r *= 10
	}
	return r
}

// thousands prints n with a comma between each three digits.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
