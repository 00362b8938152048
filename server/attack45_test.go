package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// Hostile-tenant tests of batch retry, job restart, the efficiency
// report, oom_retry and max_lost_attempts.

// a45Sim drives a simWorker: it keeps the attempts it was given as the
// worker's known ones, and ends them as a test says.
type a45Sim struct {
	t       *testing.T
	w       *simWorker
	running []api.AttemptRef
}

func newA45Sim(t *testing.T, tc *testCluster, name string, cores float64) *a45Sim {
	return &a45Sim{t: t, w: newSimWorker(t, tc, name, cores)}
}

// assigned syncs until at least n new attempts were given (or fails).
func (s *a45Sim) assigned(n int) []api.Assignment {
	s.t.Helper()
	var got []api.Assignment
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < n {
		if time.Now().After(deadline) {
			s.t.Fatalf("assigned %d attempts, want %d: %+v", len(got), n, got)
		}
		s.w.known = slices.Clone(s.running)
		res := s.w.sync(500 * time.Millisecond)
		for _, a := range res.Assign {
			if !slices.Contains(s.running, a.AttemptRef) {
				got = append(got, a)
				s.running = append(s.running, a.AttemptRef)
			}
		}
	}
	s.w.known = slices.Clone(s.running)
	return got
}

// start reports the attempts started.
func (s *a45Sim) start(refs ...api.AttemptRef) {
	s.t.Helper()
	for _, a := range refs {
		s.w.events = append(s.w.events, api.AttemptEvent{AttemptRef: a, Kind: api.EventStarted, StartTime: time.Now()})
	}
	s.w.known = slices.Clone(s.running)
	s.w.sync(0)
}

// end reports an attempt ended with outcome (oom: the OOM killer ended it).
func (s *a45Sim) end(a api.AttemptRef, outcome string, oom bool) {
	s.t.Helper()
	code := 0
	if outcome != api.OutcomeSuccess {
		code = 1
	}
	now := time.Now()
	s.w.events = append(s.w.events, api.AttemptEvent{AttemptRef: a, Kind: api.EventCompleted, Outcome: outcome, ExitCode: code,
		StartTime: now.Add(-time.Millisecond), EndTime: now, OOM: oom, Usage: &api.Usage{CPUSeconds: 0, PeakMemory: 1 << 20}})
	s.running = slices.DeleteFunc(s.running, func(r api.AttemptRef) bool { return r == a })
	s.w.known = slices.Clone(s.running)
	s.w.sync(0)
}

