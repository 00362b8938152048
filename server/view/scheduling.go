package view

import (
	"maps"
	"slices"

	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// maxRunsPerUser bounds how far down one user's queue a round looks for
// work that could start.
const maxRunsPerUser = 10000

// maxPassedRunsPerUser bounds the runs of one user a round passes on
// only so the scheduler can say why they wait: runs that fit no active
// instance at all (too many cores or too much memory for the largest),
// and runs larger than anything free now where they may go (of runs its
// queue's quota blocks, one is passed, and this many looked at). None of
// them counts towards maxRunsPerUser or the round's job bound: a queue
// that starts with a million jobs no instance can hold must not hide the
// jobs behind them. The scheduler explains the first 16 unplaced runs of
// a user; once the fleet is full, most of every queue is such runs, and
// passing more (it was 64 per user, 32,000 runs a round with 500 users)
// made every round try and fail them all.
const maxPassedRunsPerUser = 16

// minRunsPerUser is how many runs a user's list holds at least when fair
// share bounds it: the cores other users cannot use (their jobs fit only
// elsewhere, or not in the holes left) are shared again between the users
// that can still place, and that needs jobs of several sizes to choose
// from. A user fair share gives nothing this round (once the fleet is
// full, most users: the few cores that free up go to those holding
// least) can only take leftovers and holds at least minRunsNoShare: with
// 500 users, 16 runs each was 8,000 runs a round to place a few hundred
// jobs.
const (
	minRunsPerUser = 16
	minRunsNoShare = 4
)

// reach is what the workers one constraint allows offer: the largest
// free cores and memory, the free cores in all, and what the runs
// listed so far want of them.
type reach struct {
	// shapes: the sizes (cores, memory, GPUs) of the instances it
	// allows, free or not, that no other of them exceeds in every
	// one (a fleet has a few); many: too many to keep, so every job
	// is taken to fit (the scheduler still says why it does not).
	shapes         [][3]int64
	many           bool
	maxCPU, maxMem int64
	free, want     int64
}

// maxShapes bounds the instance sizes a reach keeps.
const maxShapes = 64

// addShape keeps an instance size unless another kept one is at least as
// large in every dimension, and drops those it exceeds.
func (r *reach) addShape(sh [3]int64) {
	if r.many {
		return
	}
	covers := func(a, b [3]int64) bool { return a[0] >= b[0] && a[1] >= b[1] && a[2] >= b[2] }
	for _, k := range r.shapes {
		if covers(k, sh) {
			return
		}
	}
	r.shapes = slices.DeleteFunc(r.shapes, func(k [3]int64) bool { return covers(sh, k) })
	if len(r.shapes) == maxShapes {
		r.many, r.shapes = true, nil
		return
	}
	r.shapes = append(r.shapes, sh)
}

// fits reports whether some instance is large enough, free or not, for
// one job of the spec.
func (r *reach) fits(spec *state.Spec) bool {
	if r.many {
		return true
	}
	_, gpus := spec.GPUs()
	for _, sh := range r.shapes {
		if sh[0] >= spec.CPUMilli && sh[1] >= spec.Memory && sh[2] >= gpus {
			return true
		}
	}
	return false
}

// Round is a scheduling round's read model: the scheduler's input, and
// what the state records of each cluster's last enable or disable (`job
// why` words it).
type Round struct {
	Input *scheduler.Input
	// Records are as Input.Clusters.
	Records []ClusterRecord
}

// ClusterRecord is who last enabled or disabled a cluster, why and when.
type ClusterRecord struct {
	Name, Reason, By string
	Since            int64
}

// Options are a scheduling round's: its time, its bound and the leader's
// liveness.
type Options struct {
	// Now is the round's time (unix ns): billing projects' spend is
	// weighed at it.
	Now int64
	// MaxJobs bounds the round's placements (0: none).
	MaxJobs int
	// Silent reports whether an active instance's worker has gone
	// unheard long enough that a cluster all of whose workers are
	// silent counts as down (the leader's liveness, not Raft state;
	// nil: none is).
	Silent func(inst uint32) bool
	// Unbounded lists each user's queue up to the free cores, not
	// twice its fair share: the scheduler gets more runs than it can
	// place (tests that look at the listing).
	Unbounded bool
}

// Scheduling reads the scheduler's input from s in one consistent read.
// With no cores free in any enabled cluster it lists no users.
//
// Every active instance is listed (in no particular order), and per user
// with Ready or running jobs the head of the user's Ready queue (oldest
// batch first), no more than could possibly be placed now: each user's
// queue is read from its head until what was listed could fill every free
// core, per constraint, and, unless Unbounded, twice what fair share
// gives the user this round (at least minRunsPerUser runs). So a run
// restricted to regions whose workers are all busy takes nothing from the
// round's bounds and does not hide the runs behind it that could start
// elsewhere (the region deadlock of Hail Batch), and a round with hundreds
// of users copies a few times the free cores' worth of jobs instead of the
// free cores' worth for every user. Runs that can never start (no worker
// their constraint allows is large enough, their queue is at its quota, or
// their billing project has reached its spend limit at Now) are passed, a
// few per user, only so the scheduler can say why they wait.
//
// The fair shares are the scheduler's own (scheduler.Shares), computed
// once and handed over in Input.Shares.
func Scheduling(src Source, o Options) *Round {
	var rd *Round
	src.Read(func(r state.Reader) { rd = scheduling(r, o) })
	return rd
}

func scheduling(r state.Reader, o Options) *Round {
	in := &scheduler.Input{MaxPlacements: o.MaxJobs, Now: o.Now}
	rd := &Round{Input: in}
	groupIdx := map[string]int32{}
	for g := range r.Groups() {
		in.Groups = append(in.Groups, placement.Group{Name: g.Name, Strategy: placement.Strategy(g.Strategy)})
		groupIdx[g.Name] = int32(len(in.Groups))
	}
	clusterIdx := map[string]int32{}
	for cl := range r.Clusters() {
		clusterIdx[cl.Name] = int32(len(in.Clusters))
		in.Clusters = append(in.Clusters, placement.Cluster{Name: cl.Name, Region: cl.Region, Disabled: cl.Disabled,
			PricePerCoreHour: corePrice(cl.Pools), Group: groupIdx[cl.Group]})
		rd.Records = append(rd.Records, ClusterRecord{Name: cl.Name, Reason: cl.Reason, By: cl.By, Since: cl.Since})
	}
	// heard per cluster: 0 no workers, 1 all silent, 2 one heard.
	heard := make([]int8, len(in.Clusters))
	var free int64
	for inst := range r.Instances() {
		if r.Reserved(inst) {
			continue
		}
		slot := scheduler.Instance{ID: inst.ID, CPUMilli: inst.CPUMilli, Memory: inst.Memory, FreeMilli: inst.FreeMilli,
			FreeMem: inst.FreeMem, Cluster: clusterIdx[inst.Cluster], Pool: inst.Pool, Labels: inst.Labels,
			GPUType: inst.GPUType, GPUs: inst.GPUs, FreeGPUs: inst.FreeGPUs, Spot: r.Spot(inst)}
		in.Instances = append(in.Instances, slot)
		if int(slot.Cluster) >= len(in.Clusters) {
			continue
		}
		c := &in.Clusters[slot.Cluster]
		c.CapacityMilli += inst.CPUMilli
		c.FreeMilli += max(inst.FreeMilli, 0)
		if heard[slot.Cluster] != 2 {
			heard[slot.Cluster] = 1
			if o.Silent == nil || !o.Silent(inst.ID) {
				heard[slot.Cluster] = 2
			}
		}
		if !c.Disabled && inst.FreeMilli > 0 && inst.FreeMem > 0 {
			free += inst.FreeMilli
		}
	}
	for i, h := range heard {
		in.Clusters[i].Down = h == 1
	}
	if free == 0 {
		return rd
	}
	l := &lister{r: r, in: in, o: o, free: free, clusterIdx: clusterIdx, constraintOf: map[string]int32{},
		spendOf: map[string]spend{}}
	l.anywhere = l.newReach(placement.Constraint{})
	l.listQueues()
	// A user is one scheduler.User for each leaf queue and priority its
	// batches with Ready jobs are in (most users: one), in the order of
	// its FIFO within each.
	var lists [][]*state.Batch
	uqs := r.UserQueues()
	in.Users = make([]scheduler.User, 0, len(uqs))
	lists = make([][]*state.Batch, 0, len(uqs))
	for _, q := range uqs {
		if q.ReadyJobs() == 0 && q.RunningJobs() == 0 {
			continue
		}
		first := len(in.Users)
		for _, b := range q.Batches() {
			sq := l.r.Queue(b)
			leaf, prio := l.queue(sq), b.Priority
			k := first
			for k < len(in.Users) && (in.Users[k].Queue != leaf || in.Users[k].Priority != prio) {
				k++
			}
			if k == len(in.Users) {
				in.Users = append(in.Users, scheduler.User{Name: q.Name(), RunningMilli: q.RunningMilli(), Queue: leaf, Priority: prio,
					PastMilli: r.PastMilli(sq, q.Name(), o.Now)})
				lists = append(lists, nil)
			}
			milli := r.ReadyMilli(b)
			in.Users[k].ReadyMilli += milli
			// Memory by the batch's head: exact for a batch of one
			// size, an estimate for a mixed one (the budgets it
			// weighs bound cores alone).
			if sp := r.ReadyHead(b); sp != nil && sp.CPUMilli > 0 {
				in.Users[k].ReadyMemory += int64(float64(milli) / float64(sp.CPUMilli) * float64(sp.Memory))
			}
			lists[k] = append(lists[k], b)
		}
		if first == len(in.Users) {
			// Running work only: it counts in fair share.
			in.Users = append(in.Users, scheduler.User{Name: q.Name(), RunningMilli: q.RunningMilli()})
			lists = append(lists, nil)
		}
	}
	var budgets []int64
	in.Shares, budgets = scheduler.SharesAndBudgets(in)
	gpus := false
	for ui, batches := range lists {
		in.Users[ui].Runs = l.runs(batches, in.Shares[ui])
		for _, run := range in.Users[ui].Runs {
			gpus = gpus || run.GPUs > 0
		}
	}
	// Jobs that need GPUs make the decision weigh GPUs too: it shares
	// down the tree again from the runs.
	if !gpus {
		in.Budgets = budgets
	}
	return rd
}

// corePrice is the price of a core-hour in the cheapest declared pool,
// rounded to the nano-dollar (0: unknown).
func corePrice(pools []state.Pool) money.Rate {
	var price money.Rate
	for _, p := range pools {
		if p.CPUMilli > 0 && p.PricePerHour > 0 {
			if pc := p.PricePerHour.Per(p.CPUMilli, 1000); price == 0 || pc < price {
				price = pc
			}
		}
	}
	return price
}

// spend is a billing project's place in the input and whether it has
// reached its spend limit at the round's time.
type spend struct {
	idx     int32 // 1 + index into Input.Projects (0: no limit)
	reached bool
}

// lister lists the users' runs of one round.
type lister struct {
	r          state.Reader
	in         *scheduler.Input
	o          Options
	free       int64
	clusterIdx map[string]int32
	anywhere   *reach
	reaches    []*reach // as in.Constraints
	// constraintOf indexes in.Constraints by key (1 + index).
	constraintOf map[string]int32
	queueOf      map[*state.Queue]int32 // 1 + index into in.Queues
	// quotas: each queue's quota and use, with what this user's runs
	// listed so far are charged to (taken back after each user): the
	// listing bounds itself by placement's queue rule.
	quotas  *quotas
	spendOf map[string]spend
}

// admitted: placement's rule, on the cluster's enabled state alone.
func (l *lister) admitted(k *placement.Constraint, in *scheduler.Instance) bool {
	cl := &l.in.Clusters[in.Cluster]
	return k.Admits(&placement.Cluster{Name: cl.Name, Region: cl.Region, Disabled: cl.Disabled}, in.Pool, in.Labels, in.Spot) == 0 && k.AllowsGPUType(in.GPUType)
}

func (l *lister) newReach(k placement.Constraint) *reach {
	rc := &reach{}
	for i := range l.in.Instances {
		in := &l.in.Instances[i]
		if !l.admitted(&k, in) {
			continue
		}
		rc.addShape([3]int64{in.CPUMilli, in.Memory, in.GPUs})
		if in.FreeMilli > 0 && in.FreeMem > 0 {
			rc.free += in.FreeMilli
			rc.maxCPU = max(rc.maxCPU, in.FreeMilli)
			rc.maxMem = max(rc.maxMem, in.FreeMem)
		}
	}
	return rc
}

// constraint returns a job's constraint (1 + index, 0: none) and its
// reach: its spec's, routed to its queue's home clusters (home, read once
// a batch: Reader.HomeClusters).
func (l *lister) constraint(home []string, spec *state.Spec) (int32, *reach) {
	if w := spec.Where; len(home) == 0 && (w == nil || (len(w.Regions) == 0 && len(w.Clusters) == 0 && w.Pool == "" && w.GPUs == 0 && len(w.Labels) == 0 && !w.NoSpot)) {
		return 0, l.anywhere
	}
	k := spec.Constraint()
	k.Clusters = home
	key := k.Key()
	idx, ok := l.constraintOf[key]
	if !ok {
		k = k.Clone() // the input outlives the read
		l.reaches = append(l.reaches, l.newReach(k))
		l.in.Constraints = append(l.in.Constraints, k)
		idx = int32(len(l.in.Constraints))
		l.constraintOf[key] = idx
	}
	return idx, l.reaches[idx-1]
}

// listQueues lists the whole tree in the input (its queues' idle
// guarantees are reserved or lent whether or not they have work), each
// with its strategy (its own or the nearest above it), its limits and
// use, and the cores its quota and those above it leave.
func (l *lister) listQueues() {
	tree := l.r.QueueTree()
	l.queueOf = make(map[*state.Queue]int32, len(tree))
	for _, q := range tree {
		use := l.r.Use(q)
		quota := q.Queue.Quota()
		quota.UsedMilli, quota.UsedMemory, quota.UsedJobs = use.UsedMilli, use.UsedMemory, use.UsedJobs
		if len(use.UsedGPUs) > 0 {
			quota.UsedGPUs = maps.Clone(use.UsedGPUs)
		}
		if l.r.IsLeaf(q) {
			// A leaf's use per cluster is what spread ranks its
			// clusters by; the queues above it need none.
			quota.UsedByCluster = make([]int64, len(l.in.Clusters))
			for name, used := range use.UsedByCluster {
				if ci, ok := l.clusterIdx[name]; ok {
					quota.UsedByCluster[ci] = used
				}
			}
		}
		sq := scheduler.Queue{Name: q.Path, Parent: -1, Strategy: q.Strategy, Quota: quota, Weight: q.EffectiveWeight(),
			Guarantee: q.Guarantee.Clone(), Lend: q.LendLimit.Clone()}
		if l.r.IsLeaf(q) {
			sq.PastMilli = l.r.QueuePastMilli(q, l.o.Now)
		}
		if p := l.r.Parent(q); p != nil {
			pi := l.queueOf[p] - 1
			sq.Parent = pi
			if sq.Strategy == "" {
				sq.Strategy = l.in.Queues[pi].Strategy
			}
		}
		l.in.Queues = append(l.in.Queues, sq)
		l.queueOf[q] = int32(len(l.in.Queues))
	}
	l.quotas = newQuotas(l.r)
}

// queue returns a leaf queue's place (1 + index into in.Queues, 0: none).
func (l *lister) queue(leaf *state.Queue) int32 {
	if leaf != nil {
		return l.queueOf[leaf]
	}
	return 0
}

// blocked reports whether the leaf's quota (and those above it) leaves
// no room for one more job of the size, with this user's runs listed so
// far counted as used.
func (l *lister) blocked(leaf *state.Queue, sz placement.Size) bool {
	return l.quotas.room(leaf, sz, 1) == 0
}

// project returns a batch's billing project's place and spend.
func (l *lister) project(b *state.Batch) spend {
	sp, ok := l.spendOf[b.BillingProject]
	if !ok {
		if bg := l.r.Budget(b.BillingProject); bg.Limit > 0 {
			l.in.Projects = append(l.in.Projects, scheduler.Project{Name: b.BillingProject, Budget: bg})
			sp = spend{idx: int32(len(l.in.Projects)), reached: bg.Reached(l.o.Now)}
		}
		l.spendOf[b.BillingProject] = sp
	}
	return sp
}

// runs lists the head of one user's batches in one leaf queue and
// priority (share: what fair share gives the user there this round).
func (l *lister) runs(batches []*state.Batch, share int64) []scheduler.Run {
	free, maxJobs := l.free, l.o.MaxJobs
	limit, least := free, minRunsPerUser
	if !l.o.Unbounded {
		limit = min(free, 2*share)
		if share == 0 {
			least = minRunsNoShare
		}
	}
	var out []scheduler.Run
	// Each user's list is counted afresh, up to its limit (all free
	// cores, or twice its fair share): what the users get of them is
	// the scheduler's to decide.
	var want int64
	l.anywhere.want = 0
	for _, rc := range l.reaches {
		rc.want = 0
	}
	defer l.quotas.takeBack()
	jobs, runs, passed, blocked, quotaTold, spendTold := 0, 0, 0, 0, false, false
batches:
	for _, b := range batches {
		leaf := l.r.Queue(b)
		ti := l.queue(leaf)
		home := l.r.HomeClusters(b)
		pr := l.project(b)
		var gangsSeen map[uint32]bool
		for rg := range l.r.Ready(b) {
			spec := rg.Spec
			if spec.Where != nil && spec.Where.MachineType != "" {
				// Runs on a machine of its own, made for it.
				continue
			}
			if gang := spec.Gang(); gang != nil {
				// A gang is listed whole, its runs one after the
				// other, where its first Ready member is met, and only
				// once every member that has not ended is Ready.
				// Each gang read once, however many runs of the
				// queue its members are in.
				first := l.r.GangOf(b, rg.Lo)
				if gangsSeen[first] {
					continue
				}
				if gangsSeen == nil {
					gangsSeen = map[uint32]bool{}
				}
				gangsSeen[first] = true
				members, _, ok := l.r.GangReady(b, rg.Lo)
				var n int64
				for _, m := range members {
					n += int64(m.Len())
				}
				if !ok || pr.reached || (maxJobs > 0 && jobs+int(n) > maxJobs) {
					continue
				}
				// Its members are of one place; a job group's gang
				// spans specs, each run of its own spec's size.
				for _, m := range members {
					ci, _ := l.constraint(home, m.Spec)
					_, gpus := m.Spec.GPUs()
					out = append(out, scheduler.Run{
						Batch: b.ID, First: m.Lo, Count: m.Len(), Attempt: m.Attempt,
						CPUMilli: m.Spec.CPUMilli, Memory: m.Spec.Memory, Constraint: ci, Queue: ti, GPUs: gpus, Project: pr.idx,
						Gang: first, GangUniform: gang.Uniform,
					})
					want += int64(m.Len()) * m.Spec.CPUMilli
					l.quotas.hold(leaf, m.Spec.Size(), int64(m.Len()))
				}
				jobs += int(n)
				runs++
				if (want >= limit && (l.o.Unbounded || runs >= least || want >= free)) || (maxJobs > 0 && jobs >= maxJobs) || runs >= maxRunsPerUser {
					break batches
				}
				continue
			}
			ci, rc := l.constraint(home, spec)
			_, gpus := spec.GPUs()
			run := scheduler.Run{
				Batch: b.ID, First: rg.Lo, Count: rg.Len(), Attempt: rg.Attempt,
				CPUMilli: spec.CPUMilli, Memory: spec.Memory, Constraint: ci, Queue: ti, GPUs: gpus, Project: pr.idx,
			}
			if pr.reached {
				// No job of the project may start: the first run is
				// passed on for the scheduler to say why (job why
				// tells the others from the project's spend), and
				// the rest of the batch waits.
				if !spendTold {
					out = append(out, run)
					spendTold = true
				}
				continue batches
			}
			size := spec.Size()
			if l.blocked(leaf, size) {
				// The queue's quota is the reason for every run it
				// blocks: the first is passed on for the scheduler to
				// say so (job why tells the others from the queue's
				// use). Smaller runs behind it may still fit what the
				// queue has left, so a few more are looked at; with
				// nothing left, the rest of the batch waits too.
				if !quotaTold {
					out = append(out, run)
					quotaTold = true
				}
				if blocked++; l.blocked(leaf, placement.Size{CPUMilli: 1}) || blocked >= maxPassedRunsPerUser {
					continue batches
				}
				continue
			}
			if !rc.fits(spec) {
				// Passed on whole for the scheduler to explain, within
				// its own bound; it never uses up the round's.
				if passed < maxPassedRunsPerUser {
					out = append(out, run)
					passed++
				}
				continue
			}
			runs++
			switch {
			case spec.CPUMilli > rc.maxCPU || spec.Memory > rc.maxMem:
				// Larger than anything free where it may go: none of it
				// can start this round, so it takes nothing from the
				// round's bounds, and it is passed on only to be
				// explained.
				if passed < maxPassedRunsPerUser {
					out = append(out, run)
					passed++
				}
			case rc.want >= rc.free:
				// What it may use is spoken for by the runs before it.
			default:
				if maxJobs > 0 && jobs+int(run.Count) > maxJobs {
					run.Count = uint32(maxJobs - jobs)
				}
				out = append(out, run)
				jobs += int(run.Count)
				take := min(int64(run.Count)*spec.CPUMilli, rc.free-rc.want)
				rc.want += take
				want += take
				l.quotas.hold(leaf, size, int64(run.Count))
			}
			if (want >= limit && (l.o.Unbounded || runs >= least || want >= free)) || (maxJobs > 0 && jobs >= maxJobs) || runs >= maxRunsPerUser {
				break batches
			}
		}
	}
	return out
}
