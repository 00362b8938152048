package billing

import (
	"math"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
)

// d and r are dollars and dollars an hour, for the tables below.
func d(v float64) money.Amount { return money.FromDollars(v) }
func r(v float64) money.Rate   { return money.RateFromDollars(v) }

func TestPriceAndCost(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	b := Book{
		"compute":             {{Resource: "compute", Version: 1, PerHour: r(0.04), ValidFrom: t0}},
		"compute/preemptible": {{Resource: "compute/preemptible", Version: 1, PerHour: r(0.01), ValidFrom: t0}, {Resource: "compute/preemptible", Version: 2, PerHour: r(0.02), ValidFrom: t0 + int64(24*time.Hour)}},
		"memory":              {{Resource: "memory", Version: 1, PerHour: r(0.005), ValidFrom: t0}},
		"service-fee":         {{Resource: "service-fee", Version: 1, PerHour: r(0.01), ValidFrom: t0}},
		"gpu/a100":            {{Resource: "gpu/a100", Version: 1, PerHour: r(2.5), ValidFrom: t0}},
	}
	// 4 cores, 16 GiB, 1 A100 in pool preemptible, on day 1: version 1.
	qs := Held(4000, 16<<30, 1, "a100", "preemptible", "")
	perHour, lines := b.Price(qs, t0+int64(time.Hour))
	want := r(4*0.01 + 16*0.005 + 4*0.01 + 2.5)
	if perHour.Rate() != want || len(lines) != 4 || lines[0].Rated != "compute/preemptible" || lines[1].Rated != "memory" {
		t.Fatalf("price %v (want %v), lines %+v", perHour.Rate(), want, lines)
	}
	// 90 minutes of it, exactly.
	if c := Cost(perHour, t0, t0+int64(90*time.Minute)); c != d(2.66*1.5) {
		t.Fatalf("cost %v, want %v", c, d(2.66*1.5))
	}
	// On day 2 the preemptible rate's second version is in force.
	if p, lines := b.Price(qs[:1], t0+int64(25*time.Hour)); p.Rate() != r(4*0.02) || lines[0].Version != 2 {
		t.Fatalf("day 2: %v %+v", p.Rate(), lines)
	}
	// Before any rate, and a pool without one and no kind rate: nothing.
	if p, _ := b.Price(qs, t0-1); !p.IsZero() {
		t.Fatalf("before the rates: %v", p)
	}
	if p, lines := (Book{}).Price(Held(1000, 1<<30, 0, "", "", ""), t0); !p.IsZero() || lines[0].Rated != "" || lines[0].Resource != "compute/default" {
		t.Fatalf("no rates: %v %+v", p, lines)
	}
	if Cost(PriceOf(1), 10, 10) != 0 || Cost(PriceOf(1), 10, 5) != 0 {
		t.Fatal("no time, no cost")
	}
}

// TestCostRoundsOnlyTheProduct: a rate is never rounded before it is
// multiplied by the time held: 300 MiB at $0.000123 a GiB-hour is
// $0.0000360352... an hour, which no decimal of nine places holds, and a
// second of it is $0.0000000100098 (10 nano-dollars), for a million
// seconds $0.010009765625 exactly (10009765.625 nano-dollars, rounded up
// once). Rounding the price to a nano-dollar an hour first would give
// $0.010000; to a micro-dollar an hour, $0.0100.
func TestCostRoundsOnlyTheProduct(t *testing.T) {
	b := Book{"memory": {{Resource: "memory", Version: 1, PerHour: r(0.000123)}}}
	p, _ := b.Price([]Quantity{{Resource: "memory/x", Num: 300 << 20, Den: 1 << 30}}, 1)
	if got := Cost(p, 0, int64(time.Second)); got != 10 {
		t.Fatalf("a second: %d nano-dollars, want 10", got)
	}
	if got := Cost(p, 0, int64(1e6*float64(time.Second))); got != 10_009_766 {
		t.Fatalf("a million seconds: %d nano-dollars, want 10009766", got)
	}
	// A GiB for one second at that rate: 34 nano-dollars, not nothing.
	g, _ := b.Price([]Quantity{{Resource: "memory", Num: 1 << 30, Den: 1 << 30}}, 1)
	if got := Cost(g, 0, int64(time.Second)); got != 34 {
		t.Fatalf("a GiB-second: %d nano-dollars, want 34", got)
	}
}

// TestPriceBounds: the largest attempt the API accepts (4096 cores, an
// int64 of memory, 64 GPUs, every rate at its maximum) prices without
// overflow, and a year of it costs no more than an Amount holds
// (saturating, never wrapping to a negative).
func TestPriceBounds(t *testing.T) {
	max := MaxPricePerUnitHr
	b := Book{"compute": {{Resource: "compute", PerHour: max}}, "memory": {{Resource: "memory", PerHour: max}},
		"service-fee": {{Resource: "service-fee", PerHour: max}}, "gpu": {{Resource: "gpu", PerHour: max}}}
	p, _ := b.Price(Held(4096_000, math.MaxInt64, 64, "x", "", ""), 1)
	// rate × (memory × 1000 + (2 × 4096000 millicores + 64000 GPU-thousandths) × 2^30)
	units := new(big.Int).Mul(big.NewInt(math.MaxInt64), big.NewInt(1000))
	units.Add(units, new(big.Int).Lsh(big.NewInt(2*4096_000+64*1000), 30))
	want := units.Mul(units, big.NewInt(int64(max)))
	if p.Int().Cmp(want) != 0 || p.Int().BitLen() > 127 {
		t.Fatalf("price %v, want %v (%d bits)", p.Int(), want, want.BitLen())
	}
	if c := Cost(p, 0, int64(365*24*time.Hour)); c != money.MaxAmount {
		t.Fatalf("a year of the largest price: %d, want the saturated %d", c, money.MaxAmount)
	}
}

