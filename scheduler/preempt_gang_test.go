package scheduler

import (
	"testing"
)

// gangReclaim is a queue owed 16 cores whose waiting work is a gang of
// two 8-core members, beside a borrower whose 32 one-core attempts fill
// four 8-core workers, the youngest spread over all four.
func gangReclaim() *PreemptInput {
	now := 100 * minute
	in := &PreemptInput{Now: now, Capacity: Res{32_000, 0},
		Queues: []PreemptQueue{
			{Name: "mpi", Parent: -1, Guarantee: Res{16_000}, Waiting: Res{16_000, 16 << 30}, ShortSince: now - 2*minute, ReclaimGraceNs: minute},
			{Name: "stream", Parent: -1, Used: Res{32_000, 32 << 30}, Preemptible: true},
		}}
	in.Attempts = fullOf(2, 1, 32, now, 0)
	for i := range in.Attempts {
		in.Attempts[i].Instance = uint32(i%4 + 1) // job 32, the youngest, on worker 4
		in.Attempts[i].Memory = 1 << 30
	}
	return in
}

// TestPreemptFreesHeldRoomForAGang: a claim of a queue whose gang has
// room held for it stops the attempts on the held workers and no others
// (room freed anywhere would be spread, and taken by other jobs before
// the gang could use it); attempts already told to stop there count as
// freed; a claim without holds frees what it needs anywhere, youngest
// first.
func TestPreemptFreesHeldRoomForAGang(t *testing.T) {
	in := gangReclaim()
	out := Preempt(in)
	on := map[uint32]int{}
	for _, v := range out.Victims {
		on[v.Instance]++
	}
	if len(out.Victims) != 16 || len(on) != 4 {
		t.Fatalf("without holds: victims on %v; want the 16 youngest, spread over the 4 workers", on)
	}

	in = gangReclaim()
	in.AddHolds([]GangHold{{Batch: 9, Gang: 1, Queue: "mpi", Members: 2, CPUMilli: 16000, Memory: 16 << 30,
		On: []HeldOn{{Instance: 1, HeldMilli: 8000, HeldMem: 8 << 30}, {Instance: 2, HeldMilli: 8000, HeldMem: 8 << 30}}}})
	if len(in.Holds) != 1 || in.Holds[0].Demand[0] != 16_000 || in.Holds[0].On[0].Need[0] != 8000 || in.Holds[0].On[0].Need[1] != 8<<30 {
		t.Fatalf("holds %+v; want the gang's 16 cores, 8 to free on each worker", in.Holds)
	}
	out = Preempt(in)
	on = map[uint32]int{}
	for _, v := range out.Victims {
		on[v.Instance]++
	}
	if len(out.Victims) != 16 || on[1] != 8 || on[2] != 8 {
		t.Fatalf("with holds: victims on %v; want the 8 attempts of each held worker", on)
	}

	// Two attempts of worker 1 told to stop already, and 1 core free on
	// worker 2: 6 and 7 more.
	in = gangReclaim()
	in.Attempts[0].Stopping, in.Attempts[4].Stopping = true, true
	in.Queues[1].Used = Res{30_000, 30 << 30}
	in.AddHolds([]GangHold{{Batch: 9, Gang: 1, Queue: "mpi", Members: 2, CPUMilli: 16000, Memory: 16 << 30,
		On: []HeldOn{{Instance: 1, HeldMilli: 8000, HeldMem: 8 << 30}, {Instance: 2, HeldMilli: 8000, HeldMem: 8 << 30, FreeMilli: 1000, FreeMem: 1 << 30}}}})
	out = Preempt(in)
	on = map[uint32]int{}
	for _, v := range out.Victims {
		on[v.Instance]++
	}
	if on[1] != 6 || on[2] != 7 || len(out.Victims) != 13 {
		t.Fatalf("victims on %v; want 6 on worker 1 and 7 on worker 2", on)
	}

	// A hold of a queue the input does not have claims nothing.
	in = gangReclaim()
	in.AddHolds([]GangHold{{Batch: 9, Gang: 1, Queue: "elsewhere", Members: 2, CPUMilli: 16000}})
	if len(in.Holds) != 0 {
		t.Fatalf("holds %+v for a queue not in the input", in.Holds)
	}
}
