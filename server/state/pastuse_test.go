package state

import (
	"math"
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
)

// TestPastUseIsRememberedAndDecays: in a tree with a usage half-life, an
// ended attempt's core-seconds are its user's and its leaf queue's past
// use, decayed with
// time and read as cores; across a snapshot and a replay. A tree without
// one remembers nothing; only a top queue may set it, within its bounds.
func TestPastUseIsRememberedAndDecays(t *testing.T) {
	h := newHarness(t)
	hour := int64(time.Hour)
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}, UsageHalfLifeNs: hour}})
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/lab"}, Projects: []string{"default"}}})
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org/lab"}, Projects: []string{"default"}, UsageHalfLifeNs: hour}}, ErrInvalid)
	h.MustFail(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}, UsageHalfLifeNs: int64(time.Minute)}}, ErrInvalid)
	w := h.Activate("w", 4, 16)
	b := h.CreateBatch(entry(1, 2, spec("j", 2)))
	h.Schedule()
	start := h.Now
	// Two jobs of 2 cores for an hour: 4 core-hours.
	h.Must(&Events{Now: start + hour, Events: []Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: OutcomeSuccess, Start: start, End: start + hour},
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: OutcomeSuccess, Start: start, End: start + hour},
	}})
	for _, s := range []*State{h.S, h.Replay(), h.Restored()} {
		s.Read(func(r Reader) {
			leaf := r.Queue(r.Batch(b))
			if got := r.PastCoreHours(leaf, "root", start+hour); math.Abs(got-4) > 0.01 {
				t.Fatalf("past use %.3f core-hours, want 4", got)
			}
			if got := r.PastCoreHours(leaf, "root", start+2*hour); math.Abs(got-2) > 0.03 {
				t.Fatalf("an hour later %.3f core-hours, want 2", got)
			}
			// 4 core-hours over a mean life of 1.4427 h: 2.77 cores.
			if got := r.PastMilli(leaf, "root", start+hour); math.Abs(float64(got)-2773) > 30 {
				t.Fatalf("weighs as %d millicores, want about 2773", got)
			}
			if r.PastMilli(leaf, "someone-else", start+hour) != 0 {
				t.Fatal("a user who ran nothing has past use")
			}
			// The leaf queue remembers the same (its only user's).
			if got := r.QueuePastCoreHours(leaf, start+hour); math.Abs(got-4) > 0.01 {
				t.Fatalf("the leaf's past use %.3f core-hours, want 4", got)
			}
			if got := r.QueuePastMilli(leaf, start+hour); math.Abs(float64(got)-2773) > 30 {
				t.Fatalf("the leaf weighs as %d millicores, want about 2773", got)
			}
		})
	}
	// Without a half-life, nothing is remembered.
	h.Must(&SetQueue{Now: h.Tick(), Queue: Queue{Queue: placement.Queue{Path: "org"}}})
	h.S.Read(func(r Reader) {
		if r.PastMilli(r.Queue(r.Batch(b)), "root", start+hour) != 0 || r.QueuePastMilli(r.Queue(r.Batch(b)), start+hour) != 0 {
			t.Fatal("a tree without a half-life weighs past use")
		}
	})
}