// a45Job reads a job, failing the test on error.
func a45Job(t *testing.T, c *api.Client, batch, job int64) *api.Job {
	t.Helper()
	j, err := c.GetJob(context.Background(), batch, job)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// a45Refused reports whether err is a refusal (401, 403 or 404).
func a45Refused(err error) bool {
	return api.IsStatus(err, http.StatusUnauthorized) || api.IsStatus(err, http.StatusForbidden) || api.IsStatus(err, http.StatusNotFound)
}

// a45RetryEntries counts the RetryJobs commands in the Raft log after
// index from.
func a45RetryEntries(t *testing.T, tc *testCluster, from uint64) int {
	t.Helper()
	last, err := tc.srv.raft.boltLog.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := from + 1; i <= last; i++ {
		var l raft.Log
		if err := tc.srv.raft.boltLog.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		if c, err := state.Decode(l.Data); err == nil {
			if _, ok := c.(*state.RetryJobs); ok {
				n++
			}
		}
	}
	return n
}

// a45Setup is a server with alice (the owner, a member of genomics),
// carol (another member), mia (a manager), vera (a viewer), bob (of
// physics) and a worker; alice's batch has job 1 failed and job 2
// running.
type a45Setup struct {
	tc                           *testCluster
	alice, carol, mia, vera, bob *api.Client
	sim                          *a45Sim
	batch                        int64
	running                      api.AttemptRef
}

func newA45Setup(t *testing.T) *a45Setup {
	t.Helper()
	ctx := context.Background()
	tc := startServer(t, "", func(c *Config) { c.UserRequestsPerSecond = 0 })
	s := &a45Setup{tc: tc}
	s.alice = tc.user("alice", "genomics")
	s.carol = tc.user("carol", "genomics")
	s.mia = tc.user("mia", "genomics")
	s.vera = tc.user("vera")
	s.bob = tc.user("bob", "physics")
	if err := tc.admin.SetRole(ctx, "genomics", "mia", "manager"); err != nil {
		t.Fatal(err)
	}
	if err := tc.admin.SetRole(ctx, "genomics", "vera", "viewer"); err != nil {
		t.Fatal(err)
	}
	s.sim = newA45Sim(t, tc, "sim-a45", 4)
	b, err := s.alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "bad", Command: []string{"false"}, CPU: 1},
		{JobID: 2, Name: "long", Command: []string{"sleep", "1000"}, CPU: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	s.batch = b.ID
	as := s.sim.assigned(2)
	for _, a := range as {
		s.sim.start(a.AttemptRef)
		if a.JobID == 1 {
			s.sim.end(a.AttemptRef, api.OutcomeFailed, false)
		} else {
			s.running = a.AttemptRef
		}
	}
	if j := a45Job(t, s.alice, b.ID, 1); j.State != api.JobFailed {
		t.Fatalf("job 1 is %s, want failed", j.State)
	}
	if j := a45Job(t, s.alice, b.ID, 2); j.State != api.JobRunning {
		t.Fatalf("job 2 is %s, want running", j.State)
	}
	return s
}

// TestAttack45RetryRestartEfficiencyCallers: retry needs the batch's
// owner (or an admin); restart its owner, a manager or an admin; the
// efficiency report anyone who may read the batch. Another project's
// user, a non-owner member, a viewer, a manager (retry), a worker's token
// and no token are refused, and nothing reaches the log.
func TestAttack45RetryRestartEfficiencyCallers(t *testing.T) {
	s := newA45Setup(t)
	tc, ctx := s.tc, context.Background()
	worker := api.NewClient(tc.url, s.sim.w.c.Token())
	anon := api.NewClient(tc.url, "")
	from := tc.srv.raft.raft.LastIndex()
	for name, c := range map[string]*api.Client{"bob (other project)": s.bob, "carol (member, not owner)": s.carol,
		"vera (viewer)": s.vera, "mia (manager)": s.mia, "worker token": worker, "anonymous": anon} {
		if _, err := c.RetryBatch(ctx, s.batch, &api.RetryRequest{}); !a45Refused(err) {
			t.Errorf("retry by %s: %v, want refused", name, err)
		}
		if _, err := c.RetryBatch(ctx, s.batch, &api.RetryRequest{States: []string{api.JobCancelled}, JobRanges: []api.IDRange{{1, 2}}}); !a45Refused(err) {
			t.Errorf("retry of cancelled jobs by %s: %v, want refused", name, err)
		}
	}
	for name, c := range map[string]*api.Client{"bob (other project)": s.bob, "carol (member, not owner)": s.carol,
		"vera (viewer)": s.vera, "worker token": worker, "anonymous": anon} {
		if _, err := c.RestartJob(ctx, s.batch, 2); !a45Refused(err) {
			t.Errorf("restart by %s: %v, want refused", name, err)
		}
	}
	for name, c := range map[string]*api.Client{"bob (other project)": s.bob, "worker token": worker, "anonymous": anon} {
		if _, err := c.BatchEfficiency(ctx, s.batch); !a45Refused(err) {
			t.Errorf("efficiency read by %s: %v, want refused", name, err)
		}
	}
	if n := a45RetryEntries(t, tc, from); n != 0 {
		t.Errorf("refused retries put %d RetryJobs in the log", n)
	}
	if j := a45Job(t, s.alice, s.batch, 1); j.State != api.JobFailed || len(j.Attempts) != 1 {
		t.Errorf("after refused retries job 1 is %s with %d attempts", j.State, len(j.Attempts))
	}
	if j := a45Job(t, s.alice, s.batch, 2); j.State != api.JobRunning || len(j.Attempts) != 1 {
		t.Errorf("after refused restarts job 2 is %s with %d attempts", j.State, len(j.Attempts))
	}
	res := s.sim.w.sync(0)
	if len(res.Preempt) != 0 || len(res.Kill) != 0 {
		t.Errorf("after refused restarts the worker is told to stop %+v / kill %+v", res.Preempt, res.Kill)
	}
	// Readers who may.
	for name, c := range map[string]*api.Client{"vera (viewer)": s.vera, "carol": s.carol, "mia": s.mia, "alice": s.alice, "admin": tc.admin} {
		if _, err := c.BatchEfficiency(ctx, s.batch); err != nil {
			t.Errorf("efficiency read by %s: %v", name, err)
		}
	}
	// Bob's own batch ID does not help him: the path's batch is checked,
	// and a job ID beyond his batch is no way into another.
	bb, err := s.bob.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "physics", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		fmt.Sprintf("/api/v1/batches/%d/jobs/%d/restart", bb.ID, int64(s.batch)<<32|2),
		fmt.Sprintf("/api/v1/batches/%d/jobs/2/restart", s.batch),
		fmt.Sprintf("/api/v1/batches/%d/jobs/2/restart?batch=%d", bb.ID, s.batch),
	} {
		if err := s.bob.Do(ctx, http.MethodPost, p, nil, nil); err == nil || api.IsStatus(err, http.StatusOK) {
			t.Errorf("bob POST %s: %v, want refused", p, err)
		}
	}
	if j := a45Job(t, s.alice, s.batch, 2); j.State != api.JobRunning || len(j.Attempts) != 1 {
		t.Errorf("after bob's tries job 2 is %s with %d attempts", j.State, len(j.Attempts))
	}
	// The manager may restart; the owner may retry.
	if rs, err := s.mia.RestartJob(ctx, s.batch, 2); err != nil || !rs.Stopping {
		t.Errorf("restart by the manager: %+v %v", rs, err)
	}
	if rs, err := s.alice.RetryBatch(ctx, s.batch, &api.RetryRequest{}); err != nil || rs.Retried != 1 {
		t.Errorf("retry by the owner: %+v %v", rs, err)
	}
}

