package state

import "fmt"

// A job's life after placement: attempts end (worker events), jobs finish
// or go back to Ready for a retry, batches complete.

func (s *batchBook) applyEvents(c *Events) any {
	res := &EventsResult{}
	for i := range c.Events {
		if s.applyEvent(&c.Events[i], c.Now) {
			res.Applied++
		} else {
			res.Ignored++
			res.Skipped = append(res.Skipped, i)
		}
	}
	return res
}

// applyEvent records one worker event. An event for an attempt that is not
// the job's current running attempt on that instance is stale (the attempt
// was lost, the event repeated) and is ignored, which is what makes events
// idempotent.
func (s *batchBook) applyEvent(e *Event, now int64) bool {
	b := s.batches[e.Batch]
	if b == nil || e.Job < 1 || int(e.Job) > len(b.jobs) {
		return false
	}
	j := &b.jobs[e.Job-1]
	if j.state != Running || j.attempt != e.Attempt || j.instance != e.Instance {
		return false
	}
	if e.Usage != nil {
		b.setUsage(e.Job, *e.Usage)
	}
	if e.Sample {
		return e.Usage != nil
	}
	if e.Started {
		if j.start == 0 {
			j.start = e.Start
			s.startCharge(b, b.groupOf(e.Job), e.Job, s.instances[e.Instance], j.start)
		}
		return true
	}
	if e.Start != 0 && j.start == 0 {
		// Placed without a time (by a leader before billing from the
		// reservation): it started as its worker says.
		j.start = e.Start
		s.startCharge(b, b.groupOf(e.Job), e.Job, s.instances[e.Instance], j.start)
	}
	j.end = e.End
	if j.end < j.start {
		j.end = j.start
	}
	j.exit = e.Exit
	j.outcome = e.Outcome
	g := b.groupOf(e.Job)
	s.endAttempt(b, g, e.Job, s.instances[e.Instance], now)
	b.setMessage(e.Job, e.Message)
	switch e.Outcome {
	case OutcomeSuccess:
		s.finish(b, e.Job, j, Success, now)
	case OutcomeFailed, OutcomeError:
		if next := g.spec.oomRetry(); e.OOM && next != nil && !b.cancelledFor(g.spec) {
			// Out of memory, with a policy that gives it more: it runs
			// again with more, counted against no retry, keeping its
			// place in line.
			b.setMessage(e.Job, fmt.Sprintf("%s; retrying with %s", e.Message, mib(next.Memory)))
			if b.memory == nil {
				b.memory = map[uint32]int64{}
			}
			b.memory[e.Job] = g.spec.Memory
			g = s.isolate(b, e.Job, next)
			s.requeue(b, g, e.Job, j, true, now)
			break
		}
		if !b.cancelledFor(g.spec) && j.failures < g.spec.Retries {
			j.failures++
			s.requeue(b, g, e.Job, j, false, now)
			break
		}
		if e.Outcome == OutcomeFailed {
			s.finish(b, e.Job, j, Failed, now)
		} else {
			s.finish(b, e.Job, j, Error, now)
		}
	case OutcomePreempted:
		if b.cancelledFor(g.spec) {
			s.finish(b, e.Job, j, Cancelled, now)
			break
		}
		if inst := s.instances[e.Instance]; e.Leaving && inst != nil {
			// The worker is going away with its machine: nothing more
			// goes there (the job must not come straight back to it,
			// to be counted again at its goodbye), and on a spot machine
			// it is a reclaim.
			inst.Leaving = true
			if g.spec.maxSpot() > 0 && s.spot(inst) {
				var note string
				g, note = s.spotReclaimed(b, g, e.Job, j)
				b.setMessage(e.Job, e.Message+note)
			}
		}
		s.requeue(b, g, e.Job, j, true, now)
	default:
		s.finish(b, e.Job, j, Cancelled, now)
	}
	return true
}

// MaxAttemptsPerJob bounds a job's attempts, whatever brings them.
const MaxAttemptsPerJob = 1000

// mib writes a byte count in MiB, as workers write memory limits.
func mib(n int64) string {
	if n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", (n+(1<<20)-1)>>20)
}

