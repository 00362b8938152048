package scheduler

import (
	"cmp"
	"maps"
	"slices"
	"sort"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/placement"
	"github.com/google/btree"
)

// Instance is a worker: its size and what is free on it now. A size below
// what is free (or left zero) reads as the free amount.
type Instance struct {
	ID        uint32
	CPUMilli  int64
	Memory    int64
	FreeMilli int64
	FreeMem   int64
	Cluster   int32 // index into Input.Clusters (ignored when there are none)
	Pool      string
	Labels    map[string]string // the worker's (read-only)
	GPUType   string
	GPUs      int64
	FreeGPUs  int64
	// Spot: a spot machine (its launch config, or its pool, is spot).
	Spot bool
}

// Run is a stretch of Ready jobs of one batch with consecutive IDs that share
// a size and are on the same attempt number.
type Run struct {
	Batch    uint64
	First    uint32
	Count    uint32
	Attempt  uint16 // the attempt number a placement creates
	CPUMilli int64
	Memory   int64
	// Constraint is 1 + an index into Input.Constraints (0: none), Queue
	// 1 + an index into Input.Queues of the leaf queue it runs in (0: in
	// no queue, no quota).
	Constraint int32
	Queue      int32
	// GPUs one job needs, of its constraint's GPU type.
	GPUs int64
	// Project is 1 + an index into Input.Projects (0: its billing project
	// has no spend limit).
	Project int32
	// Gang, when not 0, names the gang the run's jobs are members of
	// (its first job's ID, within the batch): the runs of one gang come
	// one after the other in a user's Runs, and all of them start in one
	// round, in one cluster, or none does. GangUniform narrows that to
	// one pool ("pool") or one value of a worker label ("label:KEY").
	Gang        uint32
	GangUniform string
}

// User is one user's demand in one leaf queue: running cores, Ready
// cores, and the head of the Ready queue in the order the user's jobs
// should start (highest priority first, then oldest batch first). A user
// with batches in several leaves is one User in each; its running cores
// are all it runs.
type User struct {
	Name         string
	RunningMilli int64
	ReadyMilli   int64
	// ReadyMemory is what its Ready jobs ask for of memory (0: not known;
	// with queues, Shares then weighs cores alone).
	ReadyMemory int64
	Runs        []Run
	// Queue is 1 + the index into Input.Queues of the leaf the runs are
	// in (0: none); Priority is the priority of its runs' batches (a user
	// has one User per priority in a leaf: its fair share is the user's,
	// split between them highest first; users with higher priority work
	// are served first in a round, within their shares).
	Queue    int32
	Priority int32
	// PastMilli is the user's decayed past use in its leaf's tree, as
	// millicores (placement.UsageRate; 0: the tree remembers none): fair
	// share weighs it with what the user runs now (standing).
	PastMilli int64
}

// standing is what fair share weighs a user by: the cores it runs and
// its past use.
func (u *User) standing() int64 { return u.RunningMilli + u.PastMilli }

// Queue is one queue of the round's tree, a parent before its children:
// its hard limits with what it holds (the quota rule bounds it and every
// queue above a run's leaf), its placement strategy, and what weighted
// fair share needs.
type Queue struct {
	Name   string // its path
	Parent int32  // index into Input.Queues (-1: at the top)
	// Strategy is the queue's, or the nearest above it that has one.
	Strategy  placement.Strategy
	Quota     placement.Quota
	Weight    int64
	Guarantee placement.Resources
	// Lend bounds the idle guarantee its siblings may borrow.
	Lend placement.Limit
	// PastMilli is a leaf's decayed past use as cores (its tree's
	// usage_half_life; 0: none), weighed with what it holds when its
	// siblings share (QueueNode.Past).
	PastMilli int64
}

// Project is a billing project with a spend limit, and what it has spent.
type Project struct {
	Name   string
	Budget billing.Budget
}

// Input is a copy of what the scheduler needs to know. Instances may come
// in any order; IDs must be unique.
type Input struct {
	// Now is the round's time (unix ns): projects' spend is weighed at it.
	Now int64
	// Projects are the billing projects with a spend limit that runs
	// name: one that has reached its limit at Now starts nothing.
	Projects  []Project
	Instances []Instance
	Users     []User
	// MaxPlacements bounds the jobs placed in one round (0: no bound).
	MaxPlacements int
	// Clusters the instances are in (none: one cluster, always available).
	Clusters    []placement.Cluster
	Constraints []placement.Constraint
	Queues      []Queue
	// Groups the clusters are in (placement.Cluster.Group).
	Groups []placement.Group
	// Shares are the users' fair shares of the round's free cores, as
	// Users (nil: Schedule computes them with Shares). The view that
	// lists each user's runs is bounded by the same shares, so a round
	// computes fair share once.
	Shares []int64
	// Budgets are each leaf queue's part of the round's free cores (and,
	// last, the part of users in no queue), as SharesAndBudgets computed
	// them (nil: Schedule computes them from the runs, GPUs included).
	Budgets []int64
	// Launchable are the machines the autoscaler can launch now, by
	// cluster and pool (its last decision's Sizes; none: no autoscaler,
	// and the right-sizing rule, LeftForLarger, holds nowhere).
	Launchable []PoolSize
}