// TestAttack45BadPathIDs: batch and job IDs of 0, negative, beyond 2^32
// or 2^64, or not numbers, are refused without a panic.
func TestAttack45BadPathIDs(t *testing.T) {
	s := newA45Setup(t)
	tok := s.alice.Token()
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/v1/batches/0/retry"},
		{"POST", "/api/v1/batches/-1/retry"},
		{"POST", "/api/v1/batches/18446744073709551616/retry"},
		{"POST", "/api/v1/batches/1e3/retry"},
		{"POST", "/api/v1/batches/999999/retry"},
		{"GET", "/api/v1/batches/0/efficiency"},
		{"GET", "/api/v1/batches/999999/efficiency"},
		{"GET", "/api/v1/batches/18446744073709551615/efficiency"},
		{"POST", fmt.Sprintf("/api/v1/batches/%d/jobs/0/restart", s.batch)},
		{"POST", fmt.Sprintf("/api/v1/batches/%d/jobs/-2/restart", s.batch)},
		{"POST", fmt.Sprintf("/api/v1/batches/%d/jobs/4294967298/restart", s.batch)},
		{"POST", fmt.Sprintf("/api/v1/batches/%d/jobs/4294967295/restart", s.batch)},
		{"POST", fmt.Sprintf("/api/v1/batches/%d/jobs/3/restart", s.batch)},
		{"POST", fmt.Sprintf("/api/v1/batches/%d/jobs/x/restart", s.batch)},
		{"POST", "/api/v1/batches/999999/jobs/1/restart"},
	} {
		code, msg := s.tc.raw(c.method, c.path, tok, "")
		if code != http.StatusBadRequest && code != http.StatusNotFound {
			t.Errorf("%s %s: %d %s, want 400 or 404", c.method, c.path, code, msg)
		}
	}
	// A job that is not running (failed, or 2^32+2 wrapping to 2) is no
	// restart.
	code, msg := s.tc.raw("POST", fmt.Sprintf("/api/v1/batches/%d/jobs/1/restart", s.batch), tok, "")
	if code != http.StatusConflict {
		t.Errorf("restart of a failed job: %d %s, want 409", code, msg)
	}
	if j := a45Job(t, s.alice, s.batch, 2); j.State != api.JobRunning || len(j.Attempts) != 1 {
		t.Errorf("after bad restarts job 2 is %s with %d attempts", j.State, len(j.Attempts))
	}
}

// TestAttack45RetryBodyBounds: a retry's body with IDs of 0, negative,
// beyond the batch limit or 2^32, inverted ranges, too many entries,
// unknown states, NaN-ish numbers, or a malformed body is refused with a
// 400 before the Raft log; overlapping and huge ranges within the bounds
// are cut to the batch and do the work of its jobs once.
func TestAttack45RetryBodyBounds(t *testing.T) {
	s := newA45Setup(t)
	tc := s.tc
	tok := s.alice.Token()
	path := fmt.Sprintf("/api/v1/batches/%d/retry", s.batch)
	from := tc.srv.raft.raft.LastIndex()
	many := make([]string, api.MaxRetryRanges+1)
	for i := range many {
		many[i] = "[1,2]"
	}
	for _, body := range []string{
		`{"job_ids":[0]}`,
		`{"job_ids":[-1]}`,
		`{"job_ids":[2147483649]}`,
		`{"job_ids":[4294967297]}`,
		`{"job_ids":[9223372036854775807]}`,
		`{"job_ids":[1e3]}`,
		`{"job_ids":[1.5]}`,
		`{"job_ids":["1"]}`,
		`{"job_ids":[NaN]}`,
		`{"job_ranges":[[5,1]]}`,
		`{"job_ranges":[[0,3]]}`,
		`{"job_ranges":[[-5,3]]}`,
		`{"job_ranges":[[1,4294967297]]}`,
		`{"job_ranges":[[4294967297,4294967298]]}`,
		`{"job_ranges":[[1]]}`,
		`{"job_ranges":[1,2]}`,
		`{"job_ranges":[[` + strings.Repeat("9", 400) + `,1]]}`,
		`{"job_ranges":[` + strings.Join(many, ",") + `]}`,
		`{"states":["running"]}`,
		`{"states":["success"]}`,
		`{"states":["FAILED"]}`,
		`{"states":[""]}`,
		`{"states":"failed"}`,
		`{"job_ids":[1],"bogus":1}`,
		`{`,
		`[]`,
		`null x`,
	} {
		code, msg := tc.raw("POST", path, tok, body)
		if code != http.StatusBadRequest {
			b := body
			if len(b) > 80 {
				b = b[:80] + "..."
			}
			t.Errorf("retry %s: %d %s, want 400", b, code, msg)
		}
	}
	if n := a45RetryEntries(t, tc, from); n != 0 {
		t.Errorf("refused retries put %d RetryJobs in the log", n)
	}
	if j := a45Job(t, s.alice, s.batch, 1); j.State != api.JobFailed {
		t.Fatalf("after refused retries job 1 is %s", j.State)
	}
	// At the bounds: 10,000 ranges, all overlapping and reaching the
	// largest ID, retry job 1 once, quickly; a job ID past the batch's
	// jobs retries nothing.
	all := make([]api.IDRange, api.MaxRetryRanges)
	for i := range all {
		all[i] = api.IDRange{int64(1 + i%2), api.MaxJobsPerBatch}
	}
	if rs, err := s.alice.RetryBatch(context.Background(), s.batch, &api.RetryRequest{JobIDs: []int64{api.MaxJobsPerBatch}}); err != nil || rs.Retried != 0 {
		t.Errorf("retry of job 2^31: %+v %v", rs, err)
	}
	started := time.Now()
	rs, err := s.alice.RetryBatch(context.Background(), s.batch, &api.RetryRequest{JobRanges: all})
	if err != nil || rs.Retried != 1 {
		t.Fatalf("retry of 10,000 overlapping ranges to 2^31: %+v %v, want 1 retried", rs, err)
	}
	if d := time.Since(started); d > 5*time.Second {
		t.Errorf("retry of 10,000 overlapping ranges took %v", d)
	}
	if j := a45Job(t, s.alice, s.batch, 1); j.State != api.JobReady && j.State != api.JobRunning {
		t.Errorf("after the retry job 1 is %s", j.State)
	}
	// Again at once: it is not final any more, nothing is retried twice.
	if rs, err := s.alice.RetryBatch(context.Background(), s.batch, &api.RetryRequest{JobRanges: all}); err != nil || rs.Retried != 0 {
		t.Errorf("a second retry: %+v %v, want 0", rs, err)
	}
}

