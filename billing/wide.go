package billing

import (
	"math"
	"math/big"
	"math/bits"
)

// wide is a 256-bit two's-complement integer, little-endian words: the
// sums of billing.Running and the products a cost is divided from, with
// no allocation (math/big allocates; an attempt's start and end each
// touch these). The bounds that keep every value inside it are on Price
// and Running.
type wide [4]uint64

func wideOf(p Price) wide { return wide{p.Lo, p.Hi} }

func (a wide) add(b wide) wide {
	var c uint64
	a[0], c = bits.Add64(a[0], b[0], 0)
	a[1], c = bits.Add64(a[1], b[1], c)
	a[2], c = bits.Add64(a[2], b[2], c)
	a[3], _ = bits.Add64(a[3], b[3], c)
	return a
}

func (a wide) sub(b wide) wide {
	var c uint64
	a[0], c = bits.Sub64(a[0], b[0], 0)
	a[1], c = bits.Sub64(a[1], b[1], c)
	a[2], c = bits.Sub64(a[2], b[2], c)
	a[3], _ = bits.Sub64(a[3], b[3], c)
	return a
}

func (a wide) neg() wide { return wide{}.sub(a) }

func (a wide) negative() bool { return a[3]>>63 != 0 }

func (a wide) isZero() bool { return a == wide{} }

// len is the number of words up to the highest that is not zero.
func (a wide) len() int {
	for i := 3; i >= 0; i-- {
		if a[i] != 0 {
			return i + 1
		}
	}
	return 0
}

// mul is a × v for a signed v; the caller keeps |a| × |v| below 2^255.
func (a wide) mul(v int64) wide {
	if v >= 0 && !a.negative() {
		return a.mulU(uint64(v))
	}
	neg := a.negative() != (v < 0)
	if a.negative() {
		a = a.neg()
	}
	u := uint64(v)
	if v < 0 {
		u = uint64(-v) // MinInt64 wraps to itself: its uint64 is right
	}
	out := a.mulU(u)
	if neg {
		out = out.neg()
	}
	return out
}

// mulU is a × u for a non-negative a.
func (a wide) mulU(u uint64) wide {
	var out wide
	var carry uint64
	n := a.len()
	for i := 0; i < n; i++ {
		hi, lo := bits.Mul64(a[i], u)
		var c uint64
		out[i], c = bits.Add64(lo, carry, 0)
		carry = hi + c
	}
	if n < 4 {
		out[n] = carry
	}
	return out
}

// product is x × y × z for words x, y and z: below 2^192, in a wide.
func product(x, y, z uint64) wide {
	hi, lo := bits.Mul64(x, y)
	return wide{lo, hi}.mulU(z)
}

// costDenHi is costDen without its factor 2^30: 1000 × 3.6e12, one word.
const costDenHi = 1000 * 3_600_000_000_000

// amount is a/costDen nano-dollars rounded half up, for a > 0, saturating
// at math.MaxInt64 (0 for a <= 0): floor((a + costDen/2) / 2^30 / costDenHi).
func (a wide) amount() int64 {
	if a.negative() || a.isZero() {
		return 0
	}
	half := uint64(costDenHi / 2) // costDen/2 = half × 2^30
	a = a.add(wide{half << 30, half >> 34})
	// Shift right by 30.
	for i := 0; i < 3; i++ {
		a[i] = a[i]>>30 | a[i+1]<<34
	}
	a[3] >>= 30
	var q wide
	var r uint64
	for i := a.len() - 1; i >= 0; i-- {
		q[i], r = bits.Div64(r, a[i], costDenHi)
	}
	if q[1] != 0 || q[2] != 0 || q[3] != 0 || q[0] > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q[0])
}

// big is a as a big.Int, for the rare exact divisions (Crossing).
func (a wide) big() *big.Int {
	neg := a.negative()
	if neg {
		a = a.neg()
	}
	v := new(big.Int)
	for i := 3; i >= 0; i-- {
		v.Lsh(v, 64)
		v.Or(v, new(big.Int).SetUint64(a[i]))
	}
	if neg {
		v.Neg(v)
	}
	return v
}
