package server

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter lets hashicorp libraries (raft) log through slog.
type hclogAdapter struct {
	l     *slog.Logger
	name  string
	level hclog.Level
	args  []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func newHclog(l *slog.Logger, name string, level hclog.Level) hclog.Logger {
	return &hclogAdapter{l: l.With("component", name), name: name, level: level}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...interface{}) {
	if level < h.level {
		return
	}
	for i, a := range args {
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if s, ok := f[0].(string); ok {
				args[i] = fmt.Sprintf(s, f[1:]...)
			}
		}
	}
	h.l.Log(context.Background(), slogLevel(level), msg, args...)
}

func (h *hclogAdapter) Trace(msg string, args ...interface{}) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...interface{}) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...interface{})  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...interface{})  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...interface{}) { h.Log(hclog.Error, msg, args...) }
func (h *hclogAdapter) IsTrace() bool                         { return h.level <= hclog.Trace }
func (h *hclogAdapter) IsDebug() bool                         { return h.level <= hclog.Debug }
func (h *hclogAdapter) IsInfo() bool                          { return h.level <= hclog.Info }
func (h *hclogAdapter) IsWarn() bool                          { return h.level <= hclog.Warn }
func (h *hclogAdapter) IsError() bool                         { return h.level <= hclog.Error }
func (h *hclogAdapter) ImpliedArgs() []interface{}            { return h.args }
func (h *hclogAdapter) Name() string                          { return h.name }
func (h *hclogAdapter) SetLevel(l hclog.Level)                { h.level = l }
func (h *hclogAdapter) GetLevel() hclog.Level                 { return h.level }

func (h *hclogAdapter) With(args ...interface{}) hclog.Logger {
	return &hclogAdapter{l: h.l.With(args...), name: h.name, level: h.level, args: append(append([]any(nil), h.args...), args...)}
}

func (h *hclogAdapter) Named(name string) hclog.Logger {
	return &hclogAdapter{l: h.l.With("sub", name), name: h.name + "." + name, level: h.level, args: h.args}
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: h.l, name: name, level: h.level, args: h.args}
}

func (h *hclogAdapter) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.l.Handler(), slogLevel(h.level))
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return h.StandardLogger(nil).Writer()
}
