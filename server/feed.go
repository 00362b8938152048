package server

import (
	"sync"

	"github.com/drover-sched/drover/server/changes"
	"github.com/drover-sched/drover/server/samples"
	"github.com/drover-sched/drover/server/state"
)

// feedRecorder turns applied entries into the change feed
// (server/changes): the job transitions the state reports as it applies
// (Hooks.Transition) and what each command names (changesOf), published
// once per applied group, from the FSM goroutine.
type feedRecorder struct {
	feed      *changes.Feed
	samples   *samples.Store // attempts' usage over time, from the same entries
	mu        sync.Mutex
	pending   coalescer // the transitions of the group being applied
	lastBatch uint64    // the batch of the last transition, at pending.index
}

func newFeedRecorder(index uint64) *feedRecorder {
	return &feedRecorder{feed: changes.New(changes.DefaultSize, index), samples: samples.New()}
}

// maxJobChanges is how many job changes of one batch an index records
// one by one; beyond, the index records one change of every job of the
// batch ("12/*"). A commit of a million-job batch is one change, not a
// million (and not a ring emptied of everything else).
const maxJobChanges = 256

// coalescer collects changes in index order, each change once an index,
// and at most maxJobChanges job changes of a batch an index.
type coalescer struct {
	out   []changes.Change
	index uint64
	seen  map[changes.Change]bool
	jobs  map[uint64]int
}

func (c *coalescer) add(ch changes.Change) {
	if c.seen == nil {
		c.seen, c.jobs = map[changes.Change]bool{}, map[uint64]int{}
	}
	if ch.Index != c.index {
		c.index = ch.Index
		clear(c.seen)
		clear(c.jobs)
	}
	if ch.Topic == changes.Job {
		n := c.jobs[ch.Batch]
		c.jobs[ch.Batch] = n + 1
		switch {
		case n == maxJobChanges:
			ch.Job, ch.All = 0, true
		case n > maxJobChanges:
			return
		}
	}
	if c.seen[ch] {
		return
	}
	c.seen[ch] = true
	c.out = append(c.out, ch)
}

// take returns what was collected and starts afresh.
func (c *coalescer) take() []changes.Change {
	out := c.out
	c.out, c.index = nil, 0
	clear(c.seen)
	clear(c.jobs)
	return out
}

// transition is the state's hook: a job moved, so did its batch's counts
// and what queues hold or wait for.
func (r *feedRecorder) transition(index, b uint64, j uint32, _, _ state.JobState) {
	r.mu.Lock()
	if r.pending.index != index || r.lastBatch != b {
		// A large entry moves thousands of one batch's jobs in a row:
		// its batch and queue changes are told once.
		r.pending.add(changes.Change{Index: index, Topic: changes.Batch, Batch: b})
		r.pending.add(changes.Change{Index: index, Topic: changes.Queue})
		r.lastBatch = b
	}
	if r.pending.jobs[b] <= maxJobChanges {
		r.pending.add(changes.Change{Index: index, Topic: changes.Job, Batch: b, Job: j})
	}
	r.mu.Unlock()
}

// applied publishes the changes of a group of applied entries.
func (r *feedRecorder) applied(idx []uint64, cmds []state.Command, res []any) {
	r.mu.Lock()
	all := r.pending.take()
	r.lastBatch = 0
	r.mu.Unlock()
	// Transitions came in index order as apply went; each command's own
	// changes go after its index's transitions.
	var out coalescer
	t := 0
	var last uint64
	for k, c := range cmds {
		for ; t < len(all) && all[t].Index <= idx[k]; t++ {
			out.add(all[t])
		}
		if _, failed := res[k].(error); !failed {
			for _, ch := range changesOf(idx[k], c, res[k]) {
				out.add(ch)
			}
			switch c := c.(type) {
			case *state.Events:
				r.sample(c, res[k])
			case *state.ForgetBatches:
				if f, ok := res[k].(*state.ForgetResult); ok {
					r.samples.ForgetBatches(f.Forgotten)
				}
			}
		}
		last = idx[k]
	}
	for ; t < len(all); t++ {
		out.add(all[t])
	}
	if len(out.out) > 0 || last > 0 {
		r.feed.Publish(max(last, r.feed.Index()), out.out)
	}
}

