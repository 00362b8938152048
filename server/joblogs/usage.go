package joblogs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"gocloud.dev/blob"
)

// usage counts the bytes of log this store holds per batch and per billing
// project, so that the server can hold each to a quota without listing the
// store for every chunk. The batches' bytes are exact: listed once when the
// store opens, then kept up as chunks are stored. Which project a batch
// listed at open belongs to is not in the store: the server tells it
// (Attribute) once it can read its state.
type usage struct {
	mu        sync.Mutex
	batches   map[uint64]int64
	projectOf map[uint64]string // of the batches whose project is known
	projects  map[string]int64  // the bytes of the batches whose project is known
	unknown   int               // batches whose project is not known yet
}

func (u *usage) init() {
	if u.batches == nil {
		u.batches, u.projectOf, u.projects = map[uint64]int64{}, map[uint64]string{}, map[string]int64{}
	}
}

// add counts delta bytes more for batch, of project ("": not known).
func (u *usage) add(batch uint64, project string, delta int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.addLocked(batch, project, delta)
}

// addLocked is add with u.mu held.
func (u *usage) addLocked(batch uint64, project string, delta int64) {
	u.init()
	_, seen := u.batches[batch]
	u.batches[batch] += delta
	if p, known := u.projectOf[batch]; known {
		u.projects[p] += delta
		return
	}
	if project == "" {
		if !seen {
			u.unknown++
		}
		return
	}
	if seen {
		u.unknown--
	}
	u.projectOf[batch] = project
	u.projects[project] += u.batches[batch]
}

// countHeld lists the store once and counts what each batch holds.
func (l *Store) countHeld(ctx context.Context) error {
	it := l.bucket.List(&blob.ListOptions{})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("count the logs held: %w", err)
		}
		// Chunks only (batch/job/attempt/seq), as Reserve counts them.
		parts := strings.Split(obj.Key, "/")
		if obj.IsDir || len(parts) != 4 {
			continue
		}
		batch, err := strconv.ParseUint(parts[0], 10, 64)
		if _, serr := strconv.Atoi(parts[3]); err != nil || serr != nil {
			continue
		}
		l.used.add(batch, "", obj.Size)
	}
}

// Held returns the bytes of log this store holds of a batch and of a
// billing project. projectKnown is false while batches the store listed
// at open are not attributed to their projects yet (Attribute): the
// project's figure may then be short.
func (l *Store) Held(batch uint64, project string) (batchBytes, projectBytes int64, projectKnown bool) {
	l.used.mu.Lock()
	defer l.used.mu.Unlock()
	return l.used.batches[batch], l.used.projects[project], l.used.unknown == 0
}

// Reserve counts bytes of log for a batch of project before they are
// written, so that uploads arriving together cannot each take the same
// room under a quota. fit, called under the store's lock with what the
// batch and the project hold now (projectKnown as Held), returns how many
// bytes to count (a retried chunk's growth over the one it replaces may
// be negative). Reserve returns that count; the caller gives it back
// with Release if the write fails.
func (l *Store) Reserve(batch uint64, project string, fit func(batchHeld, projectHeld int64, projectKnown bool) int64) int64 {
	l.used.mu.Lock()
	defer l.used.mu.Unlock()
	n := fit(l.used.batches[batch], l.used.projects[project], l.used.unknown == 0)
	l.used.addLocked(batch, project, n)
	return n
}

// Release uncounts n bytes Reserve counted and that were not written.
func (l *Store) Release(batch uint64, project string, n int64) {
	l.used.add(batch, project, -n)
}

// Attribute tells the store the projects of the batches it listed at open:
// projectOf returns a batch's billing project ("": not known, such as a
// batch no longer kept anywhere; its bytes then count for no project).
func (l *Store) Attribute(projectOf func(batch uint64) string) {
	l.used.mu.Lock()
	var todo []uint64
	for b := range l.used.batches {
		if _, known := l.used.projectOf[b]; !known {
			todo = append(todo, b)
		}
	}
	l.used.mu.Unlock()
	for _, b := range todo {
		p := projectOf(b)
		l.used.mu.Lock()
		if _, known := l.used.projectOf[b]; !known {
			l.used.unknown--
			l.used.projectOf[b] = p
			l.used.projects[p] += l.used.batches[b]
		}
		l.used.mu.Unlock()
	}
}
