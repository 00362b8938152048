package state

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
)

// Attacks on AutoApplyQueues / RollbackQueues (server/state/queueauto.go):
// the entries the leader and the admin endpoints write.

func atkSettings(s *State) map[string]QueueSetting {
	out := map[string]QueueSetting{}
	for _, q := range s.Queues() {
		out[q.Path] = SettingOf(&q.Queue)
	}
	return out
}

func atkOrg(h *Harness) {
	h.T.Helper()
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org", Guarantee: placement.Resources{CPUMilli: 20_000}},
		AutoApply: placement.AutoApply{EveryNs: 3600e9}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t1", Weight: 4, Guarantee: placement.Resources{CPUMilli: 16_000}}, Projects: []string{"default"}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t3", Weight: 1, Guarantee: placement.Resources{CPUMilli: 4_000}}}})
}

// TestAttack46AutoApplyUnchangedHugeMaxRunningRefused: an operator sets a
// queue's max_running jobs above MaxQueueJobsSetting (2^40; the queue
// itself accepts any number >= 0, e.g. 10^13 as "no real cap"). The
// regeneration of the tree carries every queue's setting, changed or
// not; ValidateAutoApply refuses the whole entry for the one queue whose
// value it would leave as it is. The tree can then never be
// regenerated (and the leader's loop, which returns on the first error,
// stops at it every tick).
func TestAttack46AutoApplyUnchangedHugeMaxRunningRefused(t *testing.T) {
	h := newHarness(t)
	atkOrg(h)
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t3", Weight: 1, Guarantee: placement.Resources{CPUMilli: 4_000},
		Limits: placement.QueueLimits{MaxRunningJobs: 1 << 41}}}})
	cur := atkSettings(h.S)
	after := []QueueSetting{cur["org"], cur["org/t1"], cur["org/t3"]}
	after[1].Weight = 5 // one real change
	res := h.Apply(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: after})
	if err, ok := res.(*ApplyError); ok {
		t.Fatalf("a regeneration that leaves org/t3's max_running (2^41, accepted by SetQueue) unchanged is refused: %v", err)
	}
	if got := atkSettings(h.S)["org/t1"].Weight; got != 5 {
		t.Fatalf("org/t1 weight %d, want 5", got)
	}
}

// TestAttack46AutoApplyDuplicatePaths: an entry naming one queue twice is
// either refused or applied as its last setting, the same on replay and
// restore, and a rollback puts the queue back.
func TestAttack46AutoApplyDuplicatePaths(t *testing.T) {
	h := newHarness(t)
	atkOrg(h)
	start := atkSettings(h.S)
	old := start["org/t1"]
	changed := old
	changed.Weight = 7
	// The last entry for org/t1 says "as it is": last-wins keeps weight 4.
	res := h.Apply(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{changed, old}})
	h.Restored()
	if _, refused := res.(*ApplyError); !refused {
		if got := atkSettings(h.S)["org/t1"]; !got.Same(old) {
			t.Errorf("after [weight 7, weight 4] for org/t1 the queue has %+v (version %+v): neither refused nor the last setting", got, res)
		}
	}
	// Two different changes: whatever happens, a rollback of it restores.
	c1, c2 := old, old
	c1.Weight, c2.Weight = 11, 12
	res = h.Apply(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{c1, c2}})
	if ar, ok := res.(*AutoApplyResult); ok && ar.Version.Applied {
		if len(ar.Version.After) != 1 {
			t.Errorf("a version records org/t1 %d times: %+v", len(ar.Version.After), ar.Version.After)
		}
		first := h.S.QueueVersions("org")[0].Seq
		h.Must(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: first})
		if got := atkSettings(h.S); !got["org/t1"].Same(start["org/t1"]) {
			t.Errorf("rollback left org/t1 at %+v, want %+v", got["org/t1"], start["org/t1"])
		}
	}
	h.Restored()
}