// Placement puts Count jobs of a run, starting at First, on an instance.
type Placement struct {
	Batch    uint64
	First    uint32
	Count    uint32
	Attempt  uint16
	Instance uint32
}

// UserResult reports what one user was given in a round.
type UserResult struct {
	Name      string
	Share     int64 // fair-share allocation in millicores
	Placed    int64 // millicores placed
	NotPlaced int   // jobs looked at that fit on no instance
	// Ahead is how many users with jobs waiting came before this one in
	// fair-share order (fewer cores running).
	Ahead int
}

// Unplaced is a run, or the tail of one, that fit on no instance, and why.
type Unplaced struct {
	User     string
	Batch    uint64
	First    uint32
	Count    uint32
	CPUMilli int64 // one job's request
	Memory   int64
	// Constraint, Queue, GPUs and Project as in Run.
	Constraint int32
	Queue      int32
	GPUs       int64
	Project    int32
	Why        Explanation
}

// Output is a scheduling round's decision.
type Output struct {
	Placements []Placement
	Jobs       int
	Users      []UserResult
	// Unplaced lists the runs the round looked at and could place nowhere,
	// in the order it met them.
	Unplaced []Unplaced
	// GangSearch counts the instances the round looked at for gangs
	// (bounded: maxGangVisits, and the walk of the gang that reached it).
	GangSearch int
	// Holds are the gangs first in line that still wait with room held
	// for them as the round ends (gang.go: holdForGangs), by batch and
	// gang: the preemption round frees room for them there.
	Holds []GangHold
	// Queues are the input's queues with their use as the round's
	// placements left it (nil when the round placed nothing): a run
	// refused for a queue's quota is worded with the use that refused it,
	// as job why words it from the state once the plan is applied.
	Queues []Queue
}

// maxUnplacedPerUser bounds the runs a round lists in Output.Unplaced for
// one user (the rest count in UserResult.NotPlaced): once cores run out,
// every run a user has left fails, and a round with hundreds of users
// would spend its time recording them. The state's scheduling view passes
// on as many runs per user that can only be explained.
const maxUnplacedPerUser = 16

// maxExplained bounds the distinct job sizes one round explains by walking
// every instance; past it, a size reuses the explanation of a smaller size
// that also failed.
const maxExplained = 64

type slot struct {
	free, mem int64
	id        uint32 // ties break by instance ID, so the input's order does not matter
	idx       int32  // into packer.insts
}

func slotLess(a, b slot) bool {
	if a.free != b.free {
		return a.free < b.free
	}
	if a.mem != b.mem {
		return a.mem < b.mem
	}
	return a.id < b.id
}

// failure is a job size (under one constraint) that fit
// nowhere this round, and why.
type failure struct {
	cpu, mem int64
	why      Explanation
}

// failKey groups failures that can stand for one another: whether a job
// fits anywhere depends on its size and where its constraint (routing
// included) lets it go, not on its queue, whose quota is checked before
// (keyed by queue, a round of 1,000 leaf queues explained each leaf's
// first failure over every instance).
type failKey struct{ constraint int32 }

// poolTree holds the instances of one pool of one cluster that have cores
// and memory free, by free cores.
type poolTree struct {
	cluster int
	pool    string
	tree    *btree.BTreeG[slot]
}

// packer finds, in the clusters placement allows in the order the queue's
// strategy prefers, the instance with the least free cores that fits a job
// and passes the extra filters (best fit), which keeps large holes for
// large jobs. Each pool of each cluster has its own tree, searched from
// the job's size up, so DefaultChain holds for whatever it finds; the
// whole chain only runs to explain a failure, over candidates built then.
type packer struct {
	in       *Input
	filters  []Filter
	chain    []Filter // placement's filters, filters, then DefaultChain
	insts    []Instance
	clusters []placement.Cluster // what is free in each changes as jobs are placed
	trees    []poolTree
	byClust  [][]int // per cluster, its trees in pool order
	instTree []int32 // per instance, its tree
	queues   []Queue // quotas in use change as jobs are placed
	up       []int32 // each queue's parent (-1: at the top; parents)
	// slots are each instance's slot as it stands (free less what is
	// held for gangs: a slot is in its tree while both are positive).
	slots   []slot
	failed  map[failKey][]failure
	nFailed int
	// gangFailed are the gangs that fit nowhere this round (fitGang),
	// gangVisits the instances their searches looked at.
	gangFailed []gangFailure
	gangVisits int
	// holds are the room held for gangs first in line (gang.go), held
	// what is held on each instance (nil: nothing held this round).
	// holdable are the gangs first in line not yet reached in the walk,
	// byTree each tree's instances (for holds).
	holds    map[gangKey]*gangHold
	held     []heldRoom
	holdable map[gangKey]bool
	byTree   [][]int32
	// holdFailed are the gang shapes no room could be held for this
	// round, with the fewest members that failed.
	holdFailed map[holdKey]int64
	// kept is the filling pass's keeps (nil before it, or none): a hold
	// made or given back then changes what it counts as free.
	kept *keeps
	// allowed[constraint] marks the clusters a run under the constraint
	// (0: none) may use; the clusters' state does not change in a round.
	allowed [][]bool
	ranker  placement.Ranker
	order   []int
	cap     int64 // jobs the last fit may take on its instance (0: no bound)
	// cands caches candidates() until the next take: once cores run out,
	// many runs in a row fail and are explained over the same candidates.
	cands []Candidate
	// freeGPU is each instance's free GPUs as jobs are placed.
	freeGPU []int64
	// sizes are the machines each tree's pool can launch now
	// (Input.Launchable), for LeftForLarger.
	sizes [][]PoolSize
	// spent marks the projects (index as Input.Projects) that have
	// reached their spend limit at the round's time: placements do not
	// add to a project's spend until their attempts start, so it holds
	// for the whole round.
	spent []bool
}

