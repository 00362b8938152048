package view

import (
	"testing"
	"time"

	"github.com/drover-sched/drover/eta"
	"github.com/drover-sched/drover/server/state"
)

// TestEtaStartDoesNotWrap (found by a tenant's attack, helper-16): one
// slot freeing in a minute, 2^20 - 1 jobs ahead, each holding a slot
// 2^44 ns (4.9 h): the job starts in about 585 years, beyond eta.Horizon,
// so no estimate. The search's bound was an int64 product that wrapped to
// exactly 2^64, and the job was said to start in one minute.
func TestEtaStartDoesNotWrap(t *testing.T) {
	run := time.Duration(1 << 44)
	ahead := int64(1<<20 - 1)
	in, ok := eta.Start([]time.Duration{time.Minute}, ahead, run)
	if ok && in < time.Duration(ahead)*time.Minute { // any honest answer is far later than this
		t.Fatalf("eta.Start(1 slot in 1m, %d ahead, run %v) = %v, known: the bound wrapped (true start ≈ %.0f years)",
			ahead, run, in, float64(ahead+1)*run.Hours()/24/365)
	}
}

// TestJobWhyEstimateDoesNotWrap: the same through job why's read
// (view.Place): a user running one job of a group whose finished job ran
// 2^44 ns, with 2^20 - 1 of its Ready jobs before the job asked about, is
// not told the job starts when the running one ends (4.9 h).
func TestJobWhyEstimateDoesNotWrap(t *testing.T) {
	h := state.NewHarness(t, nil)
	const n = 1<<20 + 3
	b := h.Must(&state.CreateBatch{Now: h.Tick(), User: "root", BillingProject: "default",
		Jobs: []state.JobEntry{entry(1, n, spec("j", 1))}}).(*state.UpdateResult).Batch
	w := h.Activate("w", 1, 16)
	h.Schedule() // job 1 runs
	start := h.Now
	run := int64(1 << 44)
	h.Now = start + run
	h.Must(&state.Events{Now: h.Tick(), Events: []state.Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: state.OutcomeSuccess, Start: start, End: start + run}}})
	h.Schedule() // job 2 runs: the line's one slot
	// Job 3 is first in line; job id has (id - 3) Ready jobs before it.
	id := uint32(3 + (1<<20 - 1))
	jp := placeOf(t, h, b, id)
	e := jp.Estimate
	if jp.Position != 1<<20 || e.Slots != 1 || e.Run != time.Duration(run) {
		t.Fatalf("position %d, estimate %+v: the setup is not what the test means", jp.Position, e)
	}
	if e.Known && e.In < 365*24*time.Hour {
		t.Fatalf("job why estimates job %d (position %d, each job in line %v) starts in %v", id, jp.Position, e.Run, e.In)
	}
}
