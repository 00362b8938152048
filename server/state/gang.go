package state

import (
	"fmt"
	"strings"

	"github.com/drover-sched/drover/placement"
)

// Gangs: the jobs of an array with a Gang start together, on workers of
// one cluster (one pool, one value of a label, as the gang says), or not
// at all. A gang is the jobs of one committed entry: gangs are never
// split (they take no oom_retry, spot cap or machine of their own, which
// give a job a spec group of its own), so a gang is one group. Its
// members that have not succeeded start together: apply checks a plan's
// placements of a gang together and takes all or none (gangFits); an
// attempt of a member that ends any way but success stops the others'
// (stopGang), which come back to the queue, so the gang starts again as a
// whole; once a member ended for good without success, the gang cannot
// run: its other members are cancelled.

// MaxGangSize bounds a gang's members (api.MaxGangSize).
const MaxGangSize = 4096

// gangPlacements gathers the placements of group g's gang in a plan, from
// index i on while they follow one another (as the scheduler writes a
// gang's), marking them taken. A part of the gang further on is another
// try, which gangFits refuses: it does not place the whole gang.
func (s *batchBook) gangPlacements(c *Plan, i int, b *Batch, g *group, taken []bool) []Placement {
	var out []Placement
	for k := i; k < len(c.Placements); k++ {
		p := c.Placements[k]
		if p.Batch != b.ID || (p.Count > 0 && b.groupOf(p.First) != g) {
			break
		}
		if p.Count > 0 {
			out = append(out, p)
		}
		taken[k] = true
	}
	return out
}

// gangFits checks a gang's placements together: every member that has
// not ended is Ready and placed once, on its next attempt; none of them
// runs or waits for a parent; the instances are active, allowed, in one
// cluster (pool, label value) and have room for what each takes; the
// queue has room for them all. It says why not ("": they fit).
func (s *batchBook) gangFits(c *Plan, b *Batch, g *group, ps []Placement) string {
	if b.cancelledFor(g.spec) || s.spendReached(b.BillingProject, c.Now) {
		return "cancelled or at its spend limit"
	}
	gang := g.spec.gang()
	ready := 0
	for id := g.first; id < g.first+g.count; id++ {
		switch st := b.jobs[id-1].state; {
		case st == Ready:
			ready++
		case st == Success:
		default:
			// Running, waiting, or ended without success: the gang
			// cannot start whole.
			return fmt.Sprintf("member %d is %s", id, st)
		}
	}
	seen := make(map[uint32]bool, ready)
	per := map[uint32]int64{}
	var where string
	for k, p := range ps {
		inst := s.instances[p.Instance]
		if inst == nil || !inst.Active || s.reserved(inst) || !s.placeable(b, g.spec, inst) {
			return "an instance cannot take it"
		}
		last := p.First + p.Count - 1
		if last < p.First || last >= g.first+g.count {
			return "outside the gang"
		}
		for id := p.First; id <= last; id++ {
			if j := &b.jobs[id-1]; j.state != Ready || j.attempt+1 != p.Attempt || seen[id] {
				return fmt.Sprintf("member %d is not ready for attempt %d", id, p.Attempt)
			}
			seen[id] = true
		}
		per[p.Instance] += int64(p.Count)
		w := inst.Cluster
		switch {
		case gang.Uniform == "pool":
			w += "\x00" + inst.Pool
		case strings.HasPrefix(gang.Uniform, "label:"):
			v, ok := inst.Labels[strings.TrimPrefix(gang.Uniform, "label:")]
			if !ok {
				return "a worker lacks the gang's label"
			}
			w += "\x00" + v
		}
		if k > 0 && w != where {
			return "members in more than one cluster, pool or label value"
		}
		where = w
	}
	if len(seen) != ready {
		return fmt.Sprintf("%d of its %d waiting members placed", len(seen), ready)
	}
	sz := g.spec.Size()
	for id, n := range per {
		all := placement.Size{CPUMilli: sz.CPUMilli * n, Memory: sz.Memory * n, GPUType: sz.GPUType, GPUs: sz.GPUs * n}
		if !s.instances[id].free().Fits(all) {
			return "no room on an instance"
		}
	}
	if n, _, _ := placement.PathRoom(s.quotaPath(s.queueOf(b)), sz, int64(ready)); n < int64(ready) {
		return "the queue's quota"
	}
	return ""
}

// gangDead reports whether a member of g's gang ended without success:
// the gang cannot run whole again (until a retry of the batch).
func (b *Batch) gangDead(g *group) bool {
	for id := g.first; id < g.first+g.count; id++ {
		if st := b.jobs[id-1].state; st.Final() && st != Success {
			return true
		}
	}
	return false
}

