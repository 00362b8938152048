package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/jobspec/nomadspec"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/nomadview"
	"github.com/drover-sched/drover/server/state"
)

// nomadHandlers serve the batch subset of Nomad's HTTP API under /v1/
// (docs/nomad.md): a Nomad job is translated (jobspec/nomadspec) into a
// drover batch created through the same admission and Raft command as a
// native one, and read back as Nomad's jobs, evaluations and allocations
// (server/nomadview). A Nomad namespace is a billing project ("default":
// the servers' default project); a Nomad token is a drover token, sent as
// X-Nomad-Token.
type nomadHandlers struct{ *Server }

// nomadRoutes are the Nomad API's routes, all for users with a token.
func (s *Server) nomadRoutes() []Route {
	n, u := &nomadHandlers{s}, AnyUser
	return []Route{
		{"PUT /v1/jobs", u, n.wrapNomad(n.handleRegister)},
		{"POST /v1/jobs", u, n.wrapNomad(n.handleRegister)},
		{"GET /v1/jobs", u, n.wrapNomad(n.handleListJobs)},
		{"PUT /v1/jobs/parse", u, n.wrapNomad(n.handleParse)},
		{"POST /v1/jobs/parse", u, n.wrapNomad(n.handleParse)},
		{"PUT /v1/validate/job", u, n.wrapNomad(n.handleValidate)},
		{"POST /v1/validate/job", u, n.wrapNomad(n.handleValidate)},
		{"GET /v1/job/{id}", u, n.wrapNomad(n.handleGetJob)},
		{"PUT /v1/job/{id}", u, n.wrapNomad(n.handleRegister)},
		{"POST /v1/job/{id}", u, n.wrapNomad(n.handleRegister)},
		{"DELETE /v1/job/{id}", u, n.wrapNomad(n.handleDeregister)},
		{"GET /v1/job/{id}/summary", u, n.wrapNomad(n.handleSummary)},
		{"PUT /v1/job/{id}/plan", u, n.wrapNomad(n.handlePlan)},
		{"POST /v1/job/{id}/plan", u, n.wrapNomad(n.handlePlan)},
		{"GET /v1/job/{id}/allocations", u, n.wrapNomad(n.handleJobAllocations)},
		{"GET /v1/job/{id}/evaluations", u, n.wrapNomad(n.handleJobEvaluations)},
		{"GET /v1/job/{id}/deployment", u, n.wrapNomad(n.handleNull)},
		{"GET /v1/job/{id}/deployments", u, n.wrapNomad(n.handleEmptyList)},
		{"GET /v1/job/{id}/versions", u, n.wrapNomad(n.handleVersions)},
		{"PUT /v1/job/{id}/dispatch", u, n.wrapNomad(n.handleDispatch)},
		{"POST /v1/job/{id}/dispatch", u, n.wrapNomad(n.handleDispatch)},
		{"PUT /v1/job/{id}/periodic/force", u, n.wrapNomad(n.handleForce)},
		{"POST /v1/job/{id}/periodic/force", u, n.wrapNomad(n.handleForce)},
		{"GET /v1/allocations", u, n.wrapNomad(n.handleListAllocations)},
		{"GET /v1/allocation/{id}", u, n.wrapNomad(n.handleGetAllocation)},
		{"GET /v1/evaluation/{id}", u, n.wrapNomad(n.handleGetEvaluation)},
		{"GET /v1/evaluation/{id}/allocations", u, n.wrapNomad(n.handleEvalAllocations)},
		{"GET /v1/client/fs/logs/{alloc}", u, n.handleLogs},
		{"GET /v1/client/fs/cat/{alloc}", u, n.handleCat},
		{"GET /v1/event/stream", u, n.handleEventStream},
		{"PUT /v1/allocation/{id}/stop", u, n.wrapNomad(n.handleStopAlloc)},
		{"POST /v1/allocation/{id}/stop", u, n.wrapNomad(n.handleStopAlloc)},
		{"GET /v1/nodes", Admin, n.wrapNomad(n.handleNodes)},
		{"GET /v1/node/{id}", Admin, n.wrapNomad(n.handleNode)},
		{"GET /v1/status/leader", u, n.wrapNomad(n.handleLeader)},
		{"GET /v1/regions", u, n.wrapNomad(n.handleRegions)},
		{"GET /v1/namespaces", u, n.wrapNomad(n.handleNamespaces)},
		{"GET /v1/agent/self", u, n.wrapNomad(n.handleAgentSelf)},
	}
}

// nomadRegion is the one Nomad region drover is: its servers federate
// by their own means (docs/architecture.md), not by Nomad's regions.
const nomadRegion = "global"

// wrapNomad answers a handler's value as Nomad does: JSON, with the index
// headers Nomad's clients read (X-Nomad-Index, the state's Raft index;
// X-Nomad-KnownLeader; X-Nomad-LastContact, 0: this server leads or
// forwarded the read to the leader), and an error as Nomad writes one:
// the status and the message in plain text.
func (s *nomadHandlers) wrapNomad(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		var err error
		var index uint64
		if r.Method == http.MethodGet {
			body, index, err = s.blockingRead(w, r, h)
		} else {
			var v any
			if v, err = h(w, r); err == nil {
				body, err = json.Marshal(v)
			}
			index = s.state.Index()
		}
		s.nomadHeadersAt(w, index)
		if err != nil {
			s.writeNomadErr(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(body, '\n'))
	}
}

func (s *nomadHandlers) nomadHeaders(w http.ResponseWriter) { s.nomadHeadersAt(w, s.state.Index()) }

func (s *nomadHandlers) nomadHeadersAt(w http.ResponseWriter, index uint64) {
	h := w.Header()
	h.Set("X-Nomad-Index", strconv.FormatUint(max(index, 1), 10))
	_, leader := s.node.Leader()
	h.Set("X-Nomad-KnownLeader", strconv.FormatBool(leader != ""))
	h.Set("X-Nomad-LastContact", "0")
}

// writeNomadErr writes an error as Nomad does: plain text.
func (s *nomadHandlers) writeNomadErr(w http.ResponseWriter, err error) {
	rec := &bufferedWriter{header: http.Header{}}
	s.writeErr(rec, err)
	var e api.ErrorResponse
	msg := rec.body.String()
	if json.Unmarshal(rec.body.Bytes(), &e) == nil && e.Error != "" {
		msg = e.Error
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(rec.code)
	_, _ = io.WriteString(w, msg)
}

// bufferedWriter keeps a response in memory.
type bufferedWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.header }
func (b *bufferedWriter) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}

// decodeNomad reads a Nomad request body: JSON, bounded, and lenient
// about fields this server does not know (newer clients send more).
func decodeNomad(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return codedf(http.StatusRequestEntityTooLarge, "request body is larger than %s", formatSize(maxBody))
		case errors.Is(err, io.EOF):
			return coded(http.StatusBadRequest, "request body is empty; expected a JSON object")
		}
		return codedf(http.StatusBadRequest, "request body is not valid: %v", err)
	}
	return nil
}

