// Package changes is the feed of what the state's applied entries
// changed: batches, jobs (and their attempts), queues, machines, clusters
// and workers, each change stamped with the Raft index of the entry that
// made it. Every server applies the same log, so every server's feed
// holds the same changes at the same indexes, and a reader that moves to
// another server resumes where it was, as Nomad's event stream does.
//
// The feed keeps the most recent changes in a ring of fixed size: a reader
// resuming from an index whose changes have left the ring (or from before
// this server started, or before a snapshot replaced its state) is told to
// reload what it shows rather than be given a partial list.
package changes

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Topic is what kind of thing changed.
type Topic string

// The topics.
const (
	// Batch: a batch's counts, state, cost or settings changed; its key
	// is the batch ID. Any change of one of its jobs is one of the batch.
	Batch Topic = "Batch"
	// Job: a job or one of its attempts changed; key "batch/job", or
	// "batch/*" when an entry changed more jobs of the batch than are
	// told one by one (a commit of a large update, a cancellation).
	Job Topic = "Job"
	// Queue: what queues hold or wait for, or their settings, changed;
	// key "*" (a use changes along the whole path of a queue).
	Queue Topic = "Queue"
	// Machine: the autoscaler's machines or decisions changed; key "*".
	Machine Topic = "Machine"
	// Cluster: a cluster's settings or availability changed; key: the
	// cluster, or "*".
	Cluster Topic = "Cluster"
	// Worker: a worker joined, left or changed; key "*".
	Worker Topic = "Worker"
)

// Topics are the topics, for checking what a reader asks for.
var Topics = []Topic{Batch, Job, Queue, Machine, Cluster, Worker}

// Change is one change. It holds numbers, not text, so the ring's
// changes allocate nothing (a feed's memory is its ring, whatever the
// cluster ran).
type Change struct {
	Index uint64
	Topic Topic
	// Batch is the batch a Batch or Job change belongs to (readers see
	// only the batches they may), 0 for the other topics.
	Batch uint64
	Job   uint32 // a Job change's job
	All   bool   // a Job change of every job of the batch
	// Name is a Cluster change's cluster ("": every cluster).
	Name string
}

// Key is the change's key as readers see it: the batch ID, "batch/job"
// ("batch/*": every job of the batch), the cluster, or "*".
func (c Change) Key() string {
	switch c.Topic {
	case Batch:
		return strconv.FormatUint(c.Batch, 10)
	case Job:
		if c.All {
			return strconv.FormatUint(c.Batch, 10) + "/*"
		}
		return JobKey(c.Batch, c.Job)
	}
	if c.Name == "" {
		return "*"
	}
	return c.Name
}

// JobKey is the key of a job's changes.
func JobKey(batch uint64, job uint32) string {
	return strconv.FormatUint(batch, 10) + "/" + strconv.FormatUint(uint64(job), 10)
}

// DefaultSize is how many changes a feed keeps: a Plan entry of a large
// batch changes thousands of jobs at one index.
const DefaultSize = 1 << 16

// Feed keeps the latest changes. Its methods are safe for concurrent use.
type Feed struct {
	mu    sync.Mutex
	ring  []Change
	start int // the oldest change's slot
	n     int // changes held
	// whole is the index after which the feed holds every change: a
	// reader at an index below it may have missed some.
	whole uint64
	last  uint64 // the last index published (or reset to)
	wake  chan struct{}
}

// New returns a feed holding up to size changes, complete after index
// (the state's index when the feed starts).
func New(size int, index uint64) *Feed {
	return &Feed{ring: make([]Change, max(size, 1)), whole: index, last: index, wake: make(chan struct{})}
}

// Publish adds the changes of the entries applied up to index (changes
// in index order, none above index). Repeats of a change at one index
// are kept once.
func (f *Feed) Publish(index uint64, cs []Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[Change]bool{}
	for _, c := range cs {
		if c.Index > index || f.n > 0 && c.Index < f.ring[f.slot(f.n-1)].Index {
			continue // out of order: never from apply
		}
		if seen[c] {
			continue
		}
		seen[c] = true
		if f.n == len(f.ring) {
			// The oldest leaves: readers before its index may miss it.
			f.whole = max(f.whole, f.ring[f.start].Index)
			f.start = (f.start + 1) % len(f.ring)
			f.n--
		}
		f.ring[f.slot(f.n)] = c
		f.n++
	}
	if index > f.last {
		f.last = index
	}
	close(f.wake)
	f.wake = make(chan struct{})
}

