package view

import (
	"maps"
	"testing"

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
	for _, q := range Queues(h.S) {
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
