package view

import (
	"cmp"
	"slices"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// Timers are the leader's clocks of each queue's wait (by path): since
// when it has been below its guarantee with work waiting (Short), and
// below its threshold of fair share (Starved). They live on the leader:
// a new leader starts them afresh, which can only delay a preemption.
type Timers struct {
	Short, Starved map[string]int64
}

// NewTimers returns stopped clocks.
func NewTimers() *Timers {
	return &Timers{Short: map[string]int64{}, Starved: map[string]int64{}}
}

// Update starts the clocks of the queues the decision found short or
// starved, and stops the others'.
func (t *Timers) Update(in *scheduler.PreemptInput, out *scheduler.PreemptOutput) {
	for i := range in.Queues {
		name := in.Queues[i].Name
		tick(t.Short, name, out.Short[i], in.Now)
		tick(t.Starved, name, out.Starved[i], in.Now)
	}
}

func tick(m map[string]int64, name string, on bool, now int64) {
	switch {
	case !on:
		delete(m, name)
	case m[name] == 0:
		m[name] = now
	}
}

// Preemption reads a preemption decision's input in one consistent read:
// the queue tree with each queue's use, its Ready cores (a leaf's) and
// its clocks, the attempts of queued jobs running on active workers in
// enabled clusters (by batch and job), the cores of those workers and
// what they have free for the smallest job waiting. Nil when there is no
// queue that could preempt.
func Preemption(src Source, now int64, timers *Timers) *scheduler.PreemptInput {
	var in *scheduler.PreemptInput
	src.Read(func(r state.Reader) { in = preemption(r, now, timers) })
	return in
}

func preemption(r state.Reader, now int64, timers *Timers) *scheduler.PreemptInput {
	tree := r.QueueTree()
	claims := false
	for _, q := range tree {
		if q.Guarantee.CPUMilli > 0 || q.Preemption.AfterNs > 0 {
			claims = true
		}
	}
	if !claims {
		return nil
	}
	in := &scheduler.PreemptInput{Now: now, Queues: make([]scheduler.PreemptQueue, len(tree))}
	index := make(map[*state.Queue]int32, len(tree))
	byPath := make(map[string]int32, len(tree))
	for i, q := range tree {
		index[q] = int32(i)
		byPath[q.Path] = int32(i)
	}
	for i, q := range tree {
		pq := scheduler.PreemptQueue{Name: q.Path, Parent: -1, Weight: q.EffectiveWeight(), Guarantee: q.Guarantee.CPUMilli,
			Used: r.Use(q).UsedMilli, ShortSince: timers.Short[q.Path], StarvedSince: timers.Starved[q.Path],
			Preemptible: q.Preemption.Preemptible, AfterNs: q.Preemption.AfterNs, ThresholdPermille: q.Preemption.ThresholdPermille,
			ReclaimGraceNs: q.ReclaimGraceNs, MinRuntimeNs: q.MinRuntimeNs}
		if p := r.Parent(q); p != nil {
			pq.Parent = index[p]
		}
		for _, path := range q.Preemption.AllowFrom {
			if k, ok := byPath[path]; ok {
				pq.AllowFrom = append(pq.AllowFrom, k)
			}
		}
		in.Queues[i] = pq
	}
	var clusters []placement.Cluster
	clusterIdx := map[string]int32{}
	for cl := range r.Clusters() {
		clusterIdx[cl.Name] = int32(len(clusters))
		clusters = append(clusters, placement.Cluster{Name: cl.Name, Region: cl.Region, Disabled: cl.Disabled})
	}
	anywhere := make([]bool, len(tree))
	allowed := make([][]bool, len(tree))
	smallest := int64(-1)
	for _, uq := range r.UserQueues() {
		for _, b := range uq.Batches() {
			leaf := r.Queue(b)
			if leaf == nil {
				continue
			}
			i := index[leaf]
			in.Queues[i].Waiting += r.ReadyMilli(b)
			// Where its waiting work may run: each batch's head's
			// constraint (routing included); a queue one of whose
			// batches may run anywhere may use any cluster.
			if sp := r.ReadyHead(b); sp != nil && !anywhere[i] {
				if k := r.Constraint(b, sp); k.Empty() {
					anywhere[i] = true
				} else {
					if allowed[i] == nil {
						allowed[i] = make([]bool, len(clusters))
					}
					for c := range clusters {
						if k.AdmitsCluster(&clusters[c]) == 0 {
							allowed[i][c] = true
						}
					}
				}
			}
			if sp := r.ReadyHead(b); sp != nil && (smallest < 0 || sp.CPUMilli < smallest) {
				smallest = sp.CPUMilli // the head: a bound, not the least of all
			}
		}
	}
	for i := range in.Queues {
		if !anywhere[i] {
			in.Queues[i].Clusters = allowed[i]
		}
	}
	disabled := map[string]bool{}
	for cl := range r.Clusters() {
		disabled[cl.Name] = cl.Disabled
	}
	for inst := range r.Instances() {
		if disabled[inst.Cluster] || r.Reserved(inst) {
			continue
		}
		in.Capacity += inst.CPUMilli
		if smallest >= 0 && inst.FreeMilli >= smallest && inst.FreeMem > 0 {
			in.Free += inst.FreeMilli
		}
		for ra := range r.Running(inst) {
			leaf := r.Queue(ra.Batch)
			if leaf == nil {
				continue
			}
			in.Attempts = append(in.Attempts, scheduler.Attempt{Batch: ra.Batch.ID, Job: ra.Job, Attempt: ra.Attempt,
				Queue: index[leaf] + 1, CPUMilli: ra.Spec.CPUMilli, Start: ra.Start, Priority: ra.Batch.Priority, Stopping: ra.Stopping,
				Cluster: clusterIdx[inst.Cluster]})
		}
	}
	slices.SortFunc(in.Attempts, func(a, b scheduler.Attempt) int {
		if a.Batch != b.Batch {
			return cmp.Compare(a.Batch, b.Batch)
		}
		return cmp.Compare(a.Job, b.Job)
	})
	return in
}
