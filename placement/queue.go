package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Queues are the tree work is shared by: organization / project / tier is
// the usual shape (Pinterest's Monarch), but queues nest to any depth up
// to MaxQueueDepth. A queue is named by its path from the top,
// "genomics/gwas/tier1". Each queue has a weight among its siblings, a
// guarantee (its nominal quota across all clusters: what a team's quota
// was), limits on what it may borrow from its siblings' idle guarantee and
// lend of its own, caps on what it runs, and its preemption settings.
// Jobs run in leaves; an inner queue shares what it is given between its
// children.

// QueueSep separates the names in a queue's path.
const QueueSep = "/"

// Bounds on a queue tree: every count and size a client sends is bounded
// before it reaches the log.
const (
	MaxQueueDepth  = 8
	MaxQueues      = 10000
	MaxQueueWeight = 1_000_000
	// MaxQueuePath bounds a path's length in bytes.
	MaxQueuePath = MaxQueueDepth * (MaxName + 1)
	// MaxQueueDuration bounds a queue's durations (preempt_after,
	// reclaim_grace, min_runtime): 30 days, in nanoseconds.
	MaxQueueDuration = 30 * 24 * 3600 * int64(1e9)
	// MaxQueueAllowFrom bounds the queues a queue may name to preempt.
	MaxQueueAllowFrom = 64
)

// DefaultQueueWeight is a queue's weight when it names none.
const DefaultQueueWeight = 1

// DefaultPreemptThresholdPermille is the fraction of its fair share a
// queue must be held below for preempt_after before it preempts (YARN's
// fairSharePreemptionThreshold default, 0.5), in thousandths.
const DefaultPreemptThresholdPermille = 500

// Resources is an amount of each resource: millicores, bytes of memory
// and GPUs by type.
type Resources struct {
	CPUMilli int64
	Memory   int64
	GPUs     map[string]int64
}

// IsZero reports whether r holds nothing.
func (r Resources) IsZero() bool {
	if r.CPUMilli != 0 || r.Memory != 0 {
		return false
	}
	for _, n := range r.GPUs {
		if n != 0 {
			return false
		}
	}
	return true
}

// Clone returns a copy of r that shares no map with it.
func (r Resources) Clone() Resources {
	r.GPUs = maps.Clone(r.GPUs)
	return r
}

// Limit bounds each resource it names: a nil amount, and a GPU type it
// does not name, is not bounded.
type Limit struct {
	CPUMilli *int64
	Memory   *int64
	GPUs     map[string]int64
}

// IsZero reports whether l bounds nothing.
func (l Limit) IsZero() bool { return l.CPUMilli == nil && l.Memory == nil && len(l.GPUs) == 0 }

// Clone returns a copy of l that shares nothing with it.
func (l Limit) Clone() Limit {
	if l.CPUMilli != nil {
		v := *l.CPUMilli
		l.CPUMilli = &v
	}
	if l.Memory != nil {
		v := *l.Memory
		l.Memory = &v
	}
	l.GPUs = maps.Clone(l.GPUs)
	return l
}

// Bound returns a Limit that bounds every resource r has, at r's amounts.
func Bound(r Resources) Limit {
	cpu, mem := r.CPUMilli, r.Memory
	return Limit{CPUMilli: &cpu, Memory: &mem, GPUs: maps.Clone(r.GPUs)}
}

// QueueLimits bounds what a queue's attempts may hold at once.
type QueueLimits struct {
	// MaxRunningJobs and MaxRunningMilli cap the attempts running in the
	// queue and its children, and their cores (0: no cap).
	MaxRunningJobs  int64
	MaxRunningMilli int64
}

// Preemption is a queue's preemption settings, after Monarch's (YARN's
// fair scheduler): whether its attempts may be preempted for others, and
// when and from whom it may preempt.
type Preemption struct {
	// Preemptible: other queues may preempt this queue's attempts (YARN's
	// allowPreemptionFrom). Tier-1 queues are not.
	Preemptible bool
	// AfterNs: a queue held below ThresholdPermille/1000 of its fair
	// share for this long preempts attempts of other queues (YARN's
	// fairSharePreemptionTimeout); 0: it never preempts for fair share.
	AfterNs int64
	// ThresholdPermille: the fraction of its fair share, in thousandths
	// (YARN's fairSharePreemptionThreshold; 0 reads as the default).
	ThresholdPermille int64
	// AllowFrom lists the queues (paths; a queue stands for its subtree)
	// this queue may preempt from; empty: any preemptible queue.
	AllowFrom []string
}

