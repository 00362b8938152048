package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// projectHandlers serve billing projects: their members, limits and
// settings, storage prefixes, cost, and the rates costs are priced at.
type projectHandlers struct{ *Server }

func (s *projectHandlers) handleCreateBillingProject(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CreateBillingProjectRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	_, existed := s.reads.BillingProject(req.Name)
	if _, err := s.apply(&state.CreateBillingProject{Now: time.Now().UnixNano(), Name: req.Name, Members: req.Members}); err != nil {
		return nil, err
	}
	p, _ := s.reads.BillingProject(req.Name)
	// existed: a retry; the project is there with those members.
	return withStatus(createdStatus(existed), p), nil
}

// handleDeleteBillingProject removes a billing project that never had a
// batch and that no queue names (the state's rule; the servers' default
// project stays).
func (s *projectHandlers) handleDeleteBillingProject(w http.ResponseWriter, r *http.Request) (any, error) {
	name := r.PathValue("name")
	if name == s.cfg.DefaultBillingProject {
		return nil, codedf(http.StatusConflict, "billing project %q is the servers' default (-default-billing-project): it stays", name)
	}
	if _, err := s.apply(&state.DeleteBillingProject{Name: name}); err != nil {
		return nil, err
	}
	return map[string]string{"deleted": name}, nil
}

func (s *projectHandlers) handleListBillingProjects(w http.ResponseWriter, r *http.Request) (any, error) {
	u := userOf(r)
	out := s.reads.BillingProjects(u)
	if out == nil {
		out = []api.BillingProject{}
	}
	return out, nil
}

func (s *projectHandlers) setMember(r *http.Request, project, user string, member bool, role string) (any, error) {
	if err := s.manages(r, project); err != nil {
		return nil, err
	}
	if _, err := s.apply(&state.SetMember{Project: project, User: user, Member: member, Role: role}); err != nil {
		return nil, err
	}
	p, _ := s.reads.BillingProject(project)
	return p, nil
}

func (s *projectHandlers) handleAddMember(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.MemberRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	return s.setMember(r, r.PathValue("name"), req.User, true, req.Role)
}

func (s *projectHandlers) handleRemoveMember(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.setMember(r, r.PathValue("name"), r.PathValue("user"), false, "")
}

// manages checks that the caller may manage a billing project: an admin,
// or a manager of it.
func (s *projectHandlers) manages(r *http.Request, project string) error {
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
func (s *projectHandlers) handleSetLogQuota(w http.ResponseWriter, r *http.Request) (any, error) {
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

func (s *projectHandlers) handleSetSpendLimit(w http.ResponseWriter, r *http.Request) (any, error) {
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
func (s *projectHandlers) handleSetMaxPriority(w http.ResponseWriter, r *http.Request) (any, error) {
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

func (s *projectHandlers) handleListRates(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.reads.Rates(time.Now(), r.URL.Query().Get("all") == "true"), nil
}

func (s *projectHandlers) handleSetRates(w http.ResponseWriter, r *http.Request) (any, error) {
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
func (s *projectHandlers) handleProjectCost(w http.ResponseWriter, r *http.Request) (any, error) {
	project := r.PathValue("name")
	if err := s.inProject(r, project); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	now := time.Now()
	from, to, err := dayRange(q, now)
	if err != nil {
		return nil, err
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
