// Package money holds sums of money and prices as integers, so that every
// server adds the same charges to the same total, in any order, on any
// architecture, and a total of ten million micro-dollar charges is exactly
// ten dollars. Both types count nano-dollars: an Amount a sum of money, a
// Rate a price per hour (of one unit of a resource, or of what an attempt
// holds), so that a rate such as $0.0475 a core-hour or $0.000123 a
// GiB-hour is kept as given, and only what it comes to over a time is
// rounded, once, to the nano-dollar (package billing does that).
//
// Why nano-dollars and not micro-dollars: what the cheapest rates come to
// over the shortest attempts. A GiB held for a second at $0.000123 a
// GiB-hour is $0.000000034: nothing in micro-dollars, 34 nano-dollars. A
// quarter core and 256 MiB held for 1.3 seconds at common rates is
// $0.0000052: micro-dollars would bill it 4% low, and a batch of many such
// attempts as much. An int64 of nano-dollars still holds 9.2 billion
// dollars, nine times the largest spend limit (state.MaxSpendLimit).
//
// On the wire both are JSON numbers in dollars, printed exactly from the
// integer ("20.031234"); in the replicated state's MessagePack they are
// integers, and a float in dollars (what servers before integral money
// wrote) is read as the nearest Amount or Rate.
package money

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Amount is a sum of money in nano-dollars (billionths of a dollar): what
// something cost, a spend limit. An int64 holds up to about 9.2 billion
// dollars; sums saturate there (Add) rather than wrap.
type Amount int64

// Rate is a price per hour (of one unit of a resource, or of what an
// attempt holds) in nano-dollars, so that a rate keeps nine decimal
// places. An int64 holds up to about 9.2 billion dollars an hour.
type Rate int64

// Units of Amount and Rate.
const (
	Nanodollar  Amount = 1
	Microdollar Amount = 1_000
	Dollar      Amount = 1_000_000_000
	// MaxAmount is the largest Amount; sums saturate at it.
	MaxAmount Amount = math.MaxInt64

	NanodollarPerHour Rate = 1
	DollarPerHour     Rate = 1_000_000_000
)

// places is the decimal places of a dollar an Amount and a Rate count.
const places = 9

// Add returns a+b, saturating at ±MaxAmount instead of wrapping, so that
// no bound a caller checks can be passed by overflow.
func (a Amount) Add(b Amount) Amount {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return MaxAmount
		}
		return -MaxAmount
	}
	return s
}

// Dollars is a as a float64 number of dollars, for printing with a format
// (%.2f) and for the metrics; never add these.
func (a Amount) Dollars() float64 { return float64(a) / float64(Dollar) }

// Dollars is r as a float64 number of dollars an hour, for printing and for
// the autoscaler's float caps; never add these.
func (r Rate) Dollars() float64 { return float64(r) / float64(DollarPerHour) }

// String prints a in dollars, exactly, without trailing zeros: "20.031234",
// "0.5", "3".
func (a Amount) String() string { return format(int64(a), places) }

// String prints r in dollars, exactly, without trailing zeros.
func (r Rate) String() string { return format(int64(r), places) }

func format(v int64, places int) string {
	neg := v < 0
	u := uint64(v)
	if neg {
		u = uint64(-v) // MinInt64 wraps to itself: its uint64 is right
	}
	s := strconv.FormatUint(u, 10)
	if len(s) <= places {
		s = strings.Repeat("0", places-len(s)+1) + s
	}
	whole, frac := s[:len(s)-places], strings.TrimRight(s[len(s)-places:], "0")
	if frac != "" {
		whole += "." + frac
	}
	if neg {
		whole = "-" + whole
	}
	return whole
}

// numberRE is a decimal number of dollars; maxNumberBytes bounds its text.
var numberRE = regexp.MustCompile(`^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,2})?$`)

const maxNumberBytes = 64

// ErrPrecision is returned for a number of dollars with more decimal places
// than the type keeps.
var ErrPrecision = errors.New("too many decimal places")

// ParseAmount reads a number of dollars as JSON writes it ("20.031234",
// "1e3", "-0.5"). More than nine decimal places, or a number beyond
// MaxAmount, is an error: what a person typed (the CLI) is never rounded.
func ParseAmount(s string) (Amount, error) {
	v, err := parse(s, places, false)
	return Amount(v), err
}

// ParseRate reads a number of dollars an hour; more than nine decimal
// places is an error.
func ParseRate(s string) (Rate, error) {
	v, err := parse(s, places, false)
	return Rate(v), err
}