func newPacker(filters []Filter, in *Input) *packer {
	p := &packer{in: in, filters: filters, insts: in.Instances, queues: slices.Clone(in.Queues), up: parents(in)}
	for i := range p.queues {
		p.queues[i].Quota.UsedByCluster = slices.Clone(p.queues[i].Quota.UsedByCluster)
		p.queues[i].Quota.UsedGPUs = maps.Clone(p.queues[i].Quota.UsedGPUs)
	}
	p.clusters = slices.Clone(in.Clusters)
	single := len(p.clusters) == 0
	if single {
		p.clusters = []placement.Cluster{{}}
	}
	p.chain = append(placementChain(p), filters...)
	p.chain = append(p.chain, DefaultChain...)
	p.chain = append(p.chain, gpuFree, resourceFilter{ReasonLeftForLarger, func(c *Candidate, r *Run) bool {
		if p.sizes == nil || r.GPUs > 0 || c.FreeMilli < c.CPUMilli {
			return true // the rule holds for idle instances alone
		}
		for t := range p.trees {
			if p.trees[t].cluster == int(c.Cluster) && p.trees[t].pool == c.Pool {
				return !LeftForLarger(r.CPUMilli, r.Memory, c.CPUMilli, c.FreeMilli, p.sizes[t], p.constraint(r).OffSpot())
			}
		}
		return true
	}})
	p.byClust = make([][]int, len(p.clusters))
	p.allowed = make([][]bool, len(in.Constraints)+1)
	p.ranker = placement.Ranker{Clusters: p.clusters, Groups: in.Groups}
	p.instTree = make([]int32, len(in.Instances))
	p.slots = make([]slot, len(in.Instances))
	p.freeGPU = make([]int64, len(in.Instances))
	for i := range in.Instances {
		p.freeGPU[i] = in.Instances[i].FreeGPUs
	}
	p.spent = make([]bool, len(in.Projects))
	for i := range in.Projects {
		p.spent[i] = in.Projects[i].Budget.Reached(in.Now)
	}
	index := map[poolKey]int{}
	for i, inst := range in.Instances {
		c := p.clusterOf(&inst, single)
		key := poolKey{c, inst.Pool}
		t, ok := index[key]
		if !ok {
			t = len(p.trees)
			index[key] = t
			p.trees = append(p.trees, poolTree{cluster: c, pool: inst.Pool, tree: btree.NewG(16, slotLess)})
			p.byClust[c] = append(p.byClust[c], t)
		}
		p.instTree[i] = int32(t)
		p.slots[i] = slot{inst.FreeMilli, inst.FreeMem, inst.ID, int32(i)}
		if inst.FreeMilli > 0 && inst.FreeMem > 0 {
			p.trees[t].tree.ReplaceOrInsert(p.slots[i])
		}
	}
	for c := range p.byClust {
		slices.SortFunc(p.byClust[c], func(a, b int) int { return cmp.Compare(p.trees[a].pool, p.trees[b].pool) })
	}
	if len(in.Launchable) > 0 {
		p.sizes = make([][]PoolSize, len(p.trees))
		for t := range p.trees {
			name, pool := p.clusters[p.trees[t].cluster].Name, p.trees[t].pool
			for _, s := range in.Launchable {
				if s.Cluster == name && s.Pool == pool {
					p.sizes[t] = append(p.sizes[t], s)
				}
			}
		}
	}
	return p
}

// leftForLarger reports whether a job of run r leaves instance idx, with
// free cores free, to larger jobs (LeftForLarger; GPU jobs never do).
func (p *packer) leftForLarger(r *Run, idx int32, free int64) bool {
	if p.sizes == nil || r.GPUs > 0 {
		return false
	}
	return LeftForLarger(r.CPUMilli, r.Memory, p.insts[idx].CPUMilli, free, p.sizes[p.instTree[idx]], p.constraint(r).OffSpot())
}

type poolKey struct {
	cluster int
	pool    string
}

// Shares is each user's fair share (FairShare) of the cores free this
// round in clusters that take new work, by the users' running and Ready
// cores: the first pass's allocation. The scheduling view bounds each
// user's runs by it and passes it in Input.Shares.
//
// With queues, the free cores are first shared down the tree by what
// each leaf's users have Ready (queueShares, on cores alone: the view
// knows no more before it lists runs), then each leaf's share between
// its users.
func Shares(in *Input) []int64 {
	shares, _ := SharesAndBudgets(in)
	return shares
}

