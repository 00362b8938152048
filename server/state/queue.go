package state

import (
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/placement"
)

// Queues are the tree work is shared by (placement.Queue): each queue's
// guarantee is its nominal quota across all clusters, and what it may
// hold (its guarantee and borrow_limit, its max_running) bounds what its
// attempts and its children's hold. A billing project's batches go to
// its default leaf (the leaf that lists it in Projects) unless a batch
// names another leaf its project may use (AllowProjects). Teams were
// queues at the top with a hard quota; their entries and snapshot
// sections are converted (Team.queue).
//
// What each queue's attempts hold is counted where free cores are, on
// every placement and release, along the path from the leaf to the top,
// so a plan that would pass a queue's limit is rejected at apply like one
// that would oversubscribe a worker.

// Queue is one queue of the tree as the state keeps it.
type Queue struct {
	placement.Queue
	// Projects are the billing projects whose batches go to this queue
	// unless they name another (a leaf's only; a project is in one
	// queue's Projects at most). Sorted.
	Projects []string
	// AllowProjects are further billing projects whose batches may name
	// this queue. Sorted.
	AllowProjects []string
	Created       int64
	// MaxPriority is the highest priority a batch of anyone but an admin
	// may ask with this queue as its leaf (0 to placement.MaxPriority; 0,
	// the default: none above 0), below which its billing project's own
	// holds (placement.PriorityCap). Beside the projects rather than in
	// placement.Queue, whose fields the log writes inline before
	// Projects: appended here, entries and snapshots from before it read
	// as 0.
	MaxPriority int64
	// UsageHalfLifeNs gives the fair share of a tree's users a memory of
	// their past use, halving every half-life (a top queue's only; 0:
	// none, users share by what they run now). Appended as MaxPriority.
	UsageHalfLifeNs int64
	// RecommendPermille is the percentile the recommendation covers for
	// this queue and those below it that name none, in thousandths
	// (Monarch's thresholds by tier; 0: its parent's, or the request's).
	// Appended as MaxPriority.
	RecommendPermille int64
	// AutoApply is a top queue's schedule of its tree's settings
	// regenerated from history (placement.AutoApply). Appended as
	// MaxPriority.
	AutoApply placement.AutoApply

	parent *Queue // derived: nil at the top
	leaf   bool   // derived: no queue names it as parent
	used   queueUse
}

// queueUse is what a queue's attempts (its subtree's) hold.
type queueUse struct {
	milli, memory, jobs int64
	byCluster           map[string]int64 // millicores, by cluster name
	memByCluster        map[string]int64 // bytes, by cluster name
	gpus                map[string]int64 // by GPU type
}

// MaxQueueProjects bounds the billing projects one queue lists.
const MaxQueueProjects = 1000

// SetQueue creates or replaces one queue (Delete: removes it; a queue
// with children cannot be removed). The tree it leaves must be valid
// (placement.NewQueueTree); a billing project it lists as default leaves
// the queue it was in.
type SetQueue struct {
	Now    int64
	Queue  Queue
	Delete bool
}

func (*SetQueue) Type() CommandType { return CmdSetQueue }

// ValidateQueue checks a queue's own settings as apply will, so the API
// refuses it before it reaches the log. Its place in the tree and whether
// its billing projects exist are apply's to say.
func ValidateQueue(q *Queue) error {
	if err := validateQueue(q); err != nil {
		return err
	}
	return nil
}

func validateQueue(q *Queue) *ApplyError {
	if err := q.Queue.Validate(); err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	if err := placement.ValidateMaxPriority("queue "+q.Path, q.MaxPriority); err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	if h := q.UsageHalfLifeNs; h != 0 && (h < placement.MinUsageHalfLife || h > placement.MaxUsageHalfLife) {
		return errorf(ErrInvalid, "queue %s: usage_half_life is %s; it must be between 1h and 365d (0: no memory of past use)", q.Path, time.Duration(h))
	}
	if q.UsageHalfLifeNs != 0 && strings.Contains(q.Path, "/") {
		return errorf(ErrInvalid, "queue %s: only a top queue sets usage_half_life (it holds for its whole tree)", q.Path)
	}
	if p := q.RecommendPermille; p < 0 || p > 1000 {
		return errorf(ErrInvalid, "queue %s: recommend percentile must be more than 0 and at most 1 (the share of the time in use a guarantee covers)", q.Path)
	}
	if err := q.AutoApply.Validate("queue " + q.Path); err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	if q.AutoApply != (placement.AutoApply{}) && strings.Contains(q.Path, "/") {
		return errorf(ErrInvalid, "queue %s: only a top queue sets auto_apply (it holds for its whole tree)", q.Path)
	}
	if len(q.Projects) > MaxQueueProjects || len(q.AllowProjects) > MaxQueueProjects {
		return errorf(ErrInvalid, "queue %s: at most %d billing projects in projects and in allow_projects", q.Path, MaxQueueProjects)
	}
	for _, p := range append(slices.Clone(q.Projects), q.AllowProjects...) {
		if err := checkPlaceName("billing project", p); err != nil {
			return err
		}
	}
	return nil
}

