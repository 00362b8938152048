package scheduler

import (
	"fmt"
	"testing"
	"time"
)

const minute = int64(time.Minute)

// fullOf is n attempts of a core each in leaf q (1 + index), started one
// second apart before now, the last the youngest.
func fullOf(q int32, batch uint64, n int, now int64, prio int32) []Attempt {
	out := make([]Attempt, n)
	for i := range out {
		out[i] = Attempt{Batch: batch, Job: uint32(i + 1), Attempt: 1, Queue: q, CPUMilli: 1000, Start: now - int64(n-i)*int64(time.Second) - 30*minute, Priority: prio}
	}
	return out
}

func victimsOf(out *PreemptOutput) map[uint64]int {
	got := map[uint64]int{}
	for _, v := range out.Victims {
		got[v.Batch]++
	}
	return got
}

// TestReclaimTakesBackAGuarantee: a queue below its guarantee with work
// waiting past its reclaim grace takes back what it is owed from the
// queue that borrowed it, youngest and lowest priority first, never below
// the borrower's own guarantee, and no more than its waiting work uses.
func TestReclaimTakesBackAGuarantee(t *testing.T) {
	now := 100 * minute
	in := &PreemptInput{Now: now, Capacity: Res{100_000},
		Queues: []PreemptQueue{
			{Name: "owner", Parent: -1, Guarantee: Res{60_000}, Waiting: Res{50_000}, ShortSince: now - 2*minute, ReclaimGraceNs: minute},
			{Name: "borrower", Parent: -1, Guarantee: Res{40_000}, Used: Res{100_000}},
		}}
	in.Attempts = append(fullOf(2, 1, 90, now, 0), fullOf(2, 2, 10, now, -5)...)
	out := Preempt(in)
	got := victimsOf(out)
	if got[2] != 10 || got[1] != 40 || len(out.Victims) != 50 {
		t.Fatalf("victims %v, want the 10 of low priority and 40 more", got)
	}
	// Youngest first among equals.
	for _, v := range out.Victims {
		if v.Batch == 1 && v.Job <= 50 {
			t.Fatalf("job %d of batch 1 was taken before a younger one", v.Job)
		}
	}
	if !out.Short[0] || out.Victims[0].For != "owner" {
		t.Fatalf("short %v, for %q", out.Short, out.Victims[0].For)
	}
	// More waiting than the guarantee: never below the borrower's 40.
	in.Queues[0].Waiting = Res{90_000}
	if n := len(Preempt(in).Victims); n != 60 {
		t.Fatalf("%d victims, want 60: the borrower keeps its guarantee of 40", n)
	}
	// Before the grace has passed, nothing; Short says the clock runs.
	in.Queues[0].ShortSince = now - 30*int64(time.Second)
	if out := Preempt(in); len(out.Victims) != 0 || !out.Short[0] {
		t.Fatalf("within the grace: %d victims, short %v", len(out.Victims), out.Short)
	}
	// What is being given back already, and free cores, serve first.
	in.Queues[0].ShortSince = now - 2*minute
	in.Queues[0].Waiting = Res{50_000}
	in.Free = Res{5_000}
	for i := range 20 {
		in.Attempts[i].Stopping = true
	}
	if n := len(Preempt(in).Victims); n != 25 {
		t.Fatalf("%d victims, want 25: 50 waiting less 5 free and 20 stopping", n)
	}
}

