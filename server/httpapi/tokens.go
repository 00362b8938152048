package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/state"
)

// MaxTokenTTL bounds how long a token may be valid.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// tokenExpiry turns a requested TTL into an expiry: "" is the default
// TTL, "0" never (admins only). A token never outlives the one the request
// came with (state.CheckTokenLifetime): the default TTL is cut to it, and
// a longer TTL asked for is refused.
func (s *identityHandlers) tokenExpiry(r *http.Request, raw string, now time.Time) (int64, error) {
	ttl := s.cfg.DefaultTokenTTL
	if raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			return 0, codedf(http.StatusBadRequest, "ttl %q is not a duration such as 720h (0: never expires)", raw)
		}
		ttl = d
	}
	var expires int64
	switch {
	case ttl == 0 && !userOf(r).Admin:
		return 0, coded(http.StatusForbidden, "only an admin may make a token that never expires (ttl 0)")
	case ttl == 0:
	case ttl < time.Minute || ttl > MaxTokenTTL:
		return 0, codedf(http.StatusBadRequest, "ttl %s is out of range: 1m to %s (0: never, admins only)", ttl, MaxTokenTTL)
	default:
		expires = now.Add(ttl).UnixNano()
	}
	parent := tokenOf(r)
	if raw == "" {
		return capExpiry(expires, parent.Expires), nil
	}
	if err := state.CheckTokenLifetime(parent, expires); err != nil {
		return 0, codedErr(http.StatusForbidden, err)
	}
	return expires, nil
}

// capExpiry is the earlier of two expiries (0: never).
func capExpiry(expires, limit int64) int64 {
	if limit != 0 && (expires == 0 || expires > limit) {
		return limit
	}
	return expires
}

func (s *identityHandlers) handleCreateToken(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CreateTokenRequest
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "a token request is small"); err != nil {
		return nil, err
	}
	u := userOf(r)
	owner := req.User
	if owner == "" {
		owner = u.Name
	}
	if owner != u.Name && !u.Admin {
		return nil, codedf(http.StatusForbidden, "user %q may make tokens only for itself; an admin can make one for %q", u.Name, owner)
	}
	if req.Name == "" {
		req.Name = "token"
	}
	if !state.ValidName(req.Name) {
		return nil, codedf(http.StatusBadRequest, "invalid token name %q: use 1-63 letters, digits, '_', '.' or '-'", req.Name)
	}
	now := time.Now()
	expires, err := s.tokenExpiry(r, req.TTL, now)
	if err != nil {
		return nil, err
	}
	tok, err := clientToken(req.Token)
	if err != nil {
		return nil, err
	}
	hash := token.Hash(tok)
	if _, err := s.apply(&state.CreateToken{Now: now.UnixNano(), User: owner, Name: req.Name, TokenHash: hash, Expires: expires,
		Parent: tokenOf(r).Accessor}); err != nil {
		return nil, err
	}
	return s.newToken(http.StatusCreated, owner, tok)
}

// newToken is the answer with a token just made, the token itself
// included (the only time it is shown).
func (s *identityHandlers) newToken(code int, owner, tok string) (any, error) {
	acc := state.TokenAccessor(token.Hash(tok))
	for _, at := range s.reads.Tokens(owner, time.Now()) {
		if at.Accessor == acc {
			at.Token = tok
			return withStatus(code, at), nil
		}
	}
	return nil, coded(http.StatusConflict, "the token was made but was revoked already; list your tokens with `drover token list`")
}

func (s *identityHandlers) handleListTokens(w http.ResponseWriter, r *http.Request) (any, error) {
	u := userOf(r)
	who := r.URL.Query().Get("user")
	switch {
	case who == "" && u.Admin && r.URL.Query().Get("all") == "true":
	case who == "":
		who = u.Name
	case who != u.Name && !u.Admin:
		return nil, codedf(http.StatusForbidden, "user %q may list only its own tokens", u.Name)
	}
	return s.reads.Tokens(who, time.Now()), nil
}

// ownToken finds the token named in the path, which the caller must own
// (or be an admin).
func (s *identityHandlers) ownToken(r *http.Request) (state.Token, error) {
	u := userOf(r)
	t, ok := s.state.Token(r.PathValue("accessor"))
	if !ok || (t.User != u.Name && !u.Admin) {
		return state.Token{}, codedf(http.StatusNotFound, "no token %q of yours; list them with `drover token list`", r.PathValue("accessor"))
	}
	return t, nil
}

