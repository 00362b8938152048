package server

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// The Raft log file is rewritten once the server has stored nothing for
// RaftLogRewriteQuiet, when at least boltLogRewriteAfter bytes of entries
// were stored since the file was last opened or that much of it is free
// pages (the log entries that a snapshot let go); it looks every
// RaftLogRewriteCheck.
const (
	RaftLogRewriteQuiet = 10 * time.Second
	RaftLogRewriteCheck = 2 * time.Second
	boltLogRewriteAfter = 32 << 20
)

// boltLogRemapAfter is how many bytes of entries are stored before the
// file is opened again, uncopied, to let go of its memory map. BoltDB
// reads its pages through the map, and appending an entry rewrites the
// last leaf, the previous (large) entry in it: so every entry's pages are
// touched through the map once and count in the server's resident set,
// 60 MB in the middle of a million-job run (of a 715 MB peak, issue 26).
// Opened afresh the map holds no touched page; the file's pages stay in
// the kernel's page cache, which the kernel may reclaim. Reopening takes
// a few milliseconds, every 16 MB written.
const boltLogRemapAfter = 16 << 20

// boltLog is the Raft log and stable store: a BoltDB file (raft-boltdb)
// that is rewritten, compacted, once the server falls quiet after a busy
// run.
//
// BoltDB keeps bookkeeping in the heap for the pages of its file, and its
// maps never shrink: one entry for each page written since the file was
// opened and still in use, one for each free page, and the page IDs the
// last write freed. After a run of a million jobs the trailing Raft log is
// a hundred MB of pages, and that bookkeeping stays (1.5 MB, a sixth of an
// idle server's heap) long after every batch has left memory. A compacted
// copy opened afresh has no free pages and has written none.
//
// Every call holds the read lock; the rewrite holds the write lock, so
// Raft waits for it (about a second for a hundred MB of log), which
// happens only after a quiet spell.
type boltLog struct {
	path string
	log  *slog.Logger
	now  func() time.Time

	mu     sync.RWMutex
	store  *raftboltdb.BoltStore
	broken error // why store is nil: a rewrite could not open the file again

	lastWrite atomic.Int64 // unix nanoseconds
	written   atomic.Int64 // entry bytes stored since the file was last rewritten
	mapped    atomic.Int64 // entry bytes stored since the file was last opened
	rewrites  atomic.Int64
	remaps    atomic.Int64
}

// openBoltLog opens (or creates) the log store at path. A rewrite that a
// crash cut short leaves path intact and a temporary copy beside it,
// which is removed.
func openBoltLog(path string, log *slog.Logger) (*boltLog, error) {
	if err := os.Remove(path + ".compact"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove an unfinished rewrite of the raft log: %w", err)
	}
	l := &boltLog{path: path, log: log, now: time.Now}
	store, err := l.open()
	if err != nil {
		return nil, err
	}
	l.store = store
	return l, nil
}

func (l *boltLog) open() (*raftboltdb.BoltStore, error) {
	// The map freelist keeps free pages as spans; the array freelist
	// would keep one slot per free page.
	store, err := raftboltdb.New(raftboltdb.Options{Path: l.path,
		BoltOptions: &bbolt.Options{FreelistType: bbolt.FreelistMapType}})
	if err != nil {
		return nil, fmt.Errorf("open raft log %s: %w", l.path, err)
	}
	return store, nil
}

// due reports whether at least minBytes of entries were stored since the
// file was opened, or that much of it is free.
func (l *boltLog) due(minBytes int64) bool {
	return l.written.Load() >= minBytes || l.freeBytes() >= minBytes
}

// RewriteDue reports whether the file is to be rewritten once quiet.
func (l *boltLog) RewriteDue() bool { return l.due(boltLogRewriteAfter) }

// Rewrites counts the rewrites since the file was first opened.
func (l *boltLog) Rewrites() int64 { return l.rewrites.Load() }

// freeBytes is how much of the file is free pages, freed or about to be.
func (l *boltLog) freeBytes() (n int64) {
	_ = l.use(func(s *raftboltdb.BoltStore) error {
		st := s.Stats()
		n = int64(st.FreePageN+st.PendingPageN) * int64(os.Getpagesize())
		return nil
	})
	return n
}

func (l *boltLog) wrote(n int) {
	l.lastWrite.Store(l.now().UnixNano())
	l.written.Add(int64(n))
	l.mapped.Add(int64(n))
}

// Remaps counts the times the file was opened again to drop its map.
func (l *boltLog) Remaps() int64 { return l.remaps.Load() }

