package httpapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/state"
)

// MaxTokenTTL bounds how long a token may be valid.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// tokenExpiry turns a requested TTL into an expiry: "" is the default
// TTL, "0" never (admins only). A token never outlives the one the request
// came with (state.CheckTokenLifetime): the default TTL is cut to it, and
// a longer TTL asked for is refused.
func (s *Server) tokenExpiry(w http.ResponseWriter, r *http.Request, raw string, now time.Time) (int64, bool) {
	ttl := s.cfg.DefaultTokenTTL
	if raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("ttl %q is not a duration such as 720h (0: never expires)", raw))
			return 0, false
		}
		ttl = d
	}
	var expires int64
	switch {
	case ttl == 0 && !userOf(r).Admin:
		writeError(w, http.StatusForbidden, "only an admin may make a token that never expires (ttl 0)")
		return 0, false
	case ttl == 0:
	case ttl < time.Minute || ttl > MaxTokenTTL:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("ttl %s is out of range: 1m to %s (0: never, admins only)", ttl, MaxTokenTTL))
		return 0, false
	default:
		expires = now.Add(ttl).UnixNano()
	}
	parent := tokenOf(r)
	if raw == "" {
		return capExpiry(expires, parent.Expires), true
	}
	if err := state.CheckTokenLifetime(parent, expires); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return 0, false
	}
	return expires, true
}

// capExpiry is the earlier of two expiries (0: never).
func capExpiry(expires, limit int64) int64 {
	if limit != 0 && (expires == 0 || expires > limit) {
		return limit
	}
	return expires
}

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request) {
	var req api.CreateTokenRequest
	if !decodeLimit(w, r, &req, maxUnauthenticatedBody, "a token request is small") {
		return
	}
	u := userOf(r)
	owner := req.User
	if owner == "" {
		owner = u.Name
	}
	if owner != u.Name && !u.Admin {
		writeError(w, http.StatusForbidden, fmt.Sprintf("user %q may make tokens only for itself; an admin can make one for %q", u.Name, owner))
		return
	}
	if req.Name == "" {
		req.Name = "token"
	}
	if !state.ValidName(req.Name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid token name %q: use 1-63 letters, digits, '_', '.' or '-'", req.Name))
		return
	}
	now := time.Now()
	expires, ok := s.tokenExpiry(w, r, req.TTL, now)
	if !ok {
		return
	}
	tok, ok := clientToken(w, req.Token)
	if !ok {
		return
	}
	hash := token.Hash(tok)
	if _, err := s.apply(&state.CreateToken{Now: now.UnixNano(), User: owner, Name: req.Name, TokenHash: hash, Expires: expires,
		Parent: tokenOf(r).Accessor}); err != nil {
		s.writeErr(w, err)
		return
	}
	s.writeNewToken(w, http.StatusCreated, owner, tok)
}

// writeNewToken answers with a token just made, the token itself included
// (the only time it is shown).
func (s *Server) writeNewToken(w http.ResponseWriter, code int, owner, tok string) {
	acc := state.TokenAccessor(token.Hash(tok))
	for _, at := range s.state.Tokens(owner, time.Now()) {
		if at.Accessor == acc {
			at.Token = tok
			writeJSON(w, code, at)
			return
		}
	}
	writeError(w, http.StatusConflict, "the token was made but was revoked already; list your tokens with `drover token list`")
}

func (s *Server) handleListTokens(w http.ResponseWriter, r *http.Request) {
	u := userOf(r)
	who := r.URL.Query().Get("user")
	switch {
	case who == "" && u.Admin && r.URL.Query().Get("all") == "true":
	case who == "":
		who = u.Name
	case who != u.Name && !u.Admin:
		writeError(w, http.StatusForbidden, fmt.Sprintf("user %q may list only its own tokens", u.Name))
		return
	}
	writeJSON(w, http.StatusOK, s.state.Tokens(who, time.Now()))
}