// SharesAndBudgets is Shares, and with queues each leaf's part of the
// round's free cores (nil without queues) by weighted dominant resource
// fairness over cores and memory (the users' ReadyMemory), for
// Input.Budgets: a round then shares down the tree once.
func SharesAndBudgets(in *Input) ([]int64, []int64) {
	d := make([]Demand, len(in.Users))
	for i, u := range in.Users {
		d[i] = Demand{Running: u.standing(), Ready: u.ReadyMilli}
	}
	if len(in.Queues) == 0 {
		return splitByLeaf(in, d, []int64{roundFree(in)}), nil
	}
	ri := resourceIndex{gpus: map[string]int{}}
	ready := make([]Res, len(in.Queues)+1)
	for i := range ready {
		ready[i] = make(Res, ri.n())
	}
	for i := range in.Users {
		r := ready[leafOf(in, &in.Users[i])]
		r[0] += max(in.Users[i].ReadyMilli, 0)
		r[1] += max(in.Users[i].ReadyMemory, 0)
	}
	budget := cpuOf(queueShares(in, ri, ready, ri.freeRes(in)))
	return splitByLeaf(in, d, budget), budget
}

// cpuOf is the cores of each share.
func cpuOf(shares []Res) []int64 {
	out := make([]int64, len(shares))
	for i, r := range shares {
		out[i] = r[0]
	}
	return out
}

// splitByLeaf shares each leaf's budget of cores between its users
// (budget indexed as queueShares' nodes) by FairShare, whatever the
// priorities of their work, then each user's share between its own
// entries, the highest priority first. A priority orders a user's own
// work; between users it orders only who is served first within the
// shares, so no user of a shared leaf takes another's fair share by
// asking a higher priority (the leaf's and the project's max_priority
// bound what it may ask, placement.PriorityCap). A user's entries in one
// leaf (one per priority) weigh as one user: its running cores once,
// its Ready cores together.
func splitByLeaf(in *Input, d []Demand, budget []int64) []int64 {
	out := make([]int64, len(in.Users))
	idx := make([]int, len(in.Users))
	for i := range idx {
		idx[i] = i
	}
	// A user's entries together, where its first is in the input's order
	// (which FairShare's remainder follows), highest priority first.
	type leafUser struct {
		leaf int
		name string
	}
	first := make(map[leafUser]int, len(in.Users))
	for i := range in.Users {
		k := leafUser{leafOf(in, &in.Users[i]), in.Users[i].Name}
		if _, ok := first[k]; !ok {
			first[k] = i
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ua, ub := &in.Users[a], &in.Users[b]
		la, lb := leafOf(in, ua), leafOf(in, ub)
		if la != lb {
			return cmp.Compare(la, lb)
		}
		if fa, fb := first[leafUser{la, ua.Name}], first[leafUser{lb, ub.Name}]; fa != fb {
			return cmp.Compare(fa, fb)
		}
		return cmp.Compare(ub.Priority, ua.Priority)
	})
	for lo := 0; lo < len(idx); {
		l := leafOf(in, &in.Users[idx[lo]])
		hi := lo
		for hi < len(idx) && leafOf(in, &in.Users[idx[hi]]) == l {
			hi++
		}
		// The leaf's users, each a run of its entries in idx[lo:hi],
		// highest priority first.
		var starts []int
		var gd []Demand
		for k := lo; k < hi; k++ {
			e := idx[k]
			if k == lo || in.Users[e].Name != in.Users[idx[k-1]].Name {
				starts = append(starts, k)
				gd = append(gd, Demand{Running: d[e].Running})
			}
			gd[len(gd)-1].Ready += max(d[e].Ready, 0)
		}
		for k, s := range starts {
			// Pass 1 counts what each entry placed in its running
			// cores: the user runs its own cores and all of those.
			base := in.Users[idx[s]].standing()
			next := hi
			if k+1 < len(starts) {
				next = starts[k+1]
			}
			gd[k].Running = base
			for j := s; j < next; j++ {
				gd[k].Running += max(d[idx[j]].Running-base, 0)
			}
		}
		starts = append(starts, hi)
		for k, v := range FairShare(gd, max(budget[l], 0)) {
			for j := starts[k]; j < starts[k+1]; j++ {
				e := idx[j]
				out[e] = min(v, max(d[e].Ready, 0))
				v -= out[e]
			}
		}
		lo = hi
	}
	return out
}

// leafBudgets is what each leaf (and the node of users in no queue) may
// start this round by weighted dominant resource fairness down the tree,
// from what its users' runs ask for in cores, memory and GPUs (nil
// without queues).
func leafBudgets(in *Input, p *packer) []int64 {
	if len(in.Queues) == 0 {
		return nil
	}
	ri := newResourceIndex(in)
	ready := make([]Res, len(in.Queues)+1)
	for i := range ready {
		ready[i] = make(Res, ri.n())
	}
	for i := range in.Users {
		u := &in.Users[i]
		r := ready[leafOf(in, u)]
		for k := range u.Runs {
			run := &u.Runs[k]
			n := int64(run.Count)
			r[0] += n * run.CPUMilli
			r[1] += n * run.Memory
			if run.GPUs > 0 {
				if g, ok := ri.gpus[p.gpuType(run)]; ok {
					r[g] += n * run.GPUs
				}
			}
		}
	}
	return cpuOf(queueShares(in, ri, ready, ri.freeRes(in)))
}