// remapIfDue opens the file again once remapAfter bytes of entries were
// stored since it was opened (see boltLogRemapAfter).
func (l *boltLog) remapIfDue(remapAfter int64) error {
	if l.mapped.Load() < remapAfter {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil || l.mapped.Load() < remapAfter {
		return nil
	}
	err := l.store.Close()
	l.store = nil
	if err != nil {
		err = fmt.Errorf("close raft log %s to map it afresh: %w", l.path, err)
	}
	store, oerr := l.open()
	if oerr != nil {
		l.broken = oerr
		return errors.Join(err, oerr)
	}
	l.store = store
	l.mapped.Store(0)
	l.remaps.Add(1)
	return err
}

// use calls fn with the store, under the read lock.
func (l *boltLog) use(fn func(s *raftboltdb.BoltStore) error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.store == nil {
		return fmt.Errorf("raft log %s is closed: %w", l.path, l.broken)
	}
	return fn(l.store)
}

// FirstIndex implements raft.LogStore.
func (l *boltLog) FirstIndex() (idx uint64, err error) {
	err = l.use(func(s *raftboltdb.BoltStore) error { idx, err = s.FirstIndex(); return err })
	return idx, err
}

// LastIndex implements raft.LogStore.
func (l *boltLog) LastIndex() (idx uint64, err error) {
	err = l.use(func(s *raftboltdb.BoltStore) error { idx, err = s.LastIndex(); return err })
	return idx, err
}

// GetLog implements raft.LogStore.
func (l *boltLog) GetLog(idx uint64, log *raft.Log) error {
	return l.use(func(s *raftboltdb.BoltStore) error { return s.GetLog(idx, log) })
}

// StoreLog implements raft.LogStore.
func (l *boltLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore.
func (l *boltLog) StoreLogs(logs []*raft.Log) error {
	err := l.use(func(s *raftboltdb.BoltStore) error {
		n := 0
		for _, e := range logs {
			n += len(e.Data) + len(e.Extensions)
		}
		l.wrote(n)
		return s.StoreLogs(logs)
	})
	if err != nil {
		return err
	}
	// The entries are stored: a failure to open the file again is the
	// next call's (the store is closed then, and says why).
	if err := l.remapIfDue(boltLogRemapAfter); err != nil {
		l.log.Error("map the raft log afresh", "path", l.path, "err", err)
	}
	return nil
}

// DeleteRange implements raft.LogStore.
func (l *boltLog) DeleteRange(min, max uint64) error {
	return l.use(func(s *raftboltdb.BoltStore) error { l.wrote(0); return s.DeleteRange(min, max) })
}

// Set implements raft.StableStore.
func (l *boltLog) Set(k, v []byte) error {
	return l.use(func(s *raftboltdb.BoltStore) error { l.wrote(0); return s.Set(k, v) })
}

// Get implements raft.StableStore.
func (l *boltLog) Get(k []byte) (v []byte, err error) {
	err = l.use(func(s *raftboltdb.BoltStore) error { v, err = s.Get(k); return err })
	return v, err
}

// SetUint64 implements raft.StableStore.
func (l *boltLog) SetUint64(k []byte, v uint64) error {
	return l.use(func(s *raftboltdb.BoltStore) error { l.wrote(0); return s.SetUint64(k, v) })
}

// GetUint64 implements raft.StableStore.
func (l *boltLog) GetUint64(k []byte) (v uint64, err error) {
	err = l.use(func(s *raftboltdb.BoltStore) error { v, err = s.GetUint64(k); return err })
	return v, err
}

// Close closes the file.
func (l *boltLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil {
		return nil
	}
	err := l.store.Close()
	l.store, l.broken = nil, errors.New("closed")
	return err
}

// rewriteIfQuiet rewrites the file when nothing was stored for quiet and
// at least minBytes of entries were stored since it was opened, or that
// much of it is free. It reports whether it did.
func (l *boltLog) rewriteIfQuiet(quiet time.Duration, minBytes int64) (bool, error) {
	if l.now().Sub(time.Unix(0, l.lastWrite.Load())) < quiet || !l.due(minBytes) {
		return false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.store == nil || l.now().Sub(time.Unix(0, l.lastWrite.Load())) < quiet {
		return false, nil
	}
	start := l.now()
	before, err := fileSize(l.path)
	if err != nil {
		return false, err
	}
	// A store that would not close cleanly is not used again either: it
	// is opened afresh, uncopied.
	rerr := l.store.Close()
	l.store = nil
	if rerr != nil {
		rerr = fmt.Errorf("close raft log %s to rewrite it: %w", l.path, rerr)
	} else {
		rerr = compactBolt(l.path)
	}
	// Whether or not the copy replaced it, the file at path is whole.
	store, err := l.open()
	if err != nil {
		l.broken = err
		return false, errors.Join(rerr, err)
	}
	l.store = store
	l.mapped.Store(0)
	// After a failed copy too: the next try waits for as much again.
	l.written.Store(0)
	if rerr != nil {
		return false, rerr
	}
	l.rewrites.Add(1)
	after, _ := fileSize(l.path)
	l.log.Info("rewrote the raft log after a quiet spell", "path", l.path, "bytes_before", before, "bytes_after", after, "took", l.now().Sub(start))
	return true, nil
}

// rewriteWhenQuiet is what the server runs every RaftLogRewriteCheck.
func (l *boltLog) rewriteWhenQuiet() {
	if _, err := l.rewriteIfQuiet(RaftLogRewriteQuiet, boltLogRewriteAfter); err != nil {
		l.log.Error("rewrite the raft log", "path", l.path, "err", err)
	}
}

// compactBolt replaces the closed BoltDB file at path with a compacted
// copy: written beside it, synced, renamed over it, the directory synced.
// On an error path is left as it was.
func compactBolt(path string) (err error) {
	tmp := path + ".compact"
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	src, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("open raft log %s to rewrite it: %w", path, err)
	}
	defer src.Close()
	dst, err := bbolt.Open(tmp, 0o600, &bbolt.Options{NoSync: true, FreelistType: bbolt.FreelistMapType, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if err := bbolt.Compact(dst, src, 16<<20); err != nil {
		dst.Close()
		return fmt.Errorf("copy raft log %s: %w", path, err)
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace raft log %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