// checkTree validates the queues as a whole tree, as they would be once
// a change applies: placement's rules, billing projects that exist, and
// projects only in leaves.
func (s *placeBook) checkTree(queues map[string]*Queue) *ApplyError {
	list := make([]placement.Queue, 0, len(queues))
	for _, path := range sortedKeys(queues) {
		list = append(list, queues[path].Queue)
	}
	tree, err := placement.NewQueueTree(list)
	if err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	for _, path := range sortedKeys(queues) {
		q := queues[path]
		for _, p := range append(slices.Clone(q.Projects), q.AllowProjects...) {
			if s.projects[p] == nil {
				return errorf(ErrNotFound, "queue %s: billing project %q does not exist", path, p)
			}
		}
		if i, _ := tree.Find(path); !tree.IsLeaf(i) && (len(q.Projects) > 0 || len(q.AllowProjects) > 0) {
			return errorf(ErrInvalid, "queue %s has child queues, so it holds no billing projects: jobs run in leaves; list its projects in one of its children", path)
		}
	}
	return nil
}

func (s *placeBook) applySetQueue(c *SetQueue) any {
	q := c.Queue
	if err := validateQueue(&q); err != nil {
		return err
	}
	old := s.queues[q.Path]
	next := maps.Clone(s.queues)
	if c.Delete {
		if old == nil {
			return errorf(ErrNotFound, "queue %q does not exist", q.Path)
		}
		delete(next, q.Path)
		for path := range next {
			if placement.ParentQueue(path) == q.Path {
				return errorf(ErrConflict, "queue %s has child queues (%s); remove them first", q.Path, path)
			}
		}
	} else {
		next[q.Path] = &q
	}
	if err := s.checkTree(next); err != nil {
		return err
	}
	if c.Delete {
		delete(s.queues, q.Path)
	} else {
		s.putQueue(&q, old, c.Now)
	}
	s.recomputeQueueUse()
	s.notifyWork()
	return nil
}

// putQueue stores q, taking its default projects away from any other
// queue.
func (s *placeBook) putQueue(q *Queue, old *Queue, now int64) {
	q.Projects = slices.Compact(slices.Sorted(slices.Values(q.Projects)))
	q.AllowProjects = slices.Compact(slices.Sorted(slices.Values(q.AllowProjects)))
	q.Created = now
	if old != nil {
		q.Created = old.Created
	}
	for _, other := range s.queues {
		if other.Path == q.Path {
			continue
		}
		other.Projects = slices.DeleteFunc(other.Projects, func(p string) bool { return slices.Contains(q.Projects, p) })
	}
	s.queues[q.Path] = q
}

// recomputeQueueUse links the tree (parents, leaves, each project's
// default queue) and counts what every queue's attempts hold from the
// attempts running now; called when queues or their projects change and
// on restore.
func (s *placeBook) recomputeQueueUse() {
	s.forgetGoneTrees()
	s.projectQueue = map[string]*Queue{}
	s.queueOrder = s.queueOrder[:0]
	for _, path := range sortedKeys(s.queues) {
		s.queueOrder = append(s.queueOrder, s.queues[path])
	}
	for _, q := range s.queues {
		q.parent = s.queues[placement.ParentQueue(q.Path)]
		q.leaf = true
		q.used = queueUse{byCluster: map[string]int64{}, memByCluster: map[string]int64{}, gpus: map[string]int64{}}
		for _, p := range q.Projects {
			s.projectQueue[p] = q
		}
	}
	for _, q := range s.queues {
		if q.parent != nil {
			q.parent.leaf = false
		}
	}
	for _, b := range s.batches {
		b.leaf = s.resolveQueue(b)
	}
	for _, inst := range s.instances {
		for k := range inst.running {
			b := s.batches[k.batch]
			s.charge(b, b.groupOf(k.job).spec, inst, +1)
		}
	}
}

