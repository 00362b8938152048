package state

import (
	"iter"
	"slices"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/placement"
)

// Reader is one consistent read of the state: every method answers from
// the state as it stands while the function given to Read runs, so what a
// caller builds from several of them agrees (an instance's free cores and
// the queues they are weighed against, a queue's use and its quota). The
// read models of other packages (the scheduling round's view and the
// autoscaler's input, in server/view) are built from it outside the
// state, which keeps its representation to itself.
//
// A Reader is valid only inside Read's function. Pointers and slices its
// methods return point into the state: treat them as constants and copy
// what outlives the read.
type Reader struct{ s *State }

// Read calls fn with a consistent read of the state, holding the read
// lock until fn returns: applies wait for it, so fn copies what it needs
// and decides after.
func (s *core) Read(fn func(r Reader)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(Reader{s: s.st})
}

// Groups yields the cluster groups by name.
func (r Reader) Groups() iter.Seq[*ClusterGroup] {
	return sortedValues(r.s.groups)
}

// Clusters yields the clusters by name.
func (r Reader) Clusters() iter.Seq[*Cluster] {
	return sortedValues(r.s.clusters)
}

// Instances yields the active instances in no particular order (a round
// that needs an order sorts what it keeps).
func (r Reader) Instances() iter.Seq[*Instance] {
	return func(yield func(*Instance) bool) {
		for _, inst := range r.s.instances {
			if inst.Active && !yield(inst) {
				return
			}
		}
	}
}

// Reserved reports whether the scheduler may place nothing on an
// instance: its machine is kept for one job or is being drained.
func (r Reader) Reserved(inst *Instance) bool { return r.s.reserved(inst) }

// Draining reports whether an instance's machine is being emptied for
// deletion.
func (r Reader) Draining(inst *Instance) bool { return r.s.draining(inst) }

// Spot reports whether an instance runs on a spot machine (its machine's
// launch config, or its pool, is spot): what a job kept off spot avoids.
func (r Reader) Spot(inst *Instance) bool { return r.s.spot(inst) }

// Attempts is how many attempts an instance runs.
func (r Reader) Attempts(inst *Instance) int { return len(inst.running) }

// PrivateMachine reports whether an instance runs on a machine made for
// one job (its room is that job's).
func (r Reader) PrivateMachine(inst *Instance) bool {
	m := r.s.machines[inst.Machine]
	return m != nil && m.private()
}

// UserQueue is one user's scheduling counters and FIFO of batches with
// Ready jobs, as a Reader sees them.
type UserQueue struct{ u *userSched }

// Name is the user's.
func (q UserQueue) Name() string { return q.u.name }

// RunningMilli is the millicores of the user's running attempts.
func (q UserQueue) RunningMilli() int64 { return q.u.runningMilli }

// ReadyMilli is the millicores of the user's Ready jobs.
func (q UserQueue) ReadyMilli() int64 { return q.u.readyMilli }

// RunningJobs counts the user's running attempts.
func (q UserQueue) RunningJobs() int64 { return q.u.runningJobs }

// ReadyJobs counts the user's Ready jobs.
func (q UserQueue) ReadyJobs() int64 { return q.u.readyJobs }

// Batches are the user's batches with Ready jobs, oldest first (the
// user's FIFO). Read-only.
func (q UserQueue) Batches() []*Batch { return q.u.active }

// UserQueues lists the users the scheduler counts (those with Ready or
// running jobs, or batches that had them), by name.
func (r Reader) UserQueues() []UserQueue {
	out := make([]UserQueue, 0, len(r.s.sched))
	for _, u := range r.s.sched {
		out = append(out, UserQueue{u})
	}
	slices.SortFunc(out, func(a, b UserQueue) int {
		switch {
		case a.u.name < b.u.name:
			return -1
		case a.u.name > b.u.name:
			return 1
		}
		return 0
	})
	return out
}

// ReadyRange is a stretch of a batch's Ready queue: job IDs Lo to Hi, all
// of one spec, and the attempt number placing the first creates.
type ReadyRange struct {
	Range
	Spec    *Spec
	Attempt uint16
}

// ReadyHead is the spec of the first job of a batch's Ready queue (nil:
// none Ready).
func (r Reader) ReadyHead(b *Batch) *Spec {
	items := b.ready.items()
	if len(items) == 0 {
		return nil
	}
	return b.groupOf(items[0].Lo).spec
}

// Ready yields a batch's Ready queue in order.
func (r Reader) Ready(b *Batch) iter.Seq[ReadyRange] {
	return func(yield func(ReadyRange) bool) {
		hint := 0
		for _, rg := range b.ready.items() {
			if !yield(ReadyRange{Range: rg, Spec: b.groupNear(&hint, rg.Lo).spec, Attempt: b.jobs[rg.Lo-1].attempt + 1}) {
				return
			}
		}
	}
}

// ReadyAhead counts the Ready jobs of b queued before job id (which is
// Ready): those a round takes first.
func (r Reader) ReadyAhead(b *Batch, id uint32) int64 {
	var n int64
	for _, rg := range b.ready.items() {
		if id >= rg.Lo && id <= rg.Hi {
			return n + int64(id-rg.Lo)
		}
		n += int64(rg.Len())
	}
	return n
}

// groupNear is groupOf for IDs read in ascending order: it looks at the
// group of the last ID (*hint) and the one after it before searching. A
// queue of distinct jobs has a group per job, and searching 2,000 of
// them for every Ready run was a round's largest cost once the fleet was
// full.
func (b *Batch) groupNear(hint *int, id uint32) *group {
	for k := *hint; k < len(b.groups) && k <= *hint+1; k++ {
		if g := b.groups[k]; id >= g.first && id < g.first+g.count {
			*hint = k
			return g
		}
	}
	i := b.groupIndex(id)
	if i < 0 {
		return nil
	}
	*hint = i
	return b.groups[i]
}