// Queue is one queue of the tree as an operator declares it. The state
// keeps it in its log entries and snapshots as an array of its fields:
// add fields at the end, never reorder.
type Queue struct {
	// Path names the queue from the top: "genomics/gwas/tier1".
	Path string
	// Weight is the queue's part among its siblings (1 to MaxQueueWeight;
	// 0 reads as DefaultQueueWeight).
	Weight int64
	// Guarantee is the queue's nominal quota across all clusters: what it
	// gets before its siblings share the rest, and takes back by
	// preemption from borrowers when it has work waiting.
	Guarantee Resources
	// BorrowLimit bounds what the queue may hold beyond its guarantee out
	// of its siblings' idle guarantee, resource by resource (a resource
	// it does not bound: no bound). A borrow limit of 0 holds the queue
	// at its guarantee: a hard quota, which is what a team's quota was.
	BorrowLimit Limit
	// LendLimit bounds how much of the queue's idle guarantee its
	// siblings may borrow (a resource it does not bound: all of it).
	LendLimit Limit
	Limits    QueueLimits
	// ReclaimGraceNs: how long the queue lets a borrower keep its
	// guarantee once it has work waiting, before it preempts the
	// borrower's attempts.
	ReclaimGraceNs int64
	// MinRuntimeNs protects an attempt of the queue from a second
	// preemption this long after its start (so preemption never
	// thrashes).
	MinRuntimeNs int64
	Preemption   Preemption
	// Strategy orders the clusters the queue's jobs go to.
	Strategy Strategy
	// HomeClusters, when set, are the clusters the queue's new attempts
	// go to (an operator routes a queue with it, Monarch's cross-cluster
	// routing); empty: any cluster the job allows.
	HomeClusters []string
}

// Quota is the queue's hard limits as the quota rule (Quota.RoomGPU, PathRoom)
// reads them, with no use: its guarantee plus its borrow_limit, for each
// resource the borrow_limit bounds, and its max_running.
func (q *Queue) Quota() Quota {
	out := Quota{MaxJobs: q.Limits.MaxRunningJobs, MaxMilli: q.Limits.MaxRunningMilli}
	if b := q.BorrowLimit.CPUMilli; b != nil {
		out.CPUMilli = q.Guarantee.CPUMilli + *b
	}
	if b := q.BorrowLimit.Memory; b != nil {
		out.Memory = q.Guarantee.Memory + *b
	}
	for typ, b := range q.BorrowLimit.GPUs {
		if out.GPUs == nil {
			out.GPUs = map[string]int64{}
		}
		out.GPUs[typ] = q.Guarantee.GPUs[typ] + b
	}
	return out
}

// Name is the last name of the queue's path.
func (q *Queue) Name() string { return q.Path[strings.LastIndex(q.Path, QueueSep)+1:] }

// ParentPath is the path of the queue's parent ("" at the top).
func (q *Queue) ParentPath() string { return ParentQueue(q.Path) }

// ParentQueue returns the path of the parent of the queue at path ("": a
// queue at the top).
func ParentQueue(path string) string {
	i := strings.LastIndex(path, QueueSep)
	if i < 0 {
		return ""
	}
	return path[:i]
}

// EffectiveWeight is the queue's weight, the default for 0.
func (q *Queue) EffectiveWeight() int64 {
	if q.Weight == 0 {
		return DefaultQueueWeight
	}
	return q.Weight
}

// ValidateQueuePath is the rule of a queue's path: 1 to MaxQueueDepth
// names, each a place name (ValidateName), separated by QueueSep.
func ValidateQueuePath(path string) error {
	if path == "" {
		return fmt.Errorf("queue path is empty: name the queue from the top, e.g. %q", "genomics/gwas/tier1")
	}
	if len(path) > MaxQueuePath {
		return fmt.Errorf("queue path %.40q... is %d bytes; at most %d", path, len(path), MaxQueuePath)
	}
	parts := strings.Split(path, QueueSep)
	if len(parts) > MaxQueueDepth {
		return fmt.Errorf("queue %q is %d levels deep; queues nest at most %d levels", path, len(parts), MaxQueueDepth)
	}
	for _, p := range parts {
		if err := ValidateName("queue name in "+fmt.Sprintf("%q", path), p); err != nil {
			return err
		}
	}
	return nil
}

// Bounds on one queue's amounts, so that the sums of MaxQueues of them
// cannot overflow: a billion cores, an exbibyte of memory and a billion
// GPUs of a type.
const (
	MaxQueueMilli  = 1_000_000_000_000
	MaxQueueMemory = 1 << 60 / MaxQueues
	MaxQueueGPUs   = 1_000_000_000
)