// endAttempt releases what a running attempt of job id (of group g) held on
// its instance.
func (s *batchBook) endAttempt(b *Batch, g *group, id uint32, inst *Instance, now int64) {
	s.stopped(b.ID, id)
	s.endCharge(b, id, b.jobs[id-1].end)
	s.recordUse(b, g.spec.CPUMilli, b.jobs[id-1].start, b.jobs[id-1].end, now)
	if inst != nil {
		if _, ok := inst.running[attemptKey{b.ID, id}]; ok {
			delete(inst.running, attemptKey{b.ID, id})
			inst.LastEnded = max(inst.LastEnded, now)
			if len(inst.running) == 0 {
				// A map keeps its size once grown: let an idle
				// instance's go.
				inst.running = nil
			}
			if inst.Active {
				inst.hold(g.spec.Size(), -1)
			}
			s.charge(b, g.spec, inst, -1)
		}
		// A machine made for this job alone goes when the attempt ends.
		if inst.Machine != "" {
			if m := s.machines[inst.Machine]; m != nil && m.ForBatch == b.ID && m.ForJob == id {
				s.dropPrivate(b.ID, id, now, "its job's attempt ended")
			}
		}
	}
	u := s.userSched(b.User)
	u.runningMilli -= g.spec.CPUMilli
	u.runningJobs--
	if g.spec.gang() != nil && b.jobs[id-1].outcome != OutcomeSuccess {
		s.stopGang(b, g, id, now)
	}
	s.notifyWork()
}

// finish moves a running job to a final state and lets its children go.
func (s *batchBook) finish(b *Batch, id uint32, j *job, to JobState, now int64) {
	if s.hooks.Transition != nil {
		s.hooks.Transition(s.index, b.ID, id, j.state, to)
	}
	g := b.groupOf(id)
	sp := g.spec
	b.count(sp, j.state, -1)
	b.count(sp, to, 1)
	j.state = to
	b.ended(1)
	s.finishSpan(b, id, id, to != Success, now)
	s.checkComplete(b, now)
	if (to == Failed || to == Error) && len(b.jobGroups) > 0 {
		s.failedInGroups(b, sp, now)
	}
	if to != Success && sp.gang() != nil {
		s.cancelGang(b, g, id, now)
	}
	// Hail's cancel_after_n_failures: the failure that reaches the count
	// cancels what is left of the batch (nothing, once it is complete).
	if (to == Failed || to == Error) && !b.Cancelled && b.Completed == 0 && b.CancelAfterFailures > 0 &&
		b.counts[Failed]+b.counts[Error] >= int64(b.CancelAfterFailures) {
		s.cancelBatch(b, fmt.Sprintf("%d of its jobs failed (cancel_after_n_failures = %d)", b.counts[Failed]+b.counts[Error], b.CancelAfterFailures), now)
	}
}

// requeue returns a running job (of group g) to Ready for its next attempt:
// ahead of the jobs that never started when it comes back through no fault
// of its own (preempted, lost, its machine gone), behind them when it
// failed and is retried.
//
// A job that has run MaxAttemptsPerJob attempts ends Error instead: its
// attempts are numbered in 16 bits and each is kept in its history, and
// nothing (a restart, a job lost without limit) runs one forever.
func (s *batchBook) requeue(b *Batch, g *group, id uint32, j *job, ahead bool, now int64) {
	if g.spec.gang() != nil && b.gangDead(g) {
		b.setMessage(id, "its gang cannot run whole: a member ended without success")
		s.finish(b, id, j, Cancelled, now)
		return
	}
	if j.state == Running && j.attempt >= MaxAttemptsPerJob {
		b.setMessage(id, fmt.Sprintf("ran %d attempts, the most a job gets (the last: %s)", j.attempt, b.messages[id]))
		s.finish(b, id, j, Error, now)
		return
	}
	if s.hooks.Transition != nil {
		s.hooks.Transition(s.index, b.ID, id, j.state, Ready)
	}
	b.count(g.spec, j.state, -1)
	b.count(g.spec, Ready, 1)
	j.state = Ready
	s.enqueue(b, Range{id, id}, g.spec.CPUMilli, ahead)
}

// setStates moves jobs lo..hi, all in state from, to state to.
func (s *batchBook) setStates(b *Batch, sp *Spec, lo, hi uint32, from, to JobState) {
	for id := lo; id <= hi; id++ {
		b.jobs[id-1].state = to
		if s.hooks.Transition != nil {
			s.hooks.Transition(s.index, b.ID, id, from, to)
		}
	}
	n := int64(hi - lo + 1)
	b.count(sp, from, -n)
	b.count(sp, to, n)
	if to.Final() {
		b.ended(n)
	}
}

// checkComplete stamps the batch complete when every committed job is final
// and no update is open.
func (s *batchBook) checkComplete(b *Batch, now int64) {
	if len(b.dirtyGroups) > 0 {
		s.settleGroups(b, now)
	}
	if b.Completed != 0 {
		return
	}
	final := b.counts[Success] + b.counts[Failed] + b.counts[Cancelled] + b.counts[Error]
	if final == b.nJobs && b.open == 0 {
		b.setCompleted(now, s.index)
	}
}