// Batch is a batch in memory by ID (nil: none). Read-only.
func (r Reader) Batch(id uint64) *Batch { return r.s.batches[id] }

// JobAt is one committed job as a Reader sees it: its state and its
// current (or last) attempt.
type JobAt struct {
	State    JobState
	Attempt  uint16
	Instance uint32 // the current attempt's instance (0: none)
	// Spec is the job's, shared by its array; Index its place in it.
	Spec  *Spec
	Index int64
	// OOMFrom is the memory its last attempt ran out of, when it is to run
	// again with more (Spec.Memory; 0: it is not).
	OOMFrom int64
}

// Job is job id of b (false: b holds no committed job id).
func (r Reader) Job(b *Batch, id uint32) (JobAt, bool) {
	if b == nil || id < 1 || int(id) > len(b.jobs) || b.jobs[id-1].state == Staged {
		return JobAt{}, false
	}
	j := &b.jobs[id-1]
	g := b.groupOf(id)
	at := JobAt{State: j.state, Attempt: j.attempt, Instance: j.instance, Spec: g.spec, Index: int64(id - g.base)}
	if j.state == Ready {
		at.OOMFrom = b.memory[id]
	}
	return at, true
}

// WaitingFor is the parent ranges of job id of b (committed) that have
// jobs not finished yet, with how many.
func (r Reader) WaitingFor(b *Batch, id uint32) []WaitingParent {
	var out []WaitingParent
	for _, ri := range b.parentsOf(b.groupOf(id)) {
		if dr := b.ranges[ri]; dr.remaining > 0 {
			out = append(out, WaitingParent{Range: dr.r, Unfinished: dr.remaining})
		}
	}
	return out
}

// Instance is an instance by ID, active or retired (nil: none).
// Read-only.
func (r Reader) Instance(id uint32) *Instance { return r.s.instances[id] }

// Placeable reports whether a job of sp may run on inst: apply's rule
// (placement's constraint, the instance's cluster enabled, its GPUs),
// the one the scheduler and the autoscaler are held to.
func (r Reader) Placeable(b *Batch, sp *Spec, inst *Instance) bool { return r.s.placeable(b, sp, inst) }

// Constraint is a job's placement constraint: its spec's, routed to its
// queue's home clusters.
func (r Reader) Constraint(b *Batch, sp *Spec) placement.Constraint { return r.s.constraint(b, sp) }

// HasPrivate reports whether some of a batch's jobs name a machine type
// (only such batches' queues hold jobs for machines of their own).
func (r Reader) HasPrivate(b *Batch) bool { return b.private }

// Budget is a billing project's spend limit and the sums its spend comes
// from (billing's rule weighs it at a time).
func (r Reader) Budget(project string) billing.Budget { return r.s.budget(project) }

// Autoscaler is the autoscaler's settings.
func (r Reader) Autoscaler() Autoscaler { return r.s.autoscaler }

// Decisions are the autoscaler's recent decisions, oldest first.
// Read-only.
func (r Reader) Decisions() []Decision { return r.s.decisions }

// LaunchConfigs yields the launch configs by name.
func (r Reader) LaunchConfigs() iter.Seq[*LaunchConfig] {
	return sortedValues(r.s.launchConfigs)
}

// Machines yields the autoscaler's machines by ID.
func (r Reader) Machines() iter.Seq[*Machine] {
	return sortedValues(r.s.machines)
}

// Marks yields the capacity marks by launch config.
func (r Reader) Marks() iter.Seq[*CapacityMark] {
	return sortedValues(r.s.marks)
}

// sortedValues yields a map's values in key order.
func sortedValues[V any](m map[string]V) iter.Seq[V] {
	return func(yield func(V) bool) {
		for _, k := range sortedKeys(m) {
			if !yield(m[k]) {
				return
			}
		}
	}
}

// Counts is how many batches (in memory) and users the state holds.
func (r Reader) Counts() (batches, users int) { return len(r.s.batches), len(r.s.users) }

// GroupFirst is the first job ID of the group holding job id (its key
// within the batch; 0: no such job).
func (r Reader) GroupFirst(b *Batch, id uint32) uint32 {
	if g := b.groupOf(id); g != nil {
		return g.first
	}
	return 0
}

// RunTime is the mean run time (ns) of the last attempts of the succeeded
// jobs of the group holding job id, read from at most max of its jobs,
// with how many of them succeeded (0: none did, no mean).
func (r Reader) RunTime(b *Batch, id uint32, max int) (mean int64, n int) {
	g := b.groupOf(id)
	if g == nil {
		return 0, 0
	}
	var sum int64
	for k := g.first; k < g.first+g.count && int(k-g.first) < max; k++ {
		if j := &b.jobs[k-1]; j.state == Success && j.start > 0 && j.end >= j.start {
			sum += j.end - j.start
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sum / int64(n), n
}

// UserAttempts calls fn for each attempt that the user's batches in the
// leaf queue run now (nil leaf: those in no queue), in instance order, with
// its batch, job and start (0: placed, not yet started), at most max.
func (r Reader) UserAttempts(user string, leaf *Queue, max int, fn func(b *Batch, id uint32, start int64)) {
	n := 0
	for _, iid := range r.s.sortedInstanceIDs() {
		for _, k := range sortedAttempts(r.s.instances[iid].running) {
			b := r.s.batches[k.batch]
			if b == nil || b.User != user || r.s.queueOf(b) != leaf {
				continue
			}
			if n++; n > max {
				return
			}
			fn(b, k.job, b.jobs[k.job-1].start)
		}
	}
}