// roundFree is the cores free on instances in clusters that take new
// work (an instance naming no cluster of the input is in the first, as
// the packer places it).
func roundFree(in *Input) int64 {
	var free int64
	for i := range in.Instances {
		if inst := &in.Instances[i]; takesWork(in, inst) {
			free += max(inst.FreeMilli, 0)
		}
	}
	return free
}

func (p *packer) clusterOf(inst *Instance, single bool) int {
	if single || inst.Cluster < 0 || int(inst.Cluster) >= len(p.clusters) {
		return 0
	}
	return int(inst.Cluster)
}

func (p *packer) constraint(r *Run) *placement.Constraint {
	if r.Constraint <= 0 || int(r.Constraint) > len(p.in.Constraints) {
		return nil
	}
	return &p.in.Constraints[r.Constraint-1]
}

// queue returns the run's leaf queue (nil: none).
func (p *packer) queue(r *Run) *Queue {
	if i := p.leaf(r); i >= 0 {
		return &p.queues[i]
	}
	return nil
}

// leaf returns the index of the run's leaf queue (-1: none); the path to
// the top follows p.up.
func (p *packer) leaf(r *Run) int32 {
	if r.Queue <= 0 || int(r.Queue) > len(p.queues) {
		return -1
	}
	return r.Queue - 1
}

// walkUp yields the quota of queue i and of every queue above it, leaf
// first (none for i < 0). Callers wrap it in a literal passed straight
// to placement's rule, which keeps the closure off the heap.
func (p *packer) walkUp(i int32, yield func(*placement.Quota) bool) {
	for ; i >= 0; i = p.up[i] {
		if !yield(&p.queues[i].Quota) {
			return
		}
	}
}

// size is one job of the run as the quota rule reads it.
func (p *packer) size(r *Run) placement.Size {
	return placement.Size{CPUMilli: r.CPUMilli, Memory: r.Memory, GPUType: p.gpuType(r), GPUs: r.GPUs}
}

// quotaRoom bounds n jobs of the run by placement's queue rule along its
// path, and names the queue that allows none.
func (p *packer) quotaRoom(r *Run, n int64) (int64, placement.Reason, *Queue) {
	leaf := p.leaf(r)
	n, why, depth := placement.PathRoom(func(y func(*placement.Quota) bool) { p.walkUp(leaf, y) }, p.size(r), n)
	if why == 0 {
		return n, 0, nil
	}
	i := leaf
	for ; depth > 0; depth-- {
		i = p.up[i]
	}
	return 0, why, &p.queues[i]
}

// candidate is instance i as the chain sees it, with free resources f.
func (p *packer) candidate(i int32, free, mem int64) Candidate {
	in := &p.insts[i]
	var h heldRoom
	if p.held != nil {
		// What is held and free: free and mem are less all that is held.
		h = p.held[i]
		h.cpu, h.mem = min(h.cpu, max(free+h.cpu, 0)), min(h.mem, max(mem+h.mem, 0))
		h.gpus = min(h.gpus, max(p.freeGPU[i]+h.gpus, 0))
	}
	free, mem = max(free, 0), max(mem, 0)
	c := Candidate{ID: in.ID, CPUMilli: max(in.CPUMilli, free, in.FreeMilli), Memory: max(in.Memory, mem, in.FreeMem), FreeMilli: free, FreeMem: mem,
		Cluster: int32(p.trees[p.instTree[i]].cluster), Pool: in.Pool, Labels: in.Labels, GPUType: in.GPUType, GPUs: max(in.GPUs, in.FreeGPUs), FreeGPUs: max(p.freeGPU[i], 0), Spot: in.Spot}
	c.HeldMilli, c.HeldMem, c.HeldGPUs = h.cpu, h.mem, h.gpus
	return c
}

// candidates lists every instance with what is free on it now. The slice
// is the packer's until the next take.
func (p *packer) candidates() []Candidate {
	if p.cands != nil {
		return p.cands
	}
	cands := make([]Candidate, len(p.insts))
	for i, s := range p.slots {
		cands[i] = p.candidate(int32(i), s.free, s.mem)
	}
	p.cands = cands
	return cands
}

