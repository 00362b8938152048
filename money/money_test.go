package money

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"

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
