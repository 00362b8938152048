package billing

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
)

// running adds an attempt of price perHour that started at start to b,
// as the state does.
func running(b Budget, perHour money.Rate, start int64) Budget {
	b.Run.Add(PriceOf(perHour), start)
	return b
}

// TestBudgetCostAndReached: a project's cost is its ended attempts plus
// its running ones up to now, and it has reached its limit from the
// moment that cost equals the limit; without a limit it never does.
func TestBudgetCostAndReached(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	// $2 accrued; two running attempts at $3600 and $1800 an hour ($1.50
	// a second together), started at t0 and t0+2s.
	b := running(running(Budget{Limit: d(10), Accrued: d(2)}, r(3600), t0), r(1800), t0+2e9)
	for _, c := range []struct {
		at      int64
		cost    float64
		reached bool
	}{
		{t0 - 1e9, 2, false}, // before either started
		{t0 + 2e9, 4, false}, // the first for 2 s
		{t0 + 4e9, 7, false}, // then both for 2 s
		{t0 + 6e9, 10, true}, // exactly the limit
		{t0 + 6e9 - 1e6, 9.9985, false},
	} {
		if got := b.Cost(c.at); got != d(c.cost) || b.Reached(c.at) != c.reached {
			t.Errorf("at t0%+.3fs: cost %v reached %v, want %v %v", float64(c.at-t0)/1e9, got, b.Reached(c.at), c.cost, c.reached)
		}
	}
	b.Limit = 0
	if b.Reached(t0 + int64(time.Hour)) {
		t.Fatal("a project without a limit reached it")
	}
}

// TestBudgetCrossing: the time Crossing gives is the first at which
// Reached holds (to the nanosecond), for budgets of every scale the state
// can hold; with nothing running it is never, or now if the ended
// attempts reached the limit already.
func TestBudgetCrossing(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 5))
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC).UnixNano()
	crossed := 0
	for i := 0; i < 2000; i++ {
		limit := d(math.Pow(10, rng.Float64()*9-2)) // 1 cent to $10M
		b := Budget{Limit: limit, Accrued: money.Amount(float64(limit) * rng.Float64())}
		for k := rng.IntN(50) + 1; k > 0; k-- {
			price := r(math.Pow(10, rng.Float64()*6-2)) // 1 cent to $10,000 an hour
			b = running(b, price, now-int64(rng.Float64()*float64(time.Hour)))
		}
		at, ok := b.Crossing()
		if !ok {
			if b.Cost(now+int64(1e6*time.Hour)) >= limit {
				t.Fatalf("%+v: no crossing, but it reaches its limit within a million hours", b)
			}
			continue
		}
		crossed++
		if !b.Reached(at) || b.Reached(at-1) {
			t.Fatalf("%+v: crossing at now%+v: reached there %v, a nanosecond before %v", b, time.Duration(at-now), b.Reached(at), b.Reached(at-1))
		}
	}
	if crossed < 1000 {
		t.Fatalf("only %d of 2000 budgets cross their limit", crossed)
	}
	if _, ok := (Budget{Limit: d(5), Accrued: d(4)}).Crossing(); ok {
		t.Fatal("a project with nothing running crosses its limit")
	}
	if at, ok := (Budget{Limit: d(5), Accrued: d(5)}).Crossing(); !ok || at > now {
		t.Fatalf("a project that reached its limit crosses it at %d, %v", at, ok)
	}
	if _, ok := running(Budget{Accrued: d(5)}, r(100), now).Crossing(); ok {
		t.Fatal("a project without a limit crosses it")
	}
	// A price so small that it would take past the year 2100.
	if _, ok := running(Budget{Limit: d(1e9)}, 1, now).Crossing(); ok {
		t.Fatal("a crossing beyond what a time holds")
	}
}

// TestLimitReason: the sentence shows amounts as the pages do, so a
// $0.001 limit reads "$0.001" and not "$0.00".
func TestLimitReason(t *testing.T) {
	got := LimitReason("lab", d(16), d(16.012))
	if !strings.Contains(got, "billing project lab reached its spend limit of $16.00 (spent $16.01)") {
		t.Fatalf("reason %q", got)
	}
	if got := LimitReason("lab", money.Dollar/1000, 1_430_000); got != "billing project lab reached its spend limit of $0.001 (spent $0.0014)" {
		t.Fatalf("reason %q", got)
	}
}