// fit returns the best-fit instance for one job of the run, or why there is
// none.
func (p *packer) fit(r *Run) (slot, Explanation, bool) {
	// A billing project at its spend limit starts nothing, wherever there
	// is room.
	if r.Project > 0 && int(r.Project) <= len(p.spent) && p.spent[r.Project-1] {
		return slot{}, Explanation{Instances: len(p.insts), Quota: ReasonSpendLimit, Project: p.in.Projects[r.Project-1].Name}, false
	}
	// The queues' quotas first: they cost a few comparisons, and a queue
	// at its quota (every queue, once the fleet is full) fails every run,
	// so recording each of those failures would make the cache below a
	// long list scanned on every fit.
	quota, strategy := p.rankBy(r)
	if quota != nil {
		if n, why, q := p.quotaRoom(r, 1); n == 0 {
			return slot{}, Explanation{Instances: len(p.insts), Quota: placementReason(why), Queue: q.Name}, false
		}
	}
	key := failKey{r.Constraint}
	failed := p.failed[key]
	known := -1
	for i, f := range failed {
		if f.cpu == r.CPUMilli && f.mem == r.Memory {
			return slot{}, f.why, false
		}
		// Free resources and quotas only shrink during a round: a job at
		// least as large as one that failed fails too, unless what failed
		// it was an idle machine left to larger jobs (LeftForLarger),
		// which a larger job may take.
		if known < 0 && r.CPUMilli >= f.cpu && r.Memory >= f.mem && f.why.Count(ReasonLeftForLarger) == 0 {
			known = i
		}
	}
	if known >= 0 && p.nFailed >= maxExplained {
		return slot{}, failed[known].why, false
	}
	fail := func(why Explanation) (slot, Explanation, bool) {
		if p.failed == nil {
			p.failed = map[failKey][]failure{}
		}
		p.failed[key] = append(p.failed[key], failure{r.CPUMilli, r.Memory, why})
		p.nFailed++
		return slot{}, why, false
	}
	var found slot
	ok := false
	allowed := p.allowedFor(r)
	if known < 0 {
		k := p.constraint(r)
		// The best cluster first; the whole order only when it has no
		// room (most fits end in the first cluster tried).
		search := func(c int) bool {
			for _, t := range p.byClust[c] {
				if !k.AllowsPool(p.trees[t].pool) {
					continue
				}
				p.trees[t].tree.AscendGreaterOrEqual(slot{free: r.CPUMilli}, func(s slot) bool {
					if s.mem < r.Memory {
						return true
					}
					if !k.HoldsGPUs(r.GPUs, p.insts[s.idx].GPUType, p.freeGPU[s.idx]) {
						return true
					}
					if !k.AllowsLabels(p.insts[s.idx].Labels) || !k.AllowsSpot(p.insts[s.idx].Spot) {
						return true
					}
					if p.leftForLarger(r, s.idx, s.free) {
						return true
					}
					if len(p.filters) > 0 {
						c := p.candidate(s.idx, s.free, s.mem)
						if rejects(p.filters, &c, r) != 0 {
							return true
						}
					}
					found, ok = s, true
					return false
				})
				if ok {
					return true
				}
			}
			return false
		}
		p.order = p.order[:0]
		if best := p.ranker.Best(strategy, allowed, quota); best >= 0 && !search(best) {
			p.order = p.ranker.Order(strategy, allowed, quota, p.order)
			for _, c := range p.order[1:] {
				if search(c) {
					break
				}
			}
		}
	}
	if !ok {
		return fail(explain(p.chain, p.candidates(), r))
	}
	// Spread: a queue's jobs go to its least used cluster only until it
	// catches up with the next one, so filling one large worker does not
	// undo the balance.
	p.cap = 0
	if c := p.trees[p.instTree[found.idx]].cluster; p.spreads(strategy, c) && quota != nil && len(p.order) == 0 && r.CPUMilli > 0 {
		// Found in the best cluster: take it up to the next one's use, or
		// an even split of the run over the clusters it may use, whichever
		// is more (a job at a time would make a round of 20,000
		// placements 20,000 searches).
		next, n := int64(-1), int64(0)
		for i := range p.clusters {
			if !allowed[i] {
				continue
			}
			n++
			if i != c && i < len(quota.UsedByCluster) && (next < 0 || quota.UsedByCluster[i] < next) {
				next = quota.UsedByCluster[i]
			}
		}
		if next >= 0 {
			// What the queue can place now: the run, within its quota.
			now, _, _ := p.quotaRoom(r, int64(r.Count))
			even := (now + n - 1) / n
			p.cap = max((next-quota.UsedByCluster[c])/r.CPUMilli+1, even, 1)
		}
	}
	return found, Explanation{}, true
}

// rankBy is what ranks the clusters for run r: its leaf queue's quota
// (nil: in no queue) and placement strategy (its own, or the default).
func (p *packer) rankBy(r *Run) (*placement.Quota, placement.Strategy) {
	leaf := p.queue(r)
	if leaf == nil {
		return nil, placement.DefaultStrategy
	}
	if leaf.Strategy != "" {
		return &leaf.Quota, leaf.Strategy
	}
	return &leaf.Quota, placement.DefaultStrategy
}

// allowedFor returns the clusters the run's constraint lets it use, and
// that are available, computed once a round for each constraint.
func (p *packer) allowedFor(r *Run) []bool {
	i := 0
	if r.Constraint > 0 && int(r.Constraint) <= len(p.in.Constraints) {
		i = int(r.Constraint)
	}
	if a := p.allowed[i]; a != nil {
		return a
	}
	k := p.constraint(r)
	a := make([]bool, len(p.clusters))
	for c := range p.clusters {
		if k != nil {
			a[c] = k.AdmitsCluster(&p.clusters[c]) == 0
		} else {
			a[c] = p.clusters[c].Available() == 0
		}
	}
	p.allowed[i] = a
	return a
}

// spreads reports whether a queue with strategy s spreads its jobs over
// cluster c's peers: s is spread, and so is c's group, if it has one.
func (p *packer) spreads(s placement.Strategy, c int) bool {
	if s != placement.Spread {
		return false
	}
	g := p.clusters[c].Group
	return g <= 0 || int(g) > len(p.in.Groups) || p.in.Groups[g-1].Strategy == "" || p.in.Groups[g-1].Strategy == placement.Spread
}

// room bounds n jobs of the run by its queues' quotas, and by the GPUs
// free on the instance of slot s.
func (p *packer) room(r *Run, s slot, n int64) int64 {
	n, _, _ = p.quotaRoom(r, n)
	if r.GPUs > 0 {
		n = min(n, p.freeGPU[s.idx]/r.GPUs)
	}
	return n
}

