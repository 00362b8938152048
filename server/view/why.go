package view

import (
	"cmp"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/eta"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
)

// JobPlace is what the state says of why a job is where it is, read in
// one consistent read; job why adds the last scheduling round's reasons
// for a Ready job.
type JobPlace struct {
	State state.JobState
	// Parents, for a Pending job: the parent ranges not finished yet, with
	// how many of their jobs are unfinished.
	Parents []state.WaitingParent
	// Cluster and Region of the instance running the job.
	Cluster, Region, Instance string
	// Queues the batch's jobs run in, its leaf first and then each queue
	// above it, with their use (none: in no queue).
	Queues         []state.QueueInfo
	BatchCancelled bool
	Regions        []string
	Pool           string
	Labels         []string // the worker labels it asks for, "key=value"
	Clusters       []string // the clusters it names (none: any)
	// AheadByPriority counts the Ready jobs of its user's batches of a
	// higher priority in its leaf queue, which go first within the
	// user's fair share (other users' priorities do not take it).
	AheadByPriority int64
	// AheadOlder counts the Ready jobs of its user's older batches of the
	// same priority in its leaf queue, and AheadInBatch those of its own
	// batch queued before it (jobs that came back first): with
	// AheadByPriority, its place in its user's line (Position, from 1).
	AheadOlder, AheadInBatch int64
	Position                 int64
	// HomeClusters: where its queue is routed (none: any cluster).
	HomeClusters     []string
	DisabledClusters []string // the clusters the job could use that are disabled, by name
	// Ahead counts the users with Ready jobs the scheduler serves before
	// the batch's user (scheduler.ServedBefore).
	Ahead int
	// Busy: no active worker in an enabled cluster the job may use has
	// its cores and memory free; Usable counts those workers.
	Busy   bool
	Usable int
	// OffSpot: the job is kept off spot machines (max_spot_attempts,
	// MaxSpot of them reclaimed); SpotOnly counts the active workers
	// it may not use only because they are spot.
	OffSpot  bool
	MaxSpot  int
	SpotOnly int
	// CPUMilli and Memory: what one attempt of the job asks for; GPUs of
	// GPUType (0: none).
	CPUMilli, Memory int64
	GPUType          string
	GPUs             int64
	// Active counts the active workers anywhere.
	Active int
	// MachineType: the job runs on a machine of its own of this type.
	MachineType string
	// BillingProject of the batch, with its spend limit and spend
	// (Budget.Limit 0: none).
	BillingProject string
	Budget         billing.Budget
	// OOMFrom: the memory its last attempt ran out of, when it runs again
	// with Memory (0: it does not).
	OOMFrom int64
	// PastMilli and PastCoreHours: its user's decayed past use in its
	// queue tree, as fair share weighs it (millicores) and in core-hours
	// (0: the tree remembers none).
	PastMilli     int64
	PastCoreHours float64
	// Estimate: when a Ready job is estimated to start (estimateStart).
	Estimate Estimate
	// Gang is the members of the gang the job is in (0: none),
	// GangUniform what they share, and GangRunning how many of them run
	// still (a Ready member waits for them to stop).
	Gang        int64
	GangUniform string
	GangRunning int
}

// Estimate is a Ready job's estimated start: In from now (Known false: no
// estimate), from Slots running attempts of its user's line and a run
// time of Run for each job in line, the mean of Runs finished attempts of
// its job group (0: of the line's running groups). Now: a worker it may
// use has room, and the next round may place it.
type Estimate struct {
	Known bool
	Now   bool
	In    time.Duration
	Slots int
	Run   time.Duration
	Runs  int
}

// runSample bounds the jobs of a group read for its mean run time, and
// runGroups the groups read for one estimate (the slots of groups past it
// free by the job's own group's mean): an estimate reads at most
// runSample × (runGroups + 1) jobs under the state's read lock, however
// many distinct jobs its user runs.
const (
	runSample = 1000
	runGroups = 256
)

// estimateStart estimates when a Ready job starts (package eta): its
// user's running attempts in its leaf queue are the slots of its line,
// each freeing by its group's mean run time (at least a tenth of it from
// now), and the jobs before it (Position - 1) and it hold a slot for its
// own group's mean (or, before any of its group finished, the mean of the
// line's running groups).
func estimateStart(r state.Reader, b *state.Batch, id uint32, jp *JobPlace, now int64) Estimate {
	if !jp.Busy {
		return Estimate{Known: true, Now: true}
	}
	own, runs := r.RunTime(b, id, runSample)
	type key struct {
		batch uint64
		first uint32
	}
	means := map[key]int64{}
	type slot struct {
		mean, start int64
	}
	var slots []slot
	r.UserAttempts(b.User, r.Queue(b), eta.MaxSlots, func(ob *state.Batch, oid uint32, start int64) {
		k := key{ob.ID, r.GroupFirst(ob, oid)}
		m, ok := means[k]
		if !ok && len(means) < runGroups {
			m, _ = r.RunTime(ob, oid, runSample)
			means[k] = m
		}
		slots = append(slots, slot{m, start})
	})
	if own == 0 {
		var sum, n int64
		for _, sl := range slots {
			if sl.mean > 0 {
				sum, n = sum+sl.mean, n+1
			}
		}
		if n == 0 {
			return Estimate{Slots: len(slots)}
		}
		own = sum / n
	}
	remaining := make([]time.Duration, len(slots))
	for i, sl := range slots {
		m := cmp.Or(sl.mean, own)
		elapsed := int64(0)
		if sl.start > 0 {
			elapsed = now - sl.start
		}
		remaining[i] = time.Duration(max(m-elapsed, m/10))
	}
	in, ok := eta.Start(remaining, max(jp.Position-1, 0), time.Duration(own))
	return Estimate{Known: ok, In: in, Slots: len(slots), Run: time.Duration(own), Runs: runs}
}

