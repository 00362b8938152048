package view

import (
	"maps"
	"math"
	"testing"
	"time"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// TestQueuesCarryTheirWaitingDemand: each queue's Waiting is what the
// Ready jobs of its subtree ask for, in cores, memory and GPUs, summed up
// the tree; a leaf's is what the preemption round reads for it; a queue
// with nothing Ready waits for nothing.
func TestQueuesCarryTheirWaitingDemand(t *testing.T) {
	h := state.NewHarness(t, nil)
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Queues: []state.Queue{
		{Queue: placement.Queue{Path: "org", Guarantee: placement.Resources{CPUMilli: 4000, GPUs: map[string]int64{"a100": 1}}}},
		{Queue: placement.Queue{Path: "org/t1"}, Projects: []string{"default"}},
		{Queue: placement.Queue{Path: "org/t2"}},
	}})
	gpu := spec("gpu", 2)
	gpu.Memory = 4 << 30
	gpu.Where = &state.Where{GPUType: "a100", GPUs: 2}
	h.CreateBatch(entry(1, 10, spec("cpu", 1)), entry(11, 2, gpu))
	byPath := map[string]QueueDemand{}
	for _, q := range Queues(h.S, h.Now) {
		byPath[q.Path] = q
	}
	want := placement.Resources{CPUMilli: 14000, Memory: 18 << 30, GPUs: map[string]int64{"a100": 4}}
	for _, path := range []string{"org", "org/t1"} {
		q := byPath[path]
		if q.WaitingJobs != 12 || q.Waiting.CPUMilli != want.CPUMilli || q.Waiting.Memory != want.Memory || !maps.Equal(q.Waiting.GPUs, want.GPUs) {
			t.Errorf("%s waits for %d jobs, %+v; want 12 jobs, %+v", path, q.WaitingJobs, q.Waiting, want)
		}
	}
	if q := byPath["org/t2"]; q.WaitingJobs != 0 || !q.Waiting.IsZero() {
		t.Errorf("org/t2 has nothing Ready, waits for %d jobs, %+v", q.WaitingJobs, q.Waiting)
	}
	in := Preemption(h.S, h.Now, NewTimers())
	found := false
	for _, pq := range in.Queues {
		if pq.Name != "org/t1" {
			continue
		}
		found = true
		if w := pq.Waiting; w[0] != want.CPUMilli || w[1] != want.Memory || w[2] != 4 {
			t.Errorf("the preemption round reads org/t1 waiting for %v, the API's queues %+v", w, want)
		}
	}
	if !found {
		t.Error("org/t1 is not in the preemption round's input")
	}
}

// TestQueuesCarryTheirPastUse: in a tree with a usage half-life, a leaf
// lists its decayed past use (what fair share between sibling queues
// weighs): 4 core-hours run, half of it an hour later; its sibling and
// the inner queue list none.
func TestQueuesCarryTheirPastUse(t *testing.T) {
	h := state.NewHarness(t, nil)
	hour := int64(time.Hour)
	h.Must(&state.ApplyPlacement{Now: h.Tick(), Queues: []state.Queue{
		{Queue: placement.Queue{Path: "org"}, UsageHalfLifeNs: hour},
		{Queue: placement.Queue{Path: "org/t1"}, Projects: []string{"default"}},
		{Queue: placement.Queue{Path: "org/t2"}},
	}})
	w := h.Activate("w", 4, 16)
	b := h.CreateBatch(entry(1, 2, spec("j", 2)))
	h.Schedule()
	start := h.Now
	h.Must(&state.Events{Now: start + hour, Events: []state.Event{
		{Instance: w, Batch: b, Job: 1, Attempt: 1, Outcome: state.OutcomeSuccess, Start: start, End: start + hour},
		{Instance: w, Batch: b, Job: 2, Attempt: 1, Outcome: state.OutcomeSuccess, Start: start, End: start + hour}}})
	for _, c := range []struct {
		at   int64
		want float64
	}{{start + hour, 4}, {start + 2*hour, 2}} {
		past := map[string]float64{}
		for _, q := range Queues(h.S, c.at) {
			past[q.Path] = q.PastCoreHours
		}
		if math.Abs(past["org/t1"]-c.want) > 0.03 || past["org/t2"] != 0 || past["org"] != 0 {
			t.Fatalf("past use %v; want org/t1 at %.0f core-hours, none elsewhere", past, c.want)
		}
	}
}
