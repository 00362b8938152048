package ui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// maxTokenBytes bounds what the login form takes as a token.
const maxTokenBytes = 256

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	u.render(w, r, nil, http.StatusOK, "login", map[string]any{"Title": "Log in", "Next": safeNext(r.URL.Query().Get("next"))})
}

// safeNext is where to go after logging in: a page of the UI, never
// another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix
	}
	return next
}

// login makes a session from the token typed (or passed in the login
// link's fragment, which ui.js posts and never sends in a URL).
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	bad := func(code int, msg string) {
		u.render(w, r, nil, code, "login", map[string]any{"Title": "Log in", "Error": msg, "Next": next})
	}
	if tok == "" || len(tok) > maxTokenBytes {
		bad(http.StatusBadRequest, "Paste a drover token (what `drover token create` printed, or DROVER_TOKEN).")
		return
	}
	ctx := withRemote(r.Context(), r)
	c := u.client(tok)
	me, err := c.Whoami(ctx)
	if err != nil {
		var ae *api.Error
		if api.IsStatus(err, http.StatusUnauthorized) && errorsAs(err, &ae) {
			bad(http.StatusUnauthorized, ae.Message)
			return
		}
		u.fail(w, r, nil, err)
		return
	}
	session, err := c.CreateToken(ctx, &api.CreateTokenRequest{Name: SessionTokenName, TTL: SessionTTL.String()})
	if api.IsStatus(err, http.StatusForbidden) {
		// The token expires sooner: the session lives as long as it does.
		session, err = c.CreateToken(ctx, &api.CreateTokenRequest{Name: SessionTokenName})
	}
	if err != nil {
		u.fail(w, r, nil, fmt.Errorf("make a session token for %s: %w", me.Name, err))
		return
	}
	u.pruneSessions(ctx, u.client(session.Token), me.Name, session.Accessor)
	expires := u.now().Add(SessionTTL)
	if session.ExpiresAt != nil && session.ExpiresAt.Before(expires) {
		expires = *session.ExpiresAt
	}
	setCookie(w, session.Accessor+"."+session.Token, expires, u.d.TLS)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// pruneSessions revokes a user's oldest sessions beyond MaxSessions.
func (u *UI) pruneSessions(ctx context.Context, c *api.Client, user, keep string) {
	toks, err := c.ListTokens(ctx, user, false)
	if err != nil {
		u.d.Log.Debug("ui: list sessions", "user", user, "err", err)
		return
	}
	var sessions []api.Token
	for _, t := range toks {
		if t.Name == SessionTokenName && !t.Expired && t.Accessor != keep {
			sessions = append(sessions, t)
		}
	}
	slices.SortFunc(sessions, func(a, b api.Token) int { return a.TimeCreated.Compare(b.TimeCreated) })
	for len(sessions) >= MaxSessions {
		if err := c.RevokeToken(ctx, sessions[0].Accessor); err != nil {
			u.d.Log.Debug("ui: revoke old session", "user", user, "err", err)
		}
		sessions = sessions[1:]
	}
}

// logout revokes the session's token: the cookie, wherever it went, no
// longer works.
func (u *UI) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := s.client.RevokeToken(withRemote(r.Context(), r), s.accessor); err != nil && !api.IsStatus(err, http.StatusNotFound) {
		u.fail(w, r, s, err)
		return
	}
	clearCookie(w, u.d.TLS)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// batchFilter is the batches page's filter form.
type batchFilter struct {
	State, Project, User, Attrs string
}

func (f batchFilter) query() string {
	var terms []string
	if f.State != "" {
		terms = append(terms, "state="+f.State)
	}
	if f.Project != "" {
		terms = append(terms, "billing_project="+f.Project)
	}
	if f.User != "" {
		terms = append(terms, "user="+f.User)
	}
	for _, a := range strings.Fields(f.Attrs) {
		terms = append(terms, "attr:"+a)
	}
	return strings.Join(terms, " ")
}

