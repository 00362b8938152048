package state

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
)

// TestAutoApplyAndRollback: a regeneration changes the tree's queues at
// once, as a version with what it replaced, audited; a dry run only
// records its proposal; one that would leave the tree invalid is recorded
// as refused and changes nothing; a rollback puts back what the tree had
// before a version and every later one; a tree keeps its last `keep`
// versions; and all of it, the time of the last run too, survives a
// replay and a snapshot.
func TestAutoApplyAndRollback(t *testing.T) {
	h := newHarness(t)
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org", Guarantee: placement.Resources{CPUMilli: 20_000}},
		AutoApply: placement.AutoApply{EveryNs: 3600e9, Keep: 4}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/tier1", Weight: 4, Guarantee: placement.Resources{CPUMilli: 16_000}}, Projects: []string{"default"}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/tier3", Weight: 1, Guarantee: placement.Resources{CPUMilli: 4_000}}}})
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/tier3"}, AutoApply: placement.AutoApply{EveryNs: 3600e9}}}, ErrInvalid)
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}, AutoApply: placement.AutoApply{EveryNs: 1}}}, ErrInvalid)

	settings := func(s *State) map[string]QueueSetting {
		out := map[string]QueueSetting{}
		for _, q := range s.Queues() {
			out[q.Path] = SettingOf(&q.Queue)
		}
		return out
	}
	start := settings(h.S)
	step1 := []QueueSetting{{Path: "org", Weight: 1, GuaranteeMilli: 25_000}, {Path: "org/tier1", Weight: 5, GuaranteeMilli: 20_000, MaxRunningJobs: 0},
		{Path: "org/tier3", Weight: 1, GuaranteeMilli: 5_000}}
	v1 := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", By: "drover auto_apply", After: step1, Note: "checks ok"}).(*AutoApplyResult).Version
	if !v1.Applied || v1.Kind != VersionAutoApply || len(v1.After) != 3 || v1.Before[1].GuaranteeMilli != 16_000 {
		t.Fatalf("version 1: %+v", v1)
	}
	if got := settings(h.S)["org/tier1"]; got.Weight != 5 || got.GuaranteeMilli != 20_000 {
		t.Fatalf("tier 1 after version 1: %+v", got)
	}
	// A dry run records, changes nothing.
	dry := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", DryRun: true, After: []QueueSetting{{Path: "org/tier3", Weight: 2, GuaranteeMilli: 5_000}}}).(*AutoApplyResult).Version
	if dry.Applied || dry.Kind != VersionDryRun || settings(h.S)["org/tier3"].Weight != 1 {
		t.Fatalf("dry run %+v changed tier 3 to %+v", dry, settings(h.S)["org/tier3"])
	}
	// Children over their parent's guarantee: refused, nothing changed.
	bad := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/tier1", Weight: 5, GuaranteeMilli: 40_000}}}).(*AutoApplyResult).Version
	if bad.Applied || bad.Kind != VersionRefused || !strings.Contains(bad.Note, "guarantees") || settings(h.S)["org/tier1"].GuaranteeMilli != 20_000 {
		t.Fatalf("refused %+v", bad)
	}
	step2 := []QueueSetting{{Path: "org", Weight: 1, GuaranteeMilli: 30_000}, {Path: "org/tier1", Weight: 6, GuaranteeMilli: 24_000}, {Path: "org/tier3", Weight: 1, GuaranteeMilli: 6_000}}
	v2 := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: step2}).(*AutoApplyResult).Version
	last := h.Now
	// Out of bounds, or another tree's queue: refused before anything.
	h.MustFail(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/tier1", Weight: 0}}}, ErrInvalid)
	h.MustFail(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "other/x", Weight: 1}}}, ErrInvalid)
	h.MustFail(&AutoApplyQueues{Now: h.Tick(), Tree: "nope", After: nil}, ErrNotFound)
	// A rollback to before version 1 undoes 1 and 2.
	h.MustFail(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: dry.Seq}, ErrConflict)
	rb := h.Must(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: v1.Seq, By: "root"}).(*AutoApplyResult).Version
	if !reflect.DeepEqual(settings(h.S), start) || rb.Kind != VersionRollback || !rb.Applied {
		t.Fatalf("after the rollback %+v (version %+v), want %+v", settings(h.S), rb, start)
	}
	// Keep 4: version 1 has gone; rolling back to
	// version 1 is no more possible.
	h.MustFail(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: v1.Seq}, ErrNotFound)
	for _, s := range []*State{h.S, h.Replay(), h.Restored()} {
		var kinds []string
		for _, v := range s.QueueVersions("org") {
			kinds = append(kinds, v.Kind)
		}
		if strings.Join(kinds, ",") != "dry_run,refused,auto_apply,rollback" {
			t.Fatalf("versions kept %v, want the last 4", kinds)
		}
		if got := s.QueueVersions("org")[2]; got.Seq != v2.Seq || !reflect.DeepEqual(got.After, v2.After) {
			t.Fatalf("version 2 kept as %+v", got)
		}
		s.Read(func(r Reader) {
			if r.LastAutoApply("org") < last {
				t.Fatalf("last run %d, want at least %d", r.LastAutoApply("org"), last)
			}
		})
		if !reflect.DeepEqual(settings(s), start) {
			t.Fatalf("settings %+v", settings(s))
		}
	}
	// Audited, newest first: the applied versions (by "drover" when the
	// entry names no one) and the rollback.
	var audited []string
	for _, e := range h.S.AuditLog(time.Time{}, "", 100) {
		if strings.HasPrefix(e.Route, "queue ") {
			audited = append(audited, e.User+" "+e.Route)
		}
	}
	if strings.Join(audited, ",") != "root queue rollback,drover queue auto_apply,drover auto_apply queue auto_apply" {
		t.Fatalf("audit %q", audited)
	}
}

