package state

import (
	"fmt"
	"testing"
)

// TestRetryWhatFailed: a scatter-gather whose shard 2 failed (its gather
// cancelled because of it) and whose shard 3 errored: a retry of the
// failed jobs runs shard 2 again (a new attempt, the old one kept) and,
// once it succeeds, the gather; shard 3 stays in error; the batch
// completes again. A retry of what errored after that runs shard 3, with
// its retries counted afresh. Across a snapshot and a replay.
func TestRetryWhatFailed(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 8, 16)
	shard := spec("shard", 1)
	shard.Array = true
	b := h.CreateBatch(entry(1, 3, shard), entry(4, 1, spec("gather", 1), Range{1, 3}))
	h.RunAll([]uint32{w}, func(_ uint64, j uint32) Outcome {
		switch j {
		case 2:
			return OutcomeFailed
		case 3:
			return OutcomeError
		}
		return OutcomeSuccess
	})
	want := map[uint32]JobState{1: Success, 2: Failed, 3: Error, 4: Cancelled}
	check := func(s *State, want map[uint32]JobState) {
		t.Helper()
		for id, st := range want {
			jb, _ := s.Job(b, id)
			if jb.State != st {
				t.Fatalf("job %d is %s, want %s", id, jb.State, st)
			}
		}
	}
	check(h.S, want)
	if h.Batch(b).Completed == 0 {
		t.Fatal("the batch is not complete")
	}
	res := h.Must(&RetryJobs{Now: h.Tick(), Batch: b, User: "root", States: RetryStates(Failed)}).(*RetryResult)
	if res.Retried != 2 {
		t.Fatalf("retried %d jobs, want 2 (shard 2 and the gather cancelled because of it)", res.Retried)
	}
	check(h.S, map[uint32]JobState{1: Success, 2: Ready, 3: Error, 4: Pending})
	if h.Batch(b).Completed != 0 {
		t.Fatal("a batch running again is complete")
	}
	for _, s := range []*State{h.Replay(), h.Restored()} {
		check(s, map[uint32]JobState{2: Ready, 3: Error, 4: Pending})
	}
	// Shard 2 succeeds now; the gather then waits for nothing but
	// shard 3's error, and is cancelled again.
	h.RunAll([]uint32{w}, nil)
	check(h.S, map[uint32]JobState{1: Success, 2: Success, 3: Error, 4: Cancelled})
	if jb, _ := h.S.Job(b, 2); len(jb.Attempts) != 2 || jb.Attempts[0].Outcome != OutcomeFailed || jb.Attempts[1].Outcome != OutcomeSuccess {
		t.Fatalf("shard 2's attempts: %+v", jb.Attempts)
	}
	if h.Batch(b).Completed == 0 {
		t.Fatal("the batch did not complete again")
	}
	// Now what errored: shard 3, then the gather, run.
	res = h.Must(&RetryJobs{Now: h.Tick(), Batch: b, User: "root", States: RetryStates(Error, Failed)}).(*RetryResult)
	if res.Retried != 2 {
		t.Fatalf("retried %d, want 2", res.Retried)
	}
	h.RunAll([]uint32{w}, nil)
	check(h.S, map[uint32]JobState{1: Success, 2: Success, 3: Success, 4: Success})
	h.Restored()
	// Nothing left to retry.
	if res := h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Failed, Error, Cancelled)}).(*RetryResult); res.Retried != 0 {
		t.Fatalf("retried %d of a batch that succeeded", res.Retried)
	}
	h.MustFail(&RetryJobs{Now: h.Tick(), Batch: b, Jobs: make([]Range, MaxRetryRanges+1)}, ErrInvalid)
}

// TestRetryACancelledBatch: a batch cancelled while a job ran and others
// waited runs them again when asked for its cancelled jobs, only those
// named when named, and is cancelled no more.
func TestRetryACancelledBatch(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 1, 16)
	b := h.CreateBatch(entry(1, 4, spec("j", 1)), entry(5, 1, spec("after", 1), Range{1, 4}))
	h.Schedule()
	h.Must(&CancelBatch{Now: h.Tick(), Batch: b, Reason: "oops"})
	h.Must(&Events{Now: h.Tick(), Events: []Event{{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeCancelled, Start: h.Now, End: h.Tick()}}})
	for id := uint32(1); id <= 5; id++ {
		if st := h.JobState(b, id); st != Cancelled {
			t.Fatalf("job %d is %s", id, st)
		}
	}
	res := h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Cancelled), Jobs: []Range{{2, 3}}}).(*RetryResult)
	if res.Retried != 3 || h.Batch(b).Cancelled {
		t.Fatalf("retried %d (want jobs 2, 3 and the one after them), cancelled %v", res.Retried, h.Batch(b).Cancelled)
	}
	h.RunAll([]uint32{w}, nil)
	want := map[uint32]JobState{1: Cancelled, 2: Success, 3: Success, 4: Cancelled, 5: Cancelled}
	for id, st := range want {
		if got := h.JobState(b, id); got != st {
			t.Fatalf("job %d is %s, want %s", id, got, st)
		}
	}
	h.Restored()
}

