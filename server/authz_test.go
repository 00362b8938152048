package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/server/httpapi"
	"github.com/drover-sched/drover/server/nomadview"
	"github.com/drover-sched/drover/server/state"
)

// The kinds of caller every route is tried with.
var callers = []string{"anonymous", "malformed", "expired", "revoked", "viewer", "other-project", "member", "manager", "admin", "worker"}

// Outcomes: U 401, F 403, N 404, A allowed (anything but 401 and 403:
// the request reached the handler, which may still find the body wanting).
const (
	U = "401"
	F = "403"
	N = "404"
	A = "allowed"
)

// userRow is the row of a route any user may call, by caller from
// "viewer" on (the anonymous, malformed, expired and revoked callers, and
// the worker, always get 401 there). Every such route needs one: what a
// role may do there is the handler's decision.
type userRow struct{ viewer, other, member, manager, admin string }

var (
	everyone  = userRow{A, A, A, A, A}
	readBatch = userRow{A, F, A, A, A} // any role in the batch's project
	ownBatch  = userRow{F, F, A, F, A} // its owner (the member) or an admin
	manage    = userRow{F, F, F, A, A} // a manager of the project or an admin
)

var userRoutes = map[string]userRow{
	"GET /api/v1/status/leader":                           everyone,
	"GET /api/v1/whoami":                                  everyone,
	"POST /api/v1/batches":                                {F, F, A, A, A},
	"GET /api/v1/changes":                                 everyone,
	"GET /api/v1/batches":                                 everyone,
	"GET /api/v1/batches/{id}":                            readBatch,
	"POST /api/v1/batches/{id}/cancel":                    {F, F, A, A, A},
	"POST /api/v1/batches/{id}/jobs/{job}/restart":        {F, F, A, A, A},
	"POST /api/v1/batches/{id}/retry":                     ownBatch,
	"GET /api/v1/batches/{id}/job-groups":                 readBatch,
	"GET /api/v1/batches/{id}/job-groups/{group}":         readBatch,
	"POST /api/v1/batches/{id}/job-groups/{group}/cancel": {F, F, A, A, A},
	"GET /api/v1/batches/{id}/efficiency":                 readBatch,
	"POST /api/v1/batches/{id}/updates":                   ownBatch,
	"POST /api/v1/batches/{id}/updates/{update}/jobs":     ownBatch,
	"POST /api/v1/batches/{id}/updates/{update}/commit":   ownBatch,
	"GET /api/v1/batches/{id}/stages":                     readBatch,
	"GET /api/v1/batches/{id}/jobs":                       readBatch,
	"GET /api/v1/batches/{id}/jobs/{job}":                 readBatch,
	"GET /api/v1/batches/{id}/jobs/{job}/log":             readBatch,
	"GET /api/v1/batches/{id}/jobs/{job}/usage":           readBatch,
	"GET /api/v1/batches/{id}/jobs/{job}/why":             readBatch,
	"GET /api/v1/regions":                                 everyone,
	"GET /api/v1/clusters":                                everyone,
	"GET /api/v1/cluster-groups":                          everyone,
	"GET /api/v1/autoscaler":                              everyone,
	"GET /api/v1/clusters/{name}":                         everyone,
	"GET /api/v1/queues":                                  everyone,
	"GET /api/v1/queues/{path...}":                        everyone,
	"GET /api/v1/queue-recommendations":                   everyone,
	"GET /api/v1/queue-slo":                               everyone,
	"GET /api/v1/queue-history":                           everyone,
	"GET /api/v1/queue-report":                            everyone,
	"GET /api/v1/queue-rebalance":                         everyone,
	"POST /api/v1/tokens":                                 everyone,
	"GET /api/v1/tokens":                                  everyone,
	// Another user's token: only an admin finds it.
	"DELETE /api/v1/tokens/{accessor}":                      {N, N, N, N, A},
	"POST /api/v1/tokens/{accessor}/rotate":                 {N, N, N, N, A},
	"GET /api/v1/billing-projects":                          everyone,
	"POST /api/v1/billing-projects/{name}/members":          manage,
	"DELETE /api/v1/billing-projects/{name}/members/{user}": manage,
	"PUT /api/v1/billing-projects/{name}/spend-limit":       manage,
	"PUT /api/v1/billing-projects/{name}/max-priority":      manage,
	"GET /api/v1/billing-projects/{name}/cost":              readBatch,
	"GET /api/v1/billing-projects/{name}/storage":           readBatch,
	"GET /api/v1/efficiency":                                everyone, // one's own; the handler checks the rest
	"GET /api/v1/status/peers":                              everyone,
	"GET /api/v1/rates":                                     everyone,

	// Nomad's API: a job of another project is not there (404); a
	// viewer reads, registers nothing and changes nothing of a member's.
	"PUT /v1/jobs":                        {F, F, A, A, A},
	"POST /v1/jobs":                       {F, F, A, A, A},
	"GET /v1/jobs":                        everyone,
	"PUT /v1/jobs/parse":                  everyone,
	"POST /v1/jobs/parse":                 everyone,
	"PUT /v1/validate/job":                everyone,
	"POST /v1/validate/job":               everyone,
	"GET /v1/job/{id}":                    nomadRead,
	"PUT /v1/job/{id}":                    everyone, // an empty body: 400 before anything
	"POST /v1/job/{id}":                   everyone,
	"DELETE /v1/job/{id}":                 {F, N, A, A, A},
	"GET /v1/job/{id}/summary":            nomadRead,
	"PUT /v1/job/{id}/plan":               everyone, // an empty body: 400 before anything
	"POST /v1/job/{id}/plan":              everyone,
	"GET /v1/job/{id}/allocations":        nomadRead,
	"GET /v1/job/{id}/evaluations":        nomadRead,
	"GET /v1/job/{id}/deployment":         nomadRead,
	"GET /v1/job/{id}/deployments":        nomadRead,
	"GET /v1/job/{id}/versions":           nomadRead,
	"PUT /v1/job/{id}/dispatch":           nomadRead, // not parameterized: 400 to those who see it
	"POST /v1/job/{id}/dispatch":          nomadRead,
	"PUT /v1/job/{id}/periodic/force":     nomadRead, // not periodic: 400 to those who see it
	"POST /v1/job/{id}/periodic/force":    nomadRead,
	"GET /v1/allocations":                 everyone,
	"GET /v1/allocation/{id}":             nomadRead,
	"PUT /v1/allocation/{id}/stop":        {F, N, A, A, A},
	"POST /v1/allocation/{id}/stop":       {F, N, A, A, A},
	"GET /v1/evaluation/{id}":             nomadRead,
	"GET /v1/evaluation/{id}/allocations": nomadRead,
	"GET /v1/client/fs/logs/{alloc}":      nomadRead,
	"GET /v1/client/fs/cat/{alloc}":       nomadRead,
	"GET /v1/event/stream":                everyone,
	"GET /v1/status/leader":               everyone,
	"GET /v1/regions":                     everyone,
	"GET /v1/namespaces":                  everyone,
	"GET /v1/agent/self":                  everyone,
}

