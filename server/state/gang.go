package state

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/drover-sched/drover/placement"
)

// Gangs: the jobs of an array with a Gang, or of a job group declared a
// gang, start together, on workers of one cluster (one pool, one value of
// a label, as the gang says), or not at all. A gang is consecutive job IDs
// of one committed entry (an array), or of the entries of one command (a
// job group's): its span, which each member's spec knows (Gang.Lead:
// how many members come before its entry). Gangs are never split (they
// take no oom_retry, spot cap or machine of their own, which give a job a
// spec group of its own), so the span stays whole. Its members that have
// not succeeded start together: apply checks a plan's placements of a
// gang together and takes all or none (gangFits); an attempt of a member
// that ends any way but success stops the others' (stopGang), which come
// back to the queue, so the gang starts again as a whole; once a member
// ended for good without success, the gang cannot run: its other members
// are cancelled.

// MaxGangSize bounds a gang's members (api.MaxGangSize).
const MaxGangSize = 4096

// gangEntries checks the gangs of a command's entries: each gang's
// members (the entries whose first job less their Lead is the gang's
// first) are its Size consecutive jobs, all in these entries, 2 to
// MaxGangSize of them, of one placement (GPUs of one type; sizes may
// differ), none on a policy that
// would start one apart from the others (oom_retry, a spot cap, a machine
// of its own), none waiting for another member.
func gangEntries(entries []JobEntry) *ApplyError {
	type span struct {
		got     uint32
		spec    *Spec
		gpuType string // of its members with GPUs
	}
	spans := map[uint32]*span{}
	var order []uint32
	for i := range entries {
		e := &entries[i]
		g := e.Spec.gang()
		if g == nil {
			continue
		}
		if g.Lead >= e.First {
			return errorf(ErrInvalid, "job %d: its gang would begin before job 1 (%d members before it)", e.First, g.Lead)
		}
		first := e.First - g.Lead
		sp := spans[first]
		if sp == nil {
			sp = &span{spec: e.Spec}
			spans[first] = sp
			order = append(order, first)
		}
		lead := sp.spec.gang()
		typ, gpus := e.Spec.GPUs()
		oneType := gpus == 0 || sp.gpuType == "" || sp.gpuType == typ
		if gpus > 0 {
			sp.gpuType = typ
		}
		switch {
		case g.Size < 2 || g.Size > MaxGangSize:
			return errorf(ErrInvalid, "job %d: a gang is 2 to %d jobs that start together; this one is %d", e.First, MaxGangSize, g.Size)
		case g.Size != lead.Size || g.Uniform != lead.Uniform:
			return errorf(ErrInvalid, "job %d: its gang from job %d is of %d members (%q) in one entry and of %d (%q) in another", e.First, first, g.Size, g.Uniform, lead.Size, lead.Uniform)
		case uint64(g.Lead)+uint64(e.Count) > uint64(g.Size):
			return errorf(ErrInvalid, "job %d (count %d) lies outside its gang of jobs %d to %d", e.First, e.Count, first, uint64(first)+uint64(g.Size)-1)
		case !samePlace(e.Spec.Where, sp.spec.Where) || !oneType:
			return errorf(ErrInvalid, "job %d: the members of a gang ask for one place (regions, clusters, pool, worker labels, GPU type); job %d asks for another", e.First, first)
		case e.Spec.policy() != nil && (e.Spec.policy().OOMFactorMilli != 0 || e.Spec.policy().MaxSpot != 0):
			return errorf(ErrInvalid, "job %d: a gang's member takes no oom_retry or max_spot_attempts: it would start apart from the others", e.First)
		case e.Spec.Where != nil && e.Spec.Where.MachineType != "":
			return errorf(ErrInvalid, "job %d: a gang's member takes no machine_type: its members start together on the workers of one cluster", e.First)
		}
		last := uint64(first) + uint64(g.Size) - 1
		for _, p := range e.Parents {
			if p.Hi >= first && uint64(p.Lo) <= last {
				return errorf(ErrInvalid, "job %d waits for jobs %d to %d, members of its own gang, which starts together: it would never start", e.First, p.Lo, p.Hi)
			}
		}
		sp.got += e.Count
	}
	for _, first := range order {
		if sp := spans[first]; sp.got != sp.spec.gang().Size {
			return errorf(ErrInvalid, "job %d: its gang is of %d members, and %d of them come in this request: a gang's jobs come together", first, sp.spec.gang().Size, sp.got)
		}
	}
	return nil
}

