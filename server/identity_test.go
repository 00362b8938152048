package server

import (
	"context"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

// TestActivationByNodeID: a worker's node ID, not its name, identifies it.
// A restart that proves its previous token replaces its live instance; a
// second live claimant without it is refused with 409 and the first keeps
// running; another node with the same name is a second instance.
func TestActivationByNodeID(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	secret := tc.srv.cfg.WorkerSecret
	act := func(name, node, prev string) (*api.ActivateResponse, error) {
		return tc.admin.Workers().Activate(ctx, &api.ActivateRequest{Name: name, NodeID: node, PreviousToken: prev, CPU: 2, Memory: 4 << 30, Secret: secret})
	}
	first, err := act("vm", "aaaa", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = act("vm", "aaaa", "")
	if !api.IsStatus(err, 409) || !strings.Contains(err.Error(), "node ID aaaa is in use by instance") {
		t.Fatalf("second claimant of a live node ID: %v", err)
	}
	restarted, err := act("vm", "aaaa", first.Token)
	if err != nil {
		t.Fatalf("restart proving its token: %v", err)
	}
	// A claimant that races in between an activation's apply and the
	// leader noting the contact (as a copy started right after the
	// original did, on a loaded machine) is refused too.
	tc.srv.live.forget(uint32(restarted.InstanceID))
	if _, err = act("vm", "aaaa", ""); !api.IsStatus(err, 409) {
		t.Fatalf("second claimant of a node ID activated a moment ago: %v", err)
	}
	other, err := act("vm", "bbbb", "")
	if err != nil {
		t.Fatal(err)
	}
	insts, err := tc.admin.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	active := map[int64]bool{}
	for _, in := range insts {
		active[in.ID] = in.Active
	}
	if len(insts) != 3 || active[first.InstanceID] || !active[restarted.InstanceID] || !active[other.InstanceID] {
		t.Fatalf("instances: %+v", insts)
	}
	// Sizes a worker sends are bounded.
	if _, err := act(strings.Repeat("n", api.MaxWorkerName+1), "cccc", ""); !api.IsStatus(err, 400) {
		t.Fatalf("oversized name: %v", err)
	}
}
