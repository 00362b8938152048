package placement

import (
	"strings"
	"testing"
)

// TestPriorityCap: an admin is bounded by ±MaxPriority alone; anyone else
// by the lower of the queue's and the project's max_priority (0 unless
// raised); lowering one's priority needs no one's leave.
func TestPriorityCap(t *testing.T) {
	member := PriorityCap{Project: "p", Queue: "org/shared"}
	raised := PriorityCap{Project: "p", ProjectMax: 50, Queue: "org/shared", QueueMax: 10}
	for _, c := range []struct {
		name     string
		cap      PriorityCap
		priority int64
		want     string // "": allowed
	}{
		{"a member at the default", member, 0, ""},
		{"a member lowers its own", member, -MaxPriority, ""},
		{"a member above the default", member, 1, "priority 1 is above 0, the highest a batch of billing project p may ask in queue org/shared: billing project p's max_priority is 0 (its managers set it: drover billing-project set p -max-priority N), and queue org/shared's is 0 (admins set it"},
		{"the issue's member", member, 1_000_000, "priority 1000000 is above 0"},
		{"the project's cap raised, the queue's holds", raised, 11, "priority 11 is above 10"},
		{"at the queue's cap", raised, 10, ""},
		{"the queue's cap raised, the project's holds", PriorityCap{Project: "p", ProjectMax: 5, Queue: "q", QueueMax: 100}, 6, "priority 6 is above 5"},
		{"in no queue: the project's cap", PriorityCap{Project: "p", ProjectMax: 5}, 5, ""},
		{"in no queue, above the project's cap", PriorityCap{Project: "p", ProjectMax: 5}, 6, "priority 6 is above 5, the highest a batch of billing project p may ask: billing project p's max_priority is 5"},
		{"an admin", PriorityCap{Admin: true, Project: "p", Queue: "q"}, MaxPriority, ""},
		{"an admin out of range", PriorityCap{Admin: true}, MaxPriority + 1, "out of range"},
		{"below the range", member, -MaxPriority - 1, "out of range"},
	} {
		err := c.cap.Check(c.priority)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: priority %d refused: %v", c.name, c.priority, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: priority %d: %v, want %q", c.name, c.priority, err, c.want)
		}
	}
	for _, v := range []int64{-1, MaxPriority + 1} {
		if err := ValidateMaxPriority("billing project p", v); err == nil {
			t.Errorf("max_priority %d accepted", v)
		}
	}
}