// nomadRead: a Nomad job's readers (any role in its project), and none
// else, who finds nothing.
var nomadRead = userRow{A, N, A, A, A}

// expected is what each caller gets from a route, from its access and,
// for user routes, its row.
func expected(t *testing.T, rt httpapi.Route) map[string]string {
	out := map[string]string{}
	set := func(v string, who ...string) {
		for _, c := range who {
			out[c] = v
		}
	}
	users := []string{"viewer", "other-project", "member", "manager", "admin"}
	// Nomad's API answers a caller without a valid token 403, as Nomad.
	unauth := U
	if strings.Contains(rt.Pattern, " /v1/") {
		unauth = F
	}
	switch rt.Access {
	case httpapi.Public:
		set(A, callers...)
	case httpapi.Activate:
		set(U, callers...) // the join secret, not a token, decides: the test sends a wrong one
	case httpapi.Worker:
		set(U, callers...)
		set(A, "worker")
	case httpapi.Admin:
		set(unauth, "anonymous", "malformed", "expired", "revoked", "worker")
		set(F, users...)
		set(A, "admin")
	case httpapi.AnyUser:
		row, ok := userRoutes[rt.Pattern]
		if !ok {
			t.Errorf("route %s has no row in the authorization matrix (userRoutes): say what each role gets", rt.Pattern)
			return nil
		}
		set(unauth, "anonymous", "malformed", "expired", "revoked", "worker")
		out["viewer"], out["other-project"], out["member"], out["manager"], out["admin"] = row.viewer, row.other, row.member, row.manager, row.admin
	default:
		t.Errorf("route %s: unknown access %q", rt.Pattern, rt.Access)
		return nil
	}
	return out
}