func TestCheckRate(t *testing.T) {
	for _, ok := range []string{"compute", "compute/preemptible", "gpu/a100", "service-fee", "disk/pd-ssd/us-east1"} {
		if err := CheckRate(ok, r(0.1)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Compute", "compute/", "/x", "a/b/c/d/e", "compute/with space"} {
		if CheckRate(bad, r(0.1)) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, p := range []money.Rate{-1, MaxPricePerUnitHr + 1} {
		if CheckRate("compute", p) == nil {
			t.Errorf("price %v accepted", p)
		}
	}
}

func TestGroup(t *testing.T) {
	spends := []Spend{
		{Batch: 1, User: "ann", Cost: d(1)},
		{Batch: 2, User: "bob", Cost: d(2), Running: d(0.5)},
		{Batch: 1, User: "ann", Cost: d(0.25)}, // the same batch on another day
		{Batch: 3, User: "ann", Cost: d(0.5)},
		{Batch: 4, User: "cy", Running: d(1.25)},
		{Batch: 5, User: "dee", Cost: d(1.25)},
	}
	rows, rest, omitted := Group(spends, false, 10)
	want := []Row{{User: "bob", Cost: d(2), Running: d(0.5)}, {User: "ann", Cost: d(1.75)}, {User: "cy", Running: d(1.25)}, {User: "dee", Cost: d(1.25)}}
	if !reflect.DeepEqual(rows, want) || omitted != 0 || rest != (Row{}) {
		t.Fatalf("by user: %+v rest %+v omitted %d; want %+v", rows, rest, omitted, want)
	}
	rows, rest, omitted = Group(spends, true, 3)
	want = []Row{{User: "bob", Batch: 2, Cost: d(2), Running: d(0.5)}, {User: "dee", Batch: 5, Cost: d(1.25)}, {User: "cy", Batch: 4, Running: d(1.25)}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("by batch: %+v; want %+v (ties: newest batch first)", rows, want)
	}
	if omitted != 2 || rest != (Row{Cost: d(1.75)}) {
		t.Fatalf("by batch: omitted %d rest %+v; want 2 and cost 1.75 (batches 1 and 3)", omitted, rest)
	}
}

func TestMachineRates(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	// n2-standard-8: 8 cores, 32 GiB, $0.40 an hour.
	m := Machine{Config: "n2-8", Pool: "batch", CPUMilli: 8000, Memory: 32 << 30, PerHour: r(0.40)}
	rates := MachineRates(m)
	if len(rates) != 2 || rates[0].Resource != "compute/batch/n2-8" || rates[1].Resource != "memory/batch/n2-8" {
		t.Fatalf("rates %+v", rates)
	}
	b := Book{"compute": {{Resource: "compute", Version: 1, PerHour: r(5), ValidFrom: t0}}}
	for _, r := range rates {
		if !ValidResource(r.Resource) {
			t.Fatalf("%s is not a valid resource", r.Resource)
		}
		b[r.Resource] = []Rate{{Resource: r.Resource, Version: 1, PerHour: r.PerHour, ValidFrom: t0}}
	}
	// The whole machine costs its price; a quarter of it a quarter;
	// cores off the config take the kind's rate.
	for _, c := range []struct {
		cpu, mem int64
		config   string
		want     float64
	}{{8000, 32 << 30, "n2-8", 0.40}, {2000, 8 << 30, "n2-8", 0.10}, {1000, 0, "", 5}} {
		held := Held(c.cpu, c.mem, 0, "", "batch", c.config)[:2] // without the service fee
		if p, _ := b.Price(held, t0); math.Abs(p.Rate().Dollars()-c.want) > 1e-8 {
			t.Errorf("%d millicores, %d bytes on %q: $%v an hour, want $%v", c.cpu, c.mem, c.config, p.Rate(), c.want)
		}
	}
	// With GPUs, they carry GPUWeight core-hours each.
	g := MachineRates(Machine{Config: "g2", CPUMilli: 4000, Memory: 16 << 30, GPUType: "l4", GPUs: 1, PerHour: r(1)})
	unit := 1 / (4 + 16*MemoryWeight + GPUWeight)
	if len(g) != 3 || g[0].Resource != "compute/default/g2" || g[2].Resource != "gpu/l4/g2" || math.Abs(g[2].PerHour.Dollars()-GPUWeight*unit) > 1e-9 {
		t.Fatalf("gpu rates %+v", g)
	}
	if MachineRates(Machine{Config: "free", CPUMilli: 1000, Memory: 1 << 30}) != nil {
		t.Fatal("a machine without a price gives rates")
	}
}
