// Package testlog sends a component's structured logs to a test's log, so
// they show only when the test fails (or with -v).
package testlog

import (
	"log/slog"
	"strings"
	"testing"
)

type writer struct{ t testing.TB }

func (w writer) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// New returns a logger that writes warnings and errors to t's log.
func New(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(writer{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