// parse reads a decimal number exactly (math/big's rational parser) and
// scales it by 10^places; with round, a number with more places is
// rounded to the nearest (halves away from zero) instead of refused.
func parse(s string, places int, round bool) (int64, error) {
	s = strings.TrimSpace(s)
	// A decimal as JSON writes it, with an exponent of at most two
	// digits: big.Rat would also take hex and fractions, and spend
	// without bound on 1e999999999.
	if len(s) > maxNumberBytes || !numberRE.MatchString(s) {
		return 0, fmt.Errorf("%.40q is not a number of dollars (a decimal of at most %d characters, with an exponent of at most two digits)", s, maxNumberBytes)
	}
	var r big.Rat
	if _, ok := r.SetString(s); !ok {
		return 0, fmt.Errorf("%q is not a number of dollars", s)
	}
	r.Mul(&r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(places)), nil)))
	n := r.Num()
	if !r.IsInt() {
		if !round {
			return 0, fmt.Errorf("%s dollars: %w (at most %d)", s, ErrPrecision, places)
		}
		n = nearest(&r)
	}
	if !n.IsInt64() {
		if round {
			// Saturate: the caller's bound (a spend limit's, a
			// rate's) then refuses it in its own words.
			if n.Sign() < 0 {
				return -math.MaxInt64, nil
			}
			return math.MaxInt64, nil
		}
		return 0, fmt.Errorf("%s dollars is out of range", s)
	}
	return n.Int64(), nil
}

// FromDollars is the Amount nearest to a float number of dollars (halves
// away from zero), saturating at ±MaxAmount; NaN is 0. It reads the
// floats that servers before integral money wrote, and the autoscaler's
// float prices: one multiplication and one rounding, the same on every
// machine.
func FromDollars(d float64) Amount { return Amount(fromFloat(d, 1e9)) }

// RateFromDollars is the Rate nearest to a float number of dollars an hour,
// as FromDollars.
func RateFromDollars(d float64) Rate { return Rate(fromFloat(d, 1e9)) }

func fromFloat(d, scale float64) int64 {
	v := math.Round(d * scale)
	switch {
	case math.IsNaN(v):
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= -math.MaxInt64:
		return -math.MaxInt64
	}
	return int64(v)
}

// MarshalJSON writes a as a JSON number of dollars, exactly.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalJSON reads a JSON number of dollars, exactly, rounding a
// number with more than nine decimal places to the nearest nano-dollar
// (halves away from zero): what a float-based client or a server before
// integral money wrote, such as 0.30000000000000004, is read as the
// amount it stood for. null leaves a as it is.
func (a *Amount) UnmarshalJSON(b []byte) error { return unmarshal(b, a) }

// unmarshal reads JSON dollars into an Amount or a Rate (both count
// nano-dollars): rounding, saturating, and leaving dst as it is for null.
func unmarshal[T ~int64](b []byte, dst *T) error {
	if string(b) == "null" {
		return nil
	}
	v, err := parse(string(b), places, true)
	if err != nil {
		return err
	}
	*dst = T(v)
	return nil
}

// MarshalJSON writes r as a JSON number of dollars an hour, exactly.
func (r Rate) MarshalJSON() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalJSON reads a JSON number of dollars an hour, rounding to the
// nearest nano-dollar as Amount's does.
func (r *Rate) UnmarshalJSON(b []byte) error { return unmarshal(b, r) }

// CodecEncodeSelf implements codec.Selfer: an integer.
func (a Amount) CodecEncodeSelf(e *codec.Encoder) { e.MustEncode(int64(a)) }

// CodecDecodeSelf implements codec.Selfer: an integer of nano-dollars, or
// a float of dollars as servers before integral money wrote it.
func (a *Amount) CodecDecodeSelf(d *codec.Decoder) { *a = Amount(decodeSelf(d, 1e9)) }

// CodecEncodeSelf implements codec.Selfer: an integer.
func (r Rate) CodecEncodeSelf(e *codec.Encoder) { e.MustEncode(int64(r)) }

// CodecDecodeSelf implements codec.Selfer: an integer of nano-dollars, or a
// float of dollars as servers before integral money wrote it.
func (r *Rate) CodecDecodeSelf(d *codec.Decoder) { *r = Rate(decodeSelf(d, 1e9)) }

func decodeSelf(d *codec.Decoder, scale float64) int64 {
	var v any
	d.MustDecode(&v)
	switch v := v.(type) {
	case int64:
		return v
	case uint64:
		if v > math.MaxInt64 {
			return math.MaxInt64
		}
		return int64(v)
	case float64:
		return fromFloat(v, scale)
	case float32:
		return fromFloat(float64(v), scale)
	case nil:
		return 0
	}
	panic(fmt.Errorf("money: cannot decode %T as an amount", v))
}

// Value implements driver.Valuer: the exact decimal, for a DECIMAL column.
func (a Amount) Value() (driver.Value, error) { return a.String(), nil }

// Scan implements sql.Scanner: a DECIMAL (text, exact), an integer of
// nano-dollars, or a float of dollars (a DOUBLE column written before
// integral money), rounded once to the nearest nano-dollar.
func (a *Amount) Scan(src any) error {
	switch v := src.(type) {
	case []byte:
		return a.UnmarshalJSON(v)
	case string:
		return a.UnmarshalJSON([]byte(v))
	case int64:
		*a = Amount(v)
	case float64:
		*a = FromDollars(v)
	default:
		return fmt.Errorf("money: cannot scan %T into an amount", src)
	}
	return nil
}
