package state

import (
	"math"
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
	return s.AuditPage(AuditQuery{Since: since, User: user, Limit: limit})
}

// AuditQuery asks for one page of the audit log.
type AuditQuery struct {
	// Since: entries at or after it; Before: older than it (zero: no
	// bound); After: newer than it (zero: no bound).
	Since, Before, After time.Time
	// User: of this user only ("": everyone's, anonymous counts too).
	User string
	// Limit bounds the page: the newest entries of the window, or with
	// After the oldest ones, those just after it, so that a page newer
	// than one read follows it without a gap.
	Limit int
}

// AuditPage returns a page of the audit log, newest first.
func (s *identityBook) AuditPage(q AuditQuery) []AuditEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []AuditEntry{}
	if q.Limit <= 0 {
		return out
	}
	skip := 0
	if !q.After.IsZero() {
		// The page is the oldest entries after it: count them first,
		// then skip the newer ones (the log is bounded, so is the walk).
		n := 0
		s.auditWalk(q, func(*AuditEntry) bool { n++; return true })
		skip = max(n-q.Limit, 0)
	}
	s.auditWalk(q, func(e *AuditEntry) bool {
		if skip > 0 {
			skip--
			return true
		}
		out = append(out, *e)
		return len(out) < q.Limit
	})
	return out
}

// auditWalk calls fn with the entries q's window and user take, newest
// first, until it returns false.
func (s *identityBook) auditWalk(q AuditQuery, fn func(*AuditEntry) bool) {
	from := q.Since.UnixNano()
	if !q.After.IsZero() {
		from = max(from, q.After.UnixNano()+1)
	}
	before := int64(math.MaxInt64)
	if !q.Before.IsZero() {
		before = q.Before.UnixNano()
	}
	// Both logs are in time order: merge them from the newest.
	i, k := len(s.audit)-1, len(s.anonAudit)-1
	if q.User != "" {
		k = -1 // a user's entries are all in the first
	}
	for {
		var e *AuditEntry
		switch {
		case i >= 0 && (k < 0 || s.audit[i].Time >= s.anonAudit[k].Time):
			e = &s.audit[i]
			i--
		case k >= 0:
			e = &s.anonAudit[k]
			k--
		default:
			return
		}
		if e.Time < from {
			return // the merge runs newest first: the rest is older
		}
		if e.Time >= before || q.User != "" && e.User != q.User {
			continue
		}
		if !fn(e) {
			return
		}
	}
}

// AuditSize is the size of the audit log in a snapshot taken now.
func (s *identityBook) AuditSize() int64 {
	s.mu.RLock()
	audit, anon := slices.Clone(s.audit), slices.Clone(s.anonAudit)
	s.mu.RUnlock()
	return auditSize(audit, anon)
}
