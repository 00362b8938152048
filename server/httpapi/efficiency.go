package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/efficiency"
	"github.com/drover-sched/drover/history"
)

// dayRange reads a report's days from=..to= (YYYY-MM-DD, UTC; by default
// today and the 30 days before to), at most api.MaxCostDays of them.
func dayRange(q url.Values, now time.Time) (from, to int32, err error) {
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
	if to, err = day("to", now); err != nil {
		return 0, 0, err
	}
	if from, err = day("from", time.Unix(int64(to)*86400, 0).AddDate(0, 0, -30)); err != nil {
		return 0, 0, err
	}
	if from > to {
		return 0, 0, codedf(http.StatusBadRequest, "from=%s is after to=%s", dayString(from), dayString(to))
	}
	if to-from+1 > api.MaxCostDays {
		return 0, 0, codedf(http.StatusBadRequest, "%s..%s is %d days; a report covers at most %d", dayString(from), dayString(to), to-from+1, api.MaxCostDays)
	}
	return from, to, nil
}

// handlePeriodEfficiency measures what the jobs of a billing project's
// batches, or of a user's, asked for against what they used over days
// (package efficiency), from the sums the history store keeps of each
// finished batch. A project's report is for its members; a user's other
// than one's own, outside a project, for admins.
func (s *projectHandlers) handlePeriodEfficiency(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	u := userOf(r)
	project, user := q.Get("billing_project"), q.Get("user")
	if err := api.ValidateName("user", user); err != nil {
		return nil, codedf(http.StatusBadRequest, "%v", err)
	}
	switch {
	case project != "":
		if err := s.inProject(r, project); err != nil {
			return nil, err
		}
	case user == "":
		user = u.Name
	case user != u.Name && !u.Admin:
		return nil, codedf(http.StatusForbidden, "only an admin reads another user's efficiency outside a billing project; name billing_project= to read %q's in one you are in", user)
	}
	from, to, err := dayRange(q, time.Now())
	if err != nil {
		return nil, err
	}
	st, err := s.historyStore("the history of finished batches")
	if err != nil {
		return nil, err
	}
	rows, more, err := st.Efficiency(r.Context(), history.EfficiencyQuery{BillingProject: project, User: user, From: from, To: to}, api.MaxEfficiencySummaries)
	if err != nil {
		return nil, codedf(http.StatusServiceUnavailable, "the history store failed: %w; retry later", err)
	}
	sums := make([]efficiency.Owned, len(rows))
	for i := range rows {
		sums[i] = efficiency.Owned{BillingProject: rows[i].BillingProject, User: rows[i].User, Batch: rows[i].Batch, Summary: &rows[i].Summary}
	}
	rep := efficiency.ReportPeriod(sums, efficiency.DefaultOptions())
	rep.BillingProject, rep.User, rep.From, rep.To = project, user, dayString(from), dayString(to)
	if more {
		upTo := from
		if len(rows) > 0 {
			upTo = rows[len(rows)-1].Day
		}
		rep.Partial = fmt.Sprintf("counted up to %s (that day in part): the days hold more than the %d sums (one per group of jobs of a batch and day) a report reads; ask for fewer days",
			dayString(upTo), api.MaxEfficiencySummaries)
	}
	return rep, nil
}