func (s *identityHandlers) handleRevokeToken(w http.ResponseWriter, r *http.Request) (any, error) {
	t, err := s.ownToken(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.apply(&state.RevokeToken{Accessor: t.Accessor}); err != nil {
		return nil, err
	}
	return map[string]string{"revoked": t.Accessor}, nil
}

// handleRotateOwnToken makes a new token with the same name and lifetime
// and revokes the old one.
func (s *identityHandlers) handleRotateOwnToken(w http.ResponseWriter, r *http.Request) (any, error) {
	t, err := s.ownToken(r)
	if err != nil {
		return nil, err
	}
	var req api.RotateTokenRequest
	if r.ContentLength != 0 {
		if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "a token request is small"); err != nil {
			return nil, err
		}
	}
	tok, err := clientToken(req.Token)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var expires int64
	if t.Expires != 0 {
		expires = now.Add(time.Duration(t.Expires - t.Created)).UnixNano()
	}
	// The new token lives as long as the old one did, but not past the
	// token the old one came from, nor the one this request came with.
	if p, ok := s.state.Token(t.Parent); ok {
		expires = capExpiry(expires, p.Expires)
	}
	expires = capExpiry(expires, tokenOf(r).Expires)
	hash := token.Hash(tok)
	if _, err := s.apply(&state.CreateToken{Now: now.UnixNano(), User: t.User, Name: t.Name, TokenHash: hash, Expires: expires,
		Parent: tokenOf(r).Accessor, Replaces: t.Accessor}); err != nil {
		return nil, err
	}
	return s.newToken(http.StatusOK, t.User, tok)
}

// maxAuditList bounds one audit answer.
const maxAuditList = 10000

// handleAudit answers a page of the audit log, newest first: the last
// 24 hours by default; before and after (RFC 3339 times, to the
// nanosecond, exclusive) page through all the log keeps, older and newer
// than a page read (without since, they reach back as far as the log).
func (s *identityHandlers) handleAudit(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	aq := state.AuditQuery{User: q.Get("user"), Limit: 1000}
	for _, c := range []struct {
		name string
		to   *time.Time
	}{{"before", &aq.Before}, {"after", &aq.After}} {
		raw := q.Get(c.name)
		if raw == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			return nil, codedf(http.StatusBadRequest, "%s=%.40q is not an RFC 3339 time (2006-01-02T15:04:05.999999999Z)", c.name, raw)
		}
		*c.to = t
	}
	if aq.Before.IsZero() && aq.After.IsZero() {
		aq.Since = time.Now().Add(-24 * time.Hour)
	}
	if raw := q.Get("since"); raw != "" {
		if d, err := time.ParseDuration(raw); err == nil && d >= 0 {
			aq.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, raw); err == nil {
			aq.Since = t
		} else {
			return nil, codedf(http.StatusBadRequest, "since=%q is neither a duration (1h) nor an RFC 3339 time", raw)
		}
	}
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxAuditList {
			return nil, codedf(http.StatusBadRequest, "limit=%q: give 1 to %d", raw, maxAuditList)
		}
		aq.Limit = n
	}
	return s.reads.AuditPage(aq), nil
}

// auditor commits audit entries on the leader in groups: a request only
// queues its entry. Entries that find no room, or a server that lost
// leadership, are counted as dropped.
type auditor struct {
	ch      chan state.AuditEntry
	dropped prometheus.Counter
	pending atomic.Int64 // recorded, not committed or dropped yet
}

func newAuditor() *auditor {
	return &auditor{ch: make(chan state.AuditEntry, 8192), dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "drover_audit_dropped_total", Help: "Audit entries that could not be committed (queue full, or leadership lost)."})}
}

func (a *auditor) record(e state.AuditEntry) {
	a.pending.Add(1)
	select {
	case a.ch <- e:
	default:
		a.pending.Add(-1)
		a.dropped.Inc()
	}
}

// WaitAudit waits until every audit entry recorded so far is committed
// (or dropped): tests that compare states quiesce with it.
func (s *Server) WaitAudit(ctx context.Context) error {
	// The counts of anonymous requests go now rather than at the end of
	// their minute.
	for _, e := range s.anon.due(time.Now(), true) {
		s.audit.record(e)
	}
	for s.audit.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// RunAudit commits queued audit entries until ctx ends.
func (s *Server) RunAudit(ctx context.Context) {
	var batch []state.AuditEntry
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := s.apply(&state.Audit{Entries: batch}); err != nil {
			s.log.Warn("audit entries not committed", "entries", len(batch), "err", err)
			s.audit.dropped.Add(float64(len(batch)))
		}
		s.audit.pending.Add(-int64(len(batch)))
		batch = batch[:0]
	}
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case e := <-s.audit.ch:
			batch = append(batch, e)
			if len(batch) >= state.MaxAuditPerCommand {
				flush()
			}
		case now := <-tick.C:
			for _, e := range s.anon.due(now, false) {
				s.audit.record(e)
			}
			flush()
		}
	}
}