// Place reads where job id of batch is and what holds it at now (unix
// ns; false: the state holds no such job).
func Place(r state.Reader, batch uint64, id uint32, now int64) (JobPlace, bool) {
	b := r.Batch(batch)
	j, ok := r.Job(b, id)
	if !ok {
		return JobPlace{}, false
	}
	sp := j.Spec
	jp := JobPlace{State: j.State, BatchCancelled: b.Cancelled, Regions: sp.Regions(), Pool: sp.Pool(), Labels: sp.Labels(), Clusters: sp.Clusters(),
		CPUMilli: sp.CPUMilli, Memory: sp.Memory, BillingProject: b.BillingProject, Budget: r.Budget(b.BillingProject), OOMFrom: j.OOMFrom}
	if sp.Where != nil {
		jp.MachineType = sp.Where.MachineType
	}
	jp.GPUType, jp.GPUs = sp.GPUs()
	switch j.State {
	case state.Pending:
		jp.Parents = r.WaitingFor(b, id)
	case state.Running:
		if inst := r.Instance(j.Instance); inst != nil {
			jp.Cluster, jp.Region, jp.Instance = inst.Cluster, inst.Region, inst.Name
		}
	}
	for q := r.Queue(b); q != nil; q = r.Parent(q) {
		jp.Queues = append(jp.Queues, r.QueueInfo(q))
	}
	k := r.Constraint(b, sp)
	jp.HomeClusters = k.Clusters
	for cl := range r.Clusters() {
		if cl.Disabled && k.AllowsRegion(cl.Region) && k.AllowsJobCluster(cl.Name) && k.AllowsCluster(cl.Name) {
			jp.DisabledClusters = append(jp.DisabledClusters, cl.Name)
		}
	}
	queues := r.UserQueues()
	if leaf := r.Queue(b); j.State == state.Ready {
		for _, q := range queues {
			if q.Name() != b.User {
				continue
			}
			// The user's batches with Ready jobs, oldest first: the
			// order a round takes them in (within a priority).
			for _, o := range q.Batches() {
				switch {
				case o == b || r.Queue(o) != leaf:
				case o.Priority > b.Priority:
					jp.AheadByPriority += r.ReadyJobs(o)
				case o.Priority == b.Priority && o.ID < b.ID:
					jp.AheadOlder += r.ReadyJobs(o)
				}
			}
		}
		jp.AheadInBatch = r.ReadyAhead(b, id)
		jp.Position = jp.AheadByPriority + jp.AheadOlder + jp.AheadInBatch + 1
	}
	// Standing as the round weighs it: running cores, and past use where
	// the job's queue tree remembers it (read in the job's tree).
	leaf := r.Queue(b)
	jp.PastMilli = r.PastMilli(leaf, b.User, now)
	jp.PastCoreHours = r.PastCoreHours(leaf, b.User, now)
	for _, me := range queues {
		if me.Name() != b.User {
			continue
		}
		for _, q := range queues {
			if q.ReadyJobs() > 0 && q.Name() != b.User &&
				scheduler.ServedBefore(q.RunningMilli()+r.PastMilli(leaf, q.Name(), now), q.Name(), me.RunningMilli()+jp.PastMilli, me.Name()) {
				jp.Ahead++
			}
		}
	}
	jp.Busy = true
	if g := sp.Gang(); g != nil {
		jp.Gang, jp.GangUniform = int64(g.Size), g.Uniform
		jp.GangRunning = r.GangRunning(b, id)
	}
	jp.OffSpot = sp.Where != nil && sp.Where.NoSpot
	if p := sp.Policy(); p != nil {
		jp.MaxSpot = int(p.MaxSpot)
	}
	for inst := range r.Instances() {
		jp.Active++
		if !r.Placeable(b, sp, inst) { // its cluster enabled too
			if jp.OffSpot && r.Spot(inst) {
				jp.SpotOnly++
			}
			continue
		}
		jp.Usable++
		if (placement.Free{CPUMilli: inst.FreeMilli, Memory: inst.FreeMem, GPUs: inst.FreeGPUs}).Fits(sp.Size()) {
			jp.Busy = false
		}
	}
	if j.State == state.Ready {
		jp.Estimate = estimateStart(r, b, id, &jp, now)
	}
	return jp, true
}

// QuotaRefusal is the first queue on the way up from the job's leaf whose
// quota refuses one more job of its size (placement's queue rule, as the
// round checks it): that queue's quota, the reason and its path; a zero
// reason when every queue admits it.
func (jp *JobPlace) QuotaRefusal() (placement.Quota, placement.Reason, string) {
	quotas := make([]placement.Quota, len(jp.Queues))
	for i := range jp.Queues {
		quotas[i] = jp.Queues[i].Quota()
	}
	sz := placement.Size{CPUMilli: jp.CPUMilli, Memory: jp.Memory, GPUType: jp.GPUType, GPUs: jp.GPUs}
	n, why, depth := placement.PathRoom(func(yield func(*placement.Quota) bool) {
		for i := range quotas {
			if !yield(&quotas[i]) {
				return
			}
		}
	}, sz, 1)
	if n > 0 {
		return placement.Quota{}, 0, ""
	}
	return quotas[depth], why, jp.Queues[depth].Path
}
