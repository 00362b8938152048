package scheduler

import (
	"maps"
	"slices"

	"github.com/drover-sched/drover/placement"
)

// A round with queues shares what is free down the tree first
// (QueueShares: guarantees, then weighted dominant resource fairness),
// then inside each leaf between its users (FairShare, Hail's water
// filling). Users whose batches are in no queue share as one more queue
// at the top, of weight 1 and no guarantee.

// resourceIndex maps the round's resources onto Res positions: cpu,
// memory, then GPU types by name.
type resourceIndex struct{ gpus map[string]int }

func newResourceIndex(in *Input) resourceIndex {
	types := map[string]bool{}
	for i := range in.Instances {
		if t := in.Instances[i].GPUType; t != "" && in.Instances[i].GPUs > 0 {
			types[t] = true
		}
	}
	for i := range in.Queues {
		for t := range in.Queues[i].Guarantee.GPUs {
			types[t] = true
		}
	}
	ri := resourceIndex{gpus: map[string]int{}}
	for k, t := range slices.Sorted(maps.Keys(types)) {
		ri.gpus[t] = 2 + k
	}
	return ri
}

func (ri resourceIndex) n() int { return 2 + len(ri.gpus) }

// res is r as a Res (GPU types the round does not know are dropped:
// nothing of them is free).
func (ri resourceIndex) res(r placement.Resources) Res {
	out := make(Res, ri.n())
	out[0], out[1] = r.CPUMilli, r.Memory
	for t, v := range r.GPUs {
		if k, ok := ri.gpus[t]; ok {
			out[k] = v
		}
	}
	return out
}

// limit is l over base as a cap (Unbounded where l bounds nothing; nil
// when it bounds nothing at all).
func (ri resourceIndex) limit(base placement.Resources, l placement.Limit) Res {
	if l.IsZero() {
		return nil
	}
	out := make(Res, ri.n())
	for i := range out {
		out[i] = Unbounded
	}
	if l.CPUMilli != nil {
		out[0] = base.CPUMilli + *l.CPUMilli
	}
	if l.Memory != nil {
		out[1] = base.Memory + *l.Memory
	}
	for t, v := range l.GPUs {
		if k, ok := ri.gpus[t]; ok {
			out[k] = base.GPUs[t] + v
		}
	}
	return out
}

// capOf is a queue's hard cap as a Res: its quota's limits (guarantee
// and borrow_limit; max_running's cores), Unbounded where none.
func (ri resourceIndex) capOf(q *Queue) Res {
	out := make(Res, ri.n())
	for i := range out {
		out[i] = Unbounded
	}
	bounded := false
	if c := q.Quota.CPUMilli; c > 0 {
		out[0], bounded = c, true
	}
	if m := q.Quota.MaxMilli; m > 0 && m < out[0] {
		out[0], bounded = m, true
	}
	if m := q.Quota.Memory; m > 0 {
		out[1], bounded = m, true
	}
	for t, v := range q.Quota.GPUs {
		if k, ok := ri.gpus[t]; ok {
			out[k], bounded = v, true
		}
	}
	if !bounded {
		return nil
	}
	return out
}

// freeRes is what is free this round where new work may go.
func (ri resourceIndex) freeRes(in *Input) Res {
	out := make(Res, ri.n())
	for i := range in.Instances {
		inst := &in.Instances[i]
		if !takesWork(in, inst) {
			continue
		}
		out[0] += max(inst.FreeMilli, 0)
		out[1] += max(inst.FreeMem, 0)
		if k, ok := ri.gpus[inst.GPUType]; ok {
			out[k] += max(inst.FreeGPUs, 0)
		}
	}
	return out
}

// takesWork reports whether an instance's cluster takes new work (an
// instance naming no cluster of the input is in the first, as the packer
// places it).
func takesWork(in *Input, inst *Instance) bool {
	if len(in.Clusters) == 0 {
		return true
	}
	c := 0
	if inst.Cluster >= 0 && int(inst.Cluster) < len(in.Clusters) {
		c = int(inst.Cluster)
	}
	return in.Clusters[c].Available() == 0
}