func (f batchFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"state": f.State, "project": f.Project, "user": f.User, "attrs": f.Attrs} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func (u *UI) batchesPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := batchFilter{State: q.Get("state"), Project: q.Get("project"), User: q.Get("user"), Attrs: q.Get("attrs")}
	last, _ := strconv.ParseInt(q.Get("last_id"), 10, 64)
	list, err := s.client.ListBatches(withRemote(r.Context(), r), f.query(), last)
	if err != nil {
		if api.IsStatus(err, http.StatusBadRequest) {
			u.render(w, r, s, http.StatusBadRequest, "batches", map[string]any{"Title": "Batches", "Filter": f, "Error": errMessage(err), "States": batchStates})
			return
		}
		u.fail(w, r, s, err)
		return
	}
	data := map[string]any{"Title": "Batches", "Filter": f, "Batches": list.Batches, "States": batchStates}
	if list.LastID != 0 {
		v := f.values()
		v.Set("last_id", strconv.FormatInt(list.LastID, 10))
		data["Next"] = "/ui/batches?" + v.Encode()
	}
	if last != 0 {
		data["First"] = "/ui/batches?" + f.values().Encode()
	}
	u.render(w, r, s, http.StatusOK, "batches", data)
}

var batchStates = []string{"running", "complete", "success", "failure", "cancelled"}

var jobStates = []string{api.JobPending, api.JobReady, api.JobRunning, api.JobSuccess, api.JobFailed, api.JobCancelled, api.JobError, api.JobFilterDone, api.JobFilterBad}

func pathInt(r *http.Request, name string) (int64, error) {
	v, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || v <= 0 {
		return 0, &api.Error{StatusCode: http.StatusNotFound, Message: fmt.Sprintf("%q is not a %s", r.PathValue(name), name)}
	}
	return v, nil
}

// jobPath is the batch and job a job's page, log or stream names.
func jobPath(r *http.Request) (id, jid int64, err error) {
	if id, err = pathInt(r, "id"); err == nil {
		jid, err = pathInt(r, "job")
	}
	return id, jid, err
}

func (u *UI) batchPage(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	ctx := withRemote(r.Context(), r)
	b, err := s.client.GetBatch(ctx, id)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	q := r.URL.Query()
	jobState := q.Get("state")
	filter := ""
	if jobState != "" {
		filter = "state=" + jobState
	}
	if name := q.Get("name"); name != "" {
		filter = strings.TrimSpace(filter + " name=" + name)
	}
	last, _ := strconv.ParseInt(q.Get("last_id"), 10, 64)
	jobs, err := s.client.ListJobs(ctx, id, filter, last)
	if err != nil && !api.IsStatus(err, http.StatusBadRequest) {
		u.fail(w, r, s, err)
		return
	}
	data := map[string]any{"Title": batchTitle(b), "Batch": b, "JobStates": jobStates, "JobState": jobState, "JobName": q.Get("name")}
	if err != nil {
		data["JobsError"] = errMessage(err)
	} else {
		data["Jobs"] = jobs.Jobs
		data["Gantt"] = gantt(jobs.Jobs, u.now())
		if jobs.LastID != 0 {
			v := url.Values{}
			if jobState != "" {
				v.Set("state", jobState)
			}
			if q.Get("name") != "" {
				v.Set("name", q.Get("name"))
			}
			v.Set("last_id", strconv.FormatInt(jobs.LastID, 10))
			data["NextJobs"] = fmt.Sprintf("/ui/batches/%d?%s", id, v.Encode())
		}
	}
	if st, err := s.client.BatchStages(ctx, id); err == nil {
		data["Stages"] = st.Stages
		data["MoreStages"] = st.More
		data["DAG"] = dagChart(st.Stages)
	}
	u.render(w, r, s, http.StatusOK, "batch", data)
}

func batchTitle(b *api.Batch) string {
	if b.Name != "" {
		return fmt.Sprintf("Batch %d: %s", b.ID, inert(b.Name))
	}
	return fmt.Sprintf("Batch %d", b.ID)
}