// TestAttack46RollbackAfterQueuesDeletedAndReAdded: rollback after a queue
// of the version was removed, and after it came back as a parent whose
// children's guarantees exceed what the version would put back: never a
// panic, a refusal rather than an invalid tree, the same on replay and
// restore.
func TestAttack46RollbackAfterQueuesDeletedAndReAdded(t *testing.T) {
	h := newHarness(t)
	atkOrg(h)
	v1 := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{
		{Path: "org", Weight: 1, GuaranteeMilli: 22_000}, {Path: "org/t1", Weight: 5, GuaranteeMilli: 17_000}, {Path: "org/t3", Weight: 2, GuaranteeMilli: 5_000}}}).(*AutoApplyResult).Version
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t3"}}, Delete: true})
	rb := h.Must(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: v1.Seq}).(*AutoApplyResult).Version
	for _, a := range rb.After {
		if a.Path == "org/t3" {
			t.Fatalf("rollback touched the removed org/t3: %+v", rb)
		}
	}
	// org/t3 back, as a parent of children guaranteed 5 cores; a version
	// that moves it, then a rollback to before v1 would put 4 cores back.
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t3", Guarantee: placement.Resources{CPUMilli: 0}}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t3/a", Guarantee: placement.Resources{CPUMilli: 2_000}}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t3/b", Guarantee: placement.Resources{CPUMilli: 3_000}}}})
	v2 := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/t3", Weight: 1, GuaranteeMilli: 6_000}}}).(*AutoApplyResult).Version
	_ = v2
	res := h.Apply(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: v1.Seq})
	if err, ok := res.(*ApplyError); ok && err.Kind != ErrInvalid {
		t.Fatalf("rollback: %v", err)
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	h.Restored()
}

// TestAttack46VersionsOfRemovedTreeDoNotCarryOver: a tree is removed and
// a new tree of the same name made (another team's). The old tree's
// versions are not the new tree's history: they are not listed for it
// and cannot be rolled back onto it, and the old tree's last run does
// not delay the new tree's first.
func TestAttack46VersionsOfRemovedTreeDoNotCarryOver(t *testing.T) {
	h := newHarness(t)
	atkOrg(h)
	v1 := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{
		{Path: "org", Weight: 1, GuaranteeMilli: 20_000}, {Path: "org/t1", Weight: 9, GuaranteeMilli: 1_000}}}).(*AutoApplyResult).Version
	for _, p := range []string{"org/t1", "org/t3", "org"} {
		h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: p}}, Delete: true})
	}
	h.MustFail(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: v1.Seq}, ErrNotFound)
	// A new tree "org", set up from scratch.
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org", Guarantee: placement.Resources{CPUMilli: 100_000}}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/t1", Weight: 2, Guarantee: placement.Resources{CPUMilli: 50_000}}}})
	var problems []string
	if vs := h.S.QueueVersions("org"); len(vs) != 0 {
		problems = append(problems, fmt.Sprintf("the new tree org lists %d versions of the removed one", len(vs)))
	}
	h.S.Read(func(r Reader) {
		if last := r.LastAutoApply("org"); last != 0 {
			problems = append(problems, fmt.Sprintf("the new tree org was 'last regenerated' at %d, by the removed tree", last))
		}
	})
	res := h.Apply(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: v1.Seq})
	if _, ok := res.(*ApplyError); !ok {
		problems = append(problems, fmt.Sprintf("a rollback to the removed tree's version %d applied to the new tree: org/t1 now %+v", v1.Seq, atkSettings(h.S)["org/t1"]))
	}
	for _, p := range problems {
		t.Error(p)
	}
	h.Restored()
}

