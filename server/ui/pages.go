package ui

import (
	"bytes"
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

// page serves a page built by its data function, the one its live
// stream (livePages) calls too.
func (u *UI) page(name string, data func(*UI, *http.Request, *session) (map[string]any, error)) sessionHandler {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		d, err := data(u, r, s)
		if err != nil {
			u.fail(w, r, s, err)
			return
		}
		u.render(w, r, s, http.StatusOK, name, d)
	}
}

// maxTokenBytes bounds what the login form takes as a token.
const maxTokenBytes = 256

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	data := map[string]any{"Title": "Log in", "Next": safeNext(r.URL.Query().Get("next"))}
	if r.URL.Query().Get("ended") != "" {
		data["Notice"] = sessionEnded
	}
	u.render(w, r, nil, http.StatusOK, "login", data)
}

// maxNextBytes bounds the page a login leads to.
const maxNextBytes = 2048

// safeNext is where to go after logging in: a page of the UI, as a path
// of this origin, never another site nor a path a browser would resolve
// out of the UI. Anything else is the UI's first page.
func safeNext(next string) string {
	if len(next) > maxNextBytes || !strings.HasPrefix(next, Prefix) {
		return Prefix
	}
	// Browsers drop tabs and newlines inside a URL and read a backslash
	// as a slash: the path they went to would not be the one checked.
	if strings.ContainsFunc(next, func(c rune) bool { return c <= ' ' || c == 0x7f || c == '\\' || c >= 0x80 }) {
		return Prefix
	}
	v, err := url.Parse(next)
	if err != nil || v.Scheme != "" || v.Host != "" || v.User != nil || v.Opaque != "" || !strings.HasPrefix(v.Path, Prefix) {
		return Prefix
	}
	// The path decoded, as a browser resolves it: no dot segments (%2e
	// counts as a dot), no empty ones (%2f counts as a slash), no
	// backslash (%5c).
	if strings.Contains(v.Path, "//") || strings.Contains(v.Path, "\\") {
		return Prefix
	}
	for _, seg := range strings.Split(v.Path, "/") {
		if seg == "." || seg == ".." {
			return Prefix
		}
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
	data, err := u.batchesData(r, s)
	if err != nil {
		if api.IsStatus(err, http.StatusBadRequest) {
			u.render(w, r, s, http.StatusBadRequest, "batches", map[string]any{"Title": "Batches", "Filter": filterOf(r), "Error": errMessage(err), "States": batchStates})
			return
		}
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "batches", data)
}

func filterOf(r *http.Request) batchFilter {
	q := r.URL.Query()
	return batchFilter{State: q.Get("state"), Project: q.Get("project"), User: q.Get("user"), Attrs: q.Get("attrs")}
}

// batchesData is the batches page: one page of the batches the user
// sees, newest first. The first page is live (a new batch appears).
func (u *UI) batchesData(r *http.Request, s *session) (map[string]any, error) {
	f := filterOf(r)
	last, _ := strconv.ParseInt(r.URL.Query().Get("last_id"), 10, 64)
	list, err := s.client.ListBatches(withRemote(r.Context(), r), f.query(), last)
	if err != nil {
		return nil, err
	}
	data := map[string]any{"Title": "Batches", "Filter": f, "Batches": list.Batches, "States": batchStates}
	if list.LastID != 0 {
		v := f.values()
		v.Set("last_id", strconv.FormatInt(list.LastID, 10))
		data["Next"] = "/ui/batches?" + v.Encode()
	}
	if last != 0 {
		data["First"] = "/ui/batches?" + f.values().Encode()
	} else {
		data["Live"] = liveURL(r)
	}
	return data, nil
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

// jobSorts are the orders the batch page's jobs table can be sorted in
// (the page's jobs, by the column).
var jobSorts = []string{"id", "state", "exit", "attempts", "cost", "cpu", "memory"}

// batchData is the batch page: the batch's summary and a page of its
// jobs, read together (api.JobList.Batch) so the summary, the table and
// the chart show one state of the batch.
func (u *UI) batchData(r *http.Request, s *session) (map[string]any, error) {
	id, err := pathInt(r, "id")
	if err != nil {
		return nil, err
	}
	ctx := withRemote(r.Context(), r)
	b, err := s.client.GetBatch(ctx, id)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	jobState := q.Get("state")
	filter := ""
	if jobState != "" {
		filter = "state=" + jobState
	}
	if g := q.Get("group"); g != "" {
		filter = strings.TrimSpace(filter + " group=" + g)
	}
	name := strings.TrimSpace(q.Get("name"))
	jobID, _ := strconv.ParseInt(strings.TrimPrefix(name, "#"), 10, 64)
	switch {
	case jobID > 0:
		// A job's ID: its page of the table, from it on.
	case name != "":
		filter = strings.TrimSpace(filter + " name=" + name)
	}
	last, _ := strconv.ParseInt(q.Get("last_id"), 10, 64)
	if jobID > 0 {
		last = jobID - 1
	}
	jobs, err := s.client.ListJobs(ctx, id, filter, last)
	if err != nil && !api.IsStatus(err, http.StatusBadRequest) {
		return nil, err
	}
	if err == nil && jobs.Batch != nil {
		// The counts of the same read as the jobs; the waiting reasons
		// and what the user may do from the batch's own read.
		fresh := *jobs.Batch
		fresh.Waiting, fresh.WaitingSummary = b.Waiting, b.WaitingSummary
		fresh.Actions = nil
		for _, a := range b.Actions {
			// Cancel and add to it while it runs; retry what failed
			// whenever (the template asks its counts).
			if a == api.ActionRetry || (!fresh.Complete() && !fresh.Cancelled) {
				fresh.Actions = append(fresh.Actions, a)
			}
		}
		b = &fresh
	}
	data := map[string]any{"Title": batchTitle(b), "Batch": b, "JobStates": jobStates, "JobState": jobState, "JobName": q.Get("name"),
		"Sorts": jobSorts, "Sort": q.Get("sort"), "JobGroup": q.Get("group")}
	if err == nil {
		// The groups of the same read as the jobs and the counts.
		data["Groups"] = jobs.JobGroups
		data["MoreGroups"] = len(jobs.JobGroups) == api.JobGroupsPerPage
	}
	if err != nil {
		data["JobsError"] = errMessage(err)
	} else {
		sortJobs(jobs.Jobs, q.Get("sort"))
		data["Jobs"] = jobs.Jobs
		data["Gantt"] = gantt(jobs.Jobs, u.now())
		page := func(last int64) string {
			v := url.Values{}
			for _, k := range []string{"state", "name", "sort", "group"} {
				if q.Get(k) != "" && !(k == "name" && jobID > 0) {
					v.Set(k, q.Get(k))
				}
			}
			if last > 0 {
				v.Set("last_id", strconv.FormatInt(last, 10))
			}
			return fmt.Sprintf("/ui/batches/%d?%s", id, v.Encode())
		}
		if jobs.LastID != 0 {
			data["NextJobs"] = page(jobs.LastID)
		}
		if last > 0 {
			// Job IDs are dense: the page before starts PageSize IDs
			// back (fewer with a filter, which only the first link
			// then gets exactly right).
			data["FirstJobs"] = page(0)
			if filter == "" {
				data["PrevJobs"] = page(max(last-int64(jobsPerPage), 0))
			}
		}
		if filter == "" && b.NJobs > int64(jobsPerPage) && jobs.LastID != 0 {
			data["LastJobs"] = page(max(b.NJobs-int64(jobsPerPage), 0))
		}
		sorts := map[string]string{}
		for _, k := range jobSorts {
			v := url.Values{}
			for _, f := range []string{"state", "name", "last_id", "group"} {
				if q.Get(f) != "" {
					v.Set(f, q.Get(f))
				}
			}
			v.Set("sort", k)
			sorts[k] = fmt.Sprintf("/ui/batches/%d?%s", id, v.Encode())
		}
		data["SortLinks"] = sorts
	}
	if st, err := s.client.BatchStages(ctx, id); err == nil {
		data["Stages"] = st.Stages
		data["MoreStages"] = st.More
		data["DAG"] = dagChart(st.Stages)
	}
	if !b.Complete() {
		data["Live"] = liveURL(r)
	}
	return data, nil
}

// jobsPerPage is the API's page of jobs (state.PageSize).
const jobsPerPage = 50

// sortJobs orders a page of jobs by a column (by ID when none, or an
// unknown one); ties keep the ID order.
func sortJobs(jobs []api.Job, by string) {
	key := func(j *api.Job) float64 {
		switch by {
		case "state":
			return float64(slices.Index(jobStates, j.State))
		case "exit":
			if j.ExitCode != nil {
				return float64(*j.ExitCode)
			}
			return -1
		case "attempts":
			return float64(len(j.Attempts))
		case "cost":
			return float64(jobCost(*j))
		case "cpu":
			return j.CPU
		case "memory":
			return float64(j.Memory)
		}
		return float64(j.JobID)
	}
	slices.SortStableFunc(jobs, func(a, b api.Job) int {
		ka, kb := key(&a), key(&b)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
}

// jobCost is what a job's attempts cost (running ones up to the read).
func jobCost(j api.Job) money.Amount {
	var sum money.Amount
	for _, a := range j.Attempts {
		if a.Cost != nil {
			sum = sum.Add(*a.Cost)
		}
	}
	return sum
}

func batchTitle(b *api.Batch) string {
	if b.Name != "" {
		return fmt.Sprintf("Batch %d: %s", b.ID, inert(b.Name))
	}
	return fmt.Sprintf("Batch %d", b.ID)
}

// cancelConfirm asks before a batch is cancelled, naming what will
// stop: a second step, reached by a link (keyboard and screen reader
// alike), whose form carries the CSRF token.
func (u *UI) cancelConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	b, err := s.client.GetBatch(withRemote(r.Context(), r), id)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	back := fmt.Sprintf("/ui/batches/%d", id)
	if !b.Can(api.ActionCancel) {
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	name := fmt.Sprintf("batch %d", id)
	if b.Name != "" {
		name = fmt.Sprintf("batch %d (%s)", id, inert(b.Name))
	}
	u.ask(w, r, s, question{
		Title:    fmt.Sprintf("Cancel batch %d?", id),
		Question: fmt.Sprintf("Cancel %s of billing project %s?", name, b.BillingProject),
		Consequences: []string{
			fmt.Sprintf("%s stopped now (their attempts end as cancelled; what they cost so far stays billed).", count(b.NRunning, "running job is", "running jobs are")),
			fmt.Sprintf("%s (%d pending, %d ready) never start.", count(b.NPending+b.NReady, "job that waits", "jobs that wait"), b.NPending, b.NReady),
			count(b.NCompleted, "job that already ended keeps its results and logs.", "jobs that already ended keep their results and logs."),
			"A cancelled batch cannot be resumed; submit it again to rerun it.",
		},
		Action: fmt.Sprintf("/ui/batches/%d/cancel", id), Yes: fmt.Sprintf("Cancel %s", name), No: "Keep it running", Back: back,
	})
}

// question is a confirmation page: what is asked, what follows, and the
// form that does it (Action, posted with confirm=yes, the CSRF token and
// Hidden) or leads Back.
type question struct {
	Title, Question string
	Consequences    []string
	Hidden          map[string]string
	Action, Yes, No string
	Back            string
}

// ask renders a question.
func (u *UI) ask(w http.ResponseWriter, r *http.Request, s *session, q question) {
	u.render(w, r, s, http.StatusOK, "confirm", map[string]any{"Title": q.Title, "Question": q.Question, "Consequences": q.Consequences,
		"Hidden": q.Hidden, "Action": q.Action, "Yes": q.Yes, "No": q.No, "Back": q.Back})
}

// confirmed does what a question's form posts: never in one step (a POST
// without confirm=yes only leads to the question, at asked), then back.
func (u *UI) confirmed(w http.ResponseWriter, r *http.Request, s *session, asked, back string, do func(ctx context.Context) error) {
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, asked, http.StatusSeeOther)
		return
	}
	if err := do(withRemote(r.Context(), r)); err != nil {
		u.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (u *UI) cancelBatch(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	back := fmt.Sprintf("/ui/batches/%d", id)
	u.confirmed(w, r, s, back+"/cancel", back, func(ctx context.Context) error { return s.client.CancelBatch(ctx, id) })
}

// cancelGroupConfirm asks before a job group (and the groups below it)
// is cancelled, saying what stops.
func (u *UI) cancelGroupConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	gid, err := pathInt(r, "group")
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
	g, err := s.client.JobGroup(ctx, id, strconv.FormatInt(gid, 10))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	back := fmt.Sprintf("/ui/batches/%d", id)
	if !b.Can(api.ActionCancel) || g.Cancelled || g.State == api.BatchComplete {
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	u.ask(w, r, s, question{
		Title:    fmt.Sprintf("Cancel job group %s?", g.Path),
		Question: fmt.Sprintf("Cancel job group %s of batch %d, and the groups below it?", g.Path, id),
		Consequences: []string{
			fmt.Sprintf("%s stopped now (their attempts end as cancelled; what they cost so far stays billed).", count(g.NRunning, "running job is", "running jobs are")),
			fmt.Sprintf("%s (%d pending, %d ready) never start, nor do the jobs of other groups that wait for them (unless they always run).", count(g.NPending+g.NReady, "job that waits", "jobs that wait"), g.NPending, g.NReady),
			"The rest of the batch goes on. Jobs added to the group later are cancelled as they come; a retry of the batch runs its jobs again.",
		},
		Action: fmt.Sprintf("/ui/batches/%d/groups/%d/cancel", id, gid), Yes: fmt.Sprintf("Cancel job group %s", g.Path), No: "Keep it running", Back: back,
	})
}

func (u *UI) cancelGroup(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	gid, err := pathInt(r, "group")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	back := fmt.Sprintf("/ui/batches/%d", id)
	u.confirmed(w, r, s, fmt.Sprintf("%s/groups/%d/cancel", back, gid), back, func(ctx context.Context) error {
		_, err := s.client.CancelJobGroup(ctx, id, strconv.FormatInt(gid, 10))
		return err
	})
}

// efficiencyPage is a batch's right-sizing report (drover batch
// efficiency).
func (u *UI) efficiencyPage(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	rep, err := s.client.BatchEfficiency(withRemote(r.Context(), r), id)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "efficiency", map[string]any{"Title": fmt.Sprintf("Efficiency of batch %d", id), "Report": rep, "BatchID": id})
}

// periodEfficiencyData is the right-sizing report over a period (drover
// billing efficiency): of a billing project's finished batches, or of a
// user's (by default the viewer's own), for the days chosen.
func (u *UI) periodEfficiencyData(r *http.Request, s *session) (map[string]any, error) {
	ctx := withRemote(r.Context(), r)
	q := r.URL.Query()
	eq := api.EfficiencyQuery{BillingProject: q.Get("billing_project"), User: q.Get("user"), From: q.Get("from"), To: q.Get("to")}
	projects, err := s.client.ListBillingProjects(ctx)
	if err != nil {
		return nil, err
	}
	data := map[string]any{"Title": "Efficiency over a period", "Query": eq, "Projects": projects}
	rep, err := s.client.PeriodEfficiency(ctx, eq)
	if err != nil {
		data["Error"] = errMessage(err)
		return data, nil
	}
	data["Report"] = rep
	switch {
	case rep.BillingProject != "" && rep.User != "":
		data["Whose"] = fmt.Sprintf("%s's jobs in billing project %s", rep.User, rep.BillingProject)
	case rep.BillingProject != "":
		data["Whose"] = "billing project " + rep.BillingProject
	default:
		data["Whose"] = rep.User + "'s jobs"
	}
	return data, nil
}

// retryConfirm asks before a batch's failed jobs run again.
func (u *UI) retryConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	b, err := s.client.GetBatch(withRemote(r.Context(), r), id)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	back := fmt.Sprintf("/ui/batches/%d", id)
	if !b.Can(api.ActionRetry) || b.NFailed+b.NError == 0 {
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	u.ask(w, r, s, question{
		Title:    fmt.Sprintf("Retry the failed jobs of batch %d?", id),
		Question: fmt.Sprintf("Run the %s of batch %d again?", count(b.NFailed+b.NError, "job that failed", "jobs that failed"), id),
		Consequences: []string{
			fmt.Sprintf("%d failed and %d in error run again as new attempts, with their retries counted afresh; their earlier attempts and logs are kept.", b.NFailed, b.NError),
			"The jobs cancelled because one of them failed run again once it succeeds.",
			fmt.Sprintf("They are billed to %s as any attempt.", b.BillingProject),
		},
		Action: fmt.Sprintf("/ui/batches/%d/retry", id), Yes: "Retry them", No: "Leave the batch as it is", Back: back,
	})
}

func (u *UI) retryBatch(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := pathInt(r, "id")
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	back := fmt.Sprintf("/ui/batches/%d", id)
	u.confirmed(w, r, s, back+"/retry", back, func(ctx context.Context) error {
		_, err := s.client.RetryBatch(ctx, id, &api.RetryRequest{})
		return err
	})
}

// restartConfirm asks before a running job's attempt is stopped and the
// job run again.
func (u *UI) restartConfirm(w http.ResponseWriter, r *http.Request, s *session) {
	id, jid, err := jobPath(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	ctx := withRemote(r.Context(), r)
	back := fmt.Sprintf("/ui/batches/%d/jobs/%d", id, jid)
	j, err := s.client.GetJob(ctx, id, jid)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	b, err := s.client.GetBatch(ctx, id)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	if j.State != api.JobRunning || !b.Can(api.ActionCancel) || len(j.Attempts) == 0 {
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	a := j.Attempts[len(j.Attempts)-1]
	grace := j.PreemptionGraceSeconds
	if grace == 0 {
		grace = api.DefaultPreemptionGraceSeconds
	}
	u.ask(w, r, s, question{
		Title:    fmt.Sprintf("Restart job %d of batch %d?", jid, id),
		Question: fmt.Sprintf("Restart job %d (%s) of batch %d?", jid, inert(j.Name), id),
		Consequences: []string{
			fmt.Sprintf("Its attempt %d on %s is sent SIGTERM, then SIGKILL after %g s; it ends preempted, and what it cost so far stays billed.", a.Attempt, inert(a.Instance), grace),
			"The job runs again as a new attempt, at the head of its line, counted against none of its retries.",
		},
		Action: fmt.Sprintf("/ui/batches/%d/jobs/%d/restart", id, jid), Yes: fmt.Sprintf("Restart job %d", jid), No: "Leave it running", Back: back,
	})
}

func (u *UI) restartJob(w http.ResponseWriter, r *http.Request, s *session) {
	id, jid, err := jobPath(r)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	back := fmt.Sprintf("/ui/batches/%d/jobs/%d", id, jid)
	u.confirmed(w, r, s, back+"/restart", back, func(ctx context.Context) error {
		_, err := s.client.RestartJob(ctx, id, jid)
		return err
	})
}

// logTail is how much of a log the job page shows at first.
const logTail = 64 << 10

func (u *UI) jobPage(w http.ResponseWriter, r *http.Request, s *session) {
	data, err := u.jobData(r, s)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	id, jid, _ := jobPath(r)
	j := data["Job"].(*api.Job)
	ctx := withRemote(r.Context(), r)
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
	// The log follows the job until it ends, from before its first
	// attempt starts too.
	data["Running"] = !jobFinal(j.State)
	u.render(w, r, s, http.StatusOK, "job", data)
}

// jobFinal: the job will not change again.
func jobFinal(st string) bool {
	switch st {
	case api.JobPending, api.JobReady, api.JobCreating, api.JobRunning:
		return false
	}
	return true
}

// jobData is the job page but its log: the job, its attempts and why it
// is where it is.
func (u *UI) jobData(r *http.Request, s *session) (map[string]any, error) {
	id, jid, err := jobPath(r)
	if err != nil {
		return nil, err
	}
	ctx := withRemote(r.Context(), r)
	j, err := s.client.GetJob(ctx, id, jid)
	if err != nil {
		return nil, err
	}
	data := map[string]any{"Title": fmt.Sprintf("Job %d of batch %d", jid, id), "Job": j, "BatchID": id, "Cost": jobCost(*j)}
	if why, err := s.client.JobWhy(ctx, id, jid); err == nil {
		data["Why"] = why.Reasons
	}
	if n := len(j.Attempts); n > 0 && j.Attempts[n-1].StartTime != nil {
		if use, err := s.client.AttemptUsage(ctx, id, jid, j.Attempts[n-1].Attempt); err == nil {
			data["Usage"], data["UsageAttempt"] = usageChart(use.Samples, j.CPU, j.Memory), use.Attempt
		}
	}
	if !jobFinal(j.State) {
		data["Live"] = liveURL(r)
	}
	return data, nil
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
	size := from + int64(len(data))
	if from > 0 {
		// The tail starts on a line of its own, not halfway through one.
		if i := bytes.IndexByte(data, '\n'); i >= 0 && i < len(data)-1 {
			data = data[i+1:]
		}
	}
	return string(data), size, st.Attempt, nil
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

// billingData is the billing page, live (at most every 10 s: each
// project is three reads of the cost report).
func (u *UI) billingData(r *http.Request, s *session) (map[string]any, error) {
	ctx := withRemote(r.Context(), r)
	projects, err := s.client.ListBillingProjects(ctx)
	if err != nil {
		return nil, err
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
	return map[string]any{"Title": "Billing", "Projects": out, "From": from, "To": to,
		"All": all, "Chosen": r.URL.Query().Get("project"), "More": more, "Live": liveURL(r)}, nil
}

// clustersData is the clusters page: regions and clusters, live; the
// forms that change a cluster stand apart from what updates.
func (u *UI) clustersData(r *http.Request, s *session) (map[string]any, error) {
	ctx := withRemote(r.Context(), r)
	regions, err := s.client.ListRegions(ctx)
	if err != nil {
		return nil, err
	}
	clusters, err := s.client.ListClusters(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Title": "Regions and clusters", "Regions": regions, "Clusters": clusters, "Live": liveURL(r),
		"CanChange": u.may(s, "POST /api/v1/clusters/{name}/disable") && u.may(s, "POST /api/v1/clusters/{name}/enable")}, nil
}

// clusterState disables (and maybe evacuates) or enables a cluster: the
// cluster named in the path, or chosen in the form.
func (u *UI) clusterState(w http.ResponseWriter, r *http.Request, s *session) {
	name, op := r.PathValue("name"), r.PathValue("op")
	if name == "" {
		name = r.PostFormValue("cluster")
	}
	req := &api.ClusterStateRequest{Reason: strings.TrimSpace(r.PostFormValue("reason")), Evacuate: r.PostFormValue("evacuate") == "on"}
	ctx := withRemote(r.Context(), r)
	var err error
	switch op {
	case "disable":
		if req.Reason == "" {
			err = &api.Error{StatusCode: http.StatusBadRequest, Message: "say why the cluster is taken out of service (the reason is shown to everyone)"}
			break
		}
		if r.PostFormValue("confirm") != "yes" {
			if !u.may(s, "POST /api/v1/clusters/{name}/disable") {
				u.fail(w, r, s, &api.Error{StatusCode: http.StatusForbidden, Message: fmt.Sprintf("user %q is not an admin; only admins take a cluster out of service", s.me.Name)})
				return
			}
			u.disableConfirm(w, r, s, name, req)
			return
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

// disableConfirm asks before a cluster is disabled (and evacuated),
// naming what will stop.
func (u *UI) disableConfirm(w http.ResponseWriter, r *http.Request, s *session, name string, req *api.ClusterStateRequest) {
	clusters, err := s.client.ListClusters(withRemote(r.Context(), r))
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	i := slices.IndexFunc(clusters, func(c api.Cluster) bool { return c.Name == name })
	if i < 0 {
		u.fail(w, r, s, &api.Error{StatusCode: http.StatusNotFound, Message: "no cluster " + inert(name)})
		return
	}
	c := clusters[i]
	cons := []string{fmt.Sprintf("No new job starts on its %s until it is enabled again.", count(int64(c.Workers), "worker", "workers"))}
	hidden := map[string]string{"reason": req.Reason}
	yes := "Disable " + name
	if req.Evacuate {
		cons = append(cons, fmt.Sprintf("Its %s stopped now and run again elsewhere (the stops count as neither failures nor retries).", count(int64(c.Running), "running job is", "running jobs are")))
		hidden["evacuate"] = "on"
		yes = "Disable and evacuate " + name
	} else {
		cons = append(cons, fmt.Sprintf("Its %s to the end.", count(int64(c.Running), "running job runs", "running jobs run")))
	}
	cons = append(cons, "The reason is shown to everyone: "+inert(req.Reason))
	u.ask(w, r, s, question{
		Title: "Disable cluster " + name + "?", Question: fmt.Sprintf("Take cluster %s of region %s out of service?", name, c.Region),
		Consequences: cons, Hidden: hidden, Action: "/ui/clusters/" + url.PathEscape(name) + "/disable", Yes: yes, No: "Keep it in service", Back: "/ui/clusters",
	})
}

// queuesData is the queues page's data, live.
func (u *UI) queuesData(r *http.Request, s *session) (map[string]any, error) {
	queues, err := s.client.ListQueues(withRemote(r.Context(), r))
	if err != nil {
		return nil, err
	}
	rows := queueRows(queues)
	var names []string
	if len(rows) > 0 {
		for _, res := range rows[0].Resources {
			names = append(names, res.Name)
		}
	}
	data := map[string]any{"Title": "Queues", "Queues": rows, "Resources": names}
	data["Live"] = liveURL(r)
	return data, nil
}

// capCPU is the most cores a queue may hold (0: no bound).
func capCPU(q api.Queue) float64 {
	if q.Cap != nil {
		return q.Cap.CPU
	}
	return 0
}

// autoscalerData is the autoscaler page, live.
func (u *UI) autoscalerData(r *http.Request, s *session) (map[string]any, error) {
	st, err := s.client.AutoscalerStatus(withRemote(r.Context(), r))
	if err != nil {
		return nil, err
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
	return map[string]any{"Title": "Autoscaler", "Status": st, "States": states, "ByState": byState,
		"Limited": limited, "Chart": spendChart(st.SpendHistory, st.Settings.MaxPerHour), "Live": liveURL(r)}, nil
}

// auditPageSize is how many entries a page of the audit log shows.
const auditPageSize = 100

// auditPage shows the audit log newest first, a page at a time: the
// newest page, then older ones (before the last entry shown) and back
// (after the first one). A page never ends inside a run of entries of
// the same time, so the next page's cursor, a time, misses none of them.
func (u *UI) auditPage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	user := q.Get("user")
	aq := api.AuditQuery{User: user, Limit: auditPageSize + 1, Since: time.Unix(0, 0).UTC().Format(time.RFC3339)}
	for _, c := range []struct {
		name string
		to   *time.Time
	}{{"before", &aq.Before}, {"after", &aq.After}} {
		if raw := q.Get(c.name); raw != "" {
			t, err := time.Parse(time.RFC3339Nano, raw)
			if err != nil {
				u.fail(w, r, s, &api.Error{StatusCode: http.StatusBadRequest, Message: fmt.Sprintf("%s=%.40q is not a time of the audit log", c.name, raw)})
				return
			}
			*c.to = t
		}
	}
	if !aq.Before.IsZero() && !aq.After.IsZero() {
		aq.After = time.Time{} // one cursor: the older page
	}
	entries, err := s.client.AuditPage(withRemote(r.Context(), r), aq)
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	newer, older := !aq.Before.IsZero(), !aq.After.IsZero()
	if len(entries) > auditPageSize {
		if aq.After.IsZero() {
			// More older than the page: cut at its end, before a run of
			// entries of one time (unless the run fills the page).
			older = true
			n := auditPageSize
			for n > 1 && entries[n-1].Time.Equal(entries[n].Time) {
				n--
			}
			entries = entries[:n]
		} else {
			// More newer than the page (the oldest after the cursor):
			// cut at its top likewise.
			newer = true
			n := 1
			for n < len(entries)-1 && entries[n].Time.Equal(entries[n-1].Time) {
				n++
			}
			entries = entries[n:]
		}
	}
	link := func(cursor string, t time.Time) string {
		v := url.Values{}
		if user != "" {
			v.Set("user", user)
		}
		v.Set(cursor, t.UTC().Format(time.RFC3339Nano))
		return "/ui/audit?" + v.Encode()
	}
	data := map[string]any{"Title": "Audit log", "Entries": entries, "User": user, "PageSize": auditPageSize}
	if len(entries) > 0 {
		if older {
			data["Older"] = link("before", entries[len(entries)-1].Time)
		}
		if newer {
			data["Newer"] = link("after", entries[0].Time)
		}
	}
	if newer || len(entries) == 0 && (!aq.Before.IsZero() || !aq.After.IsZero()) {
		v := url.Values{}
		if user != "" {
			v.Set("user", user)
		}
		data["Newest"] = "/ui/audit?" + v.Encode()
	}
	u.render(w, r, s, http.StatusOK, "audit", data)
}

func errMessage(err error) string {
	var ae *api.Error
	if errorsAs(err, &ae) {
		return ae.Message
	}
	return err.Error()
}

// count says n of something, in the singular for one.
func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
