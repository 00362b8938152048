package state

import (
	"testing"

	"github.com/drover-sched/drover/placement"
)

// TestRemoveDeclaredWaitsForWhatDependsOnIt: a launch config, a cluster
// group and a cluster are removed one at a time, each refused while
// something still depends on it (the config's live machine, a cluster in
// the group, active workers, a queue routed there); a cluster that
// retired workers named stays as their record, undeclared; the result
// survives a snapshot and a replay.
func TestRemoveDeclaredWaitsForWhatDependsOnIt(t *testing.T) {
	h := autoscaled(t)
	h.Must(&ApplyPlacement{Now: h.Tick(), Groups: []ClusterGroup{{Name: "g"}},
		Clusters: []Cluster{{Name: "a", Region: "east", Group: "g", Provider: "local"}, {Name: "b", Region: "east"}},
		Queues:   []Queue{{Queue: placement.Queue{Path: "org", HomeClusters: []string{"b"}}}}})
	res := h.Must(&Scale{Now: h.Tick(), Launches: []ScaleLaunch{{Config: "small", Count: 1}}}).(*ScaleResult)
	machine := res.Requests[0].Machines[0]

	h.MustFail(&RemoveDeclared{Now: h.Tick(), Kind: KindCluster, Name: "a"}, ErrConflict)      // its launch configs
	h.MustFail(&RemoveDeclared{Now: h.Tick(), Kind: KindClusterGroup, Name: "g"}, ErrConflict) // cluster a is in it
	h.MustFail(&RemoveDeclared{Now: h.Tick(), Kind: KindLaunchConfig, Name: "nope"}, ErrNotFound)
	h.MustFail(&RemoveDeclared{Now: h.Tick(), Kind: "queue", Name: "org"}, ErrInvalid)
	h.Must(&RemoveDeclared{Now: h.Tick(), Kind: KindLaunchConfig, Name: "small"})
	h.Must(&RemoveDeclared{Now: h.Tick(), Kind: KindLaunchConfig, Name: "spot"})
	h.S.Read(func(r Reader) {
		if _, cfgs, _ := r.AutoscalerRecord(); len(cfgs) != 0 {
			t.Fatalf("configs left: %+v", cfgs)
		}
	})
	// The removed config's machine is still requested: the cluster waits.
	h.MustFail(&RemoveDeclared{Now: h.Tick(), Kind: KindCluster, Name: "a"}, ErrConflict)
	h.Must(&MachineGone{Now: h.Tick(), Machine: machine, Reason: "deleted"})
	// A worker that was in a and retired keeps a's record.
	w := h.activateIn("w1", "east", "a", 4)
	h.MustFail(&RemoveDeclared{Now: h.Tick(), Kind: KindCluster, Name: "a"}, ErrConflict) // an active worker
	h.Must(&Retire{Now: h.Tick(), Instance: w, Reason: "drained"})
	h.Must(&RemoveDeclared{Now: h.Tick(), Kind: KindCluster, Name: "a"})
	h.MustFail(&RemoveDeclared{Now: h.Tick(), Kind: KindCluster, Name: "a"}, ErrNotFound) // undeclared now
	h.Must(&RemoveDeclared{Now: h.Tick(), Kind: KindClusterGroup, Name: "g"})
	// b has no worker's record, but a queue is routed to it.
	h.MustFail(&RemoveDeclared{Now: h.Tick(), Kind: KindCluster, Name: "b"}, ErrConflict)
	h.Must(&ApplyPlacement{Now: h.Tick(), Queues: []Queue{{Queue: placement.Queue{Path: "org"}}}})
	h.Must(&RemoveDeclared{Now: h.Tick(), Kind: KindCluster, Name: "b"})

	restored := h.Restored()
	for _, s := range []*State{h.S, restored} {
		cls := s.Clusters()
		if len(cls) != 1 || cls[0].Name != "a" || cls[0].Declared || cls[0].Group != "" || cls[0].Provider != "" || len(cls[0].Pools) != 0 {
			t.Fatalf("clusters %+v: want a alone, undeclared", cls)
		}
		if gs := s.ClusterGroups(); len(gs) != 0 {
			t.Fatalf("groups %+v", gs)
		}
	}
}