// ownToken finds the token named in the path, which the caller must own
// (or be an admin).
func (s *Server) ownToken(w http.ResponseWriter, r *http.Request) (state.Token, bool) {
	u := userOf(r)
	t, ok := s.state.Token(r.PathValue("accessor"))
	if !ok || (t.User != u.Name && !u.Admin) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no token %q of yours; list them with `drover token list`", r.PathValue("accessor")))
		return state.Token{}, false
	}
	return t, true
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request) {
	t, ok := s.ownToken(w, r)
	if !ok {
		return
	}
	if _, err := s.apply(&state.RevokeToken{Accessor: t.Accessor}); err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"revoked": t.Accessor})
}

// handleRotateOwnToken makes a new token with the same name and lifetime
// and revokes the old one.
func (s *Server) handleRotateOwnToken(w http.ResponseWriter, r *http.Request) {
	t, ok := s.ownToken(w, r)
	if !ok {
		return
	}
	var req api.RotateTokenRequest
	if r.ContentLength != 0 && !decodeLimit(w, r, &req, maxUnauthenticatedBody, "a token request is small") {
		return
	}
	tok, ok := clientToken(w, req.Token)
	if !ok {
		return
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
		s.writeErr(w, err)
		return
	}
	s.writeNewToken(w, http.StatusOK, t.User, tok)
}

func (s *Server) handleDeleteUser(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := s.apply(&state.DeleteUser{Now: time.Now().UnixNano(), Name: name}); err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": name})
}

// manages checks that the caller may manage a billing project: an admin,
// or a manager of it.
func (s *Server) manages(w http.ResponseWriter, r *http.Request, project string) bool {
	u := userOf(r)
	if u.Admin {
		return true
	}
	if _, ok := s.state.BillingProject(project); !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("billing project %q does not exist", project))
		return false
	}
	if s.state.Role(project, u.Name) != state.RoleManager {
		writeError(w, http.StatusForbidden, fmt.Sprintf("user %q is not a manager of billing project %q; a manager or an admin can do this", u.Name, project))
		return false
	}
	return true
}

// handleSetLogQuota sets a billing project's log quota: an admin's call,
// since the quota bounds the servers' disks, not the project's money.
func (s *Server) handleSetLogQuota(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("name")
	var req api.LogQuotaRequest
	if !decodeLimit(w, r, &req, maxUnauthenticatedBody, "a log quota is one number") {
		return
	}
	if req.Bytes < 0 || req.Bytes > state.MaxLogQuota {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("log quota %d: give 0 (none) to %d bytes", req.Bytes, int64(state.MaxLogQuota)))
		return
	}
	if _, err := s.apply(&state.SetLogQuota{Project: project, Bytes: req.Bytes}); err != nil {
		s.writeErr(w, err)
		return
	}
	p, _ := s.state.BillingProject(project)
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) handleSetSpendLimit(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("name")
	if !s.manages(w, r, project) {
		return
	}
	var req api.SpendLimitRequest
	if !decodeLimit(w, r, &req, maxUnauthenticatedBody, "a spend limit is one number") {
		return
	}
	if err := state.CheckSpendLimit(req.Limit); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if _, err := s.apply(&state.SetSpendLimit{Project: project, Limit: req.Limit}); err != nil {
		s.writeErr(w, err)
		return
	}
	p, _ := s.state.BillingProject(project)
	writeJSON(w, http.StatusOK, p)
}

// maxAuditList bounds one audit answer.
const maxAuditList = 10000

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since := time.Now().Add(-24 * time.Hour)
	if raw := q.Get("since"); raw != "" {
		if d, err := time.ParseDuration(raw); err == nil && d >= 0 {
			since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, raw); err == nil {
			since = t
		} else {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("since=%q is neither a duration (1h) nor an RFC 3339 time", raw))
			return
		}
	}
	limit := 1000
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxAuditList {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit=%q: give 1 to %d", raw, maxAuditList))
			return
		}
		limit = n
	}
	writeJSON(w, http.StatusOK, s.state.AuditLog(since, q.Get("user"), limit))
}

// handleMetrics serves Prometheus metrics, behind MetricsToken when set.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.MetricsToken != "" && subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.cfg.MetricsToken)) != 1 {
		if !s.allowAnonymous(w, r) {
			return
		}
		writeError(w, http.StatusUnauthorized, "metrics need the metrics token: send Authorization: Bearer <the server's -metrics-token>")
		return
	}
	s.metricsHandler.ServeHTTP(w, r)
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

