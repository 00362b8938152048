package view

import (
	"cmp"
	"maps"
	"slices"
	"strconv"

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
// the queue tree with each queue's guarantee and use in every resource
// (cores, memory, GPUs of each type), its Ready demand (a leaf's) and its
// clocks, the attempts of queued jobs running on active workers in
// enabled clusters (by batch and job), the capacity of those workers and
// what they have free for the smallest job waiting. Nil when there is no
// queue that could preempt.
func Preemption(src Source, now int64, timers *Timers) *scheduler.PreemptInput {
	var in *scheduler.PreemptInput
	src.Read(func(r state.Reader) { in = preemption(r, now, timers) })
	return in
}

// readyDemand is what a batch's Ready jobs ask for: its cores are the
// state's tally, and its memory and GPUs (by type; "": of any type) those
// of its first waitingShapeRanges ranges, scaled to the rest of its
// cores. The preemption round and the API's queues read it alike.
func readyDemand(r state.Reader, b *state.Batch) placement.Resources {
	total := r.ReadyMilli(b)
	var shape placement.Resources // of the ranges read
	ranges := 0
	for rg := range r.Ready(b) {
		if ranges++; ranges > waitingShapeRanges {
			break
		}
		n := int64(rg.Len())
		shape.CPUMilli += n * rg.Spec.CPUMilli
		shape.Memory += n * rg.Spec.Memory
		if typ, g := rg.Spec.GPUs(); g > 0 {
			if shape.GPUs == nil {
				shape.GPUs = map[string]int64{}
			}
			shape.GPUs[typ] += n * g
		}
	}
	scale := func(v int64) int64 {
		if rest := total - shape.CPUMilli; rest > 0 && shape.CPUMilli > 0 {
			v += int64(float64(v) * float64(rest) / float64(shape.CPUMilli))
		}
		return v
	}
	out := placement.Resources{CPUMilli: total, Memory: scale(shape.Memory)}
	for typ, n := range shape.GPUs {
		if out.GPUs == nil {
			out.GPUs = map[string]int64{}
		}
		out.GPUs[typ] = scale(n)
	}
	return out
}

// addTo adds b to a, resource by resource.
func addTo(a, b scheduler.Res) {
	for k := range a {
		a[k] += b[k]
	}
}

// waitingShapeRanges bounds the Ready ranges of one batch read for the
// shape of its demand: its cores are the state's tally, and its memory
// and GPUs are those of its first ranges, scaled to the rest of its cores
// (a read under the state's lock stays bounded by batches, not jobs).
const waitingShapeRanges = 64

func preemption(r state.Reader, now int64, timers *Timers) *scheduler.PreemptInput {
	tree := r.QueueTree()
	claims := false
	for _, q := range tree {
		if !q.Guarantee.IsZero() || q.Preemption.AfterNs > 0 {
			claims = true
		}
	}
	if !claims {
		return nil
	}
	in := &scheduler.PreemptInput{Now: now, Queues: make([]scheduler.PreemptQueue, len(tree))}
	// The resources: cores, memory, and each GPU type a worker has or a
	// guarantee names, in name order (the same on every leader).
	gpuIdx := map[string]int32{}
	addType := func(t string) {
		if _, ok := gpuIdx[t]; !ok && t != "" {
			gpuIdx[t] = 0
			in.GPUTypes = append(in.GPUTypes, t)
		}
	}
	for inst := range r.Instances() {
		if inst.GPUs > 0 {
			addType(inst.GPUType)
		}
	}
	for _, q := range tree {
		for t := range q.Guarantee.GPUs {
			addType(t)
		}
	}
	slices.Sort(in.GPUTypes)
	for i, t := range in.GPUTypes {
		gpuIdx[t] = int32(i + 2)
	}
	res := func(cpu, mem int64, gpus map[string]int64) scheduler.Res {
		out := make(scheduler.Res, 2+len(in.GPUTypes))
		out[0], out[1] = cpu, mem
		for t, n := range gpus {
			if k, ok := gpuIdx[t]; ok {
				out[k] += n
			}
		}
		return out
	}
	index := make(map[*state.Queue]int32, len(tree))
	byPath := make(map[string]int32, len(tree))
	for i, q := range tree {
		index[q] = int32(i)
		byPath[q.Path] = int32(i)
	}
	for i, q := range tree {
		use := r.Use(q)
		pq := scheduler.PreemptQueue{Name: q.Path, Parent: -1, Weight: q.EffectiveWeight(),
			Used: res(use.UsedMilli, use.UsedMemory, use.UsedGPUs), Waiting: res(0, 0, nil),
			ShortSince: timers.Short[q.Path], StarvedSince: timers.Starved[q.Path],
			Preemptible: q.Preemption.Preemptible, AfterNs: q.Preemption.AfterNs, ThresholdPermille: q.Preemption.ThresholdPermille,
			ReclaimGraceNs: q.ReclaimGraceNs, MinRuntimeNs: q.MinRuntimeNs}
		if !q.Guarantee.IsZero() {
			pq.Guarantee = res(q.Guarantee.CPUMilli, q.Guarantee.Memory, q.Guarantee.GPUs)
		}
		if r.IsLeaf(q) {
			pq.PastMilli = r.QueuePastMilli(q, now)
		}
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
	reach := clusterReach(r, clusters, clusterIdx)
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
			d := readyDemand(r, b)
			addTo(in.Queues[i].Waiting, res(d.CPUMilli, d.Memory, d.GPUs)) // GPUs of a type no worker has nor guarantee names: none
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
					for c, ok := range reach(&k) {
						if ok {
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
	in.Capacity, in.Free = res(0, 0, nil), res(0, 0, nil)
	for inst := range r.Instances() {
		if disabled[inst.Cluster] || r.Reserved(inst) {
			continue
		}
		gpu := gpuIdx[inst.GPUType]
		in.Capacity[0] += inst.CPUMilli
		in.Capacity[1] += inst.Memory
		if gpu > 0 {
			in.Capacity[gpu] += inst.GPUs
		}
		if smallest >= 0 && inst.FreeMilli >= smallest && inst.FreeMem > 0 {
			in.Free[0] += inst.FreeMilli
			in.Free[1] += inst.FreeMem
			if gpu > 0 {
				in.Free[gpu] += inst.FreeGPUs
			}
		}
		for ra := range r.Running(inst) {
			leaf := r.Queue(ra.Batch)
			if leaf == nil {
				continue
			}
			a := scheduler.Attempt{Batch: ra.Batch.ID, Job: ra.Job, Attempt: ra.Attempt,
				Queue: index[leaf] + 1, CPUMilli: ra.Spec.CPUMilli, Memory: ra.Spec.Memory, Start: ra.Start, Priority: ra.Batch.Priority, Stopping: ra.Stopping,
				Cluster: clusterIdx[inst.Cluster], Instance: inst.ID}
			if _, g := ra.Spec.GPUs(); g > 0 && gpu > 0 {
				a.GPU, a.GPUs = gpu, g
			}
			in.Attempts = append(in.Attempts, a)
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

// clusterReach returns, for a constraint, the clusters with a worker it
// admits (placement's rule: region, clusters, pool, labels, the cluster
// enabled), so a queue reclaims only where its waiting work could run.
// Workers are read once, as their distinct places; each constraint's
// answer is kept for the read.
func clusterReach(r state.Reader, clusters []placement.Cluster, clusterIdx map[string]int32) func(*placement.Constraint) []bool {
	type place struct {
		cluster int32
		pool    string
		labels  map[string]string
		spot    bool
	}
	var places []place
	seen := map[string]bool{}
	for inst := range r.Instances() {
		c, ok := clusterIdx[inst.Cluster]
		if !ok {
			continue
		}
		spot := r.Spot(inst)
		key := placeKey(inst.Cluster, inst.Pool, inst.Labels, spot)
		if !seen[key] {
			seen[key] = true
			places = append(places, place{c, inst.Pool, inst.Labels, spot})
		}
	}
	memo := map[string][]bool{}
	return func(k *placement.Constraint) []bool {
		key := k.Key()
		if a, ok := memo[key]; ok {
			return a
		}
		a := make([]bool, len(clusters))
		for _, p := range places {
			if !a[p.cluster] && k.Admits(&clusters[p.cluster], p.pool, p.labels, p.spot) == 0 {
				a[p.cluster] = true
			}
		}
		memo[key] = a
		return a
	}
}

// placeKey is a worker's cluster, pool, labels and spot as one string, each
// part prefixed with its length, so that distinct places differ.
func placeKey(cluster, pool string, labels map[string]string, spot bool) string {
	var b []byte
	if spot {
		b = append(b, '!')
	}
	part := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	part(cluster)
	part(pool)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		part(k)
		part(labels[k])
	}
	return string(b)
}