// a45WaitJob polls a job until it is in state want (or fails after
// limit, saying where it is).
func a45WaitJob(t *testing.T, c *api.Client, batch, job int64, want string, limit time.Duration) *api.Job {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		j := a45Job(t, c, batch, job)
		if j.State == want {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s after %v, want %s", job, j.State, limit, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAttack45RetryAfterOOMSplitReleasesEveryPart: an always_run array
// whose parent failed runs; one of its jobs runs out of memory, which
// gives it a group of its own (splitting the array's group in three). A
// retry of the parent and of a failed job of the array's last part
// recounts that part's parents; when the parent ends, every part must be
// told, not only the first (the one the dependency names), or the retried
// job waits forever and the batch never completes. (It did before
// 960aad1, Batch.partsOf.)
func TestAttack45RetryAfterOOMSplitReleasesEveryPart(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	sim := newA45Sim(t, tc, "sim-split", 8)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "parent", Command: []string{"false"}, CPU: 1},
		{JobID: 2, Name: "kids", Count: 3, Command: []string{"true"}, CPU: 1, Memory: 512 << 20, ParentIDs: []int64{1}, AlwaysRun: true,
			OOMRetry: &api.OOMRetry{Factor: 2, MaxMemory: 2 << 30}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := sim.assigned(1)[0]
	sim.start(p.AttemptRef)
	sim.end(p.AttemptRef, api.OutcomeFailed, false)
	kids := sim.assigned(3)
	for _, a := range kids {
		sim.start(a.AttemptRef)
	}
	for _, a := range kids {
		switch a.JobID {
		case 2:
			sim.end(a.AttemptRef, api.OutcomeSuccess, false)
		case 3:
			sim.end(a.AttemptRef, api.OutcomeError, true) // out of memory: split off
		case 4:
			sim.end(a.AttemptRef, api.OutcomeFailed, false)
		}
	}
	again := sim.assigned(1)[0]
	if again.JobID != 3 || again.Memory != 1<<30 {
		t.Fatalf("after the OOM, assigned %+v; want job 3 with 1 GiB", again)
	}
	sim.start(again.AttemptRef)
	sim.end(again.AttemptRef, api.OutcomeSuccess, false)
	if bb, _ := alice.GetBatch(ctx, b.ID); !bb.Complete() {
		t.Fatalf("batch %+v, want complete", bb)
	}
	rs, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{})
	if err != nil || rs.Retried != 2 {
		t.Fatalf("retry: %+v %v, want jobs 1 and 4", rs, err)
	}
	p = sim.assigned(1)[0]
	if p.JobID != 1 {
		t.Fatalf("after the retry, assigned job %d first; want the parent", p.JobID)
	}
	sim.start(p.AttemptRef)
	sim.end(p.AttemptRef, api.OutcomeSuccess, false)
	// Job 4 waits for job 1 only, which is done: it must run now.
	deadline := time.Now().Add(5 * time.Second)
	for {
		j := a45Job(t, alice, b.ID, 4)
		if j.State == api.JobReady || j.State == api.JobRunning {
			break
		}
		if time.Now().After(deadline) {
			bb, _ := alice.GetBatch(ctx, b.ID)
			t.Fatalf("job 4 is %s (waiting %+v) 5 s after its only parent succeeded; the batch (%s, complete %v) never completes",
				j.State, j.Parents, bb.State, bb.Complete())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAttack45AttemptsAreBounded: restarts (and retries, and
// max_lost_attempts -1) could give a job attempts without bound, and an
// attempt number is a uint16: past 65535 the state would place attempt 0,
// which no worker can report (the API refuses attempt 0 in a sync's
// events and known attempts: the worker holding it would fail every sync,
// for every tenant's attempts on it). A job ends in error at
// state.MaxAttemptsPerJob instead. Driven through the exported state
// harness, then the sync refusal through the API.
func TestAttack45AttemptsAreBounded(t *testing.T) {
	h := state.NewHarness(t, nil)
	inst := h.Activate("w", 4, 16)
	b := h.CreateBatch(state.JobEntry{First: 1, Count: 1, Spec: &state.Spec{Name: "x", Command: []string{"true"}, CPUMilli: 1000, Memory: 1 << 30}})
	index := uint64(len(h.Log))
	apply := func(c state.Command) any {
		index++
		return h.S.Apply(index, c)
	}
	last := uint16(1)
	for i := 1; i <= 1<<16; i++ {
		if r, ok := apply(h.Plan()).(*state.PlanResult); !ok || r.Placed != 1 {
			t.Logf("round %d: not placed (%+v): the job's attempts are bounded", i, r)
			break
		}
		v := h.S.WorkerView(inst, nil)
		if len(v.Assign) != 1 {
			t.Fatalf("round %d: assigned %+v", i, v.Assign)
		}
		last = v.Assign[0].Attempt
		if i < 1<<16 && int(last) != i {
			t.Fatalf("round %d placed attempt %d", i, last)
		}
		// What POST .../restart applies, then the worker's report.
		apply(&state.Preempt{Now: h.Tick(), Attempts: []state.PreemptAttempt{{AttemptID: state.AttemptID{Batch: b, Job: 1, Attempt: last}, Reason: "restarted by alice"}}})
		apply(&state.Events{Now: h.Tick(), Events: []state.Event{{Instance: inst, Batch: b, Job: 1, Attempt: last, Outcome: state.OutcomePreempted, Start: h.Now, End: h.Tick()}}})
	}
	// The API side: a worker's sync naming attempt 0 is refused whole.
	tc := startServer(t, "", nil)
	w := newSimWorker(t, tc, "sim-wrap", 1)
	_, err := w.c.Workers().Sync(context.Background(), &api.SyncRequest{Known: []api.AttemptRef{{BatchID: 1, JobID: 1, Attempt: 0}}})
	syncRefused := api.IsStatus(err, http.StatusBadRequest)
	if last != state.MaxAttemptsPerJob || h.JobState(b, 1) != state.Error || !syncRefused {
		t.Errorf("after restarts without end the last attempt placed was %d (want %d) and the job is %s (want error); a sync naming attempt 0 is refused: %v (%v)",
			last, state.MaxAttemptsPerJob, h.JobState(b, 1), syncRefused, err)
	}
}

// TestAttack45EfficiencyIsBoundedAndSaysSo: a report reads at most
// api.MaxEfficiencyJobs of a batch's jobs (so a viewer who asks again and
// again does not make a server list a million each time) and says it
// left the rest out: here the only job that ran, past the millionth.
func TestAttack45EfficiencyIsBoundedAndSaysSo(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.UserRequestsPerSecond = 0 })
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	alice.AttemptTimeout = 2 * time.Minute
	sim := newA45Sim(t, tc, "sim-eff", 2)
	const n = 1_000_000
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "blocker", Command: []string{"sleep", "1000"}, CPU: 1},
		{JobID: 2, Name: "waits", Count: n, Command: []string{"true"}, CPU: 1, ParentIDs: []int64{1}},
		{JobID: n + 2, Name: "late", Command: []string{"true"}, CPU: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	as := sim.assigned(2)
	for _, a := range as {
		sim.start(a.AttemptRef)
	}
	for _, a := range as {
		if a.JobID == n+2 {
			sim.end(a.AttemptRef, api.OutcomeSuccess, false)
		}
	}
	j := a45Job(t, alice, b.ID, n+2)
	if j.State != api.JobSuccess || len(j.Attempts) != 1 || j.Attempts[0].Usage == nil {
		t.Fatalf("job %d: %s %+v", n+2, j.State, j.Attempts)
	}
	started := time.Now()
	e, err := alice.BatchEfficiency(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("efficiency of a %d-job batch took %v", n+2, time.Since(started))
	if !e.Partial || e.Jobs != api.MaxEfficiencyJobs || e.Total.Attempts != 0 {
		t.Errorf("a report of a %d-job batch read %d jobs (partial %v, %d attempts); want the first %d, said to be partial",
			n+2, e.Jobs, e.Partial, e.Total.Attempts, api.MaxEfficiencyJobs)
	}
}

// TestAttack45ForgedOOM: an OOM claim from a worker that does not run
// the attempt, for an attempt number that is not the current one, on a
// cancellation, or on a job without oom_retry, gives no memory; a job's
// own OOMs grow it to its bound and then end it in error.
func TestAttack45ForgedOOM(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	sim := newA45Sim(t, tc, "sim-oom", 4)
	evil := newSimWorker(t, tc, "sim-evil", 4)
	oom := &api.OOMRetry{Factor: 16, MaxMemory: 2 << 30}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "grow", Command: []string{"true"}, CPU: 1, Memory: 512 << 20, OOMRetry: oom},
		{JobID: 2, Name: "plain", Command: []string{"true"}, CPU: 1, Memory: 512 << 20},
		{JobID: 3, Name: "cancel", Command: []string{"true"}, CPU: 1, Memory: 512 << 20, OOMRetry: oom}}})
	if err != nil {
		t.Fatal(err)
	}
	// Only one worker may take them: the evil one is drained first.
	as := sim.assigned(3)
	byJob := map[int64]api.AttemptRef{}
	for _, a := range as {
		byJob[a.JobID] = a.AttemptRef
		sim.start(a.AttemptRef)
	}
	a1 := byJob[1]
	forged := func(ref api.AttemptRef) api.AttemptEvent {
		return api.AttemptEvent{AttemptRef: ref, Kind: api.EventCompleted, Outcome: api.OutcomeError, StartTime: time.Now(), EndTime: time.Now(),
			Message: "out of memory", OOM: true}
	}
	evil.events = []api.AttemptEvent{forged(a1)}
	evil.sync(0)
	wrong := a1
	wrong.Attempt = 2
	sim.w.events = []api.AttemptEvent{forged(wrong)}
	sim.w.sync(0)
	if j := a45Job(t, alice, b.ID, 1); j.State != api.JobRunning || j.Memory != 512<<20 || len(j.Attempts) != 1 {
		t.Fatalf("after forged OOMs job 1 is %s with %d bytes and %d attempts", j.State, j.Memory, len(j.Attempts))
	}
	// An OOM on a cancellation, and on a job without the policy.
	sim.w.events = []api.AttemptEvent{{AttemptRef: byJob[3], Kind: api.EventCompleted, Outcome: api.OutcomeCancelled, StartTime: time.Now(), EndTime: time.Now(), OOM: true}}
	sim.running = slices.DeleteFunc(sim.running, func(r api.AttemptRef) bool { return r == byJob[3] })
	sim.w.known = slices.Clone(sim.running)
	sim.w.sync(0)
	sim.end(byJob[2], api.OutcomeError, true)
	for id, want := range map[int64]string{2: api.JobError, 3: api.JobCancelled} {
		if j := a45Job(t, alice, b.ID, id); j.State != want || len(j.Attempts) != 1 {
			t.Errorf("job %d after an OOM claim: %s with %d attempts, want %s", id, j.State, len(j.Attempts), want)
		}
	}
	// Its own OOMs: 512 MiB × 16 is past the bound, so 2 GiB; at the
	// bound an OOM is the job's error.
	sim.end(a1, api.OutcomeError, true)
	a := sim.assigned(1)[0]
	if a.JobID != 1 || a.Memory != 2<<30 {
		t.Fatalf("after an OOM, assigned %+v", a)
	}
	sim.start(a.AttemptRef)
	sim.end(a.AttemptRef, api.OutcomeError, true)
	if j := a45Job(t, alice, b.ID, 1); j.State != api.JobError || len(j.Attempts) != 2 {
		t.Errorf("after an OOM at the bound job 1 is %s with %d attempts, want error with 2", j.State, len(j.Attempts))
	}
}

