package httpapi

import (
	"context"
	"crypto/subtle"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// MaxTokenTTL bounds how long a token may be valid.
const MaxTokenTTL = 10 * 365 * 24 * time.Hour

// tokenExpiry turns a requested TTL into an expiry: "" is the default
// TTL, "0" never (admins only). A token never outlives the one the request
// came with (state.CheckTokenLifetime): the default TTL is cut to it, and
// a longer TTL asked for is refused.
func (s *Server) tokenExpiry(r *http.Request, raw string, now time.Time) (int64, error) {
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

func (s *Server) handleCreateToken(w http.ResponseWriter, r *http.Request) (any, error) {
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
func (s *Server) newToken(code int, owner, tok string) (any, error) {
	acc := state.TokenAccessor(token.Hash(tok))
	for _, at := range s.reads.Tokens(owner, time.Now()) {
		if at.Accessor == acc {
			at.Token = tok
			return withStatus(code, at), nil
		}
	}
	return nil, coded(http.StatusConflict, "the token was made but was revoked already; list your tokens with `drover token list`")
}

func (s *Server) handleListTokens(w http.ResponseWriter, r *http.Request) (any, error) {
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
func (s *Server) ownToken(r *http.Request) (state.Token, error) {
	u := userOf(r)
	t, ok := s.state.Token(r.PathValue("accessor"))
	if !ok || (t.User != u.Name && !u.Admin) {
		return state.Token{}, codedf(http.StatusNotFound, "no token %q of yours; list them with `drover token list`", r.PathValue("accessor"))
	}
	return t, nil
}

func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request) (any, error) {
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
func (s *Server) handleRotateOwnToken(w http.ResponseWriter, r *http.Request) (any, error) {
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

func (s *Server) handleDeleteUser(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	if _, err := s.apply(&state.DeleteUser{Now: time.Now().UnixNano(), Name: name}); err != nil {
		return nil, err
	}
	return map[string]string{"deleted": name}, nil
}

// manages checks that the caller may manage a billing project: an admin,
// or a manager of it.
func (s *Server) manages(r *http.Request, project string) error {
	u := userOf(r)
	if u.Admin {
		return nil
	}
	if _, ok := s.reads.BillingProject(project); !ok {
		return codedf(http.StatusNotFound, "billing project %q does not exist", project)
	}
	if s.state.Role(project, u.Name) != state.RoleManager {
		return codedf(http.StatusForbidden, "user %q is not a manager of billing project %q; a manager or an admin can do this", u.Name, project)
	}
	return nil
}

// handleSetLogQuota sets a billing project's log quota: an admin's call,
// since the quota bounds the servers' disks, not the project's money.
func (s *Server) handleSetLogQuota(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	var req api.LogQuotaRequest
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "a log quota is one number"); err != nil {
		return nil, err
	}
	if req.Bytes < 0 || req.Bytes > state.MaxLogQuota {
		return nil, codedf(http.StatusBadRequest, "log quota %d: give 0 (none) to %d bytes", req.Bytes, int64(state.MaxLogQuota))
	}
	if _, err := s.apply(&state.SetLogQuota{Project: project, Bytes: req.Bytes}); err != nil {
		return nil, err
	}
	p, _ := s.reads.BillingProject(project)
	return p, nil
}

func (s *Server) handleSetSpendLimit(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	if err := s.manages(r, project); err != nil {
		return nil, err
	}
	var req api.SpendLimitRequest
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "a spend limit is one number"); err != nil {
		return nil, err
	}
	if err := state.CheckSpendLimit(req.Limit); err != nil {
		return nil, badRequest(err)
	}
	if _, err := s.apply(&state.SetSpendLimit{Project: project, Limit: req.Limit}); err != nil {
		return nil, err
	}
	p, _ := s.reads.BillingProject(project)
	return p, nil
}

// handleSetMaxPriority sets the highest priority a billing project's
// batches may ask: its managers' call (and admins'), since a priority
// orders the project's members' work against each other's; the queue's
// max_priority, an admin's, still holds above it.
func (s *Server) handleSetMaxPriority(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	if err := s.manages(r, project); err != nil {
		return nil, err
	}
	var req api.MaxPriorityRequest
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "a max_priority is one number"); err != nil {
		return nil, err
	}
	if err := placement.ValidateMaxPriority("billing project "+project, req.MaxPriority); err != nil {
		return nil, badRequest(err)
	}
	if _, err := s.apply(&state.SetProjectSettings{Project: project, MaxPriority: &req.MaxPriority}); err != nil {
		return nil, err
	}
	p, _ := s.reads.BillingProject(project)
	return p, nil
}

// maxAuditList bounds one audit answer.
const maxAuditList = 10000

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	since := time.Now().Add(-24 * time.Hour)
	if raw := q.Get("since"); raw != "" {
		if d, err := time.ParseDuration(raw); err == nil && d >= 0 {
			since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, raw); err == nil {
			since = t
		} else {
			return nil, codedf(http.StatusBadRequest, "since=%q is neither a duration (1h) nor an RFC 3339 time", raw)
		}
	}
	limit := 1000
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxAuditList {
			return nil, codedf(http.StatusBadRequest, "limit=%q: give 1 to %d", raw, maxAuditList)
		}
		limit = n
	}
	return s.reads.AuditLog(since, q.Get("user"), limit), nil
}