// validateResources checks that every amount is within 0 and its bound
// and GPU types are place names.
func validateResources(what string, r Resources) error {
	if r.CPUMilli < 0 || r.CPUMilli > MaxQueueMilli {
		return fmt.Errorf("%s: cpu must be between 0 and %d cores", what, MaxQueueMilli/1000)
	}
	if r.Memory < 0 || r.Memory > MaxQueueMemory {
		return fmt.Errorf("%s: memory must be between 0 and %d bytes", what, int64(MaxQueueMemory))
	}
	if len(r.GPUs) > MaxGPUTypes {
		return fmt.Errorf("%s names %d GPU types; at most %d", what, len(r.GPUs), MaxGPUTypes)
	}
	for _, typ := range slices.Sorted(maps.Keys(r.GPUs)) {
		if err := ValidateName(what+": gpu type", typ); err != nil {
			return err
		}
		if n := r.GPUs[typ]; n < 0 || n > MaxQueueGPUs {
			return fmt.Errorf("%s: %s GPUs must be between 0 and %d", what, typ, MaxQueueGPUs)
		}
	}
	return nil
}

// validateLimit checks a limit's amounts as validateResources does.
func validateLimit(what string, l Limit) error {
	r := Resources{GPUs: l.GPUs}
	if l.CPUMilli != nil {
		r.CPUMilli = *l.CPUMilli
	}
	if l.Memory != nil {
		r.Memory = *l.Memory
	}
	return validateResources(what, r)
}

// MaxGPUTypes bounds the GPU types one amount names.
const MaxGPUTypes = 32

// MaxRunningMilli bounds a queue's max_running cores.
const MaxRunningMilli = 1_000_000_000_000

// Validate checks one queue's own settings (not its place in a tree),
// naming the field at fault.
func (q *Queue) Validate() error {
	if err := ValidateQueuePath(q.Path); err != nil {
		return err
	}
	at := "queue " + q.Path
	if q.Weight < 0 || q.Weight > MaxQueueWeight {
		return fmt.Errorf("%s: weight %d must be between 1 and %d", at, q.Weight, MaxQueueWeight)
	}
	if err := validateResources(at+": guarantee", q.Guarantee); err != nil {
		return err
	}
	if err := validateLimit(at+": borrow_limit", q.BorrowLimit); err != nil {
		return err
	}
	if err := validateLimit(at+": lend_limit", q.LendLimit); err != nil {
		return err
	}
	// A cap of 0 cores or bytes would hold the queue at nothing, and 0
	// reads as no limit where a quota is checked: refuse it by name.
	if b := q.BorrowLimit.CPUMilli; b != nil && *b+q.Guarantee.CPUMilli == 0 {
		return fmt.Errorf("%s: a borrow_limit of 0 cpu with no cpu guarantee would let it run nothing; guarantee it cores or leave cpu out of borrow_limit", at)
	}
	if b := q.BorrowLimit.Memory; b != nil && *b+q.Guarantee.Memory == 0 {
		return fmt.Errorf("%s: a borrow_limit of 0 memory with no memory guarantee would let it run nothing; guarantee it memory or leave memory out of borrow_limit", at)
	}
	if q.Limits.MaxRunningJobs < 0 || q.Limits.MaxRunningMilli < 0 || q.Limits.MaxRunningMilli > MaxRunningMilli {
		return fmt.Errorf("%s: max_running: cpu must be between 0 (no cap) and %d cores, jobs 0 or more", at, MaxRunningMilli/1000)
	}
	for _, d := range []struct {
		name string
		ns   int64
	}{{"reclaim_grace", q.ReclaimGraceNs}, {"min_runtime", q.MinRuntimeNs}, {"preempt_after", q.Preemption.AfterNs}} {
		if d.ns < 0 || d.ns > MaxQueueDuration {
			return fmt.Errorf("%s: %s must be a duration between 0s and 720h", at, d.name)
		}
	}
	if t := q.Preemption.ThresholdPermille; t < 0 || t > 1000 {
		return fmt.Errorf("%s: preempt_threshold must be between 0 and 1 (a fraction of the queue's fair share)", at)
	}
	if len(q.Preemption.AllowFrom) > MaxQueueAllowFrom {
		return fmt.Errorf("%s: allow_preemption_from names %d queues; at most %d", at, len(q.Preemption.AllowFrom), MaxQueueAllowFrom)
	}
	for _, p := range q.Preemption.AllowFrom {
		if err := ValidateQueuePath(p); err != nil {
			return fmt.Errorf("%s: allow_preemption_from: %w", at, err)
		}
	}
	if q.Strategy != "" {
		if _, err := ParseStrategy(string(q.Strategy)); err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
	}
	if len(q.HomeClusters) > MaxQueueAllowFrom {
		return fmt.Errorf("%s: home_clusters names %d clusters; at most %d", at, len(q.HomeClusters), MaxQueueAllowFrom)
	}
	for _, c := range q.HomeClusters {
		if err := ValidateName(at+": home cluster", c); err != nil {
			return err
		}
	}
	return nil
}