// TestAttack45OOMRetryAndLostBounds: oom_retry, max_lost_attempts and
// max_spot_attempts out of bounds, sent as raw JSON (non-numbers,
// overflowing numbers, NaN), are refused with a 400.
func TestAttack45OOMRetryAndLostBounds(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.UserRequestsPerSecond = 0 })
	alice := tc.user("alice", "genomics")
	tok := alice.Token()
	newSimWorker(t, tc, "sim-64g", 4) // the fleet's largest machine: 64 GiB
	body := func(extra string) string {
		return `{"billing_project":"genomics","jobs":[{"job_id":1,"command":["true"],"cpu":1,"memory":536870912` + extra + `}]}`
	}
	for _, extra := range []string{
		`,"oom_retry":{"factor":"NaN","max_memory":1073741824}`,
		`,"oom_retry":{"factor":NaN,"max_memory":1073741824}`,
		`,"oom_retry":{"factor":1e309,"max_memory":1073741824}`,
		`,"oom_retry":{"factor":-2,"max_memory":1073741824}`,
		`,"oom_retry":{"factor":0,"max_memory":1073741824}`,
		`,"oom_retry":{"factor":1.0999,"max_memory":1073741824}`,
		`,"oom_retry":{"factor":1,"max_memory":1073741824}`,
		`,"oom_retry":{"factor":16.001,"max_memory":1073741824}`,
		`,"oom_retry":{"factor":2,"max_memory":-1}`,
		`,"oom_retry":{"factor":2,"max_memory":0}`,
		`,"oom_retry":{"factor":2,"max_memory":536870912}`,
		`,"oom_retry":{"factor":2,"max_memory":9223372036854775807}`,
		`,"oom_retry":{"factor":2,"max_memory":9223372036854775808}`,
		`,"oom_retry":{"factor":2,"max_memory":1e19}`,
		`,"oom_retry":{"factor":2,"max_memory":70368744177665}`,
		`,"oom_retry":{"factor":2,"max_memory":137438953472}`,
		`,"oom_retry":{"factor":2}`,
		`,"oom_retry":{}`,
		`,"max_lost_attempts":-2`,
		`,"max_lost_attempts":101`,
		`,"max_lost_attempts":32768`,
		`,"max_lost_attempts":4294967297`,
		`,"max_lost_attempts":1.5`,
		`,"max_lost_attempts":"3"`,
		`,"max_spot_attempts":-1`,
		`,"max_spot_attempts":101`,
		`,"max_spot_attempts":65537`,
		`,"max_spot_attempts":1.5`,
	} {
		code, msg := tc.raw("POST", "/api/v1/batches", tok, body(extra))
		if code != http.StatusBadRequest {
			t.Errorf("job with %s: %d %s, want 400", extra, code, msg)
		}
	}
	// At the bounds: accepted.
	for _, extra := range []string{
		`,"oom_retry":{"factor":1.1,"max_memory":1073741824}`,
		`,"oom_retry":{"factor":16,"max_memory":68719476736}`,
		`,"max_lost_attempts":-1`,
		`,"max_lost_attempts":100`,
		`,"max_spot_attempts":1`,
		`,"max_spot_attempts":100`,
	} {
		if code, msg := tc.raw("POST", "/api/v1/batches", tok, body(extra)); code != http.StatusCreated && code != http.StatusOK {
			t.Errorf("job with %s: %d %s, want accepted", extra, code, msg)
		}
	}
}