// TestRetryAfterAnArrayWasSplit: an always_run array waiting on a parent,
// one of whose jobs ran out of memory (a group of its own), and whose
// other failed: retrying the parent and that job lets it run once the
// parent succeeds (every part of the split array waits on the parent).
func TestRetryAfterAnArrayWasSplit(t *testing.T) {
	h := newHarness(t)
	w := h.Activate("w", 8, 64)
	kids := spec("kids", 1)
	kids.Array, kids.AlwaysRun, kids.Memory = true, true, 512<<20
	kids.Run = &Run{Policy: &Policy{OOMFactorMilli: 2000, OOMMaxMemory: 2 << 30}}
	b := h.CreateBatch(entry(1, 1, spec("parent", 1)), entry(2, 3, kids, Range{1, 1}))
	h.Schedule()
	h.Complete(w, func(uint64, uint32) Outcome { return OutcomeFailed })
	h.Schedule()
	h.Must(&Events{Now: h.Tick(), Events: []Event{
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: OutcomeSuccess, Start: h.Now, End: h.Tick()},
		oomEvent(h, w, b, 3, 1),
		{Instance: w, Batch: b, Job: 4, Attempt: 1, Outcome: OutcomeFailed, Exit: 1, Start: h.Now, End: h.Tick()},
	}})
	h.RunAll([]uint32{w}, nil)
	if res := h.Must(&RetryJobs{Now: h.Tick(), Batch: b, States: RetryStates(Failed)}).(*RetryResult); res.Retried != 2 {
		t.Fatalf("retried %d, want the parent and job 4", res.Retried)
	}
	h.RunAll([]uint32{w}, nil)
	for id := uint32(1); id <= 4; id++ {
		if st := h.JobState(b, id); st != Success {
			t.Fatalf("job %d is %s, want success", id, st)
		}
	}
	h.Restored()
}

// TestRetryChecksTheProjectsRulesAgain: apply runs jobs again only under
// the billing project's rules as they are at the retry (the API checks
// them too; this is the re-check a rule changed in between meets).
func TestRetryChecksTheProjectsRulesAgain(t *testing.T) {
	h := newHarness(t)
	h.Must(&CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "a"})
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "lab", Members: []string{"alice", "root"}})
	yes, no := true, false
	h.Must(&SetProjectSettings{Project: "lab", AllowHostNetwork: &yes})
	host := spec("net", 1)
	host.Run = &Run{Image: "reg/tool:1", Network: NetworkHost}
	b := h.Must(&CreateBatch{Now: h.Tick(), User: "alice", BillingProject: "lab", Jobs: []JobEntry{entry(1, 1, host)}, Policy: PolicyStorage}).(*UpdateResult).Batch
	w := h.Activate("w", 2, 8)
	h.RunAll([]uint32{w}, func(uint64, uint32) Outcome { return OutcomeFailed })
	h.Must(&SetProjectSettings{Project: "lab", AllowHostNetwork: &no})
	h.MustFail(&RetryJobs{Now: h.Tick(), Batch: b, User: "alice", States: RetryStates(Failed)}, ErrForbidden)
	if st := h.JobState(b, 1); st != Failed {
		t.Fatalf("the job is %s after a refused retry", st)
	}
}

// BenchmarkRetryCascade: retrying an array of n cancelled jobs with an
// array of n children waiting on all of it walks each dependency and
// each child group once: the time per job stays flat as n grows.
func BenchmarkRetryCascade(b *testing.B) {
	for _, n := range []uint32{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				h := NewHarness(b, nil)
				id := h.CreateBatch(entry(1, n, spec("a", 1)), entry(n+1, n, spec("b", 1), Range{1, n}))
				h.Must(&CancelBatch{Now: h.Tick(), Batch: id})
				b.StartTimer()
				h.S.Apply(uint64(len(h.Log)+1), &RetryJobs{Now: h.Tick(), Batch: id, States: RetryStates(Cancelled)})
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(2*n), "ns/job")
		})
	}
}
