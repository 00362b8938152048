package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// logCache keeps the most recent Raft log entries in memory in front of
// the log store, as raft.LogCache does: a follower applies each entry
// right after storing it, and the leader replicates what it has just
// stored, and both would otherwise read it back from BoltDB. Unlike
// raft.LogCache, entries go once they are older than maxAge, so a cluster
// that falls quiet after a busy run does not keep its last (large) plans
// and worker events in memory.
type logCache struct {
	store  raft.LogStore
	maxAge time.Duration
	now    func() time.Time

	mu     sync.RWMutex
	cache  []*raft.Log
	stored []time.Time // when each slot was filled
}

func newLogCache(capacity int, maxAge time.Duration, store raft.LogStore) (*logCache, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("log cache capacity %d: it must be positive", capacity)
	}
	return &logCache{store: store, maxAge: maxAge, now: time.Now,
		cache: make([]*raft.Log, capacity), stored: make([]time.Time, capacity)}, nil
}

// IsMonotonic implements raft.MonotonicLogStore when the store does.
func (c *logCache) IsMonotonic() bool {
	if s, ok := c.store.(raft.MonotonicLogStore); ok {
		return s.IsMonotonic()
	}
	return false
}

// GetLog implements raft.LogStore.
func (c *logCache) GetLog(idx uint64, log *raft.Log) error {
	c.mu.RLock()
	cached := c.cache[idx%uint64(len(c.cache))]
	c.mu.RUnlock()
	if cached != nil && cached.Index == idx {
		*log = *cached
		return nil
	}
	return c.store.GetLog(idx, log)
}

// StoreLog implements raft.LogStore.
func (c *logCache) StoreLog(log *raft.Log) error { return c.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore.
func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return fmt.Errorf("store raft logs: %w", err)
	}
	now := c.now()
	c.mu.Lock()
	for _, l := range logs {
		i := l.Index % uint64(len(c.cache))
		c.cache[i], c.stored[i] = l, now
	}
	c.mu.Unlock()
	return nil
}

// FirstIndex implements raft.LogStore.
func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }

// LastIndex implements raft.LogStore.
func (c *logCache) LastIndex() (uint64, error) { return c.store.LastIndex() }

// DeleteRange implements raft.LogStore.
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	clear(c.cache)
	c.mu.Unlock()
	return c.store.DeleteRange(min, max)
}

// expire drops the entries stored more than maxAge ago; it returns how
// many it dropped.
func (c *logCache) expire() int {
	cut := c.now().Add(-c.maxAge)
	n := 0
	c.mu.Lock()
	for i, l := range c.cache {
		if l != nil && c.stored[i].Before(cut) {
			c.cache[i] = nil
			n++
		}
	}
	c.mu.Unlock()
	return n
}
