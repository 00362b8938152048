package state

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/drover-sched/drover/money"
)

// TestPlacementCommandsOfOldServersStillDecode: an ApplyPlacement entry
// of a server before integral prices (type CmdApplyPlacement, float
// dollars) decodes to the same command with each price and cap the
// nearest nano-dollar; new entries take CmdApplyPlacementExact, which
// such servers do not know; and the old entry applies with the caps
// exact: three machines at $0.1 fill a $0.3 cap, the fourth is held.
func TestPlacementCommandsOfOldServersStillDecode(t *testing.T) {
	cmd := &ApplyPlacement{Now: 1, Clusters: []Cluster{{Name: "a", Region: "east", Pools: []Pool{{Name: "default", CPUMilli: 8000, PricePerHour: 380_000_000}}}},
		Autoscaler:    &Autoscaler{Enabled: true, MaxPerHour: 300_000_000},
		LaunchConfigs: []LaunchConfig{{Name: "c", Cluster: "a", Pool: "default", CPUMilli: 4000, Memory: 1 << 30, PricePerHour: 100_000_000, MaxPerHour: 1_300_000_000}}}
	// The entry as the old binary wrote it: the same layout, each price a
	// float of dollars (the cap as a float sum, 0.1 + 0.2).
	legacy := floatPrices(reflect.ValueOf(cmd))
	legacy.([]any)[5].([]any)[3] = 0.1 + 0.2 // Autoscaler.MaxPerHour
	var buf bytes.Buffer
	buf.WriteByte(byte(CmdApplyPlacement))
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(legacy); err != nil {
		t.Fatal(err)
	}
	c, err := Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	p, ok := c.(*ApplyPlacement)
	if !ok || p.Autoscaler.MaxPerHour != 300_000_000 || len(p.LaunchConfigs) != 1 || p.LaunchConfigs[0].PricePerHour != 100_000_000 ||
		p.LaunchConfigs[0].MaxPerHour != 1_300_000_000 || p.Clusters[0].Pools[0].PricePerHour != 380_000_000 {
		t.Fatalf("the old entry decodes to %+v", c)
	}
	data, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if typ := CommandType(data[0]); typ != CmdApplyPlacementQueues {
		t.Fatalf("ApplyPlacement is written as %s, a type servers with float prices read", typ)
	}
	// Decoded from the old form, it is the command written anew.
	if want, err := Encode(cmd); err != nil || !bytes.Equal(data, want) {
		t.Fatalf("the old entry decodes to %+v, not %+v (%v)", p, cmd, err)
	}
	h := newHarness(t)
	h.Must(p)
	res := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "c", Count: 4, Reason: "test"}}}).(*ScaleResult)
	if len(res.Requests) != 1 || len(res.Requests[0].Machines) != 3 || res.Capped != 1 {
		t.Fatalf("a $0.3 cap on machines at $0.1: %+v (float64 sums them to 0.30000000000000004)", res)
	}
}

// floatPrices is v as the state's MessagePack lays it out (a struct as
// the array of its fields), with every money.Rate as a float of dollars:
// what a server before integral prices wrote.
func floatPrices(v reflect.Value) any {
	if v.Type() == reflect.TypeFor[money.Rate]() {
		return money.Rate(v.Int()).Dollars()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return floatPrices(v.Elem())
	case reflect.Struct:
		var out []any
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				out = append(out, floatPrices(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		var out []any
		for i := 0; i < v.Len(); i++ {
			out = append(out, floatPrices(v.Index(i)))
		}
		return out
	}
	return v.Interface()
}