// TestAutoApplyMovesHomeClusters: a regeneration's rebalancing move sets
// a leaf's home clusters with its other settings in one version, a
// rollback puts the route back, and a setting equal but for its home
// clusters is a change.
func TestAutoApplyMovesHomeClusters(t *testing.T) {
	h := newHarness(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Clusters: []Cluster{{Name: "east", Region: "r1"}, {Name: "west", Region: "r2"}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}, AutoApply: placement.AutoApply{EveryNs: 3600e9, Rebalance: true}}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/tier3", HomeClusters: []string{"east"}}, Projects: []string{"default"}}})
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}, AutoApply: placement.AutoApply{EveryNs: 3600e9, HighPermille: 500, LowPermille: 600}}}, ErrInvalid)
	before := []QueueSetting{{Path: "org", Weight: 1}, {Path: "org/tier3", Weight: 1, HomeClusters: []string{"east"}}}
	after := []QueueSetting{{Path: "org", Weight: 1}, {Path: "org/tier3", Weight: 1, HomeClusters: []string{"west"}}}
	v := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: after, Before: before, Note: "moved org/tier3 from east to west"}).(*AutoApplyResult).Version
	if !v.Applied || len(v.After) != 1 || !slices.Equal(v.After[0].HomeClusters, []string{"west"}) || !slices.Equal(v.Before[0].HomeClusters, []string{"east"}) {
		t.Fatalf("version %+v", v)
	}
	home := func(s *State) []string {
		q, _ := s.QueueByPath("org/tier3")
		return q.HomeClusters
	}
	if got := home(h.S); !slices.Equal(got, []string{"west"}) {
		t.Fatalf("tier 3 routed to %v, want west", got)
	}
	h.MustFail(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: []QueueSetting{{Path: "org/tier3", Weight: 1, HomeClusters: []string{"no such name!"}}}}, ErrInvalid)
	// A move to a cluster not declared is not made: the queue keeps its
	// route (its jobs would wait for ever).
	nowhere := []QueueSetting{{Path: "org/tier3", Weight: 1, HomeClusters: []string{"gone"}}}
	if r := h.Must(&AutoApplyQueues{Now: h.Tick(), Tree: "org", After: nowhere, Before: after[1:]}).(*AutoApplyResult); r.Version.Applied {
		t.Fatalf("moved to an undeclared cluster: %+v", r.Version)
	}
	h.Must(&RollbackQueues{Now: h.Tick(), Tree: "org", Seq: v.Seq})
	for _, s := range []*State{h.S, h.Replay(), h.Restored()} {
		if got := home(s); !slices.Equal(got, []string{"east"}) {
			t.Fatalf("after the rollback tier 3 is routed to %v, want east", got)
		}
	}
}
