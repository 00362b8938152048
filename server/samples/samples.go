// Package samples keeps each recent attempt's usage over time: the CPU
// time and memory its worker reported at each usage sample, from the
// worker events the log applies. Every server applies the same log, so
// every server holds the same series, in memory only: a server that
// restarts has the samples from then on (an attempt's totals stay in the
// state). Bounded: at most MaxPoints a series (a longer attempt keeps
// every other point, so its whole run stays drawn at a coarser step) and
// MaxAttempts series (the attempts sampled longest ago go first).
package samples

import (
	"sync"
)

// Bounds.
const (
	MaxPoints   = 64
	MaxAttempts = 20_000
)

// Key names an attempt.
type Key struct {
	Batch   uint64
	Job     uint32
	Attempt uint16
}

// Point is one sample: when, the CPU time used so far, the memory
// charged then and the peak so far.
type Point struct {
	Time       int64 // unix ns
	CPUMillis  int64
	Memory     int64
	PeakMemory int64
}

// Store holds the series. Its methods are safe for concurrent use.
type Store struct {
	mu     sync.Mutex
	series map[Key]*series
	order  []Key // by first sample, for eviction (with holes: gone keys)
	head   int
}

type series struct {
	points []Point
	step   int // points kept are every step-th reported (1, 2, 4...)
	skip   int // reports to skip before the next kept one
}

// New returns an empty store.
func New() *Store { return &Store{series: map[Key]*series{}} }

// Add records a point of an attempt's series. Points come in log order;
// one older than the last kept is dropped.
func (s *Store) Add(k Key, p Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.series[k]
	if sr == nil {
		for len(s.series) >= MaxAttempts {
			s.evictLocked()
		}
		sr = &series{step: 1}
		s.series[k] = sr
		s.order = append(s.order, k)
	}
	if n := len(sr.points); n > 0 && p.Time < sr.points[n-1].Time {
		return
	}
	if sr.skip > 0 {
		sr.skip--
		// The latest point stays the last one, so the series ends now.
		sr.points[len(sr.points)-1] = p
		return
	}
	if len(sr.points) == MaxPoints {
		// Thin: keep every other point, and from now on every other
		// report. The first and the last stay.
		kept := sr.points[:0]
		for i, q := range sr.points {
			if i%2 == 0 || i == len(sr.points)-1 {
				kept = append(kept, q)
			}
		}
		sr.points = kept
		sr.step *= 2
	}
	sr.points = append(sr.points, p)
	sr.skip = sr.step - 1
}

func (s *Store) evictLocked() {
	for s.head < len(s.order) {
		k := s.order[s.head]
		s.head++
		if _, ok := s.series[k]; ok {
			delete(s.series, k)
			break
		}
	}
	if s.head > len(s.order)/2 {
		s.order = append([]Key(nil), s.order[s.head:]...)
		s.head = 0
	}
}

// Series returns a copy of an attempt's points (nil: none kept).
func (s *Store) Series(k Key) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.series[k]
	if sr == nil {
		return nil
	}
	return append([]Point(nil), sr.points...)
}

// ForgetBatches drops the series of the batches' attempts (the batches
// left the state: their jobs are read from the history store, and their
// usage over time is not kept).
func (s *Store) ForgetBatches(batches []uint64) {
	if len(batches) == 0 {
		return
	}
	gone := make(map[uint64]bool, len(batches))
	for _, b := range batches {
		gone[b] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.series {
		if gone[k.Batch] {
			delete(s.series, k)
		}
	}
	// A map keeps the room it grew to: copy what is left into one of its
	// size (the store's memory follows the attempts it holds, not the
	// most it ever held).
	// (maps.Clone keeps the room too).
	fresh := make(map[Key]*series, len(s.series))
	for k, v := range s.series {
		fresh[k] = v
	}
	s.series = fresh
	kept := make([]Key, 0, len(s.series))
	for _, k := range s.order[s.head:] {
		if _, ok := s.series[k]; ok {
			kept = append(kept, k)
		}
	}
	s.order, s.head = kept, 0
}

// Len is how many attempts have a series.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.series)
}

// Reset drops every series (the state was replaced by a snapshot: the
// attempts may be others).
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.series = map[Key]*series{}
	s.order, s.head = nil, 0
}
