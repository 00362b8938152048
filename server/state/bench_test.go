package state

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkApplyPlan applies a plan that places 10,000 jobs of a job array on
// 160 instances with 64 cores each, then completes them, per iteration.
func BenchmarkApplyPlan(b *testing.B) { benchApplyPlan(b, nil) }

// BenchmarkApplyPlanPriced is BenchmarkApplyPlan with rates set: every
// attempt is priced as it starts and charged as it ends.
func BenchmarkApplyPlanPriced(b *testing.B) {
	benchApplyPlan(b, []RateEntry{{Resource: "compute", Price: 47_500_000}, {Resource: "memory", Price: 123_000}, {Resource: "service-fee", Price: 10_000_000}})
}

func benchApplyPlan(b *testing.B, rates []RateEntry) {
	s := New()
	s.Apply(1, &Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"})
	if rates != nil {
		s.Apply(1, &SetRates{Now: 1, Rates: rates})
	}
	var insts []uint32
	for i := 0; i < 160; i++ {
		r := s.Apply(2, &Activate{Now: 1, Name: fmt.Sprint("w", i), CPUMilli: 64000, Memory: 256 << 30, TokenHash: fmt.Sprint("t", i)})
		insts = append(insts, r.(*ActivateResult).Instance)
	}
	n := uint32(b.N) * 10_000
	s.Apply(3, &CreateBatch{Now: 1, User: "root", BillingProject: "default", Jobs: []JobEntry{
		{First: 1, Count: n, Spec: &Spec{Name: "a", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}},
	}})
	plans := make([]*Plan, b.N)
	events := make([]*Events, b.N)
	for i := range plans {
		p := &Plan{Now: 2}
		ev := &Events{Now: 3}
		first := uint32(i)*10_000 + 1
		for k, inst := range insts {
			lo := first + uint32(k)*64
			cnt := min(uint32(64), first+10_000-lo)
			if lo >= first+10_000 {
				break
			}
			p.Placements = append(p.Placements, Placement{Batch: 1, First: lo, Count: cnt, Attempt: 1, Instance: inst})
			for j := lo; j < lo+cnt; j++ {
				ev.Events = append(ev.Events, Event{Instance: inst, Batch: 1, Job: j, Attempt: 1, Outcome: OutcomeSuccess, Start: 2, End: 3})
			}
		}
		plans[i], events[i] = p, ev
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := s.Apply(4, plans[i]).(*PlanResult); r.Placed != 10_000 {
			b.Fatalf("placed %d", r.Placed)
		}
		if r := s.Apply(5, events[i]).(*EventsResult); r.Applied != 10_000 {
			b.Fatalf("completed %d", r.Applied)
		}
	}
	b.ReportMetric(float64(b.N*10_000)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkCommitUpdateMillion commits an update of 1,000,000 distinct jobs
// (each its own spec, staged in bunches of 10,000), the largest entry
// `bench sched -jobs 1000000` applies; the time per iteration is the
// commit alone, hold-ms/op how long of it apply held the state's write
// lock (what a reader could wait behind).
func BenchmarkCommitUpdateMillion(b *testing.B) {
	const n, bunch = 1_000_000, 10_000
	benchHold(b, func(s *State) Command {
		cb := s.Apply(2, &CreateBatch{Now: 1, User: "root", BillingProject: "default"}).(*UpdateResult)
		u := s.Apply(3, &CreateUpdate{Now: 1, Batch: cb.Batch, NJobs: n, User: "root"}).(*UpdateResult)
		for lo := uint32(1); lo <= n; lo += bunch {
			jobs := make([]JobEntry, bunch)
			for k := range jobs {
				jobs[k] = JobEntry{First: lo + uint32(k), Count: 1, Spec: &Spec{Name: fmt.Sprint("j", lo+uint32(k)), Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}}
			}
			if err, ok := s.Apply(4, &AddJobs{Batch: cb.Batch, Update: u.Update, Jobs: jobs, Now: 1, User: "root"}).(*ApplyError); ok {
				b.Fatal(err)
			}
		}
		return &CommitUpdate{Now: 2, Batch: cb.Batch, Update: u.Update}
	}, func(r any) {
		if err, ok := r.(*ApplyError); ok {
			b.Fatal(err)
		}
	})
}

// BenchmarkCancelBatchMillion cancels a batch of 1,000,000 Ready jobs
// (one job array); the time per iteration is the cancellation alone,
// hold-ms/op how long of it apply held the state's write lock.
func BenchmarkCancelBatchMillion(b *testing.B) {
	const n = 1_000_000
	benchHold(b, func(s *State) Command {
		cb := s.Apply(2, &CreateBatch{Now: 1, User: "root", BillingProject: "default", Jobs: []JobEntry{
			{First: 1, Count: n, Spec: &Spec{Name: "a", Array: true, Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}},
		}}).(*UpdateResult)
		return &CancelBatch{Now: 2, Batch: cb.Batch}
	}, func(r any) {
		if r, ok := r.(*CancelResult); !ok || r.Cancelled != n {
			b.Fatalf("cancelled: %v", r)
		}
	})
}

// benchHold times applying the command setup returns (at index 5) on a
// bootstrapped state setup has filled, untimed, checking its result with
// check, and reports how long of it apply held the write lock
// (hold-ms/op).
func benchHold(b *testing.B, setup func(s *State) Command, check func(r any)) {
	var held time.Duration
	obs := holdObserver(&held)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := New()
		s.Apply(1, &Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"})
		c := setup(s)
		s.SetLockObserver(obs)
		b.StartTimer()
		check(s.Apply(5, c))
	}
	reportHold(b, held)
}

// holdObserver adds up how long apply held the write lock into held.
func holdObserver(held *time.Duration) *LockObserver {
	return &LockObserver{
		Now:       time.Now,
		ReadWait:  func(time.Duration) {},
		WriteWait: func(time.Duration) {},
		Held:      func(d, _ time.Duration, _ int) { *held += d },
		Entry:     func(CommandType, time.Duration) {},
	}
}

// reportHold reports the write lock's hold per iteration, in ms.
func reportHold(b *testing.B, held time.Duration) {
	b.ReportMetric(float64(held.Microseconds())/1e3/float64(b.N), "hold-ms/op")
}
