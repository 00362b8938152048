package placement

import "fmt"

// MaxPriority bounds a batch's priority either side of 0, and a queue's
// and a billing project's max_priority.
const MaxPriority = 1_000_000

// ValidatePriority checks a batch's priority against ±MaxPriority.
func ValidatePriority(priority int64) error {
	if priority < -MaxPriority || priority > MaxPriority {
		return fmt.Errorf("priority %d is out of range: between %d and %d (higher goes first among its user's work in its queue)", priority, -MaxPriority, MaxPriority)
	}
	return nil
}

// ValidateMaxPriority checks a queue's or a billing project's
// max_priority: 0 (the default: no batch above 0) to MaxPriority.
func ValidateMaxPriority(what string, max int64) error {
	if max < 0 || max > MaxPriority {
		return fmt.Errorf("%s: max_priority %d must be between 0 (no batch above the default priority) and %d", what, max, MaxPriority)
	}
	return nil
}

// PriorityCap is what bounds the priority a batch may ask: the one rule,
// which the API checks a new batch with and apply checks again.
//
// A priority orders a user's own work in a leaf queue, and users of a
// leaf by it only within their fair shares (the scheduler's rule), but it
// still decides whose attempts go first in a round and are preempted
// last, so it is a setting of the queue and the project, not the
// submitter's alone. An admin's batch is bounded by ±MaxPriority only.
// Anyone else's by the lower of two caps, each 0 unless raised: its
// leaf queue's max_priority (admins set it with the queue) and its
// billing project's (its managers set it for the project's batches, in
// whatever queue they run; the queue's still holds). A batch in no queue
// (no queue tree) has the project's cap alone. Lowering one's own
// priority, down to -MaxPriority, needs no one's leave.
type PriorityCap struct {
	Admin bool
	// Project is the batch's billing project and ProjectMax its
	// max_priority.
	Project    string
	ProjectMax int64
	// Queue is the leaf the batch runs in ("": none) and QueueMax its
	// max_priority.
	Queue    string
	QueueMax int64
}

// Max is the highest priority the cap allows.
func (c PriorityCap) Max() int64 {
	if c.Admin {
		return MaxPriority
	}
	if c.Queue != "" {
		return min(c.ProjectMax, c.QueueMax)
	}
	return c.ProjectMax
}

// Check refuses a priority above the cap (and out of ±MaxPriority),
// naming the caps and who can raise them.
func (c PriorityCap) Check(priority int64) error {
	if err := ValidatePriority(priority); err != nil {
		return err
	}
	max := c.Max()
	if priority <= max {
		return nil
	}
	project := fmt.Sprintf("billing project %s's max_priority is %d (its managers set it: drover billing-project set %s -max-priority N)", c.Project, c.ProjectMax, c.Project)
	if c.Queue == "" {
		return fmt.Errorf("priority %d is above %d, the highest a batch of billing project %s may ask: %s", priority, max, c.Project, project)
	}
	return fmt.Errorf("priority %d is above %d, the highest a batch of billing project %s may ask in queue %s: %s, and queue %s's is %d (admins set it: max_priority in the placement config, or drover queue set %s -max-priority N)",
		priority, max, c.Project, c.Queue, project, c.Queue, c.QueueMax, c.Queue)
}