// queueOf returns the leaf queue a batch's jobs run in (nil: none), as
// resolveQueue found it when the batch was made or the tree last changed
// (a map lookup by name for every batch of every round was a tenth of a
// scheduling round's read with 1,000 queues).
func (s *placeBook) queueOf(b *Batch) *Queue { return b.leaf }

// resolveQueue finds the leaf queue a batch's jobs run in (nil: none): the
// queue it names, while that is a leaf its billing project may use, else
// its project's default queue.
func (s *placeBook) resolveQueue(b *Batch) *Queue {
	if b.Queue != "" {
		if q := s.queues[b.Queue]; q != nil && q.leaf && q.allows(b.BillingProject) {
			return q
		}
	}
	if q := s.projectQueue[b.BillingProject]; q != nil && q.leaf {
		return q
	}
	return nil
}

// homeOf is the home clusters of a batch's queue: its leaf's, or those
// of the nearest queue above it that names some (none: any cluster).
func (s *placeBook) homeOf(b *Batch) []string {
	for q := s.queueOf(b); q != nil; q = q.parent {
		if len(q.HomeClusters) > 0 {
			return q.HomeClusters
		}
	}
	return nil
}

// HomeClusters is where a batch's queue is routed (none: anywhere): its
// leaf's home clusters or the nearest queue's above it. The queue's:
// read-only.
func (r Reader) HomeClusters(b *Batch) []string { return r.s.homeOf(b) }

// constraint is a job's placement constraint: its spec's (Spec.Constraint),
// routed to its queue's home clusters. Shares the spec's and the queue's
// slices: read-only.
func (s *placeBook) constraint(b *Batch, sp *Spec) placement.Constraint {
	k := sp.Constraint()
	k.Clusters = s.homeOf(b)
	return k
}

// allows reports whether a batch of project may name the queue.
func (q *Queue) allows(project string) bool {
	return slices.Contains(q.Projects, project) || slices.Contains(q.AllowProjects, project)
}

// MaxPriority bounds a batch's priority either side of 0 (placement's
// bound, the API's too).
const MaxPriority = placement.MaxPriority

// CheckPriority is the one rule of a new batch's priority: within
// ±placement.MaxPriority, and for anyone but an admin at most the lower
// of its leaf queue's max_priority and its billing project's
// (placement.PriorityCap), with the leaf the batch would run in now (the
// queue it names, else its project's default). The API checks a new
// batch with it before the log (403 naming the caps and who raises them),
// and apply again with the state of the moment.
func (r Reader) CheckPriority(project, user, queue string, priority int64) *ApplyError {
	u, err := r.s.liveUser(user)
	if err != nil {
		return err
	}
	return r.s.checkPriority(project, u, queue, priority)
}

func (s *placeBook) checkPriority(project string, u *User, queue string, priority int64) *ApplyError {
	if err := placement.ValidatePriority(priority); err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	c := placement.PriorityCap{Admin: u.Admin, Project: project}
	if p := s.projects[project]; p != nil {
		c.ProjectMax = p.MaxPriority
	}
	if q := s.resolveQueue(&Batch{Queue: queue, BillingProject: project}); q != nil {
		c.Queue, c.QueueMax = q.Path, q.MaxPriority
	}
	if err := c.Check(priority); err != nil {
		return errorf(ErrForbidden, "%v", err)
	}
	return nil
}

// checkBatchQueue refuses a batch that names a queue its project may not
// use.
func (s *placeBook) checkBatchQueue(path, project string) *ApplyError {
	if path == "" {
		return nil
	}
	q := s.queues[path]
	switch {
	case q == nil:
		return errorf(ErrNotFound, "queue %q does not exist", path)
	case !q.leaf:
		return errorf(ErrInvalid, "queue %s has child queues; a batch runs in a leaf: name one of them", path)
	case !q.allows(project):
		return errorf(ErrForbidden, "billing project %s may not use queue %s (it lists neither in projects nor in allow_projects)", project, path)
	}
	return nil
}

// charge counts one job of spec on inst against its batch's queue and
// those above it (sign +1) or releases it (-1).
func (s *placeBook) charge(b *Batch, sp *Spec, inst *Instance, sign int64) {
	typ, n := sp.GPUs()
	for q := s.queueOf(b); q != nil; q = q.parent {
		q.used.milli += sign * sp.CPUMilli
		q.used.memory += sign * sp.Memory
		q.used.jobs += sign
		q.used.byCluster[inst.Cluster] += sign * sp.CPUMilli
		q.used.memByCluster[inst.Cluster] += sign * sp.Memory
		if n > 0 {
			q.used.gpus[typ] += sign * n
		}
	}
}

