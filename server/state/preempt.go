package state

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
)

// Preemption for other queues' work (scheduler.Preempt decides which
// attempts): an attempt told to stop keeps what it holds, and its job
// stays Running, until its worker reports it ended, so no worker is ever
// oversubscribed while the attempt checkpoints. Its worker is told on
// its next sync (WorkerView.Preempt): SIGTERM, the job's preemption
// grace, then SIGKILL. It ends preempted (its job Ready again with a new
// attempt, counted as neither a failure nor a retry), or as it really
// ended if it ended first: a job is never both preempted and succeeded.
// The orders are in the state, so a new leader neither forgets nor
// repeats them.

// MaxPreemptPerEntry bounds the attempts one Preempt entry names.
const MaxPreemptPerEntry = 100_000

// maxStopReason bounds the reason kept with each order.
const maxStopReason = 512

// Preempt tells the workers of running attempts to stop them. An attempt
// no longer running as named, or told already, is skipped.
type Preempt struct {
	Now      int64
	Attempts []PreemptAttempt
}

// PreemptAttempt is one attempt to stop, and why.
type PreemptAttempt struct {
	AttemptID
	Reason string
}

// PreemptResult counts the attempts told to stop.
type PreemptResult struct{ Stopping int }

func (*Preempt) Type() CommandType { return CmdPreempt }

// stopOrder is an attempt told to stop.
type stopOrder struct {
	attempt uint16
	at      int64
	reason  string
}

func (s *placeBook) applyPreempt(c *Preempt) any {
	if len(c.Attempts) > MaxPreemptPerEntry {
		return errorf(ErrInvalid, "a preemption names %d attempts; at most %d an entry", len(c.Attempts), MaxPreemptPerEntry)
	}
	res := &PreemptResult{}
	for _, a := range c.Attempts {
		b := s.batches[a.Batch]
		if b == nil || a.Job < 1 || int(a.Job) > len(b.jobs) {
			continue
		}
		j := &b.jobs[a.Job-1]
		key := attemptKey{a.Batch, a.Job}
		if j.state != Running || j.attempt != a.Attempt {
			continue
		}
		if _, told := s.stopping[key]; told {
			continue
		}
		reason := a.Reason
		if len(reason) > maxStopReason {
			reason = reason[:maxStopReason]
		}
		s.stopping[key] = stopOrder{attempt: a.Attempt, at: c.Now, reason: reason}
		b.setMessage(a.Job, "preempting: "+reason)
		s.notifyInstance(j.instance)
		res.Stopping++
	}
	return res
}

// PreemptOrder is an attempt a worker is told to stop, with its grace.
type PreemptOrder struct {
	AttemptID
	Reason  string
	GraceMs int64
}

// DefaultPreemptGraceMs is a preempted attempt's grace when its job
// names none (api.DefaultPreemptionGraceSeconds).
const DefaultPreemptGraceMs = 30_000

// preemptGrace is a spec's preemption grace.
func (sp *Spec) preemptGrace() int64 {
	if sp.Run != nil && sp.Run.PreemptGraceMs > 0 {
		return sp.Run.PreemptGraceMs
	}
	return DefaultPreemptGraceMs
}

// stopped forgets the order to stop an attempt that ended.
func (s *placeBook) stopped(batch uint64, job uint32) {
	if len(s.stopping) > 0 {
		delete(s.stopping, attemptKey{batch, job})
	}
}

// RunningAttempt is an attempt running on an instance, as a Reader yields
// it.
type RunningAttempt struct {
	Batch    *Batch
	Job      uint32
	Attempt  uint16
	Start    int64 // unix ns (0: not started yet)
	Spec     *Spec
	Stopping bool // told to stop (Preempt)
}

// Running yields the attempts running on an instance, by batch and job.
func (r Reader) Running(inst *Instance) iter.Seq[RunningAttempt] {
	return func(yield func(RunningAttempt) bool) {
		for _, k := range sortedAttempts(inst.running) {
			b := r.s.batches[k.batch]
			j := &b.jobs[k.job-1]
			_, stopping := r.s.stopping[k]
			if !yield(RunningAttempt{Batch: b, Job: k.job, Attempt: j.attempt, Start: j.start, Spec: b.groupOf(k.job).spec, Stopping: stopping}) {
				return
			}
		}
	}
}

// snapStop is an order to stop in a snapshot.
type snapStop struct {
	Batch   uint64
	Job     uint32
	Attempt uint16
	At      int64
	Reason  string
}

func (s *placeBook) snapStops() []snapStop {
	out := make([]snapStop, 0, len(s.stopping))
	for k, o := range s.stopping {
		out = append(out, snapStop{Batch: k.batch, Job: k.job, Attempt: o.attempt, At: o.at, Reason: o.reason})
	}
	slices.SortFunc(out, func(a, b snapStop) int {
		if a.Batch != b.Batch {
			return cmp.Compare(a.Batch, b.Batch)
		}
		return cmp.Compare(a.Job, b.Job)
	})
	return out
}

// checkStops: every order names an attempt running as ordered.
func (s *placeBook) checkStops() error {
	for k, o := range s.stopping {
		b := s.batches[k.batch]
		if b == nil || k.job < 1 || int(k.job) > len(b.jobs) {
			return fmt.Errorf("an order to stop names job %d of batch %d, which the state does not have", k.job, k.batch)
		}
		if j := &b.jobs[k.job-1]; j.state != Running || j.attempt != o.attempt {
			return fmt.Errorf("an order to stop names attempt %d of job %d/%d, which is %s at attempt %d", o.attempt, k.batch, k.job, j.state, j.attempt)
		}
	}
	return nil
}
