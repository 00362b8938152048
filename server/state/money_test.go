package state

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
	"github.com/hashicorp/go-msgpack/v2/codec"
)

// moneyRun is what a run of TestCostsAreExactAndOrderFree's workload
// leaves: the project's cost and each batch's at a fixed time, and the
// snapshot.
type moneyRun struct {
	total, running money.Amount
	spends         []billing.Spend
	snap           []byte
}

// runMoneyWorkload runs 120 attempts of four sizes at rates no float
// holds, started at their own times, 110 of them ended, in an order the
// seed picks (the times do not depend on it), and reads the costs at a
// fixed time: twice, and on the state replayed from the log.
func runMoneyWorkload(t *testing.T, seed uint64) moneyRun {
	h := newHarness(t)
	h.Must(&SetRates{Now: h.Tick(), Rates: []RateEntry{{Resource: "compute", Price: 47_500_000},
		{Resource: "memory", Price: 123_000}, {Resource: "service-fee", Price: 10_000_001}}})
	inst := h.Activate("w", 64, 256)
	var batches []uint64
	for i := range 4 {
		sp := spec(fmt.Sprint("size", i), 0)
		sp.CPUMilli, sp.Memory = int64(250+i*130), int64(300<<20+i*12345)
		batches = append(batches, h.CreateBatch(entry(1, 30, sp)))
	}
	if r := h.Schedule(); r.Placed != 120 {
		t.Fatalf("placed %+v", r)
	}
	start := h.Tick()
	type att struct {
		b          uint64
		j          uint32
		start, end int64
	}
	var all []att
	var started []Event
	for bi, b := range batches {
		for j := uint32(1); j <= 30; j++ {
			a := att{b: b, j: j, start: start + int64(j)*7_777_777 + int64(bi)*13}
			a.end = a.start + int64(bi+1)*int64(j)*int64(time.Second)/3 + int64(j)*999
			all = append(all, a)
			started = append(started, Event{Instance: inst, Batch: b, Job: j, Attempt: 1, Started: true, Start: a.start})
		}
	}
	h.Must(&Events{Now: start + int64(time.Second), Events: started})
	last := start + int64(time.Minute)
	ended := all[:110]
	rand.New(rand.NewPCG(seed, 26)).Shuffle(len(ended), func(i, k int) { ended[i], ended[k] = ended[k], ended[i] })
	for lo := 0; lo < len(ended); lo += 10 {
		var evs []Event
		for _, a := range ended[lo : lo+10] {
			evs = append(evs, Event{Instance: inst, Batch: a.b, Job: a.j, Attempt: 1, Outcome: OutcomeSuccess, Start: a.start, End: a.end})
		}
		h.Must(&Events{Now: last, Events: evs})
	}
	at := time.Unix(0, last).Add(time.Hour)
	day := int32(at.UnixNano() / (24 * 3600e9))
	read := func(s *State) moneyRun {
		var r moneyRun
		r.total, r.running = s.ProjectCosts("default", at)
		r.spends, _ = s.BatchSpends("default", day-1, day+1, at)
		return r
	}
	r := read(h.S)
	for _, s := range []*State{h.S, h.Replay()} {
		if again := read(s); again.total != r.total || again.running != r.running || !slices.Equal(again.spends, r.spends) {
			t.Fatalf("read again or replayed: %+v, first %+v", again, r)
		}
	}
	// Exact: the project's ended cost is its attempts' costs summed, and
	// each batch's is its own attempts'.
	var sum money.Amount
	for _, b := range batches {
		var batchSum money.Amount
		for j := uint32(1); j <= 30; j++ {
			job, _ := h.S.Job(b, j)
			if a := job.Attempts[0]; a.End != 0 {
				batchSum += a.Cost(a.End)
			}
		}
		i := slices.IndexFunc(r.spends, func(sp billing.Spend) bool { return sp.Batch == b })
		if i < 0 || r.spends[i].Cost != batchSum {
			t.Fatalf("batch %d: spends %+v, its ended attempts cost %s", b, r.spends, batchSum)
		}
		sum += batchSum
	}
	if r.total-r.running != sum {
		t.Fatalf("project cost %s (running %s), its ended attempts %s", r.total, r.running, sum)
	}
	r.snap = SnapshotBytes(t, h.S)
	return r
}