// TestTierPreemptionForFairShare: a tier-1 queue held below its threshold
// of fair share for preempt_after preempts from a preemptible tier-3
// queue it may preempt from, never an attempt younger than min_runtime,
// never taking tier 3 below its fair share; a queue that is not
// preemptible is never a victim.
func TestTierPreemptionForFairShare(t *testing.T) {
	now := 100 * minute
	in := &PreemptInput{Now: now, Capacity: Res{100_000},
		Queues: []PreemptQueue{
			{Name: "org", Parent: -1},
			{Name: "org/tier1", Parent: 0, Weight: 3, Waiting: Res{40_000}, AfterNs: minute, StarvedSince: now - 5*minute, AllowFrom: []int32{2}},
			{Name: "org/tier3", Parent: 0, Weight: 1, Used: Res{90_000}, Preemptible: true, MinRuntimeNs: 10 * minute},
			{Name: "other", Parent: -1, Used: Res{10_000}},
		}}
	in.Queues[0].Used = Res{90_000}
	in.Attempts = append(fullOf(3, 1, 90, now, 0), fullOf(4, 2, 10, now, 0)...)
	// Five of tier 3's attempts are young: protected by min_runtime.
	for i := 85; i < 90; i++ {
		in.Attempts[i].Start = now - minute
	}
	out := Preempt(in)
	got := victimsOf(out)
	// org's share: all but other's demand of 10 (90); tier1 3/4 of it
	// capped by what it wants (40), tier3 the rest (50).
	if out.FairShare[1][0] != 40_000 || out.FairShare[2][0] != 50_000 {
		t.Fatalf("fair shares %v", out.FairShare)
	}
	if got[1] != 40 || got[2] != 0 || !out.Starved[1] {
		t.Fatalf("victims %v, want 40 of tier 3's and none of other's", got)
	}
	for _, v := range out.Victims {
		if v.Job > 85 {
			t.Fatalf("job %d started within min_runtime and was preempted", v.Job)
		}
	}
	// Not past preempt_after yet: nothing.
	in.Queues[1].StarvedSince = now - 30*int64(time.Second)
	if n := len(Preempt(in).Victims); n != 0 {
		t.Fatalf("%d victims before preempt_after", n)
	}
	// allow_preemption_from names other (not preemptible): nothing.
	in.Queues[1].StarvedSince = now - 5*minute
	in.Queues[1].AllowFrom = []int32{3}
	if n := len(Preempt(in).Victims); n != 0 {
		t.Fatalf("%d victims from a queue it may not preempt from", n)
	}
	// A tier 1 at its threshold of fair share is not starved.
	in.Queues[1].AllowFrom = nil
	in.Queues[1].Used, in.Queues[1].Waiting = Res{25_000}, Res{15_000}
	in.Queues[0].Used = Res{115_000}
	if out := Preempt(in); out.Starved[1] {
		t.Fatalf("25 of a fair share of 40 is above the threshold of 0.5: %v", out.FairShare)
	}
}

func BenchmarkPreempt(b *testing.B) {
	// A fleet of 50,000 cores full of tier-3 work in 100 leaves, and a
	// tier-1 batch of 10,000 one-core jobs waiting.
	now := 100 * minute
	in := &PreemptInput{Now: now, Capacity: Res{50_000_000}}
	in.Queues = append(in.Queues, PreemptQueue{Name: "org", Parent: -1, Used: Res{50_000_000}})
	in.Queues = append(in.Queues, PreemptQueue{Name: "org/tier1", Parent: 0, Weight: 1000, Waiting: Res{10_000_000}, AfterNs: minute, StarvedSince: now - 5*minute})
	for l := range 100 {
		in.Queues = append(in.Queues, PreemptQueue{Name: fmt.Sprintf("org/t3-%d", l), Parent: 0, Used: Res{500_000}, Preemptible: true})
		in.Attempts = append(in.Attempts, fullOf(int32(len(in.Queues)), uint64(l+1), 500, now, int32(l%3))...)
	}
	b.ResetTimer()
	for b.Loop() {
		if out := Preempt(in); len(out.Victims) != 10_000 {
			b.Fatalf("%d victims", len(out.Victims))
		}
	}
}