// quotaAdmits reports whether the batch's queue, and every queue above
// it, can hold one more job of spec: placement's queue rule, as the
// scheduler applied it. Apply calls it for every job it places, so the
// quotas it reads go into the book's own scratch, not the heap.
func (s *placeBook) quotaAdmits(b *Batch, sp *Spec) bool {
	n, _, _ := placement.PathRoom(s.quotaPath(s.queueOf(b)), sp.Size(), 1)
	return n > 0
}

// quotaPath yields the quotas of a leaf queue and of every queue above it,
// leaf first, as placement reads them, in s.pathScratch (apply's: one
// writer).
func (s *placeBook) quotaPath(leaf *Queue) iter.Seq[*placement.Quota] {
	return func(yield func(*placement.Quota) bool) {
		i := 0
		for q := leaf; q != nil && i < len(s.pathScratch); q = q.parent {
			s.pathScratch[i] = q.quota()
			if !yield(&s.pathScratch[i]) {
				return
			}
			i++
		}
	}
}

// quota is the queue's limits and use as placement reads them (no use
// per cluster: the quota rule does not need it).
func (q *Queue) quota() placement.Quota {
	out := q.Queue.Quota()
	out.UsedMilli, out.UsedMemory, out.UsedJobs, out.UsedGPUs = q.used.milli, q.used.memory, q.used.jobs, q.used.gpus
	return out
}

// QueueInfo is a queue with what its attempts hold.
type QueueInfo struct {
	Queue
	Leaf          bool
	UsedMilli     int64
	UsedMemory    int64
	UsedJobs      int64
	UsedByCluster map[string]int64
	UsedGPUs      map[string]int64
	// UsedMemoryByCluster is what UsedByCluster is for memory (bytes).
	UsedMemoryByCluster map[string]int64
}

// Quota is the queue's limits and use as placement reads them, so job
// why asks placement's quota rule what the scheduler asked.
func (q *QueueInfo) Quota() placement.Quota {
	out := q.Queue.Queue.Quota()
	out.UsedMilli, out.UsedMemory, out.UsedJobs, out.UsedGPUs = q.UsedMilli, q.UsedMemory, q.UsedJobs, q.UsedGPUs
	return out
}

// Queues lists every queue, a parent before its children (by path).
func (s *placeBook) Queues() (out []QueueInfo) {
	s.Read(func(r Reader) { out = r.Queues() })
	return
}

// QueueByPath returns one queue.
func (s *placeBook) QueueByPath(path string) (qi QueueInfo, ok bool) {
	s.Read(func(r Reader) {
		if q := r.s.queues[path]; q != nil {
			qi, ok = r.QueueInfo(q), true
		}
	})
	return
}

// Queues is State.Queues within a consistent read.
func (r Reader) Queues() []QueueInfo {
	out := make([]QueueInfo, 0, len(r.s.queues))
	for _, path := range sortedKeys(r.s.queues) {
		out = append(out, r.QueueInfo(r.s.queues[path]))
	}
	return out
}

// QueueInfo is a queue with its use, as the queue reads show it (a copy).
func (r Reader) QueueInfo(q *Queue) QueueInfo {
	qi := QueueInfo{Queue: *q, Leaf: q.leaf, UsedMilli: q.used.milli, UsedMemory: q.used.memory, UsedJobs: q.used.jobs,
		UsedByCluster: map[string]int64{}, UsedGPUs: map[string]int64{}, UsedMemoryByCluster: map[string]int64{}}
	qi.Queue.Queue = cloneQueue(q.Queue)
	qi.Projects = slices.Clone(q.Projects)
	qi.AllowProjects = slices.Clone(q.AllowProjects)
	qi.parent, qi.used = nil, queueUse{}
	for k, v := range q.used.gpus {
		if v != 0 {
			qi.UsedGPUs[k] = v
		}
	}
	for k, v := range q.used.byCluster {
		if v != 0 {
			qi.UsedByCluster[k] = v
		}
	}
	for k, v := range q.used.memByCluster {
		if v != 0 {
			qi.UsedMemoryByCluster[k] = v
		}
	}
	return qi
}