// QueueTree is a validated tree of queues: every queue's parent exists,
// each path once, and the guarantees of a queue's children fit in its
// own where it has one.
type QueueTree struct {
	// Queues in depth-first order, children by name: a parent before its
	// children.
	Queues []Queue
	// Parent[i] is the index of Queues[i]'s parent (-1: at the top).
	Parent []int32
	// Children[i] are the indices of Queues[i]'s children, by name.
	Children [][]int32
	// Top are the indices of the queues at the top, by name.
	Top   []int32
	index map[string]int32
}

// NewQueueTree validates queues as a tree and returns it. Each queue's
// parent must be among them: a tree is declared whole.
func NewQueueTree(queues []Queue) (*QueueTree, error) {
	if len(queues) > MaxQueues {
		return nil, fmt.Errorf("%d queues; a tree holds at most %d", len(queues), MaxQueues)
	}
	byPath := make(map[string]*Queue, len(queues))
	for i := range queues {
		q := &queues[i]
		if err := q.Validate(); err != nil {
			return nil, err
		}
		if _, dup := byPath[q.Path]; dup {
			return nil, fmt.Errorf("queue %s is declared twice", q.Path)
		}
		byPath[q.Path] = q
	}
	kids := map[string][]string{}
	for path, q := range byPath {
		parent := q.ParentPath()
		if parent != "" && byPath[parent] == nil {
			return nil, fmt.Errorf("queue %s: its parent %s is not declared", path, parent)
		}
		kids[parent] = append(kids[parent], path)
	}
	t := &QueueTree{index: make(map[string]int32, len(queues))}
	var walk func(path string, parent int32) []int32
	walk = func(path string, parent int32) []int32 {
		names := kids[path]
		slices.Sort(names)
		out := make([]int32, 0, len(names))
		for _, p := range names {
			i := int32(len(t.Queues))
			q := *byPath[p]
			t.Queues = append(t.Queues, q)
			t.Parent = append(t.Parent, parent)
			t.Children = append(t.Children, nil)
			t.index[p] = i
			out = append(out, i)
			t.Children[i] = walk(p, i)
		}
		return out
	}
	t.Top = walk("", -1)
	for i := range t.Queues {
		if err := t.checkGuarantees(int32(i)); err != nil {
			return nil, err
		}
		for _, p := range t.Queues[i].Preemption.AllowFrom {
			if _, ok := t.index[p]; !ok {
				return nil, fmt.Errorf("queue %s: allow_preemption_from names %s, which is not declared", t.Queues[i].Path, p)
			}
		}
	}
	return t, nil
}

// checkGuarantees refuses children whose guarantees add up to more than
// their parent's, resource by resource, where the parent guarantees that
// resource: a parent cannot promise its children what it is not promised.
func (t *QueueTree) checkGuarantees(i int32) error {
	q := &t.Queues[i]
	if len(t.Children[i]) == 0 {
		return nil
	}
	var sum Resources
	sum.GPUs = map[string]int64{}
	for _, c := range t.Children[i] {
		g := &t.Queues[c].Guarantee
		sum.CPUMilli += g.CPUMilli
		sum.Memory += g.Memory
		for typ, n := range g.GPUs {
			sum.GPUs[typ] += n
		}
	}
	g := &q.Guarantee
	switch {
	case g.CPUMilli > 0 && sum.CPUMilli > g.CPUMilli:
		return fmt.Errorf("queue %s guarantees %g cores but its children's guarantees add up to %g", q.Path, float64(g.CPUMilli)/1000, float64(sum.CPUMilli)/1000)
	case g.Memory > 0 && sum.Memory > g.Memory:
		return fmt.Errorf("queue %s guarantees %d bytes of memory but its children's guarantees add up to %d", q.Path, g.Memory, sum.Memory)
	}
	for _, typ := range slices.Sorted(maps.Keys(g.GPUs)) {
		if n := g.GPUs[typ]; n > 0 && sum.GPUs[typ] > n {
			return fmt.Errorf("queue %s guarantees %d %s GPUs but its children's guarantees add up to %d", q.Path, n, typ, sum.GPUs[typ])
		}
	}
	return nil
}

// Find returns the index of the queue at path (false: none).
func (t *QueueTree) Find(path string) (int32, bool) {
	i, ok := t.index[path]
	return i, ok
}

// IsLeaf reports whether queue i has no children (jobs run in leaves).
func (t *QueueTree) IsLeaf(i int32) bool { return len(t.Children[i]) == 0 }

// Within reports whether queue i is the queue at path or below it.
func (t *QueueTree) Within(i int32, path string) bool {
	p := t.Queues[i].Path
	return p == path || strings.HasPrefix(p, path+QueueSep)
}