// TestReclaimOnlyWhereTheWorkCanRun: a queue whose waiting jobs may run
// only in some clusters (their regions, its routing) takes back only what
// is held there: cores freed elsewhere it could not use, and the
// borrower would take them back.
func TestReclaimOnlyWhereTheWorkCanRun(t *testing.T) {
	now := 100 * minute
	in := &PreemptInput{Now: now, Capacity: Res{100_000},
		Queues: []PreemptQueue{
			{Name: "owner", Parent: -1, Guarantee: Res{60_000}, Waiting: Res{50_000}, ShortSince: now - 2*minute, ReclaimGraceNs: minute, Clusters: []bool{false, true}},
			{Name: "borrower", Parent: -1, Used: Res{100_000}},
		}}
	in.Attempts = fullOf(2, 1, 100, now, 0)
	for i := range in.Attempts {
		in.Attempts[i].Cluster = int32(i % 2)
	}
	out := Preempt(in)
	if len(out.Victims) != 50 {
		t.Fatalf("%d victims, want 50", len(out.Victims))
	}
	for _, v := range out.Victims {
		if v.Cluster != 1 {
			t.Fatalf("job %d reclaimed in cluster %d, where the owner's work cannot run", v.Job, v.Cluster)
		}
	}
	in.Queues[0].Clusters = []bool{false, false}
	if n := len(Preempt(in).Victims); n != 0 {
		t.Fatalf("%d victims for work that can run nowhere", n)
	}
}

// TestFairSharePreemptionByDominantShare: a queue of GPU jobs starved of
// GPUs while the fleet's cores are mostly free is starved by its dominant
// share (GPUs), and preempts attempts that hold GPUs, never one that holds
// only cores, and never below the victim queue's fair share of GPUs.
func TestFairSharePreemptionByDominantShare(t *testing.T) {
	now := 100 * minute
	in := &PreemptInput{Now: now, GPUTypes: []string{"a100"}, Capacity: Res{640_000, 2560 << 30, 8}, Free: Res{500_000, 2000 << 30, 0},
		Queues: []PreemptQueue{
			{Name: "train", Parent: -1, Waiting: Res{32_000, 64 << 30, 8}, AfterNs: minute, StarvedSince: now - 2*minute},
			{Name: "sweep", Parent: -1, Used: Res{136_000, 272 << 30, 8}, Preemptible: true},
		}}
	for j := range 8 {
		in.Attempts = append(in.Attempts, Attempt{Batch: 1, Job: uint32(j + 1), Attempt: 1, Queue: 2, CPUMilli: 8000, Memory: 16 << 30, GPU: 2, GPUs: 1, Start: now - 30*minute})
	}
	for j := range 9 {
		in.Attempts = append(in.Attempts, Attempt{Batch: 2, Job: uint32(j + 1), Attempt: 1, Queue: 2, CPUMilli: 8000, Memory: 16 << 30, Start: now - minute})
	}
	out := Preempt(in)
	if !out.Starved[0] || out.Starved[1] {
		t.Fatalf("starved %v (fair shares %v)", out.Starved, out.FairShare)
	}
	if out.FairShare[0][2] != 4 || out.FairShare[1][2] != 4 {
		t.Fatalf("fair shares %v, want 4 GPUs each", out.FairShare)
	}
	got := victimsOf(out)
	if got[1] != 4 || got[2] != 0 {
		t.Fatalf("victims %v: want 4 GPU attempts, no cpu-only one", got)
	}
	if v := out.Victims[0]; v.Kind != "fair_share" || v.Reason != "for queue train: below 0.5 of its fair share of 4 a100 GPUs for 1m0s or more" {
		t.Fatalf("victim %+v", v)
	}
}

// TestReclaimKeepsTheBorrowersFloorInEveryResourceItNeeded: a claim for
// cores and memory keeps checking the borrower's cpu floor after its cores
// are met and it goes on for memory (found by a review: the floor was
// checked against what the claim still lacked).
func TestReclaimKeepsTheBorrowersFloorInEveryResourceItNeeded(t *testing.T) {
	now := 100 * minute
	in := &PreemptInput{Now: now, Capacity: Res{100_000, 400 << 30},
		Queues: []PreemptQueue{
			{Name: "owner", Parent: -1, Guarantee: Res{60_000, 90 << 30}, Waiting: Res{22_000, 88 << 30}, ShortSince: now - 2*minute, ReclaimGraceNs: minute},
			{Name: "borrower", Parent: -1, Guarantee: Res{40_000}, Used: Res{100_000, 100 << 30}},
		}}
	for j := range 100 {
		in.Attempts = append(in.Attempts, Attempt{Batch: 1, Job: uint32(j + 1), Attempt: 1, Queue: 2, CPUMilli: 1000, Memory: 1 << 30, Start: now - minute})
	}
	out := Preempt(in)
	if n := len(out.Victims); n > 60 || n < 22 {
		t.Fatalf("%d victims: the borrower keeps its 40 cores (at most 60 taken), and the owner's 22 cores are taken", n)
	}
}

