package scheduler

import "math"

// Res is an amount of each resource of a round: Res[0] millicores, Res[1]
// bytes of memory, Res[2:] GPUs of the round's GPU types, in the order the
// round lists them. All the Res of one call have the same length.
type Res []int64

// Unbounded marks a resource a cap does not bound.
const Unbounded = math.MaxInt64

// QueueNode is one queue of a round's tree, in placement.QueueTree's
// order (a parent before its children).
type QueueNode struct {
	Parent int32 // index of the parent; -1 at the top
	Weight int64 // its part among its siblings (≤ 0 reads as 1)
	// Guarantee is what the queue is entitled to before its siblings
	// share the rest (nil: nothing).
	Guarantee Res
	// Cap is the most the queue may hold, its guarantee and what it may
	// borrow (nil: no bound; Unbounded for a resource it does not bound).
	Cap Res
	// Lend is how much of its idle guarantee its siblings may borrow
	// (nil: all of it).
	Lend Res
	// Used is what the queue's attempts hold and Ready what its Ready
	// jobs ask for; an inner queue's are its children's summed (the
	// caller may leave them nil: QueueShares sums them).
	Used, Ready Res
	// Past is the queue's decayed past use, as a rate (usage_half_life;
	// nil: none; an inner queue's is its children's summed): in the
	// sharing between siblings below a top queue it counts as held, so a
	// queue that ran much lately is given more after its siblings
	// (Slurm's and Kueue's fair share with a memory). It gives no room and
	// takes none: only the order. Top queues share without it (each tree
	// has its own half-life, or none).
	Past Res
}

// QueueShares splits free between the queues of a tree, level by level,
// and returns what each queue may start this round (an inner queue's is
// what its children split). At each level, each child first gets what its
// guarantee entitles it to beyond what it holds, up to what it has Ready;
// the rest of what the level was given, less the idle guarantee its
// owners do not lend, is shared by weighted dominant resource fairness:
// the child holding the smallest dominant share for its weight (its
// largest share of any one resource the level controls, over its
// weight) is given more first, each along the shape of what it has Ready,
// until its Ready jobs, its cap or a resource runs out (progressive
// filling: Ghodsi et al., "Dominant Resource Fairness", NSDI 2011). A
// tree of one leaf gives it everything Ready that fits; Hail's per-user
// water filling (FairShare) then splits a leaf's cores between its users.
func QueueShares(nodes []QueueNode, free Res) []Res {
	n := len(free)
	used := make([]Res, len(nodes))
	ready := make([]Res, len(nodes))
	past := make([]Res, len(nodes))
	for i := range nodes {
		used[i] = orZero(nodes[i].Used, n)
		ready[i] = orZero(nodes[i].Ready, n)
		past[i] = orZero(nodes[i].Past, n)
	}
	// Inner queues hold and want what their children do: children come
	// after their parent, so a backward walk sums each subtree.
	kids := make([][]int, len(nodes))
	var top []int
	for i := len(nodes) - 1; i >= 0; i-- {
		p := nodes[i].Parent
		if p < 0 {
			top = append(top, i)
			continue
		}
		kids[p] = append(kids[p], i)
		if nodes[p].Used == nil {
			used[p] = addRes(used[p], used[i])
		}
		if nodes[p].Ready == nil {
			ready[p] = addRes(ready[p], ready[i])
		}
		if nodes[p].Past == nil {
			past[p] = addRes(past[p], past[i])
		}
	}
	// Past use weighs between queues of one tree only: top queues (other
	// trees, with other half-lives or none) share by what they hold.
	for _, t := range top {
		past[t] = make(Res, n)
	}
	out := make([]Res, len(nodes))
	var split func(children []int, avail Res)
	split = func(children []int, avail Res) {
		given := splitLevel(nodes, children, used, ready, past, avail)
		spreadLeftover(nodes, children, kids, used, ready, avail, given)
		for k, c := range children {
			out[c] = given[k]
			if len(kids[c]) > 0 {
				split(kids[c], given[k])
			}
		}
	}
	split(top, free)
	return out
}

