// Package testlog sends a component's structured logs to a test's log, so
// they show only when the test fails (or with -v).
package testlog

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type writer struct{ t testing.TB }

func (w writer) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Writer returns a writer whose lines go to t's log, for a logger a test
// also reads (io.MultiWriter).
func Writer(t testing.TB) io.Writer { return writer{t} }

// New returns a logger that writes warnings and errors to t's log.
func New(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(writer{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Buffer collects log lines a test reads while the code under test
// writes them.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; any goroutine may call it.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
