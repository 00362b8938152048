package money

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// TestExactSum: ten million charges of a micro-dollar are ten dollars,
// exactly, in any order; the float64 sum of the same charges is not.
func TestExactSum(t *testing.T) {
	var sum Amount
	var f float64
	for i := 0; i < 10_000_000; i++ {
		sum = sum.Add(Microdollar)
		f += 0.000001
	}
	if sum != 10*Dollar || sum.String() != "10" {
		t.Fatalf("sum %s (%d), want exactly 10", sum, int64(sum))
	}
	if f == 10 {
		t.Fatalf("the float sum is exact too (%v): the test shows nothing", f)
	}
	t.Logf("float64 sum of the same charges: %.17g", f)
}

func TestAddSaturates(t *testing.T) {
	if got := MaxAmount.Add(1); got != MaxAmount {
		t.Fatalf("MaxAmount+1 = %d", got)
	}
	if got := (-MaxAmount).Add(-5); got != -MaxAmount {
		t.Fatalf("-MaxAmount-5 = %d", got)
	}
	if got := Amount(5).Add(-7); got != -2 {
		t.Fatalf("5-7 = %d", got)
	}
}

func TestFormatAndParse(t *testing.T) {
	for _, c := range []struct {
		a    Amount
		text string
	}{
		{0, "0"}, {1, "0.000000001"}, {20_031_234_000, "20.031234"}, {Dollar, "1"}, {-Dollar / 2, "-0.5"},
		{MaxAmount, "9223372036.854775807"}, {-MaxAmount, "-9223372036.854775807"},
	} {
		if got := c.a.String(); got != c.text {
			t.Errorf("%d prints %q, want %q", int64(c.a), got, c.text)
		}
		back, err := ParseAmount(c.text)
		if err != nil || back != c.a {
			t.Errorf("%q parses to %d %v, want %d", c.text, back, err, c.a)
		}
	}
	if got := Rate(47_500_000).String(); got != "0.0475" {
		t.Errorf("rate prints %q", got)
	}
	if v, err := ParseAmount("1e3"); err != nil || v != 1000*Dollar {
		t.Errorf("1e3: %d %v", v, err)
	}
	if _, err := ParseAmount("0.0000000001"); !errors.Is(err, ErrPrecision) {
		t.Errorf("ten places: %v, want ErrPrecision", err)
	}
	for _, bad := range []string{"", "abc", "1e30", "NaN", "0x10", "1/3", "1e999999999", "+-1"} {
		if _, err := ParseAmount(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestJSON: amounts travel as exact decimal numbers of dollars; a float
// with more places than a nano-dollar (what a float64-based client or a
// server before integral money writes) is read as the nearest amount.
func TestJSON(t *testing.T) {
	type doc struct {
		Cost  Amount  `json:"cost"`
		Price Rate    `json:"price"`
		Opt   *Amount `json:"opt,omitempty"`
	}
	out, err := json.Marshal(doc{Cost: 20_031_234_000, Price: 47_500_000})
	if err != nil || string(out) != `{"cost":20.031234,"price":0.0475}` {
		t.Fatalf("marshal: %s %v", out, err)
	}
	var in doc
	if err := json.Unmarshal([]byte(`{"cost":0.30000000000000004,"price":0.0475,"opt":1.0000000005}`), &in); err != nil {
		t.Fatal(err)
	}
	if in.Cost != 300_000_000 || in.Price != 47_500_000 || *in.Opt != 1_000_000_001 {
		t.Fatalf("unmarshal: %+v %d", in, *in.Opt)
	}
	if err := json.Unmarshal([]byte(`{"cost":"5"}`), &in); err == nil {
		t.Fatal("a string was read as an amount")
	}
}

// TestCodecReadsLegacyFloats: in MessagePack an amount is an integer, and
// a float64 of dollars (what servers before integral money wrote in their
// log and snapshots) is read as the nearest amount, once.
func TestCodecReadsLegacyFloats(t *testing.T) {
	h := &codec.MsgpackHandle{}
	h.StructToArray = true
	type newer struct {
		A Amount
		R Rate
	}
	type older struct {
		A float64
		R float64
	}
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, h).Encode(older{A: 0.1 + 0.2, R: 0.0475}); err != nil {
		t.Fatal(err)
	}
	var got newer
	if err := codec.NewDecoderBytes(buf.Bytes(), h).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.A != 300_000_000 || got.R != 47_500_000 {
		t.Fatalf("legacy floats read as %+v", got)
	}
	buf.Reset()
	want := newer{A: MaxAmount, R: 1}
	if err := codec.NewEncoder(&buf, h).Encode(want); err != nil {
		t.Fatal(err)
	}
	got = newer{}
	if err := codec.NewDecoderBytes(buf.Bytes(), h).Decode(&got); err != nil || got != want {
		t.Fatalf("round trip %+v %v, want %+v", got, err, want)
	}
	if FromDollars(math.NaN()) != 0 || FromDollars(1e300) != MaxAmount || FromDollars(-1e300) != -MaxAmount {
		t.Fatal("FromDollars does not saturate")
	}
}

// TestRateSums: rates sum exactly and saturate; ten machines at $0.10 an
// hour are $1 an hour, where float64 says 0.9999999999999999.
func TestRateSums(t *testing.T) {
	var sum Rate
	var f float64
	for i := 0; i < 10; i++ {
		sum = sum.Add(100_000_000)
		f += 0.1
	}
	if sum != DollarPerHour || f == 1 {
		t.Fatalf("sum %s, float %v", sum, f)
	}
	if MaxRate.Add(1) != MaxRate || Rate(5).Sub(7) != -2 || Rate(0).Sub(math.MinInt64) != MaxRate {
		t.Fatal("rates do not saturate")
	}
}

// TestRateOverAndPer: a rate over a time and per unit, rounded once.
func TestRateOverAndPer(t *testing.T) {
	for _, c := range []struct {
		r    Rate
		d    time.Duration
		want Amount
	}{
		{DollarPerHour, time.Hour, Dollar},
		{100_000_000, 90 * time.Minute, 150_000_000},
		{1, time.Second, 0},                    // 1/3600 of a nano-dollar
		{1800, time.Second, 1},                 // half a nano-dollar: up
		{MaxRate, 1000 * time.Hour, MaxAmount}, // saturates
		{-5, time.Hour, 0},
	} {
		if got := c.r.Over(c.d); got != c.want {
			t.Errorf("%s over %s = %d, want %d", c.r, c.d, got, c.want)
		}
	}
	// $0.47 for 32 cores: $0.0146875 a core-hour, exactly.
	if got := Rate(470_000_000).Per(32_000, 1000); got != 14_687_500 {
		t.Errorf("per core %d", got)
	}
	if got := Rate(1).Per(0, 1000); got != MaxRate {
		t.Errorf("per no core %d", got)
	}
	// $1 an hour at $0.47 for 32,000 thousandths of a core buys 68,085
	// of them (68,085.106...), rounded down.
	if got := DollarPerHour.Buys(470_000_000, 32_000); got != 68_085 {
		t.Errorf("buys %d", got)
	}
	if DollarPerHour.Buys(0, 1000) != math.MaxInt64 || Rate(0).Buys(1, 1000) != 0 || MaxRate.Buys(1, 1<<40) != math.MaxInt64 {
		t.Error("Buys' edges")
	}
}

// TestComparePer: prices per unit compare exactly where float64 division
// ties or errs, and a config with no units is the dearest.
func TestComparePer(t *testing.T) {
	// 0.1175 for 8 and 0.47 for 32: the same per core.
	if c := ComparePer(117_500_000, 8000, 470_000_000, 32000); c != 0 {
		t.Fatalf("equal prices per core compare %d", c)
	}
	// $0.67 for a core and $2.01 for three: the same per core, where
	// float64 division finds the three cores cheaper.
	pa, pb := 0.67, 2.01 // variables: Go's constant arithmetic is exact
	if fa, fb := pa*1000/1000, pb*1000/3000; fa <= fb {
		t.Fatalf("float64 ranks them right (%v, %v): the test shows nothing", fa, fb)
	}
	if c := ComparePer(670_000_000, 1000, 2_010_000_000, 3000); c != 0 {
		t.Fatalf("$0.67 a core and $2.01 for three compare %d", c)
	}
	// One nano-dollar apart over 4096 cores.
	a, b := Rate(999_999_999_999_999), Rate(999_999_999_999_998)
	if ComparePer(a, 4096_000, b, 4096_000) != 1 || ComparePer(b, 4096_000, a, 4096_000) != -1 {
		t.Fatal("prices one nano-dollar apart compare equal")
	}
	if ComparePer(MaxRate, 1, MaxRate, 4096_000) != 1 {
		t.Fatal("large products overflow")
	}
	if ComparePer(1, 0, MaxRate, 1) != 1 || ComparePer(MaxRate, 1, 1, 0) != -1 || ComparePer(1, 0, 2, -1) != 0 {
		t.Fatal("no units is not the dearest")
	}
}

func TestRound(t *testing.T) {
	for _, c := range []struct{ a, want Amount }{
		{324_644_999_999, 324_640_000_000}, {324_645_000_000, 324_650_000_000}, {-5_000_000, -10_000_000}, {-4_999_999, 0}, {MaxAmount, 9_223_372_036_850_000_000},
	} {
		if got := c.a.Round(Cent); got != c.want {
			t.Errorf("%s to the cent: %s, want %s", c.a, got, c.want)
		}
	}
	if got := Rate(17_625_000_001).Round(CentPerHour); got != 17_630_000_000 {
		t.Errorf("rate to the cent: %s", got)
	}
}