// TestAttack45RetryRacingCancel: retries and cancels of the same batches
// sent together, by the owner and a manager, in whatever order they
// land, leave every batch's counts adding up and every batch completing
// once its worker is done; nothing runs twice at once.
func TestAttack45RetryRacingCancel(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.UserRequestsPerSecond = 0 })
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	mia := tc.user("mia", "genomics")
	if err := tc.admin.SetRole(ctx, "genomics", "mia", "manager"); err != nil {
		t.Fatal(err)
	}
	sim := newA45Sim(t, tc, "sim-race", 16)
	const nb = 6
	var ids []int64
	for range nb {
		b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
			{JobID: 1, Name: "bad", Command: []string{"false"}, CPU: 1},
			{JobID: 2, Name: "child", Command: []string{"true"}, CPU: 1, ParentIDs: []int64{1}},
			{JobID: 3, Name: "long", Command: []string{"sleep", "1000"}, CPU: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}
	// Every job 1 fails (job 2 is cancelled with it), every job 3 runs.
	for _, a := range sim.assigned(2 * nb) {
		sim.start(a.AttemptRef)
		if a.JobID == 1 {
			sim.end(a.AttemptRef, api.OutcomeFailed, false)
		}
	}
	errs := make(chan error, 3*nb)
	for _, id := range ids {
		go func() { errs <- mia.CancelBatch(ctx, id) }()
		go func() {
			_, err := alice.RetryBatch(ctx, id, &api.RetryRequest{States: []string{api.JobFailed, api.JobCancelled}})
			errs <- err
		}()
		go func() {
			_, err := alice.RestartJob(ctx, id, 3)
			if api.IsStatus(err, http.StatusConflict) {
				err = nil
			}
			errs <- err
		}()
	}
	for range 3 * nb {
		if err := <-errs; err != nil {
			t.Errorf("race: %v", err)
		}
	}
	// The worker ends whatever it is told to stop or given, until every
	// batch completes.
	deadline := time.Now().Add(30 * time.Second)
	for {
		complete := 0
		for _, id := range ids {
			bb, err := alice.GetBatch(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ended := bb.NSucceeded + bb.NFailed + bb.NCancelled + bb.NError; ended != bb.NCompleted || ended+bb.NPending+bb.NReady+bb.NRunning != bb.NJobs {
				t.Fatalf("batch %d counts do not add up: %+v", id, bb)
			}
			if bb.Complete() {
				complete++
			}
		}
		if complete == nb {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d batches complete 30 s after the race", complete, nb)
		}
		sim.w.known = slices.Clone(sim.running)
		res := sim.w.sync(200 * time.Millisecond)
		seen := map[api.AttemptRef]bool{}
		for _, a := range res.Assign {
			if !slices.Contains(sim.running, a.AttemptRef) {
				sim.running = append(sim.running, a.AttemptRef)
			}
		}
		for _, k := range res.Kill {
			seen[k] = true
		}
		for _, p := range res.Preempt {
			seen[p.AttemptRef] = true
		}
		for _, a := range slices.Clone(sim.running) {
			switch {
			case seen[a]:
				sim.end(a, api.OutcomeCancelled, false)
			default:
				sim.end(a, api.OutcomeSuccess, false)
			}
		}
	}
}

// TestAttack45RetryRerunsOnlyWhatTheProjectStillAllows: a retry runs
// jobs again under the project's rules as they are now (state.CheckJobs
// on one job of each spec, at admission and in apply): a member whose
// project allowed network "host" when she submitted cannot keep running
// host-network jobs by retrying them after an admin turned it off (403,
// as a submission of the same job).
func TestAttack45RetryRerunsOnlyWhatTheProjectStillAllows(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	sim := newA45Sim(t, tc, "sim-host", 4)
	on, off := true, false
	if _, err := tc.admin.SetBillingProjectSettings(ctx, "genomics", &api.BillingProjectSettings{AllowHostNetwork: &on}); err != nil {
		t.Fatal(err)
	}
	hostJob := []api.JobSpec{{JobID: 1, Name: "probe", Command: []string{"false"}, CPU: 1, Image: "alpine:3", Network: api.NetworkHost}}
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: hostJob})
	if err != nil {
		t.Fatal(err)
	}
	a := sim.assigned(1)[0]
	sim.start(a.AttemptRef)
	sim.end(a.AttemptRef, api.OutcomeFailed, false)
	if _, err := tc.admin.SetBillingProjectSettings(ctx, "genomics", &api.BillingProjectSettings{AllowHostNetwork: &off}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: hostJob}); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("a host-network job submitted after the project stopped allowing it: %v, want 403", err)
	}
	rs, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{})
	if err == nil && rs.Retried > 0 {
		again := sim.assigned(1)[0]
		t.Errorf("retry of a host-network job after the project stopped allowing it: retried %d, and the worker is told to run attempt %d on network %q",
			rs.Retried, again.Attempt, again.Network)
	} else if !api.IsStatus(err, http.StatusForbidden) {
		t.Errorf("retry: %+v %v, want 403", rs, err)
	}
}