// namespaceOf is a request's namespace: ?namespace=, else the job's own,
// else "default".
func namespaceOf(r *http.Request, fromJob string) string {
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return ns
	}
	if fromJob != "" {
		return fromJob
	}
	return "default"
}

// project is the billing project a namespace names.
func (s *nomadHandlers) project(ns string) string {
	if ns == "default" {
		return s.cfg.DefaultBillingProject
	}
	return ns
}

// seesNamespace reports whether the caller may read a namespace's jobs:
// an admin, or a member of its billing project.
func (s *nomadHandlers) seesNamespace(r *http.Request, ns string) bool {
	u := userOf(r)
	if u.Admin {
		return true
	}
	p, ok := s.state.BillingProject(s.project(ns))
	return ok && p.Members[u.Name]
}

func (s *nomadHandlers) handleRegister(w http.ResponseWriter, r *http.Request) (any, error) {
	var req nomad.JobRegisterRequest
	if err := decodeNomad(w, r, &req); err != nil {
		return nil, err
	}
	if req.Job == nil {
		return nil, coded(http.StatusBadRequest, "the request has no Job")
	}
	if id := r.PathValue("id"); id != "" && (req.Job.ID == nil || *req.Job.ID != id) {
		return nil, codedf(http.StatusBadRequest, "the job's ID does not match the path's %q", id)
	}
	ns := namespaceOf(r, deref(req.Job.Namespace))
	req.Job.Namespace = &ns
	spec, err := jobSpec(req.Job)
	if err != nil {
		return nil, err
	}
	tr, err := s.translate(req.Job, req.Submission)
	if err != nil {
		return nil, err
	}
	u := userOf(r)
	cmd := &state.RegisterNomadJob{Now: time.Now().UnixNano(), Namespace: ns, ID: *req.Job.ID, User: u.Name, Project: s.project(ns),
		Spec: spec, EnforceIndex: req.EnforceIndex, JobModifyIndex: req.JobModifyIndex}
	cmd.Template = tr.Periodic != nil || tr.Parameterized != nil
	if p := tr.Periodic; p != nil {
		next, err := nomadspec.NextLaunch(p, time.Now())
		if err != nil {
			return nil, codedf(http.StatusBadRequest, "periodic: %v", err)
		}
		if !next.IsZero() {
			cmd.NextLaunch = next.UnixNano()
		}
		cmd.ProhibitOverlap = deref(p.ProhibitOverlap)
	}
	// Admitted as a batch would be, a template too: each of its
	// launches will be, and one it would refuse is refused now.
	tr.Batch.BillingProject = cmd.Project
	create, err := (&batchHandlers{s.Server}).createCommand(u, &tr.Batch)
	if err != nil {
		return nil, err
	}
	if !cmd.Template {
		cmd.Batch = create
	}
	res, err := s.apply(cmd)
	if err != nil {
		return nil, err
	}
	nr := res.(*state.NomadResult)
	out := nomad.JobRegisterResponse{JobModifyIndex: nr.Job.JobModifyIndex, Warnings: strings.Join(tr.Warnings, "\n")}
	if b := currentBatch(&nr.Job); b != 0 {
		out.EvalID, out.EvalCreateIndex = nomadview.EvalID(b, nomadview.EvalRegister), nr.Job.JobModifyIndex
	}
	return out, nil
}

// jobSpec is a job as the state keeps it (its JSON), refused past
// state.MaxNomadSpecBytes before anything reads it further.
func jobSpec(j *nomad.Job) ([]byte, error) {
	spec, err := json.Marshal(j)
	if err != nil {
		return nil, codedf(http.StatusBadRequest, "the job does not encode: %v", err)
	}
	if len(spec) > state.MaxNomadSpecBytes {
		return nil, codedf(http.StatusRequestEntityTooLarge, "the job is %d bytes as JSON; a Nomad job may have at most %d", len(spec), state.MaxNomadSpecBytes)
	}
	return spec, nil
}

// BatchCommand admits a batch for user as the API does and returns the
// command that creates it: the leader's launches of periodic Nomad jobs go
// through the same admission as a registration.
func (s *Server) BatchCommand(user string, req *api.CreateBatchRequest) (*state.CreateBatch, error) {
	u, ok := s.state.User(user)
	if !ok {
		return nil, fmt.Errorf("user %q does not exist", user)
	}
	return (&batchHandlers{s}).createCommand(u, req)
}

// ownsBatch reports whether a batch is one of a job's versions (a
// batch's attributes name its job, but a batch is the job's only if the
// job says so).
func ownsBatch(j *state.NomadJob, b uint64) bool {
	for _, v := range j.Batches {
		if v.Batch == b {
			return true
		}
	}
	return false
}

func currentBatch(j *state.NomadJob) uint64 {
	if n := len(j.Batches); n > 0 {
		return j.Batches[n-1].Batch
	}
	return 0
}

// translate turns a job into a batch, its refusals into a 400 naming
// each block (and, when the client sent the HCL it parsed, its line).
func (s *nomadHandlers) translate(job *nomad.Job, sub *nomad.JobSubmission) (*nomadspec.Translation, error) {
	var blocks nomadspec.Blocks
	if sub != nil && sub.Format == "hcl2" && len(sub.Source) <= nomadspec.MaxSource {
		if _, b, diags := nomadspec.Parse("job.nomad.hcl", []byte(sub.Source), sub.VariableFlags); !diags.HasErrors() {
			blocks = b
		}
	}
	tr, err := nomadspec.Translate(job, blocks)
	if err != nil {
		return nil, codedf(http.StatusBadRequest, "%v", err)
	}
	tr.Warnings = append(tr.Warnings, s.unknownPlaces(tr)...)
	return tr, nil
}

// unknownPlaces warns of the datacenters (clusters) and regions a job
// names that drover has none of yet: the job is accepted, and waits for
// one to join, as Nomad's would for a node there.
func (s *nomadHandlers) unknownPlaces(tr *nomadspec.Translation) []string {
	clusters, regions := map[string]bool{}, map[string]bool{}
	var names []string
	for _, cl := range s.state.Clusters() {
		clusters[cl.Name], regions[cl.Region] = true, true
		names = append(names, cl.Name)
	}
	slices.Sort(names)
	warned := map[string]bool{}
	var out []string
	for _, js := range tr.Batch.Jobs {
		for _, c := range js.Clusters {
			if !clusters[c] && !warned["dc "+c] {
				warned["dc "+c] = true
				out = append(out, fmt.Sprintf("datacenter %q: drover has no cluster of that name (its clusters: %s); the job waits until one joins", c, strings.Join(names, ", ")))
			}
		}
		for _, r := range js.Regions {
			if !regions[r] && !warned["region "+r] {
				warned["region "+r] = true
				out = append(out, fmt.Sprintf("region %q: drover has no cluster in that region; the job waits until one joins", r))
			}
		}
	}
	return out
}