// gpuType is the type of the run's GPUs ("" when it needs none).
func (p *packer) gpuType(r *Run) string {
	if k := p.constraint(r); k != nil && r.GPUs > 0 {
		return k.GPUType
	}
	return ""
}

// take removes n jobs' worth of resources from an instance, and counts
// them against the run's leaf queue and those above it.
func (p *packer) take(s slot, n int64, r *Run) {
	p.cands = nil
	tr := &p.trees[p.instTree[s.idx]]
	tr.tree.Delete(s)
	s.free -= n * r.CPUMilli
	s.mem -= n * r.Memory
	if s.free > 0 && s.mem > 0 {
		tr.tree.ReplaceOrInsert(s)
	}
	p.slots[s.idx] = s
	p.clusters[tr.cluster].FreeMilli -= n * r.CPUMilli
	p.freeGPU[s.idx] -= n * r.GPUs
	leaf := p.leaf(r)
	placement.PathCharge(func(y func(*placement.Quota) bool) { p.walkUp(leaf, y) }, p.size(r), n)
	p.walkUp(leaf, func(q *placement.Quota) bool {
		if tr.cluster < len(q.UsedByCluster) {
			q.UsedByCluster[tr.cluster] += n * r.CPUMilli
		}
		return true
	})
}

// ServedBefore is the fair-share order a round serves users in: the user
// with less standing (cores running, and past use where its queue tree
// remembers it) first, ties by name. job why counts the users ahead of a
// job's with it.
func ServedBefore(runningA int64, nameA string, runningB int64, nameB string) bool {
	if runningA != runningB {
		return runningA < runningB
	}
	return nameA < nameB
}

// Schedule walks users in fair-share order (fewest running cores first) and
// places each user's Ready jobs until the user's share is used. What is
// left over (shares that a user's jobs could not use: they fit nowhere, or
// only in holes too small) is split by fair share again between the users
// that can still place, counting what they were given; what even that
// leaves goes to any job that fits, in the same order, so no core idles
// while a job that fits is waiting.
//
// Runs that fit nowhere are listed in Output.Unplaced with the reasons of
// DefaultChain.
func Schedule(in *Input) *Output {
	return ScheduleWith(nil, in)
}