// stopGang tells the workers of g's other running members to stop them
// (as a preemption: SIGTERM, their grace, SIGKILL), because member id's
// attempt ended without success. They come back to the queue, ahead,
// counted against nothing, or end cancelled if the gang cannot run again.
func (s *batchBook) stopGang(b *Batch, g *group, id uint32, now int64) {
	reason := fmt.Sprintf("member %d of its gang ended (%s); the gang starts again together", id, b.jobs[id-1].outcome)
	for m := g.first; m < g.first+g.count; m++ {
		j := &b.jobs[m-1]
		if m == id || j.state != Running {
			continue
		}
		key := attemptKey{b.ID, m}
		if _, told := s.stopping[key]; told {
			continue
		}
		s.stopping[key] = stopOrder{attempt: j.attempt, at: now, reason: reason}
		b.setMessage(m, "preempting: "+reason)
		s.notifyInstance(j.instance)
	}
}

// cancelGang ends the members of g's gang that wait (Ready), because
// member id ended for good without success; running ones are stopping
// already (stopGang) and end cancelled when they do (requeue).
func (s *batchBook) cancelGang(b *Batch, g *group, id uint32, now int64) {
	msg := fmt.Sprintf("its gang cannot run whole: member %d ended %s", id, b.jobs[id-1].state)
	last := g.first + g.count - 1
	for lo := g.first; lo <= last; lo++ {
		if b.jobs[lo-1].state != Ready {
			continue
		}
		hi := lo
		for hi < last && b.jobs[hi].state == Ready {
			hi++
		}
		s.dequeue(b, Range{lo, hi}, g.spec.CPUMilli)
		for m := lo; m <= hi; m++ {
			b.setMessage(m, msg)
		}
		s.setStates(b, g.spec, lo, hi, Ready, Cancelled)
		s.finishSpan(b, lo, hi, true, now)
		lo = hi
	}
	s.checkComplete(b, now)
}

// GangReady returns the Ready runs of the gang that Ready job id is a
// member of (each on one attempt), the gang's first job (its name in the
// scheduler's runs), and whether the gang may start: every member that
// has not ended is Ready.
func (r Reader) GangReady(b *Batch, id uint32) ([]ReadyRange, uint32, bool) {
	g := b.groupOf(id)
	if g == nil || g.spec.gang() == nil {
		return nil, 0, false
	}
	var out []ReadyRange
	last := g.first + g.count - 1
	for lo := g.first; lo <= last; lo++ {
		j := &b.jobs[lo-1]
		switch {
		case j.state == Success:
			continue
		case j.state != Ready:
			return nil, g.first, false // running, waiting, or dead
		}
		hi := lo
		for hi < last && b.jobs[hi].state == Ready && b.jobs[hi].attempt == j.attempt {
			hi++
		}
		out = append(out, ReadyRange{Range: Range{lo, hi}, Spec: g.spec, Attempt: j.attempt + 1})
		lo = hi
	}
	return out, g.first, len(out) > 0
}

// GangRunning counts the members of job id's gang that are running or
// being placed (0: none, or it is in no gang).
func (r Reader) GangRunning(b *Batch, id uint32) int {
	g := b.groupOf(id)
	if g == nil || g.spec.gang() == nil {
		return 0
	}
	n := 0
	for m := g.first; m < g.first+g.count; m++ {
		if st := b.jobs[m-1].state; st == Running || st == Creating {
			n++
		}
	}
	return n
}

// GangQueueRoom is how many jobs of size sz, of n, the queues a batch's
// jobs run in could ever hold at once (their limits with nothing
// running), and the queue that holds fewer (empty: none does): batch is
// the batch (0: a new one, of project, naming queue named or none).
func (r Reader) GangQueueRoom(batch uint64, project, named string, sz placement.Size, n int64) (int64, string) {
	var leaf *Queue
	switch b := r.s.batches[batch]; {
	case b != nil:
		leaf = r.s.queueOf(b)
	case named != "":
		leaf = r.s.queues[named]
	default:
		leaf = r.s.projectQueue[project]
	}
	if leaf == nil {
		return n, ""
	}
	for q := leaf; q != nil; q = q.parent {
		idle := q.Queue.Quota() // its limits, nothing used
		if got, _, _ := placement.PathRoom(func(yield func(*placement.Quota) bool) { yield(&idle) }, sz, n); got < n {
			return got, q.Path
		}
	}
	return n, ""
}

// GangOf returns the first job of the gang job id is in (its name in the
// scheduler's runs; 0: none).
func (r Reader) GangOf(b *Batch, id uint32) uint32 {
	if g := b.groupOf(id); g != nil && g.spec.gang() != nil {
		return g.first
	}
	return 0
}
