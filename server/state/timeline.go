package state

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// Timelines: the history the history store holds is the cluster's only
// while the two agree. Two things break that, and both are handled here.
//
// Restoring a snapshot discards what happened after it was taken, but the
// discarded timeline may have exported batches: under batch IDs the
// restored state would hand out again, and at versions of batches the
// restored state also holds. Fork rewrites a snapshot before it is
// restored: a new timeline (every export names the timeline it came from,
// and a store's row from another timeline is discarded and written again,
// unless it is the very version an ancestor exported), batch IDs resumed
// past every ID used so far (the range skipped is hidden from reads), and
// every batch's "exported" mark cleared, so each is checked against the
// store before it may leave memory.
//
// Pointing the servers at another history store (a new or a restored
// database) leaves marks that name batches the store never saw: the
// exporter adopts each store it meets by identity (AdoptStore), and a
// store other than the one the marks were made against clears them too.

// MaxForks bounds the restores one state remembers.
const MaxForks = 1000

// Fork records one restore: the snapshot was taken in Timeline, when
// batch IDs below Below were handed out; the restored cluster went on
// from Resume, so IDs Below to Resume-1 were the discarded timeline's.
type Fork struct {
	Timeline uint64
	Below    uint64
	Resume   uint64
	At       int64
}

// ForkInfo is what Fork did.
type ForkInfo struct {
	Fork
	// NewTimeline is the restored cluster's timeline.
	NewTimeline uint64
	// Unmarked counts the complete batches whose export is checked again.
	Unmarked int
}

// ForkSnapshot reads a snapshot (as WriteTo wrote it), starts timeline
// from it with batch IDs resuming at resume or later (the highest the
// discarded timeline and the history store used, plus one), and writes
// the result to w, for a restore.
func ForkSnapshot(r io.Reader, w io.Writer, timeline, resume uint64, now int64) (ForkInfo, error) {
	if timeline == 0 {
		return ForkInfo{}, fmt.Errorf("fork: timeline 0 is the first timeline's")
	}
	st := New()
	if err := st.Restore(r); err != nil {
		return ForkInfo{}, err
	}
	if len(st.forks) >= MaxForks {
		return ForkInfo{}, fmt.Errorf("the snapshot's state was restored %d times already, the most remembered", len(st.forks))
	}
	if st.timeline == timeline || slices.ContainsFunc(st.forks, func(f Fork) bool { return f.Timeline == timeline }) {
		return ForkInfo{}, fmt.Errorf("fork: timeline %d is in the snapshot's lineage already", timeline)
	}
	f := Fork{Timeline: st.timeline, Below: st.nextBatch, Resume: max(st.nextBatch, resume), At: now}
	info := ForkInfo{Fork: f, NewTimeline: timeline}
	st.forks = append(st.forks, f)
	st.timeline = timeline
	st.nextBatch = f.Resume
	for _, b := range st.batches {
		if b.exported != 0 {
			b.exported = 0
			info.Unmarked++
		}
	}
	if _, err := st.Snapshot().WriteTo(w); err != nil {
		return ForkInfo{}, err
	}
	return info, nil
}

// AdoptStore names the history store the exporter reaches. A store other
// than the one the export marks were made against clears them (each
// batch in memory is checked against the new store, and written to it
// if it is not there, before it may leave memory); batch IDs resume past
// Floor, the store's highest.
type AdoptStore struct {
	Now   int64
	Store string
	Floor uint64
	// Recheck clears the marks though the store is the same one (it was
	// restored from a backup older than some of them).
	Recheck bool
}

// Type implements Command.
func (*AdoptStore) Type() CommandType { return CmdAdoptStore }

// AdoptResult counts the marks cleared.
type AdoptResult struct{ Unmarked int }

// MaxStoreIdentityBytes bounds a store's identity.
const MaxStoreIdentityBytes = 255

func (s *batchBook) applyAdoptStore(c *AdoptStore) any {
	if c.Store == "" || len(c.Store) > MaxStoreIdentityBytes {
		return errorf(ErrInvalid, "a history store's identity is 1 to %d bytes", MaxStoreIdentityBytes)
	}
	res := &AdoptResult{}
	if c.Store != s.historyStore || c.Recheck {
		for _, b := range s.batches {
			if b.exported != 0 {
				b.exported = 0
				res.Unmarked++
			}
		}
		s.historyStore = c.Store
	}
	if c.Floor < 1<<62 { // a store's highest ID, bounded so nextBatch never wraps
		s.nextBatch = max(s.nextBatch, c.Floor+1)
	}
	return res
}

// Lineage is the state's place in history: its timeline, and the
// restores that led to it (oldest first).
type Lineage struct {
	Timeline uint64
	Forks    []Fork
	// Store is the history store the export marks were made against
	// ("": none yet).
	Store string
}

// Lineage returns the state's lineage.
func (s *memberBook) Lineage() Lineage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Lineage{Timeline: s.timeline, Forks: slices.Clone(s.forks), Store: s.historyStore}
}

// Ancestor reports whether timeline is one this state's history went
// through before a restore.
func (l *Lineage) Ancestor(timeline uint64) bool {
	return slices.ContainsFunc(l.Forks, func(f Fork) bool { return f.Timeline == timeline })
}

// Discarded reports whether batch ID id was handed out by a timeline a
// restore discarded (the history store's rows under it are not this
// cluster's history).
func (l *Lineage) Discarded(id uint64) bool {
	return slices.ContainsFunc(l.Forks, func(f Fork) bool { return id >= f.Below && id < f.Resume })
}

// NewTimeline names a new history (at bootstrap, and at each restore):
// random, not zero, and exact in a JSON number.
func NewTimeline() uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		if t := binary.BigEndian.Uint64(b[:]) & (1<<53 - 1); t != 0 {
			return t
		}
	}
}

// NextBatchID is the ID the next batch gets.
func (s *batchBook) NextBatchID() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nextBatch
}