// TestAttack46RandomAutoApplyRollbackDeterministic: random sequences of
// queue changes, regenerations (valid, invalid, dry, duplicate paths,
// other trees' paths, unknown queues) and rollbacks never panic, never
// break the state's invariants (the harness checks after each entry),
// and replay and restore to the same bytes.
func TestAttack46RandomAutoApplyRollbackDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 46))
			h := newHarness(t)
			paths := []string{"org", "org/a", "org/b", "org/a/x", "org/a/y", "other", "other/z"}
			for _, p := range paths {
				h.Apply(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: p}}})
			}
			h.Apply(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}, AutoApply: placement.AutoApply{EveryNs: 3600e9, Keep: int64(1 + rng.IntN(4))}}})
			seqs := []uint64{0, 1, 1 << 63}
			kinds := map[string]int{}
			for step := 0; step < 400; step++ {
				switch rng.IntN(6) {
				case 0: // a queue set, removed or re-added
					p := paths[rng.IntN(len(paths))]
					h.Apply(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: p, Weight: rng.Int64N(5),
						Guarantee: placement.Resources{CPUMilli: rng.Int64N(4) * 1000}}}, Delete: rng.IntN(3) == 0})
				case 1, 2, 3: // a regeneration
					tree := []string{"org", "other", "nope", "org/a"}[rng.IntN(4)]
					var after []QueueSetting
					for range rng.IntN(5) {
						p := paths[rng.IntN(len(paths))]
						if tree == "org" && rng.IntN(10) != 0 {
							p = paths[rng.IntN(5)]
						}
						after = append(after, QueueSetting{Path: p, Weight: max(rng.Int64N(9)-1, 0) % 4,
							GuaranteeMilli: rng.Int64N(6) * 1000, MaxRunningJobs: rng.Int64N(3)})
					}
					res := h.Apply(&AutoApplyQueues{Now: h.Tick(), Tree: tree, DryRun: rng.IntN(4) == 0, After: after, Note: "n"})
					if ar, ok := res.(*AutoApplyResult); ok && ar.Version.Seq > 0 {
						seqs = append(seqs, ar.Version.Seq)
						kinds[ar.Version.Kind]++
					}
				default: // a rollback
					tree := []string{"org", "other"}[rng.IntN(2)]
					res := h.Apply(&RollbackQueues{Now: h.Tick(), Tree: tree, Seq: seqs[rng.IntN(len(seqs))]})
					if ar, ok := res.(*AutoApplyResult); ok && ar.Version.Seq > 0 {
						seqs = append(seqs, ar.Version.Seq)
						kinds[ar.Version.Kind]++
					}
				}
				if step%100 == 99 {
					h.Restored()
				}
			}
			h.Restored()
			t.Logf("versions recorded: %v", kinds)
		})
	}
}

// TestAttack46TenThousandQueues: a regeneration of a tree of MaxQueues
// queues applies in reasonable time; one more is refused; the versions a
// tree keeps (keep 100 of a 10,000-queue tree) stay within reason in the
// snapshot.
func TestAttack46TenThousandQueues(t *testing.T) {
	h := newHarness(t)
	qs := []Queue{{Queue: placement.Queue{Path: "org", Guarantee: placement.Resources{CPUMilli: 1_000_000}}, AutoApply: placement.AutoApply{EveryNs: 3600e9, Keep: placement.MaxAutoKeep}}}
	for i := range placement.MaxQueues - 1 {
		qs = append(qs, Queue{Queue: placement.Queue{Path: fmt.Sprintf("org/q%05d", i), Weight: 1, Guarantee: placement.Resources{CPUMilli: 100}}})
	}
	h.Must(&ApplyPlacement{Now: h.Tick(), Queues: qs})
	after := make([]QueueSetting, 0, len(qs))
	for _, q := range qs {
		after = append(after, QueueSetting{Path: q.Path, Weight: 2, GuaranteeMilli: q.Guarantee.CPUMilli})
	}
	start := time.Now()
	v := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: after}).(*AutoApplyResult).Version
	t.Logf("a regeneration of %d queues applied in %v", len(after), time.Since(start))
	if !v.Applied || len(v.After) != placement.MaxQueues {
		t.Fatalf("version %d applied %v with %d changes", v.Seq, v.Applied, len(v.After))
	}
	h.MustFail(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: append(slices.Clone(after), QueueSetting{Path: "org/extra", Weight: 1})}, ErrInvalid)
	base := len(SnapshotBytes(t, h.S))
	// 100 refused regenerations (children over the parent's guarantee),
	// each keeping its whole proposal.
	bad := slices.Clone(after)
	for i := range bad[1:] {
		bad[i+1].GuaranteeMilli = 1_000
	}
	start = time.Now()
	const n = 25 // of the 100 a tree may keep; scaled below
	for range n {
		res := h.Apply(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: bad})
		if ar, ok := res.(*AutoApplyResult); !ok || ar.Version.Kind != VersionRefused {
			t.Fatalf("want refused, got %+v", res)
		}
	}
	grown := (len(SnapshotBytes(t, h.S)) - base) * placement.MaxAutoKeep / n
	t.Logf("%d refused versions took %v; 100 would grow the snapshot of a %d-queue tree by %d MiB", n, time.Since(start), placement.MaxQueues, grown>>20)
	if grown > 64<<20 {
		t.Errorf("the refused versions kept of one tree grow the snapshot by %d MiB (each refused version keeps its whole proposal)", grown>>20)
	}
}