// TestCostsAreExactAndOrderFree: costs are integers, so the same
// attempts ending in another order give the same cost to the nano-dollar,
// and the same snapshot bytes; a state read twice and replayed from its
// log gives the same sums; and a project's cost is exactly the sum of its
// attempts' (runMoneyWorkload).
func TestCostsAreExactAndOrderFree(t *testing.T) {
	first := runMoneyWorkload(t, 1)
	if first.running == 0 || first.total == first.running {
		t.Fatalf("the workload costs %+v: want ended and running attempts", first)
	}
	for _, seed := range []uint64{2, 3, 4} {
		r := runMoneyWorkload(t, seed)
		if r.total != first.total || r.running != first.running || !slices.Equal(r.spends, first.spends) {
			t.Fatalf("ended in order %d: %s (running %s), in order 1: %s (%s)", seed, r.total, r.running, first.total, first.running)
		}
		if !bytes.Equal(r.snap, first.snap) {
			t.Fatalf("ended in order %d: the snapshot differs from order 1's", seed)
		}
	}
	t.Logf("project cost %s, running %s", first.total, first.running)
}

// TestManySmallChargesSumExactly: 200,000 attempts of a nano-dollar's
// worth each (a dollar a second, for a nanosecond) accrue through
// endCharge to exactly $0.0002 in their batch and their project, where a
// float64 sum of the same drifts.
func TestManySmallChargesSumExactly(t *testing.T) {
	const n = 200_000
	s := New()
	b := &Batch{ID: 1, BillingProject: "lab", bill: batchBill{Running: map[uint32]charge{}}}
	p := billing.PriceOf(3_600 * money.DollarPerHour) // a nano-dollar a nanosecond
	for i := uint32(1); i <= n; i++ {
		b.bill.Running[i] = charge{Price: p, Start: 1_000}
		b.bill.run.Add(p, 1_000)
		s.projectBill("lab").run.Add(p, 1_000)
		s.endCharge(b, i, 1_001)
	}
	want := n * money.Nanodollar
	if b.bill.Accrued != want || s.bills["lab"].Accrued != want || b.cost(5_000) != want || s.ProjectCost("lab", time.Unix(0, 5_000)) != want {
		t.Fatalf("%d nano-dollar attempts: batch %s, project %s; want %s", n, b.bill.Accrued, s.bills["lab"].Accrued, want)
	}
	var f float64
	for range n {
		f += 1e-9
	}
	if f == want.Dollars() {
		t.Fatalf("the float64 sum is exact too (%v): the test shows nothing", f)
	}
	t.Logf("the float64 sum of the same: %.17g", f)
}

// TestMoneyCommandsOfOldServersStillDecode: the log entries of servers
// before integral money (types CmdSetSpendLimit and CmdSetRates, float
// dollars) decode to the same commands with the nearest nano-dollar;
// new entries take the new types, which such servers do not know.
func TestMoneyCommandsOfOldServersStillDecode(t *testing.T) {
	old := func(typ CommandType, v any) []byte {
		var buf bytes.Buffer
		buf.WriteByte(byte(typ))
		if err := codec.NewEncoder(&buf, msgpackHandle).Encode(v); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	type oldLimit struct {
		Project string
		Limit   float64
	}
	type oldRate struct {
		Resource  string
		Price     float64
		ValidFrom int64
	}
	type oldRates struct {
		Now   int64
		Rates []oldRate
	}
	c, err := Decode(old(CmdSetSpendLimit, oldLimit{"lab", 1234.56789}))
	if l, ok := c.(*SetSpendLimit); err != nil || !ok || l.Project != "lab" || l.Limit != 1_234_567_890_000 {
		t.Fatalf("an old spend limit decodes to %+v %v", c, err)
	}
	c, err = Decode(old(CmdSetRates, oldRates{7, []oldRate{{"memory", 0.000123, 9}, {"compute", 0.1 + 0.2, 0}}}))
	if r, ok := c.(*SetRates); err != nil || !ok || r.Now != 7 || len(r.Rates) != 2 || r.Rates[0] != (RateEntry{"memory", 123_000, 9}) || r.Rates[1].Price != 300_000_000 {
		t.Fatalf("old rates decode to %+v %v", c, err)
	}
	for _, cmd := range []Command{&SetSpendLimit{Project: "lab", Limit: 1}, &SetRates{Now: 1, Rates: []RateEntry{{"compute", 1, 0}}}} {
		data, err := Encode(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if typ := CommandType(data[0]); typ != CmdSetSpendLimitExact && typ != CmdSetRatesExact {
			t.Fatalf("%T is written as %s, a type servers with float money read", cmd, typ)
		}
		back, err := Decode(data)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(cmd) {
			t.Fatalf("%T round trip: %+v %v", cmd, back, err)
		}
	}
}