// Reset drops every change: the state was replaced (a snapshot was
// installed) at index, and what changed before it is not known.
func (f *Feed) Reset(index uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start, f.n = 0, 0
	f.whole, f.last = index, index
	close(f.wake)
	f.wake = make(chan struct{})
}

func (f *Feed) slot(i int) int { return (f.start + i) % len(f.ring) }

// Page is what Since returns.
type Page struct {
	// Changes after the index asked for, up to Index, that the filter
	// kept.
	Changes []Change
	// Index is where the next read resumes (the last index read).
	Index uint64
	// Reload: changes after the index asked for are no longer all held
	// (or the index is ahead of this server's state, which a reader
	// coming from a server further on can be); the reader reloads what
	// it shows and resumes from Index.
	Reload bool
}

// Since returns the changes after index that keep says to, up to limit
// of them (limit ≤ 0: no bound). A page cut by the limit ends at the
// last whole index it holds, so a reader never resumes halfway through
// an index. keep runs without the feed's lock held (it may read the
// state), on a copy of what the feed holds after index.
func (f *Feed) Since(index uint64, keep func(Change) bool, limit int) Page {
	f.mu.Lock()
	if index < f.whole || index > f.last {
		last := f.last
		f.mu.Unlock()
		return Page{Index: last, Reload: true}
	}
	// The held changes are in index order: find the first after index.
	lo, hi := 0, f.n
	for lo < hi {
		m := (lo + hi) / 2
		if f.ring[f.slot(m)].Index <= index {
			lo = m + 1
		} else {
			hi = m
		}
	}
	held := make([]Change, 0, f.n-lo)
	for k := lo; k < f.n; k++ {
		held = append(held, f.ring[f.slot(k)])
	}
	p := Page{Index: f.last}
	f.mu.Unlock()
	for _, c := range held {
		if limit > 0 && len(p.Changes) >= limit && c.Index != p.Changes[len(p.Changes)-1].Index {
			p.Index = p.Changes[len(p.Changes)-1].Index
			return p
		}
		if keep == nil || keep(c) {
			p.Changes = append(p.Changes, c)
		}
	}
	return p
}

// Wait returns a channel closed at the next Publish or Reset.
func (f *Feed) Wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wake
}

// Index is the last index published.
func (f *Feed) Index() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Filter is what a reader asks for: topics, each with keys ("*": every
// key; "12/*": every job of batch 12).
type Filter map[Topic][]string

// ParseFilter reads "Topic" or "Topic:key" terms.
func ParseFilter(terms []string) (Filter, error) {
	f := Filter{}
	for _, t := range terms {
		topic, key, ok := strings.Cut(t, ":")
		if !ok || key == "" {
			key = "*"
		}
		if !slices.Contains(Topics, Topic(topic)) {
			return nil, &FilterError{Term: t}
		}
		f[Topic(topic)] = append(f[Topic(topic)], key)
	}
	return f, nil
}

// FilterError is a term naming no topic.
type FilterError struct{ Term string }

func (e *FilterError) Error() string {
	var names []string
	for _, t := range Topics {
		names = append(names, string(t))
	}
	return "no topic " + strconv.Quote(e.Term) + ": a term is a topic (" + strings.Join(names, ", ") + "), or topic:key"
}

// Wants reports whether the filter keeps c (an empty filter keeps all).
func (f Filter) Wants(c Change) bool {
	if len(f) == 0 {
		return true
	}
	key := c.Key()
	for _, k := range f[c.Topic] {
		switch {
		case k == "*", k == key:
			return true
		case strings.HasSuffix(k, "/*") && strings.HasPrefix(key, k[:len(k)-1]):
			return true
		case strings.HasSuffix(key, "/*") && strings.HasPrefix(k, key[:len(key)-1]):
			// A change of every job of a batch is one of each.
			return true
		}
	}
	return false
}
