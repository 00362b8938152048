package state

import (
	"strings"
	"testing"

	"github.com/drover-sched/drover/placement"
)

// TestPriorityIsCappedAtApply: a member's new batch asks at most the
// lower of its leaf queue's and its project's max_priority (0 unless
// raised), an admin's up to ±MaxPriority; apply refuses a batch above
// its cap with the rule the API checked (CheckPriority), entries from
// before the rule apply as they did, and both caps survive a replay and a
// snapshot.
func TestPriorityIsCappedAtApply(t *testing.T) {
	h := newHarness(t)
	h.Must(&CreateUser{Now: h.Tick(), Name: "mallory", TokenHash: "mallory-hash"})
	h.Must(&SetMember{Project: "default", User: "mallory", Member: true})
	h.Must(&ApplyPlacement{Now: h.Tick(), Queues: []Queue{
		{Queue: placement.Queue{Path: "org"}},
		{Queue: placement.Queue{Path: "org/shared"}, Projects: []string{"default"}, MaxPriority: 10},
	}})
	batch := func(user string, prio int32, policy uint8) *CreateBatch {
		return &CreateBatch{Now: h.Tick(), User: user, BillingProject: "default", Priority: prio, Policy: policy, NJobs: 1}
	}
	// The project's cap is 0 until a manager raises it.
	err := h.MustFail(batch("mallory", 1_000_000, PolicyPriority), ErrForbidden)
	if !strings.Contains(err.Error(), "priority 1000000 is above 0") || !strings.Contains(err.Error(), "drover billing-project set default -max-priority N") {
		t.Fatalf("the issue's priority: %v", err)
	}
	h.Must(batch("mallory", 0, PolicyPriority))
	h.Must(batch("mallory", -5, PolicyPriority))
	// An entry from before the rule applies as it did.
	h.Must(batch("mallory", 1_000_000, PolicyStorage))
	// The project's cap raised above the queue's: the queue's holds.
	h.Must(&SetProjectSettings{Project: "default", MaxPriority: i64(50)})
	h.Must(batch("mallory", 10, PolicyPriority))
	if err := h.MustFail(batch("mallory", 11, PolicyPriority), ErrForbidden); !strings.Contains(err.Error(), "queue org/shared's is 10") {
		t.Fatalf("above the queue's cap: %v", err)
	}
	// The API reads the same rule before the log.
	var checked *ApplyError
	h.S.Read(func(r Reader) { checked = r.CheckPriority("default", "mallory", "", 11) })
	if checked == nil || checked.Kind != ErrForbidden {
		t.Fatalf("CheckPriority of 11: %v", checked)
	}
	// An admin is held to ±MaxPriority alone.
	h.Must(batch("root", MaxPriority, PolicyPriority))
	h.MustFail(&SetProjectSettings{Project: "default", MaxPriority: i64(MaxPriority + 1)}, ErrInvalid)
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/other"}, MaxPriority: -1}}, ErrInvalid)
	for _, s := range []*State{h.Replay(), h.Restored()} {
		q, _ := s.QueueByPath("org/shared")
		p, _ := s.BillingProject("default")
		if q.MaxPriority != 10 || p.MaxPriority != 50 {
			t.Fatalf("after a replay or a restore the queue's max_priority is %d and the project's %d, want 10 and 50", q.MaxPriority, p.MaxPriority)
		}
	}
}
