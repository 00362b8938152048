package scheduler

import "testing"

// TestPreemptionWeighsPastUse: between sibling queues of a tree that
// remembers past use (usage_half_life), fair share for preemption weighs
// each leaf's past use as the scheduling round does: a queue that ran much
// lately has the smaller fair share, so its sibling that waits takes more
// back from it, and it takes less back from its sibling.
func TestPreemptionWeighsPastUse(t *testing.T) {
	now := 100 * minute
	input := func(pastA, pastB int64) *PreemptInput {
		in := &PreemptInput{Now: now, Capacity: Res{100_000},
			Queues: []PreemptQueue{
				{Name: "org", Parent: -1, Used: Res{100_000}},
				{Name: "org/a", Parent: 0, Used: Res{80_000}, Preemptible: true, PastMilli: pastA},
				{Name: "org/b", Parent: 0, Used: Res{20_000}, Waiting: Res{80_000}, AfterNs: minute, StarvedSince: now - 5*minute, Preemptible: true, PastMilli: pastB},
			}}
		in.Attempts = append(fullOf(2, 1, 80, now, 0), fullOf(3, 2, 20, now, 0)...)
		return in
	}
	out := Preempt(input(0, 0))
	even := victimsOf(out)[1]
	if out.FairShare[1][0] != 50_000 || even != 30 {
		t.Fatalf("no past use: fair shares %v, %d victims of a; want 50 cores each, 30 victims", out.FairShare, even)
	}
	out = Preempt(input(60_000, 0))
	if heavy := victimsOf(out)[1]; out.FairShare[1][0] >= 50_000 || heavy <= even {
		t.Fatalf("a ran 60 cores lately: its fair share %d, %d victims; want less than 50 cores and more than %d victims", out.FairShare[1][0], heavy, even)
	}
	out = Preempt(input(0, 60_000))
	if light := victimsOf(out)[1]; out.FairShare[2][0] >= 50_000 || light >= even {
		t.Fatalf("b ran 60 cores lately: its fair share %d, %d victims of a; want less than 50 cores and fewer than %d", out.FairShare[2][0], light, even)
	}
}