func (s *Server) handleListRates(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.state.Rates(time.Now(), r.URL.Query().Get("all") == "true"))
}

func (s *Server) handleSetRates(w http.ResponseWriter, r *http.Request) {
	var req api.SetRatesRequest
	if !decodeLimit(w, r, &req, maxUnauthenticatedBody, "send at most 256 rates at once") {
		return
	}
	now := time.Now()
	c := &state.SetRates{Now: now.UnixNano()}
	for _, nr := range req.Rates {
		e := state.RateEntry{Resource: nr.Resource, Price: nr.PricePerHour}
		if nr.ValidFrom != nil {
			e.ValidFrom = nr.ValidFrom.UnixNano()
		}
		c.Rates = append(c.Rates, e)
	}
	if _, err := s.apply(c); err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.state.Rates(now, false))
}

// handleProjectCost reports a billing project's cost for a range of UTC
// days, by day, user or batch, to its members (any role) and admins.
// Days come from the state, which keeps every day's total; users and
// batches from the batches in memory and, for those gone, the history
// ledger.
func (s *Server) handleProjectCost(w http.ResponseWriter, r *http.Request) {
	project := r.PathValue("name")
	if !s.inProject(w, r, project) {
		return
	}
	q := r.URL.Query()
	now := time.Now()
	day := func(name string, def time.Time) (int32, bool) {
		raw := q.Get(name)
		t := def
		if raw != "" {
			var err error
			if t, err = time.Parse(time.DateOnly, raw); err != nil {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("%s=%q is not a day such as 2026-11-24", name, raw))
				return 0, false
			}
		}
		return int32(t.UTC().Unix() / 86400), true
	}
	from, ok := day("from", now.AddDate(0, 0, -30))
	if !ok {
		return
	}
	to, ok := day("to", now)
	if !ok {
		return
	}
	if from > to {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("from=%s is after to=%s", dayString(from), dayString(to)))
		return
	}
	if to-from+1 > api.MaxCostDays {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s..%s is %d days; a report covers at most %d", dayString(from), dayString(to), to-from+1, api.MaxCostDays))
		return
	}
	by := q.Get("by")
	if by == "" {
		by = api.CostByDay
	}
	limit := api.DefaultCostRows
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > api.MaxCostRows {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("limit=%q must be a number from 1 to %d", raw, api.MaxCostRows))
			return
		}
		limit = n
	}
	out := api.ProjectCost{Project: project, From: dayString(from), To: dayString(to), By: by}
	switch by {
	case api.CostByDay:
		out.Rows = s.state.CostByDay(project, from, to)
		for _, row := range out.Rows {
			out.Total += row.Cost
		}
	case api.CostByUser, api.CostByBatch:
		spends, held := s.state.BatchSpends(project, from, to, now)
		if old, err := s.ledgerSpends(r.Context(), project, from, to, held); err != nil {
			out.Partial = "batches that left memory are missing: " + err.Error()
			w.Header().Set(HistoryUnavailableHeader, err.Error())
		} else {
			spends = append(spends, old...)
		}
		rows, rest, omitted := billing.Group(spends, by == api.CostByBatch, limit)
		out.Rows = make([]api.CostRow, len(rows))
		for i, row := range rows {
			out.Rows[i] = api.CostRow{User: row.User, Batch: int64(row.Batch), Cost: row.Cost, Running: row.Running}
			out.Total += row.Cost
		}
		out.Omitted, out.OmittedCost = omitted, rest.Cost
		out.Total += rest.Cost
	default:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("by=%q: a report is by %q, %q or %q", by, api.CostByDay, api.CostByUser, api.CostByBatch))
		return
	}
	out.Cost, out.Running = s.state.ProjectCosts(project, now)
	writeJSON(w, http.StatusOK, out)
}

func dayString(d int32) string { return time.Unix(int64(d)*86400, 0).UTC().Format(time.DateOnly) }