func (u *UI) cancelBatch(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	if err := s.client.CancelBatch(withRemote(r.Context(), r), id); err != nil {
		u.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/ui/batches/%d", id), http.StatusSeeOther)
}

// logTail is how much of a log the job page shows at first.
const logTail = 64 << 10

func (u *UI) jobPage(w http.ResponseWriter, r *http.Request, s *session) {
	id, jid, err := jobPath(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	ctx := withRemote(r.Context(), r)
	j, err := s.client.GetJob(ctx, id, jid)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	data := map[string]any{"Title": fmt.Sprintf("Job %d of batch %d", jid, id), "Job": j, "BatchID": id}
	if why, err := s.client.JobWhy(ctx, id, jid); err == nil {
		data["Why"] = why.Reasons
	}
	if len(j.Attempts) > 0 && j.Attempts[len(j.Attempts)-1].StartTime != nil {
		tail, size, at, err := u.readTail(ctx, s.client, id, jid)
		switch {
		case err == nil:
			data["Log"], data["LogSize"], data["LogAttempt"] = inert(tail), size, at
			data["LogCut"] = size > int64(len(tail))
		case api.IsStatus(err, http.StatusNotFound):
		default:
			data["LogError"] = errMessage(err)
		}
	}
	data["Running"] = j.State == api.JobRunning || j.State == api.JobCreating
	u.render(w, r, s, http.StatusOK, "job", data)
}

// readTail reads the end of a job's latest log: two reads, the size, then
// the tail from its offset.
func (u *UI) readTail(ctx context.Context, c *api.Client, batch, job int64) (string, int64, int, error) {
	head, err := c.OpenJobLogAt(ctx, batch, job, 0, 1<<62)
	if err != nil {
		return "", 0, 0, err
	}
	head.Close()
	from := max(head.Size-logTail, 0)
	st, err := c.OpenJobLogAt(ctx, batch, job, head.Attempt, from)
	if err != nil {
		return "", 0, 0, err
	}
	defer st.Close()
	data, err := io.ReadAll(io.LimitReader(st, logTail*2))
	if err != nil {
		return "", 0, 0, err
	}
	return string(data), from + int64(len(data)), st.Attempt, nil
}

// jobLog sends a whole log to download.
func (u *UI) jobLog(w http.ResponseWriter, r *http.Request, s *session) {
	id, jid, err := jobPath(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	attempt, _ := strconv.Atoi(r.URL.Query().Get("attempt"))
	st, err := s.client.OpenJobLogAt(withRemote(r.Context(), r), id, jid, max(attempt, 0), 0)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	defer st.Close()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="batch-%d-job-%d-attempt-%d.log"`, id, jid, st.Attempt))
	_, _ = io.Copy(w, st)
}

// projectBilling is one project's part of the billing page.
type projectBilling struct {
	Project api.BillingProject
	ByDay   *api.ProjectCost
	ByUser  *api.ProjectCost
	ByBatch *api.ProjectCost
	Chart   any
	Spend   any
	Error   string
}

// billingDays is how many days the billing page shows, and
// billingProjects how many projects at most (each is three reads of
// the cost report; a project can be chosen).
const (
	billingDays     = 30
	billingProjects = 20
)

func (u *UI) billingPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := withRemote(r.Context(), r)
	projects, err := s.client.ListBillingProjects(ctx)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	all := projects
	if want := r.URL.Query().Get("project"); want != "" {
		projects = slices.DeleteFunc(slices.Clone(projects), func(p api.BillingProject) bool { return p.Name != want })
	}
	more := max(len(projects)-billingProjects, 0)
	projects = projects[:min(len(projects), billingProjects)]
	now := u.now().UTC()
	from := now.AddDate(0, 0, -(billingDays - 1)).Format("2006-01-02")
	to := now.Format("2006-01-02")
	var out []projectBilling
	for _, p := range projects {
		pb := projectBilling{Project: p}
		var err error
		pb.ByDay, err = s.client.ProjectCost(ctx, p.Name, api.CostQuery{From: from, To: to, By: api.CostByDay})
		if err == nil {
			pb.ByUser, err = s.client.ProjectCost(ctx, p.Name, api.CostQuery{From: from, To: to, By: api.CostByUser, Limit: 10})
		}
		if err == nil {
			pb.ByBatch, err = s.client.ProjectCost(ctx, p.Name, api.CostQuery{From: from, To: to, By: api.CostByBatch, Limit: 10})
		}
		if err != nil {
			pb.Error = errMessage(err)
			out = append(out, pb)
			continue
		}
		// Every day of the span, those without cost too.
		byDay := map[string]money.Amount{}
		for _, row := range pb.ByDay.Rows {
			byDay[row.Day] = byDay[row.Day].Add(row.Cost).Add(row.Running)
		}
		var days []dayBar
		for d := now.AddDate(0, 0, -(billingDays - 1)); !d.After(now); d = d.AddDate(0, 0, 1) {
			day := d.Format("2006-01-02")
			days = append(days, dayBar{Day: day, Cost: byDay[day]})
		}
		pb.Chart = costChart(fmt.Sprintf("Cost of %s by day, %s to %s", p.Name, from, to), days)
		if p.SpendLimit > 0 {
			pb.Spend = bar(300, 14, float64(max(p.SpendLimit, p.Cost)), fmt.Sprintf("%s spent of a %s limit", dollars(p.Cost), dollars(p.SpendLimit)),
				[]segment{{"spend", dollars(p.Cost) + " spent", float64(min(p.Cost, p.SpendLimit))}, {"over", "over the limit", float64(max(p.Cost-p.SpendLimit, 0))}})
		}
		out = append(out, pb)
	}
	u.render(w, r, s, http.StatusOK, "billing", map[string]any{"Title": "Billing", "Projects": out, "From": from, "To": to,
		"All": all, "Chosen": r.URL.Query().Get("project"), "More": more})
}

func (u *UI) clustersPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := withRemote(r.Context(), r)
	regions, err := s.client.ListRegions(ctx)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	clusters, err := s.client.ListClusters(ctx)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "clusters", map[string]any{"Title": "Regions and clusters", "Regions": regions, "Clusters": clusters,
		"CanChange": u.may(s, "POST /api/v1/clusters/{name}/disable") && u.may(s, "POST /api/v1/clusters/{name}/enable")})
}

// clusterState disables (and maybe evacuates) or enables a cluster.
func (u *UI) clusterState(w http.ResponseWriter, r *http.Request, s *session) {
	name, op := r.PathValue("name"), r.PathValue("op")
	req := &api.ClusterStateRequest{Reason: strings.TrimSpace(r.PostFormValue("reason")), Evacuate: r.PostFormValue("evacuate") == "on"}
	ctx := withRemote(r.Context(), r)
	var err error
	switch op {
	case "disable":
		if req.Reason == "" {
			err = &api.Error{StatusCode: http.StatusBadRequest, Message: "say why the cluster is taken out of service (the reason is shown to everyone)"}
			break
		}
		_, err = s.client.DisableCluster(ctx, name, req)
	case "enable":
		req.Evacuate = false
		_, err = s.client.EnableCluster(ctx, name, req)
	default:
		err = &api.Error{StatusCode: http.StatusNotFound, Message: "no such cluster action: " + op}
	}
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/ui/clusters", http.StatusSeeOther)
}

func (u *UI) queuesPage(w http.ResponseWriter, r *http.Request, s *session) {
	queues, err := s.client.ListQueues(withRemote(r.Context(), r))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "queues", map[string]any{"Title": "Queues", "Queues": queues})
}

// capCPU is the most cores a queue may hold (0: no bound).
func capCPU(q api.Queue) float64 {
	if q.Cap != nil {
		return q.Cap.CPU
	}
	return 0
}

func (u *UI) autoscalerPage(w http.ResponseWriter, r *http.Request, s *session) {
	st, err := s.client.AutoscalerStatus(withRemote(r.Context(), r))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	byState := map[string]int{}
	for _, m := range st.Machines {
		byState[m.State]++
	}
	var states []string
	for k := range byState {
		states = append(states, k)
	}
	slices.Sort(states)
	var limited []api.LaunchConfigStatus
	for _, c := range st.LaunchConfigs {
		if c.CapacityLimited {
			limited = append(limited, c)
		}
	}
	u.render(w, r, s, http.StatusOK, "autoscaler", map[string]any{"Title": "Autoscaler", "Status": st, "States": states, "ByState": byState,
		"Limited": limited, "Chart": spendChart(st.SpendHistory, st.Settings.MaxPerHour)})
}

// auditEntries is how many entries the audit page shows.
const auditEntries = 200

func (u *UI) auditPage(w http.ResponseWriter, r *http.Request, s *session) {
	user := r.URL.Query().Get("user")
	entries, err := s.client.Audit(withRemote(r.Context(), r), "", user, auditEntries)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	slices.Reverse(entries) // newest first
	u.render(w, r, s, http.StatusOK, "audit", map[string]any{"Title": "Audit log", "Entries": entries, "User": user})
}

func errMessage(err error) string {
	var ae *api.Error
	if errorsAs(err, &ae) {
		return ae.Message
	}
	return err.Error()
}