// samePlace reports whether two members of a gang ask for the same
// place: their sizes may differ, and so may their GPU counts, but GPUs of
// one type.
func samePlace(a, b *Where) bool {
	var none Where
	if a == nil {
		a = &none
	}
	if b == nil {
		b = &none
	}
	return a.Pool == b.Pool && (a.GPUs == 0 || b.GPUs == 0 || a.GPUType == b.GPUType) && a.MachineType == b.MachineType &&
		slices.Equal(a.Regions, b.Regions) && slices.Equal(a.Clusters, b.Clusters) && slices.Equal(a.Labels, b.Labels)
}

// gangGroup is the job group declared a gang that group id is, or is
// in (0: none).
func (b *Batch) gangGroup(id uint32) uint32 {
	for id != 0 && int(id) <= len(b.jobGroups) {
		jg := b.jobGroups[id-1]
		if jg.Gang {
			return id
		}
		id = jg.Parent
	}
	return 0
}

// gangGroups checks a command's entries against the job groups declared
// gangs, the last made of them new with the command: the jobs of a gang
// group (and of the groups below it) are one gang, all committed with the
// group; a gang of more than one entry is a gang group's.
func (b *Batch) gangGroups(entries []JobEntry, made int) *ApplyError {
	newFrom := uint32(len(b.jobGroups)-made) + 1
	gangOf := map[uint32]uint32{}  // gang group → its gang's first job
	groupOf := map[uint32]uint32{} // a gang's first job → its gang group
	for i := range entries {
		e := &entries[i]
		g := e.Spec.gang()
		gg := b.gangGroup(e.Spec.JobGroup())
		if gg == 0 {
			if g != nil && (g.Lead != 0 || g.Size != e.Count) {
				return errorf(ErrInvalid, "job %d: a gang of %d in an entry of %d jobs: an array's gang is the whole array (a gang of several entries is a job group's, declared with gang = true)", e.First, g.Size, e.Count)
			}
			continue
		}
		path := b.jobGroups[gg-1].Path
		if gg < newFrom {
			return errorf(ErrConflict, "job %d: job group %s is a gang, whose jobs all came when it was made: it takes no more", e.First, path)
		}
		if g == nil {
			return errorf(ErrInvalid, "job %d: the jobs of job group %s start together: each is a member of its gang", e.First, path)
		}
		first := e.First - g.Lead
		if f, ok := gangOf[gg]; ok && f != first {
			return errorf(ErrInvalid, "job %d: the jobs of job group %s are one gang, not those from jobs %d and %d", e.First, path, f, first)
		}
		if o, ok := groupOf[first]; ok && o != gg {
			return errorf(ErrInvalid, "job %d: its gang from job %d is of job groups %s and %s", e.First, first, b.jobGroups[o-1].Path, path)
		}
		gangOf[gg], groupOf[first] = first, gg
	}
	for id := newFrom; int(id) <= len(b.jobGroups); id++ {
		if jg := b.jobGroups[id-1]; jg.Gang {
			if _, ok := gangOf[id]; !ok {
				return errorf(ErrInvalid, "job group %s is a gang and holds no job: its jobs come with it", jg.Path)
			}
		}
	}
	return nil
}

// gangSpan is the first job and the members of the gang group g's jobs
// are in (g has a gang).
func gangSpan(g *group) (first, size uint32) {
	gang := g.spec.gang()
	return g.first - gang.Lead, gang.Size
}

