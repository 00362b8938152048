package view

import (
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// QueueDemand is a queue with what it uses and what waits in it, as the
// API lists it.
type QueueDemand struct {
	state.QueueInfo
	// Waiting is what the Ready jobs of its subtree ask for (readyDemand,
	// as the preemption round reads it), WaitingJobs how many they are.
	Waiting     placement.Resources
	WaitingJobs int64
	// PastCoreHours is a leaf's decayed past use at the read's time, in
	// core-hours (its tree's usage_half_life; 0: none): what fair share
	// between sibling queues weighs with what it holds.
	PastCoreHours float64
}

// Queues reads the queue tree, a parent before its children, with each
// queue's use and its subtree's Ready demand, in one consistent read (so
// what a queue uses and what waits in it are of the same moment), and each
// leaf's past use at now (unix ns).
func Queues(src Source, now int64) []QueueDemand {
	var out []QueueDemand
	src.Read(func(r state.Reader) {
		infos := r.Queues()
		out = make([]QueueDemand, len(infos))
		byPath := make(map[string]*QueueDemand, len(infos))
		for i := range infos {
			out[i].QueueInfo = infos[i]
			byPath[infos[i].Path] = &out[i]
		}
		for _, q := range r.QueueTree() {
			if qd := byPath[q.Path]; qd != nil && r.IsLeaf(q) {
				qd.PastCoreHours = r.QueuePastCoreHours(q, now)
			}
		}
		for _, uq := range r.UserQueues() {
			for _, b := range uq.Batches() {
				jobs := r.ReadyJobs(b)
				if jobs == 0 {
					continue
				}
				d := readyDemand(r, b)
				for q := r.Queue(b); q != nil; q = r.Parent(q) {
					qd := byPath[q.Path]
					if qd == nil {
						continue
					}
					qd.WaitingJobs += jobs
					qd.Waiting.CPUMilli += d.CPUMilli
					qd.Waiting.Memory += d.Memory
					for typ, n := range d.GPUs {
						if qd.Waiting.GPUs == nil {
							qd.Waiting.GPUs = map[string]int64{}
						}
						qd.Waiting.GPUs[typ] += n
					}
				}
			}
		}
	})
	return out
}
