package state

import (
	"slices"
	"sort"
)

// readyQueue holds a batch's Ready jobs as runs of consecutive IDs in the
// order they became Ready. A released job array is one run however large it
// is, so a 16-million-job array costs a few bytes here. Jobs leave from the
// head in the common case (the scheduler takes the oldest first).
//
// A job that was taken from the queue and came back through no fault of
// its own (preempted, lost with its worker, its private machine gone)
// keeps its place: it goes ahead of every job that never started, behind
// those that came back before it (the first again runs from the head).
type readyQueue struct {
	runs  []Range
	head  int
	again int
}

func (q *readyQueue) empty() bool { return q.head >= len(q.runs) }

func (q *readyQueue) push(r Range) { q.runs = append(q.runs, r) }

// pushAgain queues r behind the jobs that came back before it and ahead
// of the rest.
func (q *readyQueue) pushAgain(r Range) {
	q.runs = slices.Insert(q.runs, q.head+q.again, r)
	q.again++
}

// items returns the runs from the head, oldest first. Callers must not keep
// the slice past the state lock.
func (q *readyQueue) items() []Range { return q.runs[q.head:] }

func (q *readyQueue) clear() {
	q.runs = nil
	q.head = 0
	q.again = 0
}

// remove deletes the IDs of r, all of which must be queued, from the queue.
// The IDs are usually the head of the first run.
func (q *readyQueue) remove(r Range) {
	for r.Lo <= r.Hi {
		i := q.find(r.Lo)
		if i < 0 {
			return
		}
		run := q.runs[i]
		cut := Range{r.Lo, min(r.Hi, run.Hi)}
		inAgain := i < q.head+q.again
		switch {
		case cut.Lo == run.Lo && cut.Hi == run.Hi:
			if inAgain {
				q.again--
			}
			if i == q.head {
				q.runs[i] = Range{}
				q.head++
			} else {
				q.runs = append(q.runs[:i], q.runs[i+1:]...)
			}
		case cut.Lo == run.Lo:
			q.runs[i].Lo = cut.Hi + 1
		case cut.Hi == run.Hi:
			q.runs[i].Hi = cut.Lo - 1
		default:
			q.runs = append(q.runs, Range{})
			copy(q.runs[i+2:], q.runs[i+1:])
			q.runs[i] = Range{run.Lo, cut.Lo - 1}
			q.runs[i+1] = Range{cut.Hi + 1, run.Hi}
			if inAgain {
				q.again++
			}
		}
		if cut.Hi == r.Hi {
			break
		}
		r.Lo = cut.Hi + 1
	}
	q.compact()
}

// find returns the index of the run holding id, or -1.
func (q *readyQueue) find(id uint32) int {
	for i := q.head; i < len(q.runs); i++ {
		if id >= q.runs[i].Lo && id <= q.runs[i].Hi {
			return i
		}
	}
	return -1
}

func (q *readyQueue) compact() {
	if q.head == len(q.runs) {
		q.runs = q.runs[:0]
		q.head = 0
		return
	}
	if q.head > 64 && q.head > len(q.runs)/2 {
		n := copy(q.runs, q.runs[q.head:])
		q.runs = q.runs[:n]
		q.head = 0
	}
}

// contains reports whether id is queued (tests and invariant checks).
func (q *readyQueue) contains(id uint32) bool { return q.find(id) >= 0 }

// enqueue appends Ready jobs to the batch's queue and the user's counters
// (ahead: jobs that come back, placed ahead of those never started).
func (s *batchBook) enqueue(b *Batch, r Range, cpuMilli int64, ahead bool) {
	n := int64(r.Len())
	wasEmpty := b.ready.empty()
	if ahead {
		b.ready.pushAgain(r)
	} else {
		b.ready.push(r)
	}
	b.readyMilli += n * cpuMilli
	u := s.userSched(b.User)
	u.readyMilli += n * cpuMilli
	u.readyJobs += n
	if wasEmpty {
		u.addActive(b)
	}
	s.notifyWork()
}

// dequeue removes Ready jobs from the queue (they were placed).
func (s *batchBook) dequeue(b *Batch, r Range, cpuMilli int64) {
	b.ready.remove(r)
	n := int64(r.Len())
	b.readyMilli -= n * cpuMilli
	u := s.userSched(b.User)
	u.readyMilli -= n * cpuMilli
	u.readyJobs -= n
	if b.ready.empty() {
		u.removeActive(b)
	}
}

func (u *userSched) addActive(b *Batch) {
	i := sort.Search(len(u.active), func(i int) bool { return u.active[i].ID >= b.ID })
	if i < len(u.active) && u.active[i] == b {
		return
	}
	u.active = append(u.active, nil)
	copy(u.active[i+1:], u.active[i:])
	u.active[i] = b
}

func (u *userSched) removeActive(b *Batch) {
	i := sort.Search(len(u.active), func(i int) bool { return u.active[i].ID >= b.ID })
	if i < len(u.active) && u.active[i] == b {
		// slices.Delete clears the slot freed at the end, which would
		// otherwise keep the batch (its jobs and specs) alive after it
		// left the state.
		u.active = slices.Delete(u.active, i, i+1)
	}
}

func (s *batchBook) userSched(name string) *userSched {
	u := s.sched[name]
	if u == nil {
		u = &userSched{name: name}
		s.sched[name] = u
	}
	return u
}

// retain keeps the queued IDs keep accepts, in their order, in one pass
// (a job group's cancel takes any number of runs out at once).
func (q *readyQueue) retain(keep func(id uint32) bool) {
	var out []Range
	again := 0
	for i := q.head; i < len(q.runs); i++ {
		r := q.runs[i]
		inAgain := i < q.head+q.again
		for id := r.Lo; id <= r.Hi; id++ {
			if !keep(id) {
				continue
			}
			lo := id
			for id < r.Hi && keep(id+1) {
				id++
			}
			out = append(out, Range{lo, id})
			if inAgain {
				again++
			}
		}
	}
	q.runs, q.head, q.again = out, 0, again
}
