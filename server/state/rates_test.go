package state

import (
	"bytes"
	"math"
	"testing"
	"time"
)

// TestAttemptCost: an attempt's cost is what it reserves × the rates in
// force when it started × how long it ran, to the cent; a running one's
// grows with the clock; rates never apply to the past, are bounded, and
// survive a snapshot.
func TestAttemptCost(t *testing.T) {
	h := newHarness(t)
	now := time.Unix(0, h.Tick())
	h.Must(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{
		{Resource: "compute", Price: 0.0475}, {Resource: "memory", Price: 0.00637}, {Resource: "service-fee", Price: 0.01},
	}})
	h.MustFail(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{{Resource: "compute", Price: 1, ValidFrom: now.Add(-time.Second).UnixNano()}}}, ErrInvalid)
	h.MustFail(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{{Resource: "Compute!", Price: 1}}}, ErrInvalid)
	h.MustFail(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{{Resource: "compute", Price: math.Inf(1)}}}, ErrInvalid)
	h.MustFail(&SetRates{Now: now.UnixNano()}, ErrInvalid)
	// Tomorrow compute costs more; today's attempts keep today's price.
	h.Must(&SetRates{Now: now.UnixNano(), Rates: []RateEntry{{Resource: "compute", Price: 0.1, ValidFrom: now.Add(24 * time.Hour).UnixNano()}}})

	inst := h.Activate("w", 8, 32)
	sp := spec("j", 1)
	sp.CPUMilli, sp.Memory = 2000, 4<<30
	b := h.CreateBatch(entry(1, 1, sp))
	h.Schedule()
	start := now.Add(time.Minute).UnixNano()
	h.Must(&Events{Now: start, Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Started: true, Start: start}}})
	perHour := 2*0.0475 + 4*0.00637 + 2*0.01
	j, _ := h.S.Job(b, 1)
	if a := j.Attempts[0]; a.Cost == nil || math.Abs(a.PricePerHour-perHour) > 1e-12 || len(a.CostLines) != 3 {
		t.Fatalf("a running attempt: %+v", a)
	}
	// While it runs, the project's live cost is its price × the time so
	// far, read from kept sums (no walk).
	at := time.Unix(0, start).Add(30 * time.Minute)
	if c := h.S.ProjectCost("default", at); math.Abs(c-perHour/2) > 1e-9 {
		t.Fatalf("project cost after 30 running minutes: %v, want %v", c, perHour/2)
	}
	// It runs 90 minutes.
	end := start + int64(90*time.Minute)
	h.Must(&Events{Now: end, Events: []Event{{Instance: inst, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeSuccess, Start: start, End: end}}})
	j, _ = h.S.Job(b, 1)
	a := j.Attempts[0]
	if want := perHour * 1.5; a.Cost == nil || math.Round(*a.Cost*100) != math.Round(want*100) || math.Abs(*a.Cost-want) > 1e-9 {
		t.Fatalf("cost %v, want %.6f (%+v)", a.Cost, want, a.CostLines)
	}
	// The batch and its billing project cost the same: their one attempt.
	if bt, _ := h.S.Batch(b); math.Abs(bt.Cost-*a.Cost) > 1e-12 {
		t.Fatalf("batch cost %v, attempt %v", bt.Cost, *a.Cost)
	}
	if p, _ := h.S.BillingProject("default"); math.Abs(p.Cost-*a.Cost) > 1e-12 {
		t.Fatalf("project cost %v, attempt %v", p.Cost, *a.Cost)
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	endDay := int32(end / (24 * 3600e9))
	if days := h.S.CostByDay("default", endDay-1, endDay+1); len(days) != 1 || math.Abs(days[0].Cost-*a.Cost) > 1e-12 ||
		days[0].Day != time.Unix(0, end).UTC().Format(time.DateOnly) {
		t.Fatalf("daily cost %+v, want %v on the day it ended", days, *a.Cost)
	}
	// Read again later (tomorrow's rate in force): the same cost.
	if j2, _ := h.S.Job(b, 1); *j2.Attempts[0].Cost != *a.Cost {
		t.Fatal("an ended attempt's cost changed")
	}
	rates := h.S.Rates(now, false)
	if len(rates) != 4 || rates[0].Resource != "compute" || !rates[0].InForce || rates[1].InForce {
		t.Fatalf("rates now: %+v", rates)
	}
	snap := SnapshotBytes(t, h.S)
	restored := New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(SnapshotBytes(t, restored), snap) || !bytes.Equal(SnapshotBytes(t, h.Replay()), snap) {
		t.Fatal("rates differ after a restore or a replay")
	}
}