// TestAttack45RetryWithinLimitsAndCancelledBatchRestart: a retry counts
// against the owner's queued-job limit (429 past it, nothing in the log);
// a restart of a running job of a cancelled batch ends it cancelled, it
// does not run again.
func TestAttack45RetryWithinLimitsAndCancelledBatchRestart(t *testing.T) {
	tc := startServer(t, "", func(c *Config) { c.MaxQueuedJobsPerUser = 3 })
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	sim := newA45Sim(t, tc, "sim-limit", 8)
	b, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "bad", Count: 3, Command: []string{"false"}, CPU: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range sim.assigned(3) {
		sim.start(a.AttemptRef)
		sim.end(a.AttemptRef, api.OutcomeFailed, false)
	}
	long, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{
		{JobID: 1, Name: "long", Command: []string{"sleep", "1000"}, CPU: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	from := tc.srv.raft.raft.LastIndex()
	if _, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{}); !api.IsStatus(err, http.StatusTooManyRequests) {
		t.Errorf("a retry of 3 jobs with 1 queued and a limit of 3: %v, want 429", err)
	}
	if n := a45RetryEntries(t, tc, from); n != 0 {
		t.Errorf("a refused retry put %d RetryJobs in the log", n)
	}
	if rs, err := alice.RetryBatch(ctx, b.ID, &api.RetryRequest{JobRanges: []api.IDRange{{1, 2}}}); err != nil || rs.Retried != 2 {
		t.Errorf("a retry of 2 jobs within the limit: %+v %v", rs, err)
	}
	// The long job runs; its batch is cancelled; a restart then ends it.
	var la api.AttemptRef
	for _, a := range sim.assigned(3) {
		sim.start(a.AttemptRef)
		if a.BatchID == long.ID {
			la = a.AttemptRef
		}
	}
	if la.BatchID == 0 {
		t.Fatal("the long job was not assigned")
	}
	if err := alice.CancelBatch(ctx, long.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.RestartJob(ctx, long.ID, 1); err != nil && !api.IsStatus(err, http.StatusConflict) {
		t.Fatalf("restart in a cancelled batch: %v", err)
	}
	sim.end(la, api.OutcomePreempted, false)
	j := a45WaitJob(t, alice, long.ID, 1, api.JobCancelled, 5*time.Second)
	if len(j.Attempts) != 1 {
		t.Errorf("the cancelled batch's restarted job has %d attempts", len(j.Attempts))
	}
}
