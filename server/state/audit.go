package state

import (
	"slices"
	"time"
	"unicode/utf8"

	"github.com/drover-sched/drover/api"
)

// Audit log bounds: the state keeps the last MaxAuditEntries entries; one
// command carries at most MaxAuditPerCommand, each field cut to
// maxAuditField bytes.
const (
	MaxAuditEntries    = 20000
	MaxAuditPerCommand = 512
	maxAuditField      = 256
)

// AuditEntry records one mutating API request: who (user and token
// accessor; "" for a caller without a valid token), what (method, route
// and path), when, from where, and the result (status and message).
type AuditEntry struct {
	Time     int64
	User     string
	Accessor string
	Method   string
	Route    string
	Path     string
	Remote   string
	Status   int
	Message  string
}

// Audit appends entries to the audit log.
type Audit struct {
	Entries []AuditEntry
}

// Type implements Command.
func (*Audit) Type() CommandType { return CmdAudit }

// TrimAudit cuts every field to the size the log keeps.
func TrimAudit(e AuditEntry) AuditEntry {
	for _, f := range []*string{&e.User, &e.Accessor, &e.Method, &e.Route, &e.Path, &e.Remote, &e.Message} {
		*f = cut(*f, maxAuditField)
	}
	return e
}

// cut shortens s to at most n bytes without splitting a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (s *State) applyAudit(c *Audit) any {
	entries := c.Entries
	if len(entries) > MaxAuditPerCommand {
		entries = entries[:MaxAuditPerCommand]
	}
	for _, e := range entries {
		s.audit = append(s.audit, TrimAudit(e))
	}
	if over := len(s.audit) - MaxAuditEntries; over > 0 {
		// Copy down rather than reslice, and clear the slots left at
		// the end, so the dropped entries' memory is not held forever.
		s.audit = slices.Delete(s.audit, 0, over)
	}
	return nil
}

// AuditLog returns entries at or after since (of one user, when user is
// set), newest first, at most limit.
func (s *State) AuditLog(since time.Time, user string, limit int) []api.AuditEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []api.AuditEntry{}
	from := since.UnixNano()
	for i := len(s.audit) - 1; i >= 0 && len(out) < limit; i-- {
		e := s.audit[i]
		if e.Time < from {
			break
		}
		if user != "" && e.User != user {
			continue
		}
		out = append(out, api.AuditEntry{Time: time.Unix(0, e.Time).UTC(), User: e.User, Token: e.Accessor, Method: e.Method,
			Route: e.Route, Path: e.Path, Remote: e.Remote, Status: e.Status, Message: e.Message})
	}
	return out
}