// gangParts calls f with each spec group of the gang group g's jobs are
// in, in ID order, and the part of the gang it holds.
func (b *Batch) gangParts(g *group, f func(m *group, lo, hi uint32)) {
	first, size := gangSpan(g)
	last := first + size - 1
	for lo := first; lo <= last; {
		m := b.groupOf(lo)
		if m == nil {
			return
		}
		hi := min(m.first+m.count-1, last)
		f(m, lo, hi)
		lo = hi + 1
	}
}

// gangPlacements gathers the placements of group g's gang in a plan, from
// index i on while they follow one another (as the scheduler writes a
// gang's), marking them taken. A part of the gang further on is another
// try, which gangFits refuses: it does not place the whole gang.
func (s *batchBook) gangPlacements(c *Plan, i int, b *Batch, g *group, taken []bool) []Placement {
	first, size := gangSpan(g)
	var out []Placement
	for k := i; k < len(c.Placements); k++ {
		p := c.Placements[k]
		if p.Batch != b.ID || (p.Count > 0 && (p.First < first || p.First-first >= size)) {
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
	if s.spendReached(b.BillingProject, c.Now) {
		return "cancelled or at its spend limit"
	}
	gang := g.spec.gang()
	first, size := gangSpan(g)
	ready := 0
	why := ""
	b.gangParts(g, func(m *group, lo, hi uint32) {
		if why == "" && b.cancelledFor(m.spec) {
			why = "cancelled or at its spend limit"
		}
		for id := lo; id <= hi && why == ""; id++ {
			switch st := b.jobs[id-1].state; {
			case st == Ready:
				ready++
			case st == Success:
			default:
				// Running, waiting, or ended without success: the
				// gang cannot start whole.
				why = fmt.Sprintf("member %d is %s", id, st)
			}
		}
	})
	if why != "" {
		return why
	}
	seen := make(map[uint32]bool, ready)
	per := map[uint32]placement.Size{}
	var where string
	for k, p := range ps {
		inst := s.instances[p.Instance]
		m := b.groupOf(p.First)
		last := p.First + p.Count - 1
		switch {
		case last < p.First || p.First < first || last-first >= size || m == nil || last >= m.first+m.count:
			return "outside the gang"
		case inst == nil || !inst.Active || s.reserved(inst) || !s.placeable(b, m.spec, inst):
			return "an instance cannot take it"
		}
		for id := p.First; id <= last; id++ {
			if j := &b.jobs[id-1]; j.state != Ready || j.attempt+1 != p.Attempt || seen[id] {
				return fmt.Sprintf("member %d is not ready for attempt %d", id, p.Attempt)
			}
			seen[id] = true
		}
		sz, n := m.spec.Size(), int64(p.Count)
		all := per[p.Instance]
		all.CPUMilli += sz.CPUMilli * n
		all.Memory += sz.Memory * n
		all.GPUs += sz.GPUs * n
		all.GPUType = sz.GPUType
		per[p.Instance] = all
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
	for id, all := range per {
		if !s.instances[id].free().Fits(all) {
			return "no room on an instance"
		}
	}
	var all placement.Size
	b.gangParts(g, func(m *group, lo, hi uint32) {
		for id := lo; id <= hi; id++ {
			if b.jobs[id-1].state == Ready {
				addSize(&all, m.spec.Size(), 1)
			}
		}
	})
	if !gangAdmits(s.quotaPath(s.queueOf(b)), all, int64(ready)) {
		return "the queue's quota"
	}
	return ""
}

// addSize adds n jobs of size sz to all (a gang's GPUs are of one type).
func addSize(all *placement.Size, sz placement.Size, n int64) {
	all.CPUMilli += n * sz.CPUMilli
	all.Memory += n * sz.Memory
	if sz.GPUs > 0 {
		all.GPUs += n * sz.GPUs
		all.GPUType = sz.GPUType
	}
}

// gangAdmits reports whether the queues along path admit a gang of jobs
// whose sizes add up to all, at once: its jobs against max_running, its
// sum as one job against the rest (the limits add, so members of several
// sizes count exactly).
func gangAdmits(path iter.Seq[*placement.Quota], all placement.Size, jobs int64) bool {
	if n, _, _ := placement.PathRoom(path, placement.Size{}, jobs); n < jobs {
		return false
	}
	n, _, _ := placement.PathRoom(path, all, 1)
	return n == 1
}

// gangDead reports whether a member of g's gang ended without success:
// the gang cannot run whole again (until a retry of the batch).
func (b *Batch) gangDead(g *group) bool {
	first, size := gangSpan(g)
	for id := first; id < first+size; id++ {
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
	first, size := gangSpan(g)
	for m := first; m < first+size; m++ {
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
	b.gangParts(g, func(m *group, lo, last uint32) {
		for ; lo <= last; lo++ {
			st := b.jobs[lo-1].state
			if st != Ready && st != Pending {
				continue
			}
			hi := lo
			for hi < last && b.jobs[hi].state == st {
				hi++
			}
			if st == Ready {
				s.dequeue(b, Range{lo, hi}, m.spec.CPUMilli)
			}
			for k := lo; k <= hi; k++ {
				b.setMessage(k, msg)
			}
			s.setStates(b, m.spec, lo, hi, st, Cancelled)
			s.finishSpan(b, lo, hi, true, now)
			lo = hi
		}
	})
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
	first, _ := gangSpan(g)
	var out []ReadyRange
	whole := true
	b.gangParts(g, func(m *group, lo, last uint32) {
		for ; lo <= last && whole; lo++ {
			j := &b.jobs[lo-1]
			switch {
			case j.state == Success:
				continue
			case j.state != Ready:
				whole = false // running, waiting, or dead
				return
			}
			hi := lo
			for hi < last && b.jobs[hi].state == Ready && b.jobs[hi].attempt == j.attempt {
				hi++
			}
			out = append(out, ReadyRange{Range: Range{lo, hi}, Spec: m.spec, Attempt: j.attempt + 1})
			lo = hi
		}
	})
	if !whole {
		return nil, first, false
	}
	return out, first, len(out) > 0
}

// GangRunning counts the members of job id's gang that are running or
// being placed (0: none, or it is in no gang).
func (r Reader) GangRunning(b *Batch, id uint32) int {
	g := b.groupOf(id)
	if g == nil || g.spec.gang() == nil {
		return 0
	}
	n := 0
	first, size := gangSpan(g)
	for m := first; m < first+size; m++ {
		if st := b.jobs[m-1].state; st == Running || st == Creating {
			n++
		}
	}
	return n
}

// GangQueueRoom says whether the queues a batch's jobs run in could ever
// hold a gang of jobs whose sizes add up to all at once (their limits
// with nothing running), and names the queue that could not (empty: all
// could): batch is the batch (0: a new one, of project, naming queue
// named or none).
func (r Reader) GangQueueRoom(batch uint64, project, named string, all placement.Size, jobs int64) string {
	var leaf *Queue
	switch b := r.s.batches[batch]; {
	case b != nil:
		leaf = r.s.queueOf(b)
	case named != "":
		leaf = r.s.queues[named]
	default:
		leaf = r.s.projectQueue[project]
	}
	for q := leaf; q != nil; q = q.parent {
		idle := q.Queue.Quota() // its limits, nothing used
		if !gangAdmits(func(yield func(*placement.Quota) bool) { yield(&idle) }, all, jobs) {
			return q.Path
		}
	}
	return ""
}

// GangOf returns the first job of the gang job id is in (its name in the
// scheduler's runs; 0: none).
func (r Reader) GangOf(b *Batch, id uint32) uint32 {
	if g := b.groupOf(id); g != nil && g.spec.gang() != nil {
		first, _ := gangSpan(g)
		return first
	}
	return 0
}
