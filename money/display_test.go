package money

import (
	"math"
	"math/big"
	"testing"
)

// TestDisplayShowsEveryAmountButZeroAsNonZero: from a dollar up an amount
// reads to the cent; below it, with two significant digits, so what a
// short attempt cost (43 micro-dollars) and a $0.001 spend limit read as
// themselves and not "$0.00"; only zero does.
func TestDisplayShowsEveryAmountButZeroAsNonZero(t *testing.T) {
	for _, c := range []struct {
		a    Amount
		want string
	}{
		{0, "$0.00"},
		{Dollar, "$1.00"},
		{1234*Dollar + 56*Cent, "$1,234.56"},
		{1234*Dollar + 56*Cent + Cent/2, "$1,234.57"}, // halves away from zero
		{1234*Dollar + 56*Cent + Cent/2 - 1, "$1,234.56"},
		{1_000_000 * Dollar, "$1,000,000.00"},
		{Dollar / 2, "$0.50"},
		{Cent, "$0.01"},
		{Cent / 2, "$0.005"},
		{Cent/2 - 1, "$0.005"},          // 0.004999999: two significant digits, 0.0050
		{14 * Cent / 10, "$0.014"},      // not "$0.01"
		{Microdollar, "$0.000001"},      // one micro-dollar
		{43 * Microdollar, "$0.000043"}, // the CLI's example
		{43_499, "$0.000043"},
		{43_500, "$0.000044"},
		{Dollar / 1000, "$0.001"}, // a $0.001 spend limit: no trailing zero
		{999_999_999, "$1.00"},    // rounds up past a dollar: cents
		{99_950_000, "$0.10"},     // rounds up to two digits at the cents
		{34, "$0.000000034"},      // a GiB-second at $0.000123 a GiB-hour
		{Nanodollar, "$0.000000001"},
		{-150 * Cent, "-$1.50"},
		{-43 * Microdollar, "-$0.000043"},
		{MaxAmount, "$9,223,372,036.85"},
		{math.MinInt64, "-$9,223,372,036.85"},
	} {
		if got := c.a.Display(); got != c.want {
			t.Errorf("Amount(%d).Display() = %s, want %s", int64(c.a), got, c.want)
		}
	}
}

// TestRateDisplay: a rate reads to a hundredth of a cent an hour, and
// below it with two significant digits.
func TestRateDisplay(t *testing.T) {
	for _, c := range []struct {
		r    Rate
		want string
	}{
		{0, "$0.0000"},
		{DollarPerHour * 9215 / 1000, "$9.2150"},
		{35_300_000, "$0.0353"},
		{141_200_000, "$0.1412"},
		{12_000, "$0.000012"},
		{12_345, "$0.000012"},
		{123_000, "$0.00012"},
		{1_000_000, "$0.0010"}, // four places always
		{CentPerHour / 100, "$0.0001"},
		{NanodollarPerHour, "$0.000000001"},
	} {
		if got := c.r.Display(); got != c.want {
			t.Errorf("Rate(%d).Display() = %s, want %s", int64(c.r), got, c.want)
		}
	}
}

// TestRateTimes: a rate times a quantity, exactly, rounded once.
func TestRateTimes(t *testing.T) {
	for _, c := range []struct {
		r    Rate
		x    *big.Rat
		want Rate
	}{
		{141_200_000, big.NewRat(1, 4), 35_300_000}, // 0.25 cores at $0.1412
		{123_000, big.NewRat(300, 1024), 36_035},    // 300 MiB at $0.000123 a GiB-hour: 36035.15625
		{3, big.NewRat(1, 2), 2},                    // a half: away from zero
		{-3, big.NewRat(1, 2), -2},                  // likewise below zero
		{1, big.NewRat(1, 1000), 0},                 // below a nano-dollar
		{MaxRate, big.NewRat(2, 1), MaxRate},        // saturates
		{DollarPerHour, big.NewRat(0, 1), 0},
	} {
		if got := c.r.Times(c.x); got != c.want {
			t.Errorf("%d × %s = %d, want %d", int64(c.r), c.x, got, c.want)
		}
	}
}
