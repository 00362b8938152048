package state

import (
	"slices"
	"testing"

	"github.com/drover-sched/drover/placement"
)

// Attacks (helper 46b) on QueueSetting.HomeClusters in AutoApplyQueues
// and RollbackQueues: log entries written before it (by a binary
// without rebalancing) replayed by this one.

func atkRoutedTree(h *Harness) {
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org", Guarantee: placement.Resources{CPUMilli: 20_000}},
		AutoApply: placement.AutoApply{EveryNs: 3600e9}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/tier3", Weight: 1, Guarantee: placement.Resources{CPUMilli: 4_000},
		HomeClusters: []string{"east"}}}})
}

// TestAttack46bHomeClustersSameIgnoresOrder: a queue declared with
// home clusters [west, east] and a setting [east, west] (a step's
// sorted HomeClusters) are the same route; Same says they differ, so a
// regeneration proposed against one and applied against the other
// keeps the queue ("changed since the proposal").
func TestAttack46bHomeClustersSameIgnoresOrder(t *testing.T) {
	a := QueueSetting{Path: "org/a", Weight: 1, HomeClusters: []string{"west", "east"}}
	b := QueueSetting{Path: "org/a", Weight: 1, HomeClusters: []string{"east", "west"}}
	if !a.Same(b) {
		t.Logf("Same(%v, %v) is false: order-sensitive (a cosmetic change counts as a change)", a.HomeClusters, b.HomeClusters)
	}
	// nil and empty are one route (any).
	if !(QueueSetting{Path: "x", Weight: 1}).Same(QueueSetting{Path: "x", Weight: 1, HomeClusters: []string{}}) {
		t.Errorf("nil and empty home clusters differ")
	}
}

// TestAttack46bAutoApplyHomeClustersBounds: a step's home clusters are
// checked as a queue's are: names, count; a setting naming a cluster
// twice, or an empty name, is refused before anything changes.
func TestAttack46bAutoApplyHomeClustersBounds(t *testing.T) {
	h := newHarness(t)
	atkRoutedTree(h)
	for _, hc := range [][]string{{""}, {"a\x00b"}, {"east west"}, make([]string, placement.MaxQueueAllowFrom+1)} {
		if len(hc) > 1 {
			for i := range hc {
				hc[i] = "c" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			}
		}
		h.MustFail(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/tier3", Weight: 1, GuaranteeMilli: 4_000, HomeClusters: hc}}}, ErrInvalid)
	}
	q, _ := h.S.QueueByPath("org/tier3")
	if !slices.Equal(q.HomeClusters, []string{"east"}) {
		t.Fatalf("home clusters %v", q.HomeClusters)
	}
}

// TestAttack46bMemoryByClusterFollowsAttempts: memory by cluster is
// charged where each attempt runs, across two clusters, released as
// attempts end, up the tree; survives a replay and a snapshot.
func TestAttack46bMemoryByClusterFollowsAttempts(t *testing.T) {
	h := newHarness(t)
	a := h.activateIn("wa", "r1", "east", 16)
	b := h.activateIn("wb", "r1", "west", 16)
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t"}, Projects: []string{"default"}}})
	sp := spec("j", 1)
	sp.Memory = 3 << 30
	bt := h.CreateBatch(entry(1, 4, sp))
	h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(bt, 1, 3, a), place(bt, 4, 1, b)}})
	check := func(s *State, east, west int64) {
		t.Helper()
		for _, p := range []string{"org", "org/t"} {
			q, _ := s.QueueByPath(p)
			if q.UsedMemoryByCluster["east"] != east || q.UsedMemoryByCluster["west"] != west || q.UsedMemory != east+west {
				t.Fatalf("%s: memory by cluster %v, total %d; want east %d west %d", p, q.UsedMemoryByCluster, q.UsedMemory, east, west)
			}
		}
	}
	check(h.S, 9<<30, 3<<30)
	check(h.Replay(), 9<<30, 3<<30)
	check(h.Restored(), 9<<30, 3<<30)
	h.Complete(a, nil)
	check(h.S, 0, 3<<30)
	if q, _ := h.S.QueueByPath("org/t"); len(q.UsedMemoryByCluster) != 1 {
		t.Fatalf("a cluster at 0 still listed: %v", q.UsedMemoryByCluster)
	}
}

// TestAttack46bInvariantsSeeMissingClusterEntry: the invariant check
// compares each cluster the queue counts with the recomputed use, not
// the other way: a cluster's memory (or cores) missing from the queue's
// count, while its attempts hold some there, goes unseen.
func TestAttack46bInvariantsSeeMissingClusterEntry(t *testing.T) {
	h := newHarness(t)
	a := h.activateIn("wa", "r1", "east", 16)
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}, Projects: []string{"default"}}})
	sp := spec("j", 1)
	sp.Memory = 3 << 30
	bt := h.CreateBatch(entry(1, 2, sp))
	h.Must(&Plan{Now: h.Tick(), Placements: []Placement{place(bt, 1, 2, a)}})
	q := h.S.queues["org"]
	delete(q.used.memByCluster, "east")
	err := h.S.CheckInvariants()
	q.used.memByCluster["east"] = 6 << 30
	if err == nil {
		t.Errorf("memory by cluster lost east's 6 GiB, and the invariants did not see it")
	}
}

// TestAttack46bRollbackRevertsRouteItNeverChanged: version 1 changes
// tier 3's weight only (its route stays [east]); an admin then routes
// tier 3 to west (queue rebalance -apply, or a placement apply); rolling
// back version 1 puts the weight back and, since every setting carries
// the route, routes tier 3 back to east: a change no version made is
// undone (as a later manual weight change is; new for routes).
func TestAttack46bRollbackRevertsRouteItNeverChanged(t *testing.T) {
	h := newHarness(t)
	atkRoutedTree(h)
	v := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/tier3", Weight: 2, GuaranteeMilli: 4_000, HomeClusters: []string{"east"}}}}).(*AutoApplyResult).Version
	q, _ := h.S.QueueByPath("org/tier3")
	q.HomeClusters = []string{"west"}
	h.Must(&ApplyPlacement{Now: h.Tick(), Queues: []Queue{q.Queue}})
	rb := h.Must(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: v.Seq}).(*AutoApplyResult).Version
	q, _ = h.S.QueueByPath("org/tier3")
	if !slices.Equal(q.HomeClusters, []string{"west"}) {
		t.Errorf("rolling back version %d (weight only) routed tier 3 from [west] to %v (rollback version %+v)", v.Seq, q.HomeClusters, rb.After)
	}
}
