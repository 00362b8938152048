package state

import (
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// The state's read records: what a read of the state returns, as the
// state's own types, copied out under one read lock. The state knows
// nothing of the wire: server/apiview turns these records into the API's
// JSON. A record never shares a map or slice the state still changes;
// specs, which apply never changes once stored, are shared and are
// constants to the reader. Nothing here reads a clock: what grows with
// time (a running attempt's cost, a token's expiry) is a method taking
// now.

// BatchRecord is a batch's status as one read of the state saw it.
type BatchRecord struct {
	ID             uint64
	Name           string
	User           string
	BillingProject string
	// Attributes are the batch's attributes, never changed once
	// created: shared, a constant to the reader.
	Attributes   map[string]string
	Cancelled    bool
	CancelReason string
	// CancelAfterFailures and Callback: see Batch. CallbackResult says
	// how the last report of a completion to the callback went (empty:
	// none made yet).
	CancelAfterFailures uint32
	Callback            string
	CallbackResult      string
	// Queue is the leaf queue the batch's jobs run in now (empty: none)
	// and Named the one it names; Priority its priority in the queue.
	Queue      string
	NamedQueue string
	Priority   int32
	// SLO and Deadline: see Batch.
	SLO, Deadline int64
	Created       int64 // unix ns
	Completed     int64 // unix ns when it last became complete; 0 while running
	NJobs         int64 // committed jobs
	NUpdates      int64
	counts        [numStates]int64
	accrued       money.Amount    // the ended attempts' cost
	running       billing.Running // the running attempts'
}

// SLOMet says whether a complete batch met its SLO and its deadline
// (ok false: it names neither, or it is not complete).
func (r *BatchRecord) SLOMet() (met, ok bool) {
	if r.Completed == 0 || (r.SLO == 0 && r.Deadline == 0) {
		return false, false
	}
	return (r.SLO == 0 || r.Completed-r.Created <= r.SLO) && (r.Deadline == 0 || r.Completed <= r.Deadline), true
}

// Count is the number of the batch's jobs in state st.
func (r *BatchRecord) Count(st JobState) int64 {
	if st >= numStates {
		return 0
	}
	return r.counts[st]
}

// Cost is what the batch has cost by now (unix ns): the same integer
// however its attempts started and ended, and however often it is read.
func (r *BatchRecord) Cost(now int64) money.Amount {
	return r.accrued.Add(r.running.Cost(now))
}

// record is the batch as a read returns it. Callers hold the lock.
func (s *batchBook) record(b *Batch) BatchRecord {
	r := b.record()
	if q := s.queueOf(b); q != nil {
		r.Queue = q.Path
	}
	return r
}

// record is the batch as a read returns it, but for the queue it runs in
// (State.record). Callers hold the lock.
func (b *Batch) record() BatchRecord {
	return BatchRecord{
		NamedQueue: b.Queue, Priority: b.Priority, SLO: b.SLO, Deadline: b.Deadline,
		ID: b.ID, Name: b.Name, User: b.User, BillingProject: b.BillingProject, Attributes: b.Attributes,
		Cancelled: b.Cancelled, CancelReason: b.CancelReason, CancelAfterFailures: b.CancelAfterFailures,
		Callback: b.Callback, CallbackResult: b.callbackResult, Created: b.Created, Completed: b.Completed,
		NJobs: b.nJobs, NUpdates: int64(len(b.updates)), counts: b.counts,
		accrued: b.bill.Accrued, running: b.bill.run,
	}
}

// JobRecord is a job as one read of the state saw it: its spec, its
// attempts (the ended ones, then the current one) and what the state
// says about how it stands.
type JobRecord struct {
	Batch      uint64
	ID         uint32
	Name       string // the job's name, with its index for an array's
	ArrayIndex int64
	State      JobState
	// Spec is the job's spec, shared by its group and never changed
	// once applied: a constant to the reader.
	Spec *Spec
	// Parents are the ranges of job IDs it waits for.
	Parents  []Range
	Attempts []AttemptRecord
	// Exit is the exit code of a job that ended with one (HasExit).
	Exit    int32
	HasExit bool
	// Message says why the job stands as it does: its worker's word, or
	// the state's for a cancelled job.
	Message string
	// GroupPath is the job group it is in (empty: none).
	GroupPath string
}

// AttemptRecord is one attempt of a job.
type AttemptRecord struct {
	Attempt  int
	Instance string // the instance's name ("" once it is forgotten)
	Cluster  string
	Region   string
	Start    int64 // unix ns; 0: never started
	End      int64 // unix ns; 0: not ended
	Message  string
	Outcome  Outcome
	// Running: the attempt runs now (its End is not one).
	Running bool
	Usage   *Usage
	// Exit is the exit code of an attempt that ended with one (HasExit).
	Exit    int32
	HasExit bool
	// Priced: the attempt started with a spec, and PerHour and Lines
	// are its price at the rates in force at its start.
	Priced  bool
	PerHour billing.Price
	Lines   []billing.Line
	// Memory is the memory the attempt was given (bytes).
	Memory int64
}

// Cost is what the attempt has cost by now (unix ns): from its start to
// its end, or to now while it runs. Zero when it is not priced.
func (a *AttemptRecord) Cost(now int64) money.Amount {
	if !a.Priced {
		return 0
	}
	end := a.End
	if a.Running || end == 0 {
		end = now
	}
	return billing.Cost(a.PerHour, a.Start, end)
}

// jobRecord is job id of b as a read returns it. Callers hold the lock.
func (s *batchBook) jobRecord(b *Batch, id uint32, j *job, g *group) JobRecord {
	out := JobRecord{
		Batch:      b.ID,
		ID:         id,
		Name:       jobName(g, id),
		ArrayIndex: int64(id - g.base),
		State:      j.state,
		Spec:       g.spec,
		Attempts:   make([]AttemptRecord, 0, len(b.history[id])+1),
	}
	for _, ri := range b.parentsOf(g) {
		out.Parents = append(out.Parents, b.ranges[ri].r)
	}
	for _, rec := range b.history[id] {
		out.Attempts = append(out.Attempts, s.attemptRecord(rec, false, g.spec))
	}
	if j.attempt > 0 {
		cur := attemptRec{Attempt: j.attempt, Instance: j.instance, Start: j.start, End: j.end, Exit: j.exit, Outcome: j.outcome, Message: b.messages[id]}
		if u, ok := b.usage[id]; ok {
			cur.Usage = &u
		}
		cur.Memory = b.memory[id]
		out.Attempts = append(out.Attempts, s.attemptRecord(cur, j.state == Running, g.spec))
		if j.state.Final() && (j.outcome == OutcomeSuccess || j.outcome == OutcomeFailed) {
			out.Exit, out.HasExit = j.exit, true
		}
	}
	out.Message = b.messages[id]
	cancelled := "batch cancelled"
	if b.CancelReason != "" {
		cancelled += ": " + b.CancelReason
	}
	if jg := b.jobGroup(g.spec); jg != nil {
		out.GroupPath = jg.Path
		if !b.Cancelled && jg.Cancelled {
			cancelled = "job group " + jg.Path + " cancelled: " + jg.CancelReason
		}
	}
	stopped := b.cancelledFor(g.spec)
	switch {
	case j.state == Cancelled && out.Message == "" && stopped:
		out.Message = cancelled
	case j.state == Cancelled && out.Message == "":
		out.Message = "a parent job did not succeed"
	case j.state == Cancelled && stopped && j.outcome == OutcomeCancelled:
		// Its worker killed it for the cancel: the job says why, its
		// attempt keeps what the worker said.
		out.Message = cancelled
	case j.state == Running && stopped:
		out.Message = cancelled + "; its running attempt is being stopped"
	}
	return out
}

// attemptRecord is one attempt as a read returns it. Callers hold the
// lock.
func (s *batchBook) attemptRecord(rec attemptRec, running bool, spec *Spec) AttemptRecord {
	a := AttemptRecord{
		Attempt: int(rec.Attempt),
		Start:   rec.Start,
		End:     rec.End,
		Message: rec.Message,
		Outcome: rec.Outcome,
		Running: running,
	}
	if rec.Usage != nil {
		u := *rec.Usage
		a.Usage = &u
	}
	if running {
		a.End = 0
	}
	inst := s.instances[rec.Instance]
	if inst != nil {
		a.Instance, a.Cluster, a.Region = inst.Name, inst.Cluster, inst.Region
	}
	if spec != nil && rec.Memory != 0 && rec.Memory != spec.Memory {
		// It ran with other memory than its spec says now (before a
		// retry that gave it more): priced and shown with its own.
		own := *spec
		own.Memory = rec.Memory
		spec = &own
	}
	if spec != nil {
		a.Memory = spec.Memory
	}
	if rec.Start != 0 && spec != nil {
		a.Priced = true
		a.PerHour, a.Lines = s.price(spec, inst, rec.Start)
	}
	if !running && (rec.Outcome == OutcomeSuccess || rec.Outcome == OutcomeFailed) {
		a.Exit, a.HasExit = rec.Exit, true
	}
	return a
}

// ProjectRecord is a billing project as a read returns it: a copy of it
// (its members, roles and storage prefixes the reader's own) and what
// its cost is made of.
type ProjectRecord struct {
	BillingProject
	budget billing.Budget
}

// Cost is what the project has cost by now (unix ns): its ended
// attempts and its running ones (billing.Budget.Cost).
func (r *ProjectRecord) Cost(now int64) money.Amount { return r.budget.Cost(now) }

// Role is user's role in the project ("" for none).
func (r *ProjectRecord) Role(user string) string { return r.role(user) }

// SortedMembers lists the project's members by name.
func (r *ProjectRecord) SortedMembers() []string { return sortedKeys(r.Members) }

// RateRecord is one version of a resource's rate.
type RateRecord struct {
	billing.Rate
	// InForce: the version in force at the time of the read.
	InForce bool
}

// CostDay is a billing project's cost on one UTC day: Cost what the
// attempts that ended on it cost, and on today (State.CostByDayAt)
// Running what those still running have cost up to now.
type CostDay struct {
	Day     int32 // days since 1970-01-01
	Cost    money.Amount
	Running money.Amount
}