// restored: the state was replaced by a snapshot at index.
func (r *feedRecorder) restored(index uint64) {
	r.mu.Lock()
	r.pending.take()
	r.lastBatch = 0
	r.mu.Unlock()
	r.feed.Reset(index)
	r.samples.Reset()
}

// sample records the usage points of worker events: an attempt starts
// at nothing used, each usage sample and its completion add a point.
func (r *feedRecorder) sample(c *state.Events, res any) {
	took, _ := res.(*state.EventsResult)
	for i, e := range c.Events {
		if took == nil || !took.Took(i) {
			continue // ignored by apply: not the attempt's own worker, or stale
		}
		k := samples.Key{Batch: e.Batch, Job: e.Job, Attempt: e.Attempt}
		switch {
		case e.Started && e.Start != 0:
			r.samples.Add(k, samples.Point{Time: min(e.Start, c.Now)})
		case e.Usage != nil:
			if !e.Sample && e.Start != 0 {
				// A short attempt's start and end can come in one sync.
				r.samples.Add(k, samples.Point{Time: min(e.Start, c.Now)})
			}
			at := c.Now
			if !e.Sample && e.End != 0 {
				at = e.End
			}
			r.samples.Add(k, samples.Point{Time: at, CPUMillis: e.Usage.CPUMillis, Memory: e.Usage.Memory, PeakMemory: e.Usage.PeakMemory})
		}
	}
}

// changesOf is what an applied command changed beyond the job
// transitions the state reports: the batches and jobs it names (an
// attempt's usage, a cancellation's reason, a callback's result), and
// the queues, machines, clusters and workers it touches.
func changesOf(index uint64, c state.Command, res any) []changes.Change {
	var out []changes.Change
	batch := func(b uint64) {
		out = append(out, changes.Change{Index: index, Topic: changes.Batch, Batch: b})
	}
	job := func(b uint64, j uint32) {
		out = append(out, changes.Change{Index: index, Topic: changes.Job, Batch: b, Job: j})
	}
	other := func(topics ...changes.Topic) {
		for _, t := range topics {
			out = append(out, changes.Change{Index: index, Topic: t})
		}
	}
	switch c := c.(type) {
	case *state.CreateBatch:
		if u, ok := res.(*state.UpdateResult); ok {
			batch(u.Batch)
		}
	case *state.CreateUpdate:
		batch(c.Batch)
	case *state.AddJobs:
		batch(c.Batch)
	case *state.CommitUpdate:
		batch(c.Batch)
	case *state.CancelBatch:
		batch(c.Batch)
		other(changes.Queue, changes.Machine)
	case *state.RetryJobs:
		batch(c.Batch)
		other(changes.Queue)
	case *state.CallbackDone:
		batch(c.Batch)
	case *state.ExpireUpdates:
		for _, u := range c.Updates {
			batch(u.Batch)
		}
	case *state.ForgetBatches:
		if f, ok := res.(*state.ForgetResult); ok {
			for _, b := range f.Forgotten {
				batch(b)
			}
		}
	case *state.Plan:
		other(changes.Worker, changes.Queue)
	case *state.Events:
		// Only what apply took: a worker's event for an attempt not its
		// own is ignored there, and tells nothing here.
		r, _ := res.(*state.EventsResult)
		for i, e := range c.Events {
			if r == nil || r.Took(i) {
				job(e.Batch, e.Job)
				batch(e.Batch)
			}
		}
		other(changes.Worker)
	case *state.Preempt:
		for _, a := range c.Attempts {
			job(a.Batch, a.Job)
			batch(a.Batch)
		}
		other(changes.Queue)
	case *state.Scale, *state.LaunchDone, *state.MachineGone:
		other(changes.Machine)
	case *state.ApplyPlacement:
		other(changes.Cluster, changes.Queue, changes.Machine)
	case *state.SetCluster:
		out = append(out, changes.Change{Index: index, Topic: changes.Cluster, Name: c.Name})
		other(changes.Worker)
	case *state.SetQueue, *state.SetTeam:
		other(changes.Queue)
	case *state.Activate, *state.Retire, *state.ForgetInstances:
		other(changes.Worker, changes.Cluster)
	}
	return out
}