// ScheduleWith is Schedule with more filters checked before DefaultChain's
// (which always apply): they can only narrow the instances a job may use.
func ScheduleWith(filters []Filter, in *Input) *Output {
	out := &Output{}
	if len(in.Users) == 0 {
		return out
	}
	full := roundFree(in) == 0
	if full && !slices.ContainsFunc(in.Users, func(u User) bool { return slices.ContainsFunc(u.Runs, func(r Run) bool { return r.Gang != 0 }) }) {
		return out
	}
	p := newPacker(filters, in)
	order := make([]int, len(in.Users))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ua, ub := &in.Users[order[a]], &in.Users[order[b]]
		if ua.Priority != ub.Priority {
			return ua.Priority > ub.Priority
		}
		return ServedBefore(ua.standing(), ua.Name, ub.standing(), ub.Name)
	})
	p.holdForGangs(order)
	if full {
		// Nothing to place, but room to hold for the gangs first in
		// line, in order, for the preemption round to free.
		for _, ui := range order {
			runs := in.Users[ui].Runs
			if i := slices.IndexFunc(runs, func(r Run) bool { return r.Gang != 0 }); i >= 0 {
				p.reachGang(gangUnit(runs, i))
			}
		}
		out.Holds = p.heldAtEnd()
		return out
	}
	shares := in.Shares
	if len(shares) != len(in.Users) {
		shares = Shares(in)
	}
	// Each leaf's part of the round (nil: no queues), and what its users
	// were given of it.
	budget := in.Budgets
	if len(in.Queues) == 0 || len(budget) != len(in.Queues)+1 {
		budget = leafBudgets(in, p)
	}
	leafGiven := make([]int64, len(budget))
	out.Users = make([]UserResult, len(in.Users))
	for i, u := range in.Users {
		out.Users[i] = UserResult{Name: u.Name, Share: shares[i]}
	}
	// progress[u] = (run index, jobs of that run already placed)
	type cursor struct {
		run  int
		done uint32
	}
	cursors := make([]cursor, len(in.Users))
	limit := in.MaxPlacements
	if limit <= 0 {
		limit = int(^uint(0) >> 1)
	}
	share := make([]int64, len(in.Users)) // this pass's allocation
	given := make([]int64, len(in.Users)) // placed in this pass
	unfit := make([]int64, len(in.Users)) // millicores of runs that fit nowhere
	listed := make([]int, len(in.Users))  // entries in out.Unplaced
	runs, explained := 0, 0
	for i := range in.Users {
		runs += len(in.Users[i].Runs)
		explained += min(len(in.Users[i].Runs), maxUnplacedPerUser)
	}
	out.Placements = make([]Placement, 0, min(runs, limit))
	// Once the fleet is full, most users list their first runs as
	// unplaced: growing the list by doubling copied it (and its pointers,
	// under the collector's write barriers) as many times.
	out.Unplaced = make([]Unplaced, 0, explained)
	copy(share, shares)
	var kept *keeps
	for pass := 0; pass < 3; pass++ {
		if pass == 2 && budget != nil {
			// What is left goes to any job that fits, but for the
			// idle guarantee queues do not lend (their shares kept
			// it already).
			kept = p.keeps()
			p.kept = kept
		}
		if pass == 1 {
			// Split what is still free between the users that can still
			// place, from where they stand now.
			var left int64
			for _, t := range p.trees {
				t.tree.Ascend(func(s slot) bool { left += s.free; return true })
			}
			again := make([]Demand, len(in.Users))
			for i, u := range in.Users {
				placed := out.Users[i].Placed
				again[i].Running = u.standing() + placed // a user's other entries weigh it (splitByLeaf)
				if cursors[i].run < len(u.Runs) {
					again[i].Ready = max(u.ReadyMilli-placed-unfit[i], 0)
				}
			}
			if budget == nil {
				share = splitByLeaf(in, again, []int64{left})
			} else {
				// What each leaf has left of its part, between its
				// users that can still place.
				rest := make([]int64, len(budget))
				for l := range budget {
					rest[l] = min(max(budget[l]-leafGiven[l], 0), left)
				}
				share = splitByLeaf(in, again, rest)
			}
			clear(given)
		}
		for _, ui := range order {
			u := &in.Users[ui]
			res := &out.Users[ui]
			c := &cursors[ui]
			for c.run < len(u.Runs) && out.Jobs < limit {
				if pass < 2 && given[ui] >= share[ui] {
					break
				}
				leaf := -1
				if budget != nil {
					leaf = leafOf(in, u)
					if pass < 2 && leafGiven[leaf] >= budget[leaf] {
						break
					}
				}
				run := &u.Runs[c.run]
				if run.Gang != 0 && c.done == 0 {
					unit := gangUnit(u.Runs, c.run)
					p.reachGang(unit)
					if pass < 2 && gangCores(unit) > 0 {
						// The whole gang within the user's share (the
						// last member may overshoot, as a run's last
						// job) and its leaf's part: else it waits for
						// the last pass, which keeps the guarantees
						// queues do not lend.
						cores, last := gangCores(unit), gangShape(unit).CPUMilli
						if cores-last >= share[ui]-given[ui] || (leaf >= 0 && cores > budget[leaf]-leafGiven[leaf]) {
							break
						}
					}
					c.run += len(unit)
					p.placeGang(unit, out, ui, &unplacedState{res: res, unfit: &unfit[ui], listed: &listed[ui]}, limit, kept, func(placed int64) {
						given[ui] += placed
						if leaf >= 0 {
							leafGiven[leaf] += placed
						}
					})
					continue
				}
				s, why, ok := p.fit(run)
				if !ok {
					unfit[ui] += int64(run.Count-c.done) * run.CPUMilli
					res.NotPlaced += int(run.Count - c.done)
					if listed[ui]++; listed[ui] <= maxUnplacedPerUser {
						out.Unplaced = append(out.Unplaced, Unplaced{
							User: u.Name, Batch: run.Batch, First: run.First + c.done,
							Count: run.Count - c.done, CPUMilli: run.CPUMilli, Memory: run.Memory,
							Constraint: run.Constraint, Queue: run.Queue, GPUs: run.GPUs, Project: run.Project, Why: why,
						})
					}
					c.run++
					c.done = 0
					continue
				}
				// Fill the chosen instance with as many jobs of the run as
				// fit, within the user's share on the first pass.
				n := int64(run.Count - c.done)
				if run.CPUMilli > 0 {
					n = min(n, s.free/run.CPUMilli)
				}
				if run.Memory > 0 {
					n = min(n, s.mem/run.Memory)
				}
				if pass < 2 && run.CPUMilli > 0 {
					// Allow the last job to overshoot so that a share smaller
					// than one job still starts one.
					left := share[ui] - given[ui]
					if leaf >= 0 {
						left = min(left, budget[leaf]-leafGiven[leaf])
					}
					n = min(n, max((left+run.CPUMilli-1)/run.CPUMilli, 1))
				}
				n = min(n, int64(limit-out.Jobs))
				n = p.room(run, s, n)
				if p.cap > 0 {
					n = min(n, p.cap)
				}
				if kept != nil {
					if n = kept.room(p, run, n); n == 0 {
						c.run++
						c.done = 0
						continue
					}
				}
				p.take(s, n, run)
				if kept != nil {
					kept.took(p, run, n)
				}
				out.Placements = append(out.Placements, Placement{
					Batch: run.Batch, First: run.First + c.done, Count: uint32(n),
					Attempt: run.Attempt, Instance: s.id,
				})
				out.Jobs += int(n)
				res.Placed += n * run.CPUMilli
				given[ui] += n * run.CPUMilli
				if leaf >= 0 {
					leafGiven[leaf] += n * run.CPUMilli
				}
				c.done += uint32(n)
				if c.done == run.Count {
					c.run++
					c.done = 0
				}
			}
		}
	}
	ahead := 0
	for _, ui := range order {
		out.Users[ui].Ahead = ahead
		if len(in.Users[ui].Runs) > 0 {
			ahead++
		}
	}
	out.Queues = p.queues
	out.GangSearch = p.gangVisits
	out.Holds = p.heldAtEnd()
	return out
}
