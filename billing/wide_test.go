package billing

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/drover-sched/drover/money"
)

// bigCost is Cost in math/big: the exact product rounded half up,
// saturated.
func bigCost(p Price, start, end int64) money.Amount {
	if end <= start {
		return 0
	}
	n := new(big.Int).Mul(p.Int(), big.NewInt(end-start))
	q := roundDiv(n, costDen)
	if !q.IsInt64() {
		return money.MaxAmount
	}
	return money.Amount(q.Int64())
}

// TestWideMatchesBig: the fixed 256-bit arithmetic of costs and running
// sums gives what math/big gives, for prices from a nano-dollar an hour
// to the largest the API allows and beyond, times from a nanosecond to
// centuries, and sums of thousands of attempts started before and after
// Epoch, added and removed in any order.
func TestWideMatchesBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	randPrice := func() Price {
		switch rng.IntN(3) {
		case 0:
			return PriceOf(money.Rate(rng.Int64N(1e12)))
		case 1:
			return Price{Lo: rng.Uint64()}
		}
		return Price{Hi: rng.Uint64() >> rng.IntN(64), Lo: rng.Uint64()}
	}
	for range 20000 {
		p := randPrice()
		start := Epoch + rng.Int64N(1<<62) - 1<<61
		end := start + rng.Int64N(1<<uint(rng.IntN(62)+1))
		if got, want := Cost(p, start, end), bigCost(p, start, end); got != want {
			t.Fatalf("Cost(%v, %d ns) = %d, math/big says %d", p.Int(), end-start, got, want)
		}
	}
	var r Running
	price, pts := new(big.Int), new(big.Int)
	type att struct {
		p     Price
		start int64
	}
	var live []att
	for i := range 5000 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(live))
			a := live[k]
			live = append(live[:k], live[k+1:]...)
			r.Remove(a.p, a.start)
			price.Sub(price, a.p.Int())
			pts.Sub(pts, new(big.Int).Mul(a.p.Int(), big.NewInt(a.start-Epoch)))
		} else {
			a := att{Price{Hi: rng.Uint64() >> 8, Lo: rng.Uint64()}, Epoch + rng.Int64N(1<<60) - 1<<59}
			live = append(live, a)
			r.Add(a.p, a.start)
			price.Add(price, a.p.Int())
			pts.Add(pts, new(big.Int).Mul(a.p.Int(), big.NewInt(a.start-Epoch)))
		}
		if r.price.big().Cmp(price) != 0 || r.pts.big().Cmp(pts) != 0 || r.Len() != len(live) {
			t.Fatalf("step %d: sums %v %v, math/big %v %v", i, r.price.big(), r.pts.big(), price, pts)
		}
		now := Epoch + 1<<60 + rng.Int64N(1<<40)
		x := new(big.Int).Mul(price, big.NewInt(now-Epoch))
		x.Sub(x, pts)
		want := money.Amount(0)
		if x.Sign() > 0 {
			q := roundDiv(x, costDen)
			want = money.MaxAmount
			if q.IsInt64() {
				want = money.Amount(q.Int64())
			}
		}
		if got := r.Cost(now); got != want {
			t.Fatalf("step %d: running cost %d, math/big %d", i, got, want)
		}
	}
	if (Price{math.MaxUint64, math.MaxUint64}).Rate() != math.MaxInt64 {
		t.Fatal("the largest price does not saturate its rate")
	}
	for _, p := range []Price{{Lo: math.MaxUint64}, {Lo: priceDen/2 - 1}, {Lo: priceDen / 2}, {Hi: 1}, {Hi: 1 << 20, Lo: 12345}} {
		if got, want := p.Rate(), roundDiv(p.Int(), big.NewInt(priceDen)).Int64(); int64(got) != want {
			t.Errorf("%v rounds to %d nano-dollars an hour, want %d", p.Int(), got, want)
		}
	}
}