// splitLevel shares avail between siblings (QueueShares). Each child is
// given units along the shape of what it has Ready: one unit is what
// raises its dominant share by one (all of the level), so a child with
// Ready r and dominant share d takes all of it at d units.
func splitLevel(nodes []QueueNode, children []int, used, ready, past []Res, avail Res) []Res {
	n := len(avail)
	left := make([]float64, n)
	total := make([]float64, n) // what the level controls: holdings and avail
	for r := range n {
		left[r] = float64(max(avail[r], 0))
		total[r] = left[r]
		for _, c := range children {
			total[r] += float64(used[c][r])
		}
	}
	dom := func(v []float64) float64 {
		d := 0.0
		for r := range n {
			if total[r] > 0 {
				d = max(d, v[r]/total[r])
			}
		}
		return d
	}
	type kid struct {
		shape  []float64 // Ready per unit (nil: nothing Ready it can be given)
		most   float64   // units its Ready and its cap allow
		g, x   float64   // units given by its guarantee, and by sharing
		start  float64   // its dominant share once given its guarantee
		weight float64
		frozen bool
	}
	ks := make([]kid, len(children))
	for k, c := range children {
		f := &ks[k]
		f.weight = float64(max(nodes[c].Weight, 1))
		rd := make([]float64, n)
		for r := range n {
			rd[r] = float64(max(ready[c][r], 0))
		}
		d := dom(rd)
		if d == 0 {
			continue
		}
		f.shape = make([]float64, n)
		f.most = d
		for r := range n {
			f.shape[r] = rd[r] / d
			if f.shape[r] > 0 {
				f.most = min(f.most, capRoom(nodes[c].Cap, used[c], r)/f.shape[r])
			}
		}
		f.most = max(f.most, 0)
	}
	// The guarantees first: each child is given units along its shape
	// until a resource its guarantee names reaches the guarantee (the
	// resources it does not name follow its jobs' shape), all of them
	// scaled down alike where the level holds less than it promised.
	want := make([]float64, n)
	for k, c := range children {
		f, g := &ks[k], nodes[c].Guarantee
		if f.shape == nil || g == nil {
			continue
		}
		units, named := f.most, false
		for r := range n {
			if g[r] > 0 && f.shape[r] > 0 {
				named = true
				units = min(units, max(float64(g[r]-used[c][r]), 0)/f.shape[r])
			}
		}
		if named {
			f.g = units
			for r := range n {
				want[r] += units * f.shape[r]
			}
		}
	}
	scale := 1.0
	for r := range n {
		if want[r] > left[r] {
			scale = min(scale, left[r]/want[r])
		}
	}
	for k := range ks {
		f := &ks[k]
		f.g *= scale
		for r := range n {
			if f.shape != nil {
				left[r] -= f.g * f.shape[r]
			}
		}
	}
	for r := range n {
		left[r] = max(left[r], 0)
	}
	// Idle guarantee a queue does not lend stays out of the sharing.
	for k, c := range children {
		g, lend := nodes[c].Guarantee, nodes[c].Lend
		if g == nil || lend == nil {
			continue
		}
		for r := range n {
			idle := float64(g[r] - used[c][r])
			if ks[k].shape != nil {
				idle -= ks[k].g * ks[k].shape[r]
			}
			if keep := idle - float64(lend[r]); keep > 0 {
				left[r] = max(left[r]-keep, 0)
			}
		}
	}
	// Weighted dominant resource fairness on the rest, by progressive
	// filling: a level lambda rises; at it, child k holds lambda*weight of
	// dominant share, from where its guarantee left it up to its limit.
	active := 0
	for k, c := range children {
		f := &ks[k]
		f.frozen = true
		if f.shape == nil || f.most-f.g <= 0 {
			continue
		}
		hold := make([]float64, n)
		for r := range n {
			hold[r] = float64(used[c][r]+past[c][r]) + f.g*f.shape[r]
		}
		f.start = dom(hold)
		f.frozen = false
		active++
	}
	at := func(f *kid, lambda float64) float64 {
		if f.frozen {
			return f.x
		}
		return min(max(lambda*f.weight-f.start, 0), f.most-f.g)
	}
	taken := func(lambda float64, r int) float64 {
		s := 0.0
		for k := range ks {
			if ks[k].shape != nil {
				s += at(&ks[k], lambda) * ks[k].shape[r]
			}
		}
		return s
	}
	fits := func(lambda float64) bool {
		for r := range n {
			if taken(lambda, r) > left[r] {
				return false
			}
		}
		return true
	}
	lo := 0.0
	for active > 0 {
		hi := lo
		for k := range ks {
			if f := &ks[k]; !f.frozen {
				hi = max(hi, (f.start+f.most-f.g)/f.weight)
			}
		}
		if fits(hi) {
			lo = hi
		} else {
			for range 200 {
				mid := (lo + hi) / 2
				if mid <= lo || mid >= hi {
					break
				}
				if fits(mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
		}
		// Those that reached their limit stop, and so do those that need
		// a resource the level has no more of (within a unit of it).
		full := make([]bool, n)
		for r := range n {
			full[r] = left[r]-taken(lo, r) < 1
		}
		progress := false
		for k := range ks {
			f := &ks[k]
			if f.frozen {
				continue
			}
			f.x = at(f, lo)
			stop := f.x >= (f.most-f.g)*(1-1e-12)
			for r := range n {
				if f.shape[r] > 0 && full[r] {
					stop = true
				}
			}
			if stop {
				f.frozen = true
				active--
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	given := make([]Res, len(children))
	sum := make(Res, n)
	for k, c := range children {
		g := make(Res, n)
		if f := &ks[k]; f.shape != nil {
			for r := range n {
				// A hair up before the floor: 29,999.9999 of a product
				// that is 30,000 exactly is 30,000 (the sum is clamped
				// below).
				g[r] = min(int64(math.Floor((f.g+f.x)*f.shape[r]+1e-6)), max(ready[c][r], 0))
				sum[r] += g[r]
			}
		}
		given[k] = g
	}
	// Rounding must not hand out more than the level had.
	for r := range n {
		for k := len(given) - 1; k >= 0 && sum[r] > max(avail[r], 0); k-- {
			cut := min(given[k][r], sum[r]-max(avail[r], 0))
			given[k][r] -= cut
			sum[r] -= cut
		}
	}
	return given
}

// spreadLeftover gives what a level left of a resource to its inner
// children, by weight, up to what they have Ready and their caps allow.
// An inner child is given its part along the shape of all its
// children's Ready together; the shares of its children are of other
// shapes, so a resource that bound nothing at this level (memory, for
// children that mix 2-core and memory-heavy jobs) must not bind them
// below.
func spreadLeftover(nodes []QueueNode, children []int, kids [][]int, used, ready []Res, avail Res, given []Res) {
	var weight int64
	for _, c := range children {
		if len(kids[c]) > 0 {
			weight += max(nodes[c].Weight, 1)
		}
	}
	if weight == 0 {
		return
	}
	for r := range avail {
		left := max(avail[r], 0)
		for k := range children {
			left -= given[k][r]
		}
		if left <= 0 {
			continue
		}
		for k, c := range children {
			if len(kids[c]) == 0 {
				continue
			}
			room := max(ready[c][r]-given[k][r], 0)
			if cr := capRoom(nodes[c].Cap, used[c], r); cr < float64(room) {
				room = max(int64(cr)-given[k][r], 0)
			}
			given[k][r] += min(left*max(nodes[c].Weight, 1)/weight, room)
		}
	}
}

// capRoom is what cap leaves of resource r above used (+Inf: no cap).
func capRoom(cap, used Res, r int) float64 {
	if cap == nil || cap[r] == Unbounded {
		return math.Inf(1)
	}
	return float64(cap[r] - used[r])
}

func orZero(r Res, n int) Res {
	if r == nil {
		return make(Res, n)
	}
	return r
}

func addRes(a, b Res) Res {
	out := make(Res, len(b))
	copy(out, a)
	for i := range b {
		out[i] += b[i]
	}
	return out
}
