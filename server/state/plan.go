package state

import (
	"sort"

	"github.com/drover-sched/drover/billing"
)

// PlanResult counts what a plan did. Rejections are normal when the state
// moved between planning and apply (a batch was cancelled, an instance left).
type PlanResult struct {
	Placed   int
	Rejected int
}

// applyPlan re-checks every placement against the current state: the job is
// still Ready on the expected attempt, its batch is not cancelled, the
// instance is active, in an enabled cluster the job may use, and has the
// cores and memory free, the batch's queue has the quota, and its billing
// project has not reached its spend limit at the plan's time (the time
// the leader stamped, not the one it planned at). Placements that no
// longer fit are dropped, so no instance is ever oversubscribed, no queue
// ever holds more than its quota, and no project over its limit starts
// an attempt. A placed attempt starts, and is billed, at the plan's time
// (Plan.Reserve): its cores are its own from then on.
func (s *batchBook) applyPlan(c *Plan) any {
	res := &PlanResult{}
	touched := map[uint32]bool{}
	var gangDone []bool // placements taken with their gang
	for i, p := range c.Placements {
		if p.Count == 0 || (gangDone != nil && gangDone[i]) {
			continue
		}
		// A gang's placements are checked together, and applied together
		// or not at all.
		if b := s.batches[p.Batch]; b != nil {
			if g := b.groupOf(p.First); g != nil && g.spec.gang() != nil {
				if gangDone == nil {
					gangDone = make([]bool, len(c.Placements))
				}
				ps := s.gangPlacements(c, i, b, g, gangDone)
				if err := s.gangFits(c, b, g, ps); err != "" {
					for _, q := range ps {
						res.Rejected += int(q.Count)
					}
					continue
				}
				for _, q := range ps {
					s.place(c, q, res, touched)
				}
				continue
			}
		}
		s.place(c, p, res, touched)
	}
	ids := make([]uint32, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		s.notifyInstance(id)
	}
	return res
}

// place applies one placement, each job of it re-checked.
func (s *batchBook) place(c *Plan, p Placement, res *PlanResult, touched map[uint32]bool) {
	b := s.batches[p.Batch]
	inst := s.instances[p.Instance]
	if b == nil || b.Cancelled || inst == nil || !inst.Active || s.reserved(inst) || s.spendReached(b.BillingProject, c.Now) {
		res.Rejected += int(p.Count)
		return
	}
	g := b.groupOf(p.First)
	last := p.First + p.Count - 1
	if g == nil || last >= g.first+g.count || last < p.First {
		res.Rejected += int(p.Count)
		return
	}
	cpu, size := g.spec.CPUMilli, g.spec.Size()
	placeable := s.placeable(b, g.spec, inst)
	// An attempt is billed from its reservation: what its worker
	// does before the command starts (pulling the image, copying the
	// inputs) holds the cores as the command does.
	var price billing.Price
	if c.Reserve && c.Now != 0 && len(s.rates) > 0 {
		price, _ = s.price(g.spec, inst, c.Now)
	}
	u := s.userSched(b.User)
	runLo := p.First
	flush := func(hi uint32) {
		if hi < runLo || hi == runLo-1 {
			return
		}
		r := Range{runLo, hi}
		s.dequeue(b, r, cpu)
		n := int64(r.Len())
		b.count(g.spec, Ready, -n)
		b.count(g.spec, Running, n)
		u.runningMilli += n * cpu
		u.runningJobs += n
		res.Placed += int(n)
	}
	for id := p.First; id <= last; id++ {
		j := &b.jobs[id-1]
		if j.state != Ready || j.attempt+1 != p.Attempt || !inst.free().Fits(size) || !placeable || !s.quotaAdmits(b, g.spec) {
			flush(id - 1)
			runLo = id + 1
			res.Rejected++
			continue
		}
		if j.attempt > 0 {
			b.archive(id, j)
		}
		if s.hooks.Transition != nil {
			s.hooks.Transition(s.index, b.ID, id, Ready, Running)
		}
		*j = job{state: Running, attempt: p.Attempt, instance: inst.ID, failures: j.failures, lost: j.lost, spotLost: j.spotLost}
		if c.Reserve {
			j.start = c.Now
			s.chargeAt(b, id, price, c.Now)
		}
		inst.hold(size, 1)
		if inst.running == nil {
			inst.running = map[attemptKey]struct{}{}
		}
		inst.running[attemptKey{b.ID, id}] = struct{}{}
		s.charge(b, g.spec, inst, +1)
		touched[inst.ID] = true
	}
	flush(last)
}

// archive moves a job's current attempt into its history before a new
// attempt starts.
func (b *Batch) archive(id uint32, j *job) {
	if b.history == nil {
		b.history = map[uint32][]attemptRec{}
	}
	rec := attemptRec{Attempt: j.attempt, Instance: j.instance, Start: j.start, End: j.end, Exit: j.exit, Outcome: j.outcome}
	if msg, ok := b.messages[id]; ok {
		rec.Message = msg
		delete(b.messages, id)
	}
	if u, ok := b.usage[id]; ok {
		rec.Usage = &u
		delete(b.usage, id)
	}
	if m, ok := b.memory[id]; ok {
		rec.Memory = m
		delete(b.memory, id)
	}
	b.history[id] = append(b.history[id], rec)
}

// setUsage records the current attempt's usage as its worker last
// reported it.
func (b *Batch) setUsage(id uint32, u Usage) {
	if b.usage == nil {
		b.usage = map[uint32]Usage{}
	}
	b.usage[id] = u
}

func (b *Batch) setMessage(id uint32, msg string) {
	if msg == "" {
		delete(b.messages, id)
		return
	}
	if b.messages == nil {
		b.messages = map[uint32]string{}
	}
	b.messages[id] = msg
}
