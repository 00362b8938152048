package images

import (
	"context"
	"sync"
)

// flights runs one function per key at a time; callers asking for a key
// already in flight wait for that run and share its error. Unlike
// singleflight, the run has a context of its own, canceled only when every
// caller waiting for it has given up: one canceled job must not fail the
// pull that twenty others are waiting for.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	done    chan struct{}
	err     error // set before done is closed
	waiters int
	cancel  context.CancelFunc
}

// do runs fn for key, or joins the run in flight, and returns its error,
// or ctx's if ctx ends first.
func (g *flights) do(ctx context.Context, key string, fn func(context.Context) error) error {
	g.mu.Lock()
	f := g.m[key]
	if f == nil {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		if g.m == nil {
			g.m = map[string]*flight{}
		}
		g.m[key] = f
		go func() {
			err := fn(fctx)
			cancel()
			g.mu.Lock()
			f.err = err
			if g.m[key] == f {
				delete(g.m, key)
			}
			g.mu.Unlock()
			close(f.done)
		}()
	}
	f.waiters++
	g.mu.Unlock()

	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		g.mu.Lock()
		if f.waiters--; f.waiters == 0 {
			f.cancel()
			// A caller arriving now starts afresh instead of joining a
			// canceled run.
			if g.m[key] == f {
				delete(g.m, key)
			}
		}
		g.mu.Unlock()
		return ctx.Err()
	}
}
