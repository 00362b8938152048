package server

import (
	"strconv"
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
	feed    *changes.Feed
	samples *samples.Store // attempts' usage over time, from the same entries
	mu      sync.Mutex
	pending []changes.Change
}

func newFeedRecorder(index uint64) *feedRecorder {
	return &feedRecorder{feed: changes.New(changes.DefaultSize, index), samples: samples.New()}
}

// transition is the state's hook: a job moved, so did its batch's counts
// and what queues hold or wait for.
func (r *feedRecorder) transition(index, b uint64, j uint32, _, _ state.JobState) {
	r.mu.Lock()
	r.pending = append(r.pending,
		changes.Change{Index: index, Topic: changes.Job, Key: changes.JobKey(b, j), Batch: b},
		changes.Change{Index: index, Topic: changes.Batch, Key: batchKey(b), Batch: b},
		changes.Change{Index: index, Topic: changes.Queue, Key: "*"})
	r.mu.Unlock()
}

// applied publishes the changes of a group of applied entries.
func (r *feedRecorder) applied(idx []uint64, cmds []state.Command, res []any) {
	r.mu.Lock()
	all := r.pending
	r.pending = nil
	r.mu.Unlock()
	// Transitions came in index order as apply went; each command's own
	// changes go after its index's transitions.
	var out []changes.Change
	t := 0
	var last uint64
	for k, c := range cmds {
		for ; t < len(all) && all[t].Index <= idx[k]; t++ {
			out = append(out, all[t])
		}
		if _, failed := res[k].(error); !failed {
			out = append(out, changesOf(idx[k], c, res[k])...)
			if ev, ok := c.(*state.Events); ok {
				r.sample(ev)
			}
		}
		last = idx[k]
	}
	out = append(out, all[t:]...)
	if len(out) > 0 || last > 0 {
		r.feed.Publish(max(last, r.feed.Index()), out)
	}
}

// restored: the state was replaced by a snapshot at index.
func (r *feedRecorder) restored(index uint64) {
	r.mu.Lock()
	r.pending = nil
	r.mu.Unlock()
	r.feed.Reset(index)
	r.samples.Reset()
}

// sample records the usage points of worker events: an attempt starts
// at nothing used, each usage sample and its completion add a point.
func (r *feedRecorder) sample(c *state.Events) {
	for _, e := range c.Events {
		k := samples.Key{Batch: e.Batch, Job: e.Job, Attempt: e.Attempt}
		switch {
		case e.Started && e.Start != 0:
			r.samples.Add(k, samples.Point{Time: e.Start})
		case e.Usage != nil:
			if !e.Sample && e.Start != 0 {
				// A short attempt's start and end can come in one sync.
				r.samples.Add(k, samples.Point{Time: e.Start})
			}
			at := c.Now
			if !e.Sample && e.End != 0 {
				at = e.End
			}
			r.samples.Add(k, samples.Point{Time: at, CPUMillis: e.Usage.CPUMillis, Memory: e.Usage.Memory, PeakMemory: e.Usage.PeakMemory})
		}
	}
}

func batchKey(b uint64) string { return strconv.FormatUint(b, 10) }

// changesOf is what an applied command changed beyond the job
// transitions the state reports: the batches and jobs it names (an
// attempt's usage, a cancellation's reason, a callback's result), and
// the queues, machines, clusters and workers it touches.
func changesOf(index uint64, c state.Command, res any) []changes.Change {
	var out []changes.Change
	batch := func(b uint64) {
		out = append(out, changes.Change{Index: index, Topic: changes.Batch, Key: batchKey(b), Batch: b})
	}
	job := func(b uint64, j uint32) {
		out = append(out, changes.Change{Index: index, Topic: changes.Job, Key: changes.JobKey(b, j), Batch: b})
	}
	other := func(topics ...changes.Topic) {
		for _, t := range topics {
			out = append(out, changes.Change{Index: index, Topic: t, Key: "*"})
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
	case *state.CallbackDone:
		batch(c.Batch)
	case *state.ExpireUpdates:
		for _, u := range c.Updates {
			batch(u.Batch)
		}
	case *state.ForgetBatches:
		for _, b := range c.Batches {
			batch(b)
		}
	case *state.Plan:
		other(changes.Worker, changes.Queue)
	case *state.Events:
		for _, e := range c.Events {
			job(e.Batch, e.Job)
			batch(e.Batch)
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
		out = append(out, changes.Change{Index: index, Topic: changes.Cluster, Key: c.Name})
		other(changes.Worker)
	case *state.SetQueue, *state.SetTeam:
		other(changes.Queue)
	case *state.Activate, *state.Retire, *state.ForgetInstances:
		other(changes.Worker, changes.Cluster)
	}
	return out
}
