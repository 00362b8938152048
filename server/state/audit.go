package state

import (
	"slices"
	"time"
	"unicode/utf8"
)

// Audit log bounds: the state keeps the last MaxAuditEntries entries of
// known callers and, apart, the last MaxAnonymousAuditEntries of callers
// without a valid token (so that strangers cannot push the record of
// what users did out of the log); one command carries at most
// MaxAuditPerCommand, each field cut to MaxAuditField bytes.
const (
	MaxAuditEntries          = 20000
	MaxAnonymousAuditEntries = 2000
	MaxAuditPerCommand       = 512
	MaxAuditField            = 256
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
	// Count is how many requests the entry stands for: requests of
	// callers without a valid token are counted per address, route,
	// status and minute (0 or 1: one request).
	Count uint32
}

// Anonymous reports whether the entry is of a caller without a valid
// token.
func (e *AuditEntry) Anonymous() bool { return e.User == "" }

// Audit appends entries to the audit log.
type Audit struct {
	Entries []AuditEntry
}

// Type implements Command.
func (*Audit) Type() CommandType { return CmdAudit }

// TrimAudit cuts every field to the size the log keeps.
func TrimAudit(e AuditEntry) AuditEntry {
	for _, f := range []*string{&e.User, &e.Accessor, &e.Method, &e.Route, &e.Path, &e.Remote, &e.Message} {
		*f = cut(*f, MaxAuditField)
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

func (s *identityBook) applyAudit(c *Audit) any {
	entries := c.Entries
	if len(entries) > MaxAuditPerCommand {
		entries = entries[:MaxAuditPerCommand]
	}
	for _, e := range entries {
		if e.Anonymous() {
			s.anonAudit = append(s.anonAudit, TrimAudit(e))
		} else {
			s.audit = append(s.audit, TrimAudit(e))
		}
	}
	s.audit = keepLast(s.audit, MaxAuditEntries)
	s.anonAudit = keepLast(s.anonAudit, MaxAnonymousAuditEntries)
	return nil
}

// keepLast drops the oldest entries past n. It copies down rather than
// reslices, and clears the slots left at the end, so the dropped entries'
// memory is not held forever.
func keepLast(entries []AuditEntry, n int) []AuditEntry {
	if over := len(entries) - n; over > 0 {
		return slices.Delete(entries, 0, over)
	}
	return entries
}

// AuditLog returns entries at or after since (of one user, when user is
// set), newest first, at most limit.
func (s *identityBook) AuditLog(since time.Time, user string, limit int) []AuditEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []AuditEntry{}
	from := since.UnixNano()
	// Both logs are in time order: merge them from the newest.
	i, k := len(s.audit)-1, len(s.anonAudit)-1
	if user != "" {
		k = -1 // a user's entries are all in the first
	}
	for len(out) < limit {
		var e AuditEntry
		switch {
		case i >= 0 && (k < 0 || s.audit[i].Time >= s.anonAudit[k].Time):
			e = s.audit[i]
			i--
		case k >= 0:
			e = s.anonAudit[k]
			k--
		default:
			return out
		}
		if e.Time < from {
			return out // the merge runs newest first: the rest is older
		}
		if user != "" && e.User != user {
			continue
		}
		out = append(out, e)
	}
	return out
}

// AuditSize is the size of the audit log in a snapshot taken now.
func (s *identityBook) AuditSize() int64 {
	s.mu.RLock()
	audit, anon := slices.Clone(s.audit), slices.Clone(s.anonAudit)
	s.mu.RUnlock()
	return auditSize(audit, anon)
}