// registered reads a job of the caller's namespace (404 when it is not
// there or the caller may not see it: Nomad does not tell the two apart).
func (s *nomadHandlers) registered(r *http.Request, id string) (*nomadview.Registered, error) {
	ns := namespaceOf(r, "")
	rec, ok := s.state.NomadJob(ns, id)
	if !ok || !s.seesNamespace(r, ns) {
		return nil, codedf(http.StatusNotFound, "job not found: %q in namespace %q", id, ns)
	}
	reg := &nomadview.Registered{Rec: rec}
	if b := currentBatch(&rec); b != 0 {
		if batch, ok := s.reads.Batch(b); ok {
			reg.Batch = &batch
		} else if old, err := (&batchHandlers{s.Server}).archivedBatch(r, b); err == nil {
			reg.Batch = &old.Batch
		}
	}
	return reg, nil
}

func (s *nomadHandlers) handleGetJob(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, err := s.registered(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return reg.Job()
}

func (s *nomadHandlers) handleVersions(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, err := s.registered(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	j, err := reg.Job()
	if err != nil {
		return nil, err
	}
	return nomad.JobVersionsResponse{Versions: []*nomad.Job{j}}, nil
}

func (s *nomadHandlers) handleListJobs(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	ns := namespaceOf(r, "")
	visible := func(n string) bool { return (ns == "*" || n == ns) && s.seesNamespace(r, n) }
	limit := 1000
	if pp := q.Get("per_page"); pp != "" {
		n, err := strconv.Atoi(pp)
		if err != nil || n < 1 {
			return nil, codedf(http.StatusBadRequest, "per_page=%q is not a positive integer", pp)
		}
		limit = min(n, limit)
	}
	var after state.NomadKey
	if next := q.Get("next_token"); next != "" {
		after.Namespace, after.ID, _ = strings.Cut(next, ".")
	}
	recs := s.state.NomadJobs(visible, q.Get("prefix"), after, limit+1)
	if len(recs) > limit {
		last := recs[limit-1]
		w.Header().Set("X-Nomad-NextToken", last.Namespace+"."+last.ID)
		recs = recs[:limit]
	}
	out := make([]*nomad.JobListStub, 0, len(recs))
	for _, rec := range recs {
		reg := &nomadview.Registered{Rec: rec}
		if b := currentBatch(&rec); b != 0 {
			if batch, ok := s.reads.Batch(b); ok {
				reg.Batch = &batch
			}
		}
		stub, err := reg.Stub()
		if err != nil {
			return nil, err
		}
		out = append(out, stub)
	}
	return out, nil
}

func (s *nomadHandlers) handleDeregister(w http.ResponseWriter, r *http.Request) (any, error) {
	ns, id := namespaceOf(r, ""), r.PathValue("id")
	if _, err := s.registered(r, id); err != nil {
		return nil, err
	}
	u := userOf(r)
	purge := r.URL.Query().Get("purge") == "true"
	res, err := s.apply(&state.DeregisterNomadJob{Now: time.Now().UnixNano(), Namespace: ns, ID: id, User: u.Name, Purge: purge})
	if err != nil {
		return nil, err
	}
	nr := res.(*state.NomadResult)
	out := nomad.JobDeregisterResponse{JobModifyIndex: nr.Job.ModifyIndex}
	if b := currentBatch(&nr.Job); b != 0 {
		out.EvalID, out.EvalCreateIndex = nomadview.EvalID(b, nomadview.EvalStop), nr.Job.ModifyIndex
	}
	return out, nil
}

// maxNomadJobsListed bounds the drover jobs an allocation listing or a
// summary reads of one batch.
const maxNomadJobsListed = 100_000

// batchJobs reads a batch's jobs (from the history store once it left the
// state), up to maxNomadJobsListed.
func (s *nomadHandlers) batchJobs(r *http.Request, batch uint64) ([]api.Job, error) {
	var out []api.Job
	var last uint32
	for len(out) < maxNomadJobsListed {
		page, found := s.reads.ListJobs(batch, nil, last)
		if !found {
			st, err := s.historyStore(fmt.Sprintf("batch %d", batch))
			if err != nil {
				return nil, err
			}
			all, err := st.ListJobs(r.Context(), batch, api.JobQuery{}, last)
			if err != nil {
				return nil, historyFailed(batch, err)
			}
			page = all
		}
		out = append(out, page.Jobs...)
		if page.LastID == 0 || len(page.Jobs) == 0 {
			break
		}
		last = uint32(page.LastID)
	}
	return out, nil
}

func (s *nomadHandlers) handleSummary(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, err := s.registered(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	var jobs []api.Job
	if b := reg.CurrentBatch(); b != 0 {
		if jobs, err = s.batchJobs(r, b); err != nil {
			return nil, err
		}
	}
	return reg.Summary(jobs), nil
}

// allocations lists the allocations of a job's current version: every
// attempt of every drover job of its batch.
func (s *nomadHandlers) allocations(r *http.Request, reg *nomadview.Registered) ([]*nomad.AllocationListStub, error) {
	out := []*nomad.AllocationListStub{}
	b := reg.CurrentBatch()
	if b == 0 {
		return out, nil
	}
	jobs, err := s.batchJobs(r, b)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		for k := range jobs[i].Attempts {
			out = append(out, reg.AllocStub(&jobs[i], &jobs[i].Attempts[k]))
		}
	}
	return out, nil
}

func (s *nomadHandlers) handleJobAllocations(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, err := s.registered(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.allocations(r, reg)
}

func (s *nomadHandlers) handleListAllocations(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	ns := namespaceOf(r, "")
	visible := func(n string) bool { return (ns == "*" || n == ns) && s.seesNamespace(r, n) }
	out := []*nomad.AllocationListStub{}
	prefix := q.Get("prefix")
	for _, rec := range s.state.NomadJobs(visible, "", state.NomadKey{}, 1000) {
		reg, err := s.registered(withNamespace(r, rec.Namespace), rec.ID)
		if err != nil {
			continue
		}
		allocs, err := s.allocations(r, reg)
		if err != nil {
			return nil, err
		}
		for _, a := range allocs {
			if strings.HasPrefix(a.ID, prefix) {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// withNamespace is r asking for namespace ns.
func withNamespace(r *http.Request, ns string) *http.Request {
	r2 := r.Clone(r.Context())
	q := r2.URL.Query()
	q.Set("namespace", ns)
	r2.URL.RawQuery = q.Encode()
	return r2
}

// alloc finds an allocation by its ID: its batch, job and attempt, and
// the Nomad job they belong to.
func (s *nomadHandlers) alloc(r *http.Request, id string) (*nomadview.Registered, *api.Job, *api.Attempt, error) {
	notFound := codedf(http.StatusNotFound, "alloc not found: %q", id)
	b, jid, attempt, ok := nomadview.ParseAllocID(id)
	if !ok {
		return nil, nil, nil, notFound
	}
	j, found := s.reads.Job(b, jid)
	if !found {
		old, err := (&batchHandlers{s.Server}).archivedJob(r, b, jid)
		if err != nil {
			return nil, nil, nil, notFound
		}
		j = old
	}
	if attempt < 1 || attempt > len(j.Attempts) {
		return nil, nil, nil, notFound
	}
	batch, ok := s.reads.Batch(b)
	if !ok {
		old, err := (&batchHandlers{s.Server}).archivedBatch(r, b)
		if err != nil {
			return nil, nil, nil, notFound
		}
		batch = old.Batch
	}
	ns, jobID := batch.Attributes[nomadspec.AttrNamespace], batch.Attributes[nomadspec.AttrJob]
	reg, err := s.registered(withNamespace(r, ns), jobID)
	if err != nil || !ownsBatch(&reg.Rec, b) {
		return nil, nil, nil, notFound
	}
	reg.Batch = &batch
	a := j.Attempts[attempt-1]
	return reg, &j, &a, nil
}

func (s *nomadHandlers) handleGetAllocation(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, j, a, err := s.alloc(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return reg.Alloc(j, a)
}

// waitingGroups says, of each group of the job's current version with
// Ready jobs the last scheduling round did not place, why.
func (s *nomadHandlers) waitingGroups(reg *nomadview.Registered) map[string]string {
	if reg.Batch == nil || reg.Batch.Complete() || s.waiting == nil || reg.Batch.NReady == 0 {
		return nil
	}
	ws := s.waiting.Batch(uint64(reg.Batch.ID))
	if len(ws) == 0 {
		return nil
	}
	out := map[string]string{}
	spec, err := reg.Spec()
	if err != nil {
		return nil
	}
	for _, g := range spec.TaskGroups {
		out[deref(g.Name)] = ws[0].Reason
	}
	return out
}

func (s *nomadHandlers) handleJobEvaluations(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, err := s.registered(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return reg.Evaluations(s.waitingGroups(reg)), nil
}

// eval finds an evaluation by its ID.
func (s *nomadHandlers) eval(r *http.Request, id string) (*nomadview.Registered, uint64, nomadview.EvalKind, error) {
	notFound := codedf(http.StatusNotFound, "eval not found: %q", id)
	b, kind, ok := nomadview.ParseEvalID(id)
	if !ok {
		return nil, 0, 0, notFound
	}
	batch, ok := s.reads.Batch(b)
	if !ok {
		old, err := (&batchHandlers{s.Server}).archivedBatch(r, b)
		if err != nil {
			return nil, 0, 0, notFound
		}
		batch = old.Batch
	}
	reg, err := s.registered(withNamespace(r, batch.Attributes[nomadspec.AttrNamespace]), batch.Attributes[nomadspec.AttrJob])
	if err != nil || !ownsBatch(&reg.Rec, b) {
		return nil, 0, 0, notFound
	}
	reg.Batch = &batch
	return reg, b, kind, nil
}

func (s *nomadHandlers) handleGetEvaluation(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, b, kind, err := s.eval(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return reg.Eval(b, kind, s.waitingGroups(reg)), nil
}

func (s *nomadHandlers) handleEvalAllocations(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, _, kind, err := s.eval(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if kind != nomadview.EvalRegister {
		return []*nomad.AllocationListStub{}, nil
	}
	return s.allocations(r, reg)
}

func (s *nomadHandlers) handleNull(w http.ResponseWriter, r *http.Request) (any, error) {
	if _, err := s.registered(r, r.PathValue("id")); err != nil {
		return nil, err
	}
	return json.RawMessage("null"), nil
}

func (s *nomadHandlers) handleEmptyList(w http.ResponseWriter, r *http.Request) (any, error) {
	if _, err := s.registered(r, r.PathValue("id")); err != nil {
		return nil, err
	}
	return []any{}, nil
}

func (s *nomadHandlers) handleParse(w http.ResponseWriter, r *http.Request) (any, error) {
	var req nomad.JobsParseRequest
	if err := decodeNomad(w, r, &req); err != nil {
		return nil, err
	}
	vars, err := parseVariables(req.Variables)
	if err != nil {
		return nil, err
	}
	job, _, diags := nomadspec.Parse("job.nomad.hcl", []byte(req.JobHCL), vars)
	if diags.HasErrors() {
		return nil, codedf(http.StatusBadRequest, "%s", strings.TrimSpace(formatDiags(diags)))
	}
	if req.Canonicalize {
		job.Canonicalize()
	}
	return job, nil
}

// parseVariables reads HCL variable assignments (name = "value" lines,
// as `nomad job run -var-file` sends them) into -var values.
func parseVariables(src string) (map[string]string, error) {
	out := map[string]string{}
	for line := range strings.SplitSeq(src, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, codedf(http.StatusBadRequest, "variables: %q is not name = value", line)
		}
		v = strings.TrimSpace(v)
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

func formatDiags(diags interface{ Error() string }) string { return diags.Error() }

func (s *nomadHandlers) handleValidate(w http.ResponseWriter, r *http.Request) (any, error) {
	var req nomad.JobValidateRequest
	if err := decodeNomad(w, r, &req); err != nil {
		return nil, err
	}
	out := nomad.JobValidateResponse{DriverConfigValidated: true}
	if req.Job == nil {
		out.Error, out.ValidationErrors = "the request has no Job", []string{"the request has no Job"}
		return out, nil
	}
	if _, err := jobSpec(req.Job); err != nil {
		return nil, err
	}
	tr, err := nomadspec.Translate(req.Job, nil)
	if err != nil {
		var errs nomadspec.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				out.ValidationErrors = append(out.ValidationErrors, e.Error())
			}
		} else {
			out.ValidationErrors = []string{err.Error()}
		}
		out.Error = err.Error()
		return out, nil
	}
	out.Warnings = strings.Join(tr.Warnings, "\n")
	return out, nil
}

func (s *nomadHandlers) handleLeader(w http.ResponseWriter, r *http.Request) (any, error) {
	addr, _ := s.node.Leader()
	return addr, nil
}

func (s *nomadHandlers) handleRegions(w http.ResponseWriter, r *http.Request) (any, error) {
	return []string{nomadRegion}, nil
}

func (s *nomadHandlers) handleNamespaces(w http.ResponseWriter, r *http.Request) (any, error) {
	u := userOf(r)
	out := []*nomad.Namespace{}
	for _, p := range s.state.BillingProjects(u) {
		name := p.Name
		if name == s.cfg.DefaultBillingProject {
			name = "default"
		}
		out = append(out, &nomad.Namespace{Name: name, Description: "drover billing project " + p.Name})
	}
	slices.SortFunc(out, func(a, b *nomad.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *nomadHandlers) handleAgentSelf(w http.ResponseWriter, r *http.Request) (any, error) {
	_, leader := s.node.Leader()
	return map[string]any{
		"config": map[string]any{"Region": nomadRegion, "Datacenter": "drover", "NodeName": s.cfg.ID, "Version": map[string]any{"Version": "drover"}},
		"member": map[string]any{"Name": s.cfg.ID, "Addr": s.cfg.Advertise, "Status": "alive",
			"Tags": map[string]string{"region": nomadRegion, "dc": "drover", "role": "nomad", "build": "drover", "leader": strconv.FormatBool(leader == s.cfg.ID)}},
		"stats": map[string]any{},
	}, nil
}

// handleLogs streams an allocation's log as Nomad's client does: frames
// of {Offset, Data, File} (or the bare text with plain=true), from the
// start or, with origin=end, offset bytes before the end; with follow,
// what the attempt writes next until it ends. drover keeps one log of an
// attempt's output: it is stdout; stderr is empty. The log is read from
// the log store from where the stream is, never whole again, and a user
// follows at most maxStreams logs and event streams at once.
func (s *nomadHandlers) handleLogs(w http.ResponseWriter, r *http.Request) {
	noWriteDeadline(w)
	s.nomadHeaders(w)
	_, j, a, err := s.alloc(r, r.PathValue("alloc"))
	if err != nil {
		s.writeNomadErr(w, err)
		return
	}
	q := r.URL.Query()
	_, task, _ := nomadview.Place(j)
	if t := q.Get("task"); t != "" && t != task {
		s.writeNomadErr(w, codedf(http.StatusBadRequest, "unknown task name %q: this allocation runs task %q", t, task))
		return
	}
	typ := q.Get("type")
	if typ == "" {
		typ = "stdout"
	}
	if typ != "stdout" && typ != "stderr" {
		s.writeNomadErr(w, codedf(http.StatusBadRequest, "type=%q: it is stdout or stderr", typ))
		return
	}
	offset := int64(0)
	if o := q.Get("offset"); o != "" {
		if offset, err = strconv.ParseInt(o, 10, 64); err != nil || offset < 0 {
			s.writeNomadErr(w, codedf(http.StatusBadRequest, "offset=%q is not a non-negative integer", o))
			return
		}
	}
	plain, follow, fromEnd := q.Get("plain") == "true", q.Get("follow") == "true", q.Get("origin") == "end"
	if follow {
		release, err := s.streams.take(userOf(r).Name)
		if err != nil {
			s.writeNomadErr(w, err)
			return
		}
		defer release()
	}
	file := "alloc/logs/" + task + "." + typ + ".0"
	batch, job := uint64(j.BatchID), uint32(j.JobID)
	b := &batchHandlers{s.Server}
	// size is the log's length now (what the log store and the other
	// servers hold of it).
	size := func() (int64, error) {
		if typ == "stderr" {
			return 0, nil
		}
		probe := &bufferedWriter{header: http.Header{}}
		b.writeLog(probe, logRequest(r, math.MaxInt64), batch, job, a.Attempt)
		if probe.code != 0 && probe.code != http.StatusOK { // 0: nothing written past the end
			return 0, codedf(max(probe.code, http.StatusInternalServerError), "%s", strings.TrimSpace(probe.body.String()))
		}
		n, _ := strconv.ParseInt(probe.header.Get(api.LogSizeHeader), 10, 64)
		return n, nil
	}
	total, err := size()
	if err != nil {
		s.writeNomadErr(w, err)
		return
	}
	pos := min(offset, total)
	if fromEnd {
		pos = max(total-offset, 0)
	}
	w.Header().Set("Content-Type", "application/json")
	if plain {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.WriteHeader(http.StatusOK)
	out := &frameWriter{w: w, enc: json.NewEncoder(w), plain: plain, file: file, pos: pos}
	// send writes what the log holds from pos on.
	send := func() bool {
		if typ == "stderr" {
			return true
		}
		b.writeLog(out, logRequest(r, out.pos), batch, job, a.Attempt)
		_ = http.NewResponseController(w).Flush()
		return out.err == nil
	}
	if !send() {
		return
	}
	for follow && !nomadview.Ended(a) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		_, _, a2, err := s.alloc(r, r.PathValue("alloc"))
		if err != nil {
			return
		}
		a = a2
		before := out.pos
		if !send() {
			return
		}
		if out.pos == before && !plain {
			// Nomad's heartbeat: an empty frame.
			if _, err := io.WriteString(w, "{}\n"); err != nil {
				return
			}
			_ = http.NewResponseController(w).Flush()
		}
	}
}

// logRequest is a request for an attempt's log from offset on, carrying
// nothing else of the Nomad request (writeLog reads its query).
func logRequest(r *http.Request, offset int64) *http.Request {
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = url.Values{"offset": {strconv.FormatInt(offset, 10)}}.Encode()
	return r2
}

// frameWriter writes a log as Nomad's frames (or as text), counting where
// it is.
type frameWriter struct {
	w     http.ResponseWriter
	enc   *json.Encoder
	plain bool
	file  string
	pos   int64
	err   error
}

func (f *frameWriter) Header() http.Header { return http.Header{} }

// WriteHeader ends the stream at an error status: what follows is an
// error's body, not the log.
func (f *frameWriter) WriteHeader(code int) {
	if code >= 400 && f.err == nil {
		f.err = fmt.Errorf("the log could not be read (%d)", code)
	}
}

func (f *frameWriter) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	if f.plain {
		_, f.err = f.w.Write(p)
	} else {
		f.err = f.enc.Encode(&nomad.StreamFrame{Offset: f.pos, Data: p, File: f.file})
	}
	if f.err != nil {
		return 0, f.err
	}
	f.pos += int64(len(p))
	return len(p), nil
}

// maxStreams bounds the logs a user follows and the event streams it
// holds open at once.
const maxStreams = 8

// streamSlots counts each user's open streams.
type streamSlots struct {
	mu   sync.Mutex
	open map[string]int
	// most is the streams one user may hold (0: maxStreams), and what
	// they are called in the refusal; mostTotal those of every user
	// together (0: no bound but each user's).
	most      int
	what      string
	mostTotal int
	total     int
}

func (c *streamSlots) take(user string) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		c.open = map[string]int{}
	}
	most, what := c.most, c.what
	if most == 0 {
		most, what = maxStreams, "log follows and event streams"
	}
	if c.open[user] >= most {
		return nil, codedf(http.StatusTooManyRequests, "user %q has %d %s open, the most one may", user, most, what)
	}
	if c.mostTotal > 0 && c.total >= c.mostTotal {
		return nil, codedf(http.StatusServiceUnavailable, "this server holds %d %s, the most it may; try another server or later", c.total, what)
	}
	c.open[user]++
	c.total++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.total--
		if c.open[user]--; c.open[user] == 0 {
			delete(c.open, user)
		}
	}, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// launch makes a child of a template the caller may see, on the caller's
// behalf, through admission.
func (s *nomadHandlers) launch(r *http.Request, id string, l nomadview.Launch) (*state.NomadResult, error) {
	reg, err := s.registered(r, id)
	if err != nil {
		return nil, err
	}
	rec := &reg.Rec
	if !rec.Template {
		return nil, codedf(http.StatusBadRequest, "job %q is neither periodic nor parameterized", id)
	}
	if rec.Stopped {
		return nil, codedf(http.StatusBadRequest, "job %q is stopped", id)
	}
	child, tr, err := nomadview.Child(rec, l)
	if err != nil {
		return nil, codedf(http.StatusBadRequest, "%v", err)
	}
	u := userOf(r)
	create, err := (&batchHandlers{s.Server}).createCommand(u, &tr.Batch)
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(child)
	if err != nil {
		return nil, fmt.Errorf("encode the child job: %w", err)
	}
	res, err := s.apply(&state.LaunchNomadJob{Now: l.Now.UnixNano(), Parent: state.NomadKey{Namespace: rec.Namespace, ID: rec.ID}, Token: l.Token,
		Child: state.RegisterNomadJob{Now: l.Now.UnixNano(), Namespace: rec.Namespace, ID: *child.ID, User: u.Name, Project: rec.Project,
			Spec: spec, Parent: rec.ID, Batch: create}})
	if err != nil {
		return nil, err
	}
	return res.(*state.NomadResult), nil
}

func (s *nomadHandlers) handleDispatch(w http.ResponseWriter, r *http.Request) (any, error) {
	var req nomad.JobDispatchRequest
	if err := decodeNomad(w, r, &req); err != nil {
		return nil, err
	}
	if len(req.Payload) > nomadspec.MaxPayload {
		return nil, codedf(http.StatusBadRequest, "the payload is %d bytes; at most %d", len(req.Payload), nomadspec.MaxPayload)
	}
	token := r.URL.Query().Get("idempotency_token")
	if len(token) > state.MaxNomadIDBytes {
		return nil, codedf(http.StatusBadRequest, "the idempotency token is %d bytes; at most %d", len(token), state.MaxNomadIDBytes)
	}
	if len(req.IdPrefixTemplate) > 64 || strings.ContainsFunc(req.IdPrefixTemplate, func(c rune) bool {
		return !(c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
	}) {
		return nil, codedf(http.StatusBadRequest, "id_prefix_template %.70q: at most 64 letters, digits, - and _", req.IdPrefixTemplate)
	}
	if req.Priority < 0 || req.Priority > 100 {
		return nil, codedf(http.StatusBadRequest, "priority %d: Nomad's priorities are 1 to 100 (0: the job's)", req.Priority)
	}
	if err := api.ValidateAttributes(req.Meta); err != nil {
		return nil, codedf(http.StatusBadRequest, "meta: %v", err)
	}
	res, err := s.launch(r, r.PathValue("id"), nomadview.Launch{Now: time.Now(), Dispatch: true, Meta: req.Meta, Payload: req.Payload, Token: token,
		Priority: req.Priority, Prefix: req.IdPrefixTemplate})
	if err != nil {
		return nil, err
	}
	out := nomad.JobDispatchResponse{DispatchedJobID: res.Job.ID, JobCreateIndex: res.Job.CreateIndex}
	if b := currentBatch(&res.Job); b != 0 {
		out.EvalID, out.EvalCreateIndex = nomadview.EvalID(b, nomadview.EvalRegister), res.Job.JobModifyIndex
	}
	return out, nil
}

func (s *nomadHandlers) handleForce(w http.ResponseWriter, r *http.Request) (any, error) {
	reg, err := s.registered(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if spec, err := reg.Spec(); err != nil || spec.Periodic == nil {
		return nil, codedf(http.StatusBadRequest, "job %q is not periodic", reg.Rec.ID)
	}
	res, err := s.launch(r, reg.Rec.ID, nomadview.Launch{Now: time.Now()})
	if err != nil {
		return nil, err
	}
	out := struct{ EvalID string }{}
	if b := currentBatch(&res.Job); b != 0 {
		out.EvalID = nomadview.EvalID(b, nomadview.EvalRegister)
	}
	return out, nil
}

// maxBlock bounds a blocking query's wait, as Nomad's servers do.
const maxBlock = 10 * time.Minute

// blockingRead answers a read, as a blocking query when it asks to be one
// (?index=N&wait=D, as Nomad's clients send to wait for a change): the
// answer waits until it differs from the one this server gave at index N,
// or D has passed (5 minutes when absent, at most 10). drover's index is
// the whole state's, which moves with every entry, so what a blocking
// query waits for is its own answer to change: the answers given lately
// are remembered by their index (blockCache), and a query naming an index
// this server did not answer at is answered at once, as a Nomad server
// answers one whose index is behind.
func (s *nomadHandlers) blockingRead(w http.ResponseWriter, r *http.Request, h handlerFunc) ([]byte, uint64, error) {
	q := r.URL.Query()
	var wait time.Duration
	var since uint64
	blocking := q.Has("index")
	if blocking {
		var err error
		if since, err = strconv.ParseUint(q.Get("index"), 10, 64); err != nil {
			return nil, 0, codedf(http.StatusBadRequest, "index=%q is not a non-negative integer", q.Get("index"))
		}
		wait = 5 * time.Minute
		if ws := q.Get("wait"); ws != "" {
			if wait, err = time.ParseDuration(ws); err != nil || wait < 0 {
				secs, err2 := strconv.Atoi(ws)
				if err2 != nil || secs < 0 {
					return nil, 0, codedf(http.StatusBadRequest, "wait=%q is not a duration", ws)
				}
				wait = time.Duration(secs) * time.Second
			}
		}
		noWriteDeadline(w)
	}
	key := blockKey(r)
	seen, known := s.blocks.get(key, since)
	deadline := time.Now().Add(min(wait, maxBlock))
	for {
		index := s.state.Index()
		v, err := h(w, r)
		if err != nil {
			return nil, index, err
		}
		body, err := json.Marshal(v)
		if err != nil {
			return nil, index, err
		}
		sum := sha256.Sum256(body)
		if !blocking || !known || sum != seen || !time.Now().Before(deadline) {
			s.blocks.put(key, index, sum)
			return body, index, nil
		}
		// Unchanged: wait for the state to move, then look again, at
		// most four times a second (a look may list a large batch).
		for first := true; first || s.state.Index() == index && time.Now().Before(deadline); first = false {
			select {
			case <-r.Context().Done():
				return nil, index, r.Context().Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

// blockKey names what a read answers, as a digest of its caller, path
// and query but for the blocking query's own parameters (a digest: a key
// the caller wrote would be as large as its request).
func blockKey(r *http.Request) [sha256.Size]byte {
	q := r.URL.Query()
	q.Del("index")
	q.Del("wait")
	q.Del("stale")
	return sha256.Sum256([]byte(userOf(r).Name + "\x00" + r.URL.Path + "?" + q.Encode()))
}

// maxBlockCache bounds the answers remembered for blocking queries.
const maxBlockCache = 10_000

// blockCache remembers the answers given lately (a digest of each, by what
// was asked and the index it was given at), oldest forgotten first.
type blockCache struct {
	mu    sync.Mutex
	m     map[blockEntry][sha256.Size]byte
	order []blockEntry // a ring of the entries, oldest at next
	next  int
}

type blockEntry struct {
	key   [sha256.Size]byte
	index uint64
}

func (c *blockCache) get(key [sha256.Size]byte, index uint64) ([sha256.Size]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[blockEntry{key, index}]
	return v, ok
}

func (c *blockCache) put(key [sha256.Size]byte, index uint64, sum [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[blockEntry][sha256.Size]byte{}
	}
	e := blockEntry{key, index}
	if _, ok := c.m[e]; ok {
		return
	}
	c.m[e] = sum
	if len(c.order) < maxBlockCache {
		c.order = append(c.order, e)
		return
	}
	delete(c.m, c.order[c.next])
	c.order[c.next] = e
	c.next = (c.next + 1) % maxBlockCache
}

func (s *nomadHandlers) handleNodes(w http.ResponseWriter, r *http.Request) (any, error) {
	prefix := r.URL.Query().Get("prefix")
	out := []*nomad.NodeListStub{}
	for _, in := range apiview.Instances(s.state.Instances()) {
		if stub := nomadview.NodeStub(&in); strings.HasPrefix(stub.ID, prefix) {
			out = append(out, stub)
		}
	}
	return out, nil
}

func (s *nomadHandlers) handleNode(w http.ResponseWriter, r *http.Request) (any, error) {
	id := strings.ToLower(r.PathValue("id"))
	for _, in := range apiview.Instances(s.state.Instances()) {
		if nomadview.NodeID(in.Name) == id {
			return nomadview.Node(&in), nil
		}
	}
	return nil, codedf(http.StatusNotFound, "node not found: %q", id)
}

// handleStopAlloc stops an allocation as Nomad's alloc stop does: its
// attempt is told to stop (SIGTERM, the job's grace, SIGKILL) and its
// job runs again, as a preempted attempt does.
func (s *nomadHandlers) handleStopAlloc(w http.ResponseWriter, r *http.Request) (any, error) {
	_, j, a, err := s.alloc(r, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	u := userOf(r)
	b := uint64(j.BatchID)
	if s.state.Access(b, viewerOf(r)) < state.Cancellable {
		return nil, codedf(http.StatusForbidden, "user %q may not stop allocations of batch %d: its owner, a manager of its project or an admin can", u.Name, b)
	}
	if nomadview.Ended(a) {
		return nil, codedf(http.StatusBadRequest, "allocation %s has ended (%s)", r.PathValue("id"), a.State)
	}
	if _, err := s.apply(&state.Preempt{Now: time.Now().UnixNano(), Attempts: []state.PreemptAttempt{{
		AttemptID: state.AttemptID{Batch: b, Job: uint32(j.JobID), Attempt: uint16(a.Attempt)},
		Reason:    "allocation stopped by " + u.Name + " (Nomad's alloc stop)"}}}); err != nil {
		return nil, err
	}
	return nomad.AllocStopResponse{EvalID: nomadview.EvalID(b, nomadview.EvalRegister)}, nil
}

// handleCat answers a file of an allocation: drover keeps one, the task's
// log (alloc/logs/<task>.stdout.0; the .stderr.0 beside it is empty).
func (s *nomadHandlers) handleCat(w http.ResponseWriter, r *http.Request) {
	s.nomadHeaders(w)
	_, j, a, err := s.alloc(r, r.PathValue("alloc"))
	if err != nil {
		s.writeNomadErr(w, err)
		return
	}
	_, task, _ := nomadview.Place(j)
	switch r.URL.Query().Get("path") {
	case "alloc/logs/" + task + ".stdout.0", "/alloc/logs/" + task + ".stdout.0":
	case "alloc/logs/" + task + ".stderr.0", "/alloc/logs/" + task + ".stderr.0":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		return
	default:
		s.writeNomadErr(w, codedf(http.StatusNotFound, "drover keeps one file of an allocation, its task's log: alloc/logs/%s.stdout.0", task))
		return
	}
	noWriteDeadline(w)
	(&batchHandlers{s.Server}).writeLog(w, logRequest(r, 0), uint64(j.BatchID), uint32(j.JobID), a.Attempt)
}

// Event stream bounds: the jobs one stream watches, and how often it looks.
const (
	maxStreamJobs   = 1000
	maxStreamItems  = 100_000
	streamInterval  = 500 * time.Millisecond
	streamHeartbeat = 10 * time.Second
)

// handleEventStream streams changes of the caller's Nomad jobs, their
// evaluations and their allocations as Nomad's event stream does
// (newline-delimited {Index, Events}, with {} heartbeats): Job
// (JobRegistered, JobDeregistered), Evaluation (EvaluationUpdated) and
// Allocation (AllocationUpdated) topics, a key (a job's ID) or * each.
// drover keeps no log of events to replay: a stream tells what changes
// from when it starts, found by comparing what it sees twice a second, for
// the first 1,000 jobs of the namespace.
func (s *nomadHandlers) handleEventStream(w http.ResponseWriter, r *http.Request) {
	noWriteDeadline(w)
	s.nomadHeaders(w)
	release, err := s.streams.take(userOf(r).Name)
	if err != nil {
		s.writeNomadErr(w, err)
		return
	}
	defer release()
	q := r.URL.Query()
	topics := map[string][]string{}
	for _, t := range q["topic"] {
		topic, key, _ := strings.Cut(t, ":")
		switch topic {
		case "*", "Job", "Evaluation", "Allocation":
		case "Deployment", "Node", "NodePool", "Service", "ACLToken", "ACLPolicy", "ACLRole", "Operator":
			continue // nothing of drover's is one of them
		default:
			s.writeNomadErr(w, codedf(http.StatusBadRequest, "unknown topic %q", topic))
			return
		}
		if key == "" {
			key = "*"
		}
		topics[topic] = append(topics[topic], key)
	}
	if len(q["topic"]) == 0 {
		topics["*"] = []string{"*"}
	}
	wants := func(topic, jobID string) bool {
		for _, t := range []string{topic, "*"} {
			for _, k := range topics[t] {
				if k == "*" || k == jobID {
					return true
				}
			}
		}
		return false
	}
	ns := namespaceOf(r, "")
	visible := func(n string) bool { return (ns == "*" || n == ns) && s.seesNamespace(r, n) }
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flush := func() { _ = http.NewResponseController(w).Flush() }
	flush()
	enc := json.NewEncoder(w)
	seen := map[string][sha256.Size]byte{} // what the last look saw, by topic and key
	first := true
	lastSent := time.Now()
	for {
		if _, ok := s.stillValid(r); !ok {
			return // its token was revoked or expired, or its user deleted
		}
		index := s.state.Index()
		var events []nomad.Event
		now := map[string][sha256.Size]byte{}
		emit := func(topic, typ, key, jobID string, payloadKey string, v any) {
			if len(now) >= maxStreamItems {
				return
			}
			body, err := json.Marshal(v)
			if err != nil {
				return
			}
			sum := sha256.Sum256(body)
			id := topic + "\x00" + key
			now[id] = sum
			if old, ok := seen[id]; ok && old == sum {
				return
			}
			if first || !wants(topic, jobID) {
				return
			}
			var payload map[string]any
			_ = json.Unmarshal([]byte(`{"`+payloadKey+`":`+string(body)+`}`), &payload)
			events = append(events, nomad.Event{Topic: nomad.Topic(topic), Type: typ, Key: key, FilterKeys: []string{jobID}, Index: index, Payload: payload})
		}
		for _, rec := range s.state.NomadJobs(visible, "", state.NomadKey{}, maxStreamJobs) {
			reg, err := s.registered(withNamespace(r, rec.Namespace), rec.ID)
			if err != nil {
				continue
			}
			if job, err := reg.Job(); err == nil {
				typ := "JobRegistered"
				if rec.Stopped {
					typ = "JobDeregistered"
				}
				emit("Job", typ, rec.ID, rec.ID, "Job", job)
			}
			for _, ev := range reg.Evaluations(s.waitingGroups(reg)) {
				emit("Evaluation", "EvaluationUpdated", ev.ID, rec.ID, "Evaluation", ev)
			}
			if wants("Allocation", rec.ID) {
				allocs, err := s.allocations(r, reg)
				if err != nil {
					continue
				}
				for _, a := range allocs {
					emit("Allocation", "AllocationUpdated", a.ID, rec.ID, "Allocation", a)
				}
			}
		}
		// A job purged since the last look.
		for id := range seen {
			if key, ok := strings.CutPrefix(id, "Job\x00"); ok && len(now) < maxStreamItems {
				if _, still := now[id]; !still && !first && wants("Job", key) {
					events = append(events, nomad.Event{Topic: nomad.TopicJob, Type: "JobDeregistered", Key: key, FilterKeys: []string{key}, Index: index,
						Payload: map[string]any{"Job": map[string]any{"ID": key, "Stop": true, "Status": "dead"}}})
				}
			}
		}
		first, seen = false, now
		if len(events) > 0 {
			if enc.Encode(&nomad.Events{Index: index, Events: events}) != nil {
				return
			}
			flush()
			lastSent = time.Now()
		} else if time.Since(lastSent) >= streamHeartbeat {
			if _, err := io.WriteString(w, "{}\n"); err != nil {
				return
			}
			flush()
			lastSent = time.Now()
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(streamInterval):
		}
	}
}

// handlePlan is a dry run of a registration (nomad job plan): the job is
// translated and admitted as a registration would be, nothing is
// written, and each group whose jobs no active worker the job may use has
// room for now is named in FailedTGAllocs with why (node fit and the
// job's constraint: the rules the scheduler places by). JobModifyIndex is
// the job's current one, for a later registration's check-index.
func (s *nomadHandlers) handlePlan(w http.ResponseWriter, r *http.Request) (any, error) {
	var req nomad.JobPlanRequest
	if err := decodeNomad(w, r, &req); err != nil {
		return nil, err
	}
	if req.Job == nil || req.Job.ID == nil || *req.Job.ID != r.PathValue("id") {
		return nil, codedf(http.StatusBadRequest, "the job's ID does not match the path's %q", r.PathValue("id"))
	}
	ns := namespaceOf(r, deref(req.Job.Namespace))
	req.Job.Namespace = &ns
	if _, err := jobSpec(req.Job); err != nil {
		return nil, err
	}
	tr, err := s.translate(req.Job, nil)
	if err != nil {
		return nil, err
	}
	out := nomad.JobPlanResponse{Warnings: strings.Join(tr.Warnings, "\n"),
		Annotations: &nomad.PlanAnnotations{DesiredTGUpdates: map[string]*nomad.DesiredUpdates{}}}
	rec, exists := s.state.NomadJob(ns, *req.Job.ID)
	if exists && !s.seesNamespace(r, ns) {
		exists = false
	}
	spec, _ := json.Marshal(req.Job)
	unchanged := exists && !rec.Stopped && bytes.Equal(rec.Spec, spec)
	if exists {
		out.JobModifyIndex = rec.JobModifyIndex
	}
	if req.Diff {
		typ := "Added"
		switch {
		case unchanged:
			typ = "None"
		case exists:
			typ = "Edited"
		}
		out.Diff = &nomad.JobDiff{Type: typ, ID: *req.Job.ID}
	}
	if p := tr.Periodic; p != nil {
		if next, err := nomadspec.NextLaunch(p, time.Now()); err == nil {
			out.NextPeriodicLaunch = next
		}
		return out, nil
	}
	if tr.Parameterized != nil {
		return out, nil
	}
	tr.Batch.BillingProject = s.project(ns)
	create, err := (&batchHandlers{s.Server}).createCommand(userOf(r), &tr.Batch)
	if err != nil {
		return nil, err
	}
	workers := apiview.Instances(s.state.Instances())
	disabled := map[string]bool{}
	for _, cl := range s.state.Clusters() {
		disabled[cl.Name] = cl.Disabled
	}
	// A group's allocations: its array's count, or its distinct indexes.
	counts, indexes := map[string]uint64{}, map[[2]string]bool{}
	for i, js := range tr.Batch.Jobs {
		ref := tr.Tasks[i]
		g := ref.Group
		if ref.Index < 0 {
			counts[g] = max(counts[g], uint64(max(js.Count, 1)))
		} else if k := [2]string{g, strconv.Itoa(ref.Index)}; !indexes[k] {
			indexes[k] = true
			counts[g]++
		}
		if why := fitsNowhere(create.Jobs[i].Spec, workers, disabled); why != "" && out.FailedTGAllocs[g] == nil {
			if out.FailedTGAllocs == nil {
				out.FailedTGAllocs = map[string]*nomad.AllocationMetric{}
			}
			out.FailedTGAllocs[g] = &nomad.AllocationMetric{NodesEvaluated: len(workers), ConstraintFiltered: map[string]int{why: 1}}
		}
	}
	for g, n := range counts {
		d := &nomad.DesiredUpdates{Place: n}
		if unchanged {
			d = &nomad.DesiredUpdates{Ignore: n}
		}
		out.Annotations.DesiredTGUpdates[g] = d
	}
	return out, nil
}

// fitsNowhere says why no active worker has room for one job of spec now
// ("" when one has): placement's rule of where it may go (its queue's
// home clusters aside), then of node fit. A spec submitted is never kept
// off spot machines (apply does that, after losses), so spot is not asked.
func fitsNowhere(spec *state.Spec, workers []api.Instance, disabled map[string]bool) string {
	k := spec.Constraint()
	_, gpus := spec.GPUs()
	size := spec.Size()
	placeable := 0
	for _, in := range workers {
		cl := placement.Cluster{Name: in.Cluster, Region: in.Region, Disabled: disabled[in.Cluster]}
		if !in.Active || k.Admits(&cl, in.Pool, in.Labels, false) != 0 || !k.HoldsGPUs(gpus, in.GPUType, int64(in.GPUs)) {
			continue
		}
		placeable++
		free := placement.Free{CPUMilli: int64(in.FreeCPU * 1000), Memory: in.FreeMemory, GPUs: int64(in.FreeGPUs)}
		if free.Fits(size) {
			return ""
		}
	}
	if placeable == 0 {
		return "no active worker in an enabled cluster of the job's regions and clusters, with its pool, labels and GPU type"
	}
	return "no worker the job may use has its cores, memory and GPUs free now"
}