// TestAGPUClaimStopsNoCPUOnlyAttempt: a queue starved of GPUs, with the
// fleet's cores full, preempts attempts that hold GPUs, not younger
// attempts that hold cores alone (their cores are on machines its jobs
// cannot use).
func TestAGPUClaimStopsNoCPUOnlyAttempt(t *testing.T) {
	now := 100 * minute
	in := &PreemptInput{Now: now, GPUTypes: []string{"a100"}, Capacity: Res{128_000, 512 << 30, 8},
		Queues: []PreemptQueue{
			{Name: "train", Parent: -1, Waiting: Res{32_000, 64 << 30, 8}, AfterNs: minute, StarvedSince: now - 2*minute},
			{Name: "sweep", Parent: -1, Used: Res{128_000, 256 << 30, 8}, Preemptible: true},
		}}
	for j := range 8 {
		in.Attempts = append(in.Attempts, Attempt{Batch: 1, Job: uint32(j + 1), Attempt: 1, Queue: 2, CPUMilli: 8000, Memory: 16 << 30, GPU: 2, GPUs: 1, Start: now - 30*minute})
		in.Attempts = append(in.Attempts, Attempt{Batch: 2, Job: uint32(j + 1), Attempt: 1, Queue: 2, CPUMilli: 8000, Memory: 16 << 30, Start: now - minute})
	}
	out := Preempt(in)
	if got := victimsOf(out); got[2] != 0 || got[1] == 0 {
		t.Fatalf("victims %v: want GPU attempts (batch 1) only", got)
	}
}

// TestStarvationIsExact: a queue exactly at its threshold of fair share is
// not starved, whatever the capacity (a float of the shares read 0.75 of 1
// core as less than 0.75 on 2.75 cores).
func TestStarvationIsExact(t *testing.T) {
	now := 100 * minute
	for _, capacity := range []int64{2750, 5500, 11_000} {
		in := &PreemptInput{Now: now, Capacity: Res{capacity},
			Queues: []PreemptQueue{
				{Name: "a", Parent: -1, Used: Res{750}, Waiting: Res{250}, AfterNs: minute, StarvedSince: now - 2*minute, ThresholdPermille: 750},
				{Name: "b", Parent: -1, Used: Res{capacity - 750}, Waiting: Res{capacity}, Preemptible: true},
			}}
		out := Preempt(in)
		if out.FairShare[0][0] != 1000 {
			t.Fatalf("capacity %d: fair share %v, want 1000 for a", capacity, out.FairShare)
		}
		if out.Starved[0] || len(out.Victims) != 0 {
			t.Fatalf("capacity %d: a at exactly 0.75 of its fair share is starved (%v) or takes %d victims", capacity, out.Starved, len(out.Victims))
		}
	}
}

// TestPreemptOverAnEmptyFleet: queues short of their guarantee with work
// waiting, on a fleet with no capacity yet (an autoscaler's, before its
// first machine): no victim, and no division by a share of nothing (the
// leader's preemption round panicked, taking the server down).
func TestPreemptOverAnEmptyFleet(t *testing.T) {
	now := 100 * minute
	in := &PreemptInput{Now: now, Capacity: Res{0, 0},
		Queues: []PreemptQueue{
			{Name: "tier1", Parent: -1, Guarantee: Res{4_000}, Waiting: Res{3_000, 96 << 20}, ShortSince: now - 2*minute, ReclaimGraceNs: minute},
			{Name: "tier3", Parent: -1, Guarantee: Res{1_000}, Waiting: Res{2_000, 64 << 20}, Preemptible: true},
		}}
	out := Preempt(in)
	if len(out.Victims) != 0 || !out.Short[0] {
		t.Fatalf("over an empty fleet: %d victims, short %v", len(out.Victims), out.Short)
	}
}