// queueShares splits free between the input's queues, with a node at the
// top (the last) for users in no queue; ready[i] is what queue i's leaf
// users ask for (inner queues' are summed by QueueShares). It returns
// what each queue, and the last node, may start this round.
func queueShares(in *Input, ri resourceIndex, ready []Res, free Res) []Res {
	nodes := make([]QueueNode, len(in.Queues)+1)
	leaf := leaves(in)
	up := parents(in)
	for i := range in.Queues {
		q := &in.Queues[i]
		used := make(Res, ri.n())
		used[0], used[1] = q.Quota.UsedMilli, q.Quota.UsedMemory
		for t, v := range q.Quota.UsedGPUs {
			if k, ok := ri.gpus[t]; ok {
				used[k] = v
			}
		}
		nodes[i] = QueueNode{Parent: up[i], Weight: q.Weight, Guarantee: ri.res(q.Guarantee), Cap: ri.capOf(q),
			Lend: ri.limit(placement.Resources{}, q.Lend)}
		if q.Guarantee.IsZero() {
			nodes[i].Guarantee = nil
		}
		// A leaf's use is its own; an inner queue's is its children's
		// summed, but an inner queue holds its leaves' use already.
		if leaf[i] {
			nodes[i].Used, nodes[i].Ready = used, ready[i]
			if q.PastMilli > 0 {
				nodes[i].Past = make(Res, ri.n())
				nodes[i].Past[0] = q.PastMilli
			}
		}
	}
	nodes[len(in.Queues)] = QueueNode{Parent: -1, Weight: placement.DefaultQueueWeight, Ready: ready[len(in.Queues)],
		Used: make(Res, ri.n())}
	return QueueShares(nodes, free)
}

// parents is each input queue's parent; a parent that does not come
// before its child (the input lists parents first) reads as none, so a
// walk up always ends.
func parents(in *Input) []int32 {
	out := make([]int32, len(in.Queues))
	for i := range in.Queues {
		out[i] = -1
		if p := in.Queues[i].Parent; p >= 0 && int(p) < i {
			out[i] = p
		}
	}
	return out
}

// leaves marks which of the input's queues are leaves.
func leaves(in *Input) []bool {
	out := make([]bool, len(in.Queues))
	for i := range out {
		out[i] = true
	}
	for _, p := range parents(in) {
		if p >= 0 {
			out[p] = false
		}
	}
	return out
}

// leafOf is the index of a user's leaf among the nodes queueShares
// returns (the last: no queue).
func leafOf(in *Input, u *User) int {
	if u.Queue <= 0 || int(u.Queue) > len(in.Queues) {
		return len(in.Queues)
	}
	return int(u.Queue - 1)
}

// keeps is the idle guarantee queues do not lend (Queue.Lend), held
// free in the pass that fills what the shares left: a queue's guarantee
// it has no work for beyond its lend limit is kept for it, and only its
// own leaves may use it.
type keeps struct {
	free  int64   // cores free now
	queue []int32 // the queues that keep some
	cores []int64 // what each keeps now
}

// keeps lists what each queue keeps as the filling pass begins (nil:
// none keeps any).
func (p *packer) keeps() *keeps {
	k := p.kept0()
	if len(k.queue) == 0 {
		return nil
	}
	for _, t := range p.trees {
		t.tree.Ascend(func(s slot) bool { k.free += max(s.free, 0); return true })
	}
	return &k
}

// kept0 is what each queue keeps now, nothing counted free.
func (p *packer) kept0() keeps {
	var k keeps
	for i := range p.queues {
		q := &p.queues[i]
		if q.Lend.CPUMilli == nil || q.Guarantee.CPUMilli <= 0 {
			continue
		}
		if c := q.Guarantee.CPUMilli - q.Quota.UsedMilli - *q.Lend.CPUMilli; c > 0 {
			k.queue, k.cores = append(k.queue, int32(i)), append(k.cores, c)
		}
	}
	return k
}

// keptFrom is what queues that run r's leaf is not within keep of their
// idle guarantee (cores).
func (p *packer) keptFrom(r *Run) int64 {
	k := p.kept0()
	var c int64
	for j, q := range k.queue {
		if !p.within(r, q) {
			c += k.cores[j]
		}
	}
	return c
}

// within reports whether the run's leaf is queue q or below it.
func (p *packer) within(r *Run, q int32) bool {
	for i := p.leaf(r); i >= 0; i = p.up[i] {
		if i == q {
			return true
		}
	}
	return false
}

// room bounds n jobs of the run so that what every other queue keeps
// stays free.
func (k *keeps) room(p *packer, r *Run, n int64) int64 {
	if r.CPUMilli <= 0 {
		return n
	}
	for j, q := range k.queue {
		if !p.within(r, q) {
			n = min(n, max(k.free-k.cores[j], 0)/r.CPUMilli)
		}
	}
	return n
}

// took counts n jobs of the run placed: what is free shrinks, and so
// does what the run's own queues keep.
func (k *keeps) took(p *packer, r *Run, n int64) {
	c := n * r.CPUMilli
	k.free -= c
	for j, q := range k.queue {
		if p.within(r, q) {
			k.cores[j] = max(k.cores[j]-c, 0)
		}
	}
}