// TestAuthorizationMatrix tries every route of the API with every kind
// of caller and checks the status each gets against the matrix.
func TestAuthorizationMatrix(t *testing.T) {
	srv, adminTok, err := StartReady(TestConfig(t.TempDir(), testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	base := "http://" + srv.HTTPAddr()
	ctx := context.Background()
	admin := api.NewClient(base, adminTok)
	toks := map[string]string{"admin": adminTok, "malformed": "not a token", "anonymous": ""}
	for _, name := range []string{"viewer", "other-project", "member", "manager", "spare", "victim"} {
		u, err := admin.CreateUser(ctx, &api.CreateUserRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		toks[name] = u.Token
	}
	for _, p := range []string{"p", "q"} {
		if _, err := admin.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: p}); err != nil {
			t.Fatal(err)
		}
	}
	for user, role := range map[string]string{"viewer": "viewer", "member": "member", "manager": "manager", "victim": "member"} {
		if err := admin.SetRole(ctx, "p", user, role); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.SetRole(ctx, "q", "other-project", "member"); err != nil {
		t.Fatal(err)
	}
	member := api.NewClient(base, toks["member"])
	res, err := member.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "p", NJobs: 2, JobGroups: []api.JobGroupSpec{{Path: "g"}}})
	if err != nil {
		t.Fatal(err)
	}
	// An expired token, and a revoked one.
	expiredTok, _ := token.New()
	if _, err := srv.raft.Apply(&state.CreateToken{Now: time.Now().Add(-2 * time.Hour).UnixNano(), User: "member", Name: "old",
		TokenHash: token.Hash(expiredTok), Expires: time.Now().Add(-time.Hour).UnixNano()}); err != nil {
		t.Fatal(err)
	}
	toks["expired"] = expiredTok
	rev, err := member.CreateToken(ctx, &api.CreateTokenRequest{Name: "soon-revoked"})
	if err != nil {
		t.Fatal(err)
	}
	if err := member.RevokeToken(ctx, rev.Accessor); err != nil {
		t.Fatal(err)
	}
	toks["revoked"] = rev.Token
	spare, err := api.NewClient(base, toks["spare"]).ListTokens(ctx, "", false)
	if err != nil || len(spare) != 1 {
		t.Fatalf("spare's tokens: %v, %v", spare, err)
	}
	act, err := api.NewClient(base, "").Workers().Activate(ctx, &api.ActivateRequest{Name: "w", NodeID: "w", CPU: 4, Memory: 4 << 30, Secret: "test-secret"})
	if err != nil {
		t.Fatal(err)
	}
	toks["worker"] = act.Token
	// The member's Nomad job in project p, placed on w.
	var reg struct{ EvalID string }
	nomadJob := func(id string) string {
		return `{"Job": {"ID": "` + id + `", "Type": "batch", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "exec", "Config": {"command": "/bin/sleep", "args": ["600"]}, "Resources": {"CPU": 100, "MemoryMB": 32}}]}]}}`
	}
	if err := member.Do(ctx, http.MethodPut, "/v1/jobs?namespace=p", json.RawMessage(nomadJob("mjob")), &reg); err != nil {
		t.Fatal(err)
	}
	nomadBatch, _, _ := nomadview.ParseEvalID(reg.EvalID)
	var alloc string
	for deadline := time.Now().Add(30 * time.Second); alloc == ""; {
		if j, err := admin.GetJob(ctx, int64(nomadBatch), 1); err == nil && len(j.Attempts) > 0 {
			alloc = nomadview.AllocID(nomadBatch, 1, 1)
		} else if time.Now().After(deadline) {
			t.Fatalf("the Nomad job was not placed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	nomadParams := map[string]string{"{alloc}": alloc}
	nomadID := func(pattern string) string {
		switch {
		case strings.Contains(pattern, "/v1/allocation/"):
			return alloc
		case strings.Contains(pattern, "/v1/evaluation/"):
			return reg.EvalID
		case strings.Contains(pattern, "/v1/node/"):
			return nomadview.NodeID("w")
		}
		return "mjob"
	}

	params := map[string]string{
		"{id}": fmt.Sprint(res.ID), "{update}": "1", "{job}": "1", "{name}": "p", "{user}": "victim", "{path...}": "org/q",
		"{accessor}": spare[0].Accessor, "{attempt}": "1", "{seq}": "0", "{group}": "g",
	}
	bodies := map[string]string{
		"POST /api/v1/batches":                             `{"billing_project": "p", "jobs": [{"job_id": 1, "command": ["true"], "cpu": 0.1, "memory": 1048576}]}`,
		"POST /api/v1/batches/{id}/updates/{update}/jobs":  `{"jobs": [{"job_id": 1, "command": ["true"], "cpu": 0.1, "memory": 1048576}]}`,
		"POST /api/v1/billing-projects/{name}/members":     `{"user": "victim", "role": "member"}`,
		"PUT /api/v1/billing-projects/{name}/spend-limit":  `{"limit": 100}`,
		"PUT /api/v1/billing-projects/{name}/max-priority": `{"max_priority": 5}`,
		"POST /api/v1/billing-projects/{name}/storage":     `{"prefix": "gs://b/p"}`,
		"PUT /api/v1/billing-projects/{name}/settings":     `{"allow_host_network": false}`,
		"POST /api/v1/workers/activate":                    `{"name": "x", "cpu": 1, "memory": 1048576, "secret": "wrong"}`,
		"POST /api/v1/tokens":                              `{"name": "matrix", "ttl": "1h"}`,
		"PUT /api/v1/rates":                                `{"rates": [{"resource": "compute", "price_per_hour": 0.05}]}`,
		"PUT /v1/jobs":                                     nomadJob("mjob2"),
		"POST /v1/jobs":                                    nomadJob("mjob2"),
	}
	hc := &http.Client{Timeout: 20 * time.Second}
	routes := srv.api.Routes()
	if len(routes) < 50 {
		t.Fatalf("only %d routes", len(routes))
	}
	for _, rt := range routes {
		want := expected(t, rt)
		if want == nil {
			continue
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		nomadRoute := strings.HasPrefix(path, "/v1/")
		if nomadRoute {
			path = strings.ReplaceAll(path, "{id}", nomadID(rt.Pattern))
			for k, v := range nomadParams {
				path = strings.ReplaceAll(path, k, v)
			}
			path += "?namespace=p"
			if rt.Pattern == "GET /v1/event/stream" {
				path += "&topic=Node"
			}
		}
		for k, v := range params {
			path = strings.ReplaceAll(path, k, v)
		}
		if strings.Contains(path, "{") {
			t.Errorf("route %s: no test value for a parameter in %s", rt.Pattern, path)
			continue
		}
		for _, who := range callers {
			body := bodies[rt.Pattern]
			if body == "" && (method == http.MethodPost || method == http.MethodPut) {
				body = "{}"
			}
			var rd io.Reader
			if body != "" {
				rd = bytes.NewReader([]byte(body))
			}
			req, _ := http.NewRequestWithContext(ctx, method, base+path, rd)
			if toks[who] != "" {
				req.Header.Set("Authorization", "Bearer "+toks[who])
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if rt.Pattern == "GET /api/v1/operator/snapshot" && who == "admin" {
				// A snapshot streams the whole state: ask and leave.
				req.Header.Set("Range", "bytes=0-0")
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s as %s: %v", rt.Pattern, who, err)
			}
			var msg []byte
			if (rt.Pattern != "GET /v1/event/stream" && rt.Pattern != "GET /api/v1/changes") || resp.StatusCode != http.StatusOK {
				msg, _ = io.ReadAll(io.LimitReader(resp.Body, 512)) // a stream goes on: not read
			}
			resp.Body.Close()
			got := fmt.Sprint(resp.StatusCode)
			ok := got == want[who]
			if want[who] == A {
				ok = resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden
				if ok {
					got = A
				}
			}
			if !ok {
				t.Errorf("%s as %s: %s, want %s (%s)", rt.Pattern, who, got, want[who], strings.TrimSpace(string(msg)))
			} else if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
				var e api.ErrorResponse
				if nomadRoute && len(bytes.TrimSpace(msg)) > 0 {
					continue // Nomad's errors are plain text
				}
				if json.Unmarshal(msg, &e) != nil || e.Error == "" {
					t.Errorf("%s as %s: a %d without a JSON message: %s", rt.Pattern, who, resp.StatusCode, msg)
				}
			}
		}
	}
	for pattern := range userRoutes {
		found := false
		for _, rt := range routes {
			found = found || rt.Pattern == pattern
		}
		if !found {
			t.Errorf("the matrix has a row for %s, which is no route", pattern)
		}
	}

	// The mutating requests above are in the audit log, refusals too (the
	// counts of anonymous ones once their minute is over, or now).
	if err := srv.api.WaitAudit(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		log, err := admin.Audit(ctx, "1h", "", 10000)
		if err != nil {
			t.Fatal(err)
		}
		var refused, byMember, anonymous bool
		for _, e := range log {
			refused = refused || (e.Status == http.StatusForbidden && e.User == "viewer" && e.Route == "POST /api/v1/batches" && e.Message != "")
			byMember = byMember || (e.User == "member" && e.Route == "POST /api/v1/batches/{id}/cancel" && e.Status == http.StatusOK && e.Remote == "127.0.0.1" && e.Token != "")
			anonymous = anonymous || (e.User == "" && e.Status == http.StatusUnauthorized)
		}
		if refused && byMember && anonymous {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit log lacks entries (refused %v, member's cancel %v, anonymous %v): %d entries", refused, byMember, anonymous, len(log))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestMetricsToken: with a metrics token, /metrics wants it; health stays
// open.
func TestMetricsToken(t *testing.T) {
	cfg := TestConfig(t.TempDir(), testLogger(t))
	cfg.MetricsToken = "scrape-secret"
	srv, _, err := StartReady(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	get := func(path, tok string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.HTTPAddr()+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("/metrics", ""); c != http.StatusUnauthorized {
		t.Fatalf("metrics without the token: %d", c)
	}
	if c := get("/metrics", "wrong"); c != http.StatusUnauthorized {
		t.Fatalf("metrics with a wrong token: %d", c)
	}
	if c := get("/metrics", "scrape-secret"); c != http.StatusOK {
		t.Fatalf("metrics with the token: %d", c)
	}
	if c := get("/api/v1/health", ""); c != http.StatusOK {
		t.Fatalf("health: %d", c)
	}
}