// TestAttack46AutoApplyBoundsRefused: names and notes over their bounds,
// a tree named by a nested path, weights 0, negative max_running and
// guarantees over MaxQueueMilli are refused before anything changes.
func TestAttack46AutoApplyBoundsRefused(t *testing.T) {
	h := newHarness(t)
	atkOrg(h)
	start := atkSettings(h.S)
	long := string(make([]byte, MaxAuditField+1))
	for _, c := range []Command{
		&AutoApplyQueues{Now: h.Tick(), Tree: "org", By: long},
		&AutoApplyQueues{Now: h.Tick(), Tree: "org", Note: string(make([]byte, MaxVersionNote+1))},
		&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/t1", Weight: 0}}},
		&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/t1", Weight: 1, MaxRunningJobs: -1}}},
		&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/t1", Weight: 1, GuaranteeMilli: placement.MaxQueueMilli + 1}}},
		&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org2/t1", Weight: 1}}},
		&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "orgx", Weight: 1}}},
		&RollbackQueues{Now: h.Tick(), Tree: "org", By: long},
	} {
		h.MustFail(c, ErrInvalid)
	}
	h.MustFail(&AutoApplyQueues{Now: h.Tick(), Tree: "org/t1", After: []QueueSetting{{Path: "org/t1", Weight: 2}}}, ErrNotFound)
	h.MustFail(&RollbackQueues{Now: h.Tick(), Tree: "org/t1", Seq: 1}, ErrNotFound)
	h.MustFail(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: 0}, ErrNotFound)
	h.MustFail(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: 1 << 63}, ErrNotFound)
	if got := atkSettings(h.S); fmt.Sprint(got) != fmt.Sprint(start) {
		t.Fatalf("settings changed: %+v", got)
	}
	// A parent's guarantee summed over many children at the bound is
	// refused (no overflow makes it pass).
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "big", Guarantee: placement.Resources{CPUMilli: placement.MaxQueueMilli}}}})
	var after []QueueSetting
	for i := range 50 {
		p := fmt.Sprintf("big/c%d", i)
		h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: p}}})
		after = append(after, QueueSetting{Path: p, Weight: 1, GuaranteeMilli: placement.MaxQueueMilli})
	}
	res := h.Apply(&AutoApplyQueues{Now: h.Tick(), Tree: "big", After: after})
	if ar, ok := res.(*AutoApplyResult); !ok || ar.Version.Kind != VersionRefused {
		t.Fatalf("children at 50x the parent's guarantee: %+v", res)
	}
	h.Restored()
}