// cloneQueue copies a queue's settings so they share no map or slice.
func cloneQueue(q placement.Queue) placement.Queue {
	q.Guarantee = q.Guarantee.Clone()
	q.BorrowLimit = q.BorrowLimit.Clone()
	q.LendLimit = q.LendLimit.Clone()
	q.Preemption.AllowFrom = slices.Clone(q.Preemption.AllowFrom)
	q.HomeClusters = slices.Clone(q.HomeClusters)
	return q
}

// Queue is the leaf queue a batch's jobs run in (nil: none).
func (r Reader) Queue(b *Batch) *Queue { return r.s.queueOf(b) }

// IsLeaf reports whether no queue names q as its parent.
func (r Reader) IsLeaf(q *Queue) bool { return q.leaf }

// Parent is the queue above q (nil: q is at the top).
func (r Reader) Parent(q *Queue) *Queue { return q.parent }

// QueueUse is what a queue's running attempts hold, against its limits.
// The maps are the state's: read-only.
type QueueUse struct {
	UsedMilli     int64
	UsedMemory    int64
	UsedJobs      int64
	UsedByCluster map[string]int64 // millicores, by cluster name
	UsedGPUs      map[string]int64 // by GPU type
}

// Use is what a queue's running attempts hold.
func (r Reader) Use(q *Queue) QueueUse {
	return QueueUse{UsedMilli: q.used.milli, UsedMemory: q.used.memory, UsedJobs: q.used.jobs, UsedByCluster: q.used.byCluster, UsedGPUs: q.used.gpus}
}

// Team is a team as it was before queues: a queue at the top with a hard
// quota. Log entries (set_team, apply_placement's teams) and snapshot
// sections of that time hold teams; they apply and restore as queues.
type Team struct {
	Name     string
	Projects []string // sorted
	// Quota: 0 is no limit.
	QuotaMilli  int64
	QuotaMemory int64
	Strategy    string
	Created     int64
	// QuotaGPUs bounds GPUs per type (a type not named: no limit).
	QuotaGPUs map[string]int64
}

// queue converts a team: a queue at the top named as the team, whose
// guarantee is the team's quota and which borrows nothing beyond it, for
// each resource the quota bounded (what a quota did), with the team's
// projects and strategy.
func (t *Team) queue() Queue {
	q := Queue{Queue: placement.Queue{Path: t.Name, Strategy: placement.Strategy(t.Strategy),
		Guarantee: placement.Resources{CPUMilli: t.QuotaMilli, Memory: t.QuotaMemory, GPUs: maps.Clone(t.QuotaGPUs)}},
		Projects: slices.Clone(t.Projects), Created: t.Created}
	if t.QuotaMilli > 0 {
		q.BorrowLimit.CPUMilli = new(int64)
	}
	if t.QuotaMemory > 0 {
		q.BorrowLimit.Memory = new(int64)
	}
	for typ := range t.QuotaGPUs {
		if q.BorrowLimit.GPUs == nil {
			q.BorrowLimit.GPUs = map[string]int64{}
		}
		q.BorrowLimit.GPUs[typ] = 0
	}
	return q
}

// SetTeam is a set_team entry from before queues: it sets the queue at
// the top named as the team (Team.queue); QuotaOnly keeps the queue's
// other settings and projects.
type SetTeam struct {
	Now  int64
	Team Team
	// Quota only: keep the team's projects and strategy.
	QuotaOnly bool
}

func (*SetTeam) Type() CommandType { return CmdSetTeam }

func (s *placeBook) applySetTeam(c *SetTeam) any {
	q := c.Team.queue()
	if c.QuotaOnly {
		old := s.queues[q.Path]
		if old == nil {
			return errorf(ErrNotFound, "queue %q does not exist", q.Path)
		}
		keep := *old
		keep.Queue = cloneQueue(old.Queue)
		keep.Guarantee, keep.BorrowLimit = q.Guarantee, q.BorrowLimit
		q = keep
	}
	return s.applySetQueue(&SetQueue{Now: c.Now, Queue: q})
}

// QueueTree lists every queue, a parent before its children (by path).
// The list and the queues are the state's: read-only.
func (r Reader) QueueTree() []*Queue { return r.s.queueOrder }

// ReadyJobs counts a batch's Ready jobs.
func (r Reader) ReadyJobs(b *Batch) int64 { return b.counts[Ready] }

// ReadyMilli is the millicores of a batch's Ready jobs.
func (r Reader) ReadyMilli(b *Batch) int64 { return b.readyMilli }