// handleMetrics serves Prometheus metrics, behind MetricsToken when set.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.MetricsToken != "" && subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.cfg.MetricsToken)) != 1 {
		err := s.allowAnonymous(w, r)
		if err == nil {
			err = coded(http.StatusUnauthorized, "metrics need the metrics token: send Authorization: Bearer <the server's -metrics-token>")
		}
		s.writeErr(w, err)
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

func (s *Server) handleListRates(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.reads.Rates(time.Now(), r.URL.Query().Get("all") == "true"), nil
}

func (s *Server) handleSetRates(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.SetRatesRequest
	if err := decodeLimit(w, r, &req, maxUnauthenticatedBody, "send at most 256 rates at once"); err != nil {
		return nil, err
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
		return nil, err
	}
	return s.reads.Rates(now, false), nil
}

// handleProjectCost reports a billing project's cost for a range of UTC
// days, by day, user or batch, to its members (any role) and admins.
// Days come from the state, which keeps every day's total; users and
// batches from the batches in memory and, for those gone, the history
// ledger.
func (s *Server) handleProjectCost(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	if err := s.inProject(r, project); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	now := time.Now()
	day := func(name string, def time.Time) (int32, error) {
		raw := q.Get(name)
		t := def
		if raw != "" {
			var err error
			if t, err = time.Parse(time.DateOnly, raw); err != nil {
				return 0, codedf(http.StatusBadRequest, "%s=%q is not a day such as 2026-11-24", name, raw)
			}
		}
		return int32(t.UTC().Unix() / 86400), nil
	}
	from, err := day("from", now.AddDate(0, 0, -30))
	if err != nil {
		return nil, err
	}
	to, err := day("to", now)
	if err != nil {
		return nil, err
	}
	if from > to {
		return nil, codedf(http.StatusBadRequest, "from=%s is after to=%s", dayString(from), dayString(to))
	}
	if to-from+1 > api.MaxCostDays {
		return nil, codedf(http.StatusBadRequest, "%s..%s is %d days; a report covers at most %d", dayString(from), dayString(to), to-from+1, api.MaxCostDays)
	}
	by := q.Get("by")
	if by == "" {
		by = api.CostByDay
	}
	limit := api.DefaultCostRows
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > api.MaxCostRows {
			return nil, codedf(http.StatusBadRequest, "limit=%q must be a number from 1 to %d", raw, api.MaxCostRows)
		}
		limit = n
	}
	out := api.ProjectCost{Project: project, From: dayString(from), To: dayString(to), By: by}
	switch by {
	case api.CostByDay:
		out.Rows = s.reads.CostByDay(project, from, to)
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
		return nil, codedf(http.StatusBadRequest, "by=%q: a report is by %q, %q or %q", by, api.CostByDay, api.CostByUser, api.CostByBatch)
	}
	out.Cost, out.Running = s.state.ProjectCosts(project, now)
	return out, nil
}

func dayString(d int32) string { return time.Unix(int64(d)*86400, 0).UTC().Format(time.DateOnly) }
