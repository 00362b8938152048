package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/api"
)

// batchOfNomadJob reads the drover batch ID the Nomad job's current
// version runs as, through drover's own API (as root).
func batchOfNomadJob(t *testing.T, a *agent, id string) int64 {
	t.Helper()
	list, err := a.client().ListBatches(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var best int64
	for _, b := range list.Batches {
		if b.Name == id && b.ID > best {
			best = b.ID
		}
	}
	return best
}

// TestNomadJobsKeepDroverRoles attacks through the Nomad API what drover's
// roles forbid (found by a tenant's review): a viewer of a billing project
// (who may read only) and a plain member (who may not cancel another
// member's batch) must not replace another member's Nomad job by
// registering its ID (which would cancel its batch, and let a viewer's
// template run as its owner on the owner's next dispatch), nor may a
// viewer stop and purge another member's periodic job.
func TestNomadJobsKeepDroverRoles(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "1", "-worker-cores", "4", "-worker-memory", "4GiB")
	ctx := context.Background()
	alice := strings.TrimSpace(a.drover(a.token, "user", "create", "alice").must(t, 0).stdout)
	bob := strings.TrimSpace(a.drover(a.token, "user", "create", "bob").must(t, 0).stdout)
	victor := strings.TrimSpace(a.drover(a.token, "user", "create", "victor").must(t, 0).stdout)
	a.drover(a.token, "billing-project", "add-member", "default", "alice").must(t, 0)
	a.drover(a.token, "billing-project", "add-member", "default", "bob", "-role", "member").must(t, 0)
	a.drover(a.token, "billing-project", "add-member", "default", "victor", "-role", "viewer").must(t, 0)

	na, nb, nv := nomadClient(t, a, alice), nomadClient(t, a, bob), nomadClient(t, a, victor)
	sleeper := func(id string) *nomad.Job {
		j := nomad.NewBatchJob(id, id, "global", 50)
		task := nomad.NewTask("nap", "raw_exec").SetConfig("command", "/bin/sleep").SetConfig("args", []string{"600"})
		task.Require(&nomad.Resources{CPU: new(100), MemoryMB: new(32)})
		j.AddTaskGroup(nomad.NewTaskGroup("g", 1).AddTask(task))
		return j
	}
	if _, _, err := na.Jobs().Register(sleeper("etl"), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := na.Jobs().Register(sleeper("report"), nil); err != nil {
		t.Fatal(err)
	}
	etl, report := batchOfNomadJob(t, a, "etl"), batchOfNomadJob(t, a, "report")
	// Sanity: drover itself refuses both attackers a cancellation.
	if err := api.NewClient(a.addr, victor).CancelBatch(ctx, etl); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("sanity: a viewer cancels a member's batch through drover's API: %v", err)
	}
	if err := api.NewClient(a.addr, bob).CancelBatch(ctx, report); !api.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("sanity: a member cancels another member's batch through drover's API: %v", err)
	}

	// 1. The viewer registers a parameterized template under alice's job ID.
	evil := nomad.NewBatchJob("etl", "etl", "global", 50)
	evil.ParameterizedJob = &nomad.ParameterizedJobConfig{Payload: "optional"}
	evil.AddTaskGroup(nomad.NewTaskGroup("g", 1).AddTask(nomad.NewTask("t", "raw_exec").
		SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", "echo viewer-code-runs-as-$NOMAD_JOB_ID"})))
	if _, _, err := nv.Jobs().Register(evil, nil); err == nil {
		t.Errorf("viewer victor (read-only) registered template %q over member alice's job", "etl")
	} else {
		t.Logf("viewer's register: %v", err)
	}
	if b, err := a.client().GetBatch(ctx, etl); err == nil && b.Cancelled {
		t.Errorf("alice's batch %d was cancelled by viewer victor's registration", etl)
	}
	if j, _, err := na.Jobs().Info("etl", nil); err == nil && j.ParameterizedJob != nil {
		// alice dispatches what she believes is her job: victor's command runs as alice.
		d, _, err := na.Jobs().Dispatch("etl", nil, nil, "", nil)
		if err == nil {
			b := batchOfNomadJob(t, a, d.DispatchedJobID)
			bb, _ := a.client().GetBatch(ctx, b)
			t.Errorf("alice's dispatch of the hijacked job ran viewer victor's spec as user %q (batch %d)", bb.User, b)
		}
	}

	// 2. The plain member re-registers alice's other job with a new spec.
	mine := sleeper("report")
	mine.Meta = map[string]string{"by": "bob"}
	if _, _, err := nb.Jobs().Register(mine, nil); err == nil {
		if b, err := a.client().GetBatch(ctx, report); err == nil && b.Cancelled {
			t.Errorf("member bob cancelled alice's batch %d (%s) by re-registering her Nomad job", report, b.CancelReason)
		}
	}

	// 3. The viewer stops and purges alice's periodic template.
	tmpl := nomad.NewBatchJob("nightly", "nightly", "global", 50)
	tmpl.Periodic = &nomad.PeriodicConfig{Spec: new("0 3 * * *"), ProhibitOverlap: new(false)}
	tmpl.AddTaskGroup(nomad.NewTaskGroup("g", 1).AddTask(nomad.NewTask("t", "exec").SetConfig("command", "/bin/true")))
	if _, _, err := na.Jobs().Register(tmpl, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := nv.Jobs().Deregister("nightly", true, nil); err == nil {
		t.Errorf("viewer victor stopped and purged member alice's periodic job %q", "nightly")
	}
}

// TestNomadPeriodicLaunchesAreAdmitted: a periodic job is admitted as a
// batch is, when it is registered and at every launch: one of more jobs
// than max-jobs-per-batch is refused (413) as a plain job is, and none of
// its launches runs.
func TestNomadPeriodicLaunchesAreAdmitted(t *testing.T) {
	c := newCluster(t, 1, "-max-jobs-per-batch", "5")
	ctx := context.Background()
	root := api.NewClient(c.Servers[0].URL(), c.token())
	tok := api.NewToken()
	if _, err := root.CreateUser(ctx, &api.CreateUserRequest{Name: "alice", Token: tok}); err != nil {
		t.Fatal(err)
	}
	if err := root.AddMember(ctx, "default", "alice"); err != nil {
		t.Fatal(err)
	}
	na, err := nomad.NewClient(&nomad.Config{Address: c.Servers[0].URL(), SecretID: tok})
	if err != nil {
		t.Fatal(err)
	}
	job := func(id string) *nomad.Job {
		j := nomad.NewBatchJob(id, id, "global", 50)
		j.AddTaskGroup(nomad.NewTaskGroup("g", 50).AddTask(nomad.NewTask("t", "exec").SetConfig("command", "/bin/true")))
		return j
	}
	if _, _, err := na.Jobs().Register(job("plain"), nil); err == nil || !strings.Contains(err.Error(), "413") {
		t.Fatalf("sanity: a job of 50 jobs with max-jobs-per-batch 5: %v", err)
	}
	p := job("every-second")
	p.Periodic = &nomad.PeriodicConfig{Spec: new("* * * * * * *"), ProhibitOverlap: new(false)}
	if _, _, err := na.Jobs().Register(p, nil); err == nil || !strings.Contains(err.Error(), "413") {
		t.Fatalf("a periodic job of 50 jobs with max-jobs-per-batch 5: %v", err)
	}
	list, err := root.ListBatches(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list.Batches {
		if strings.HasPrefix(b.Name, "every-second/periodic-") && b.NJobs > 5 {
			t.Errorf("periodic child %s is batch %d of %d jobs, past max-jobs-per-batch 5 (admission skipped)", b.Name, b.ID, b.NJobs)
		}
	}
}

// TestNomadLogOffsets: the Nomad logs endpoint hands its own query
// (offset=, and chunk/chunks=) to drover's writeLog, which applies offset
// too: the offset is applied twice.
func TestNomadLogOffsets(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "1", "-worker-cores", "2", "-worker-memory", "2GiB")
	nc := nomadClient(t, a, a.token)
	j := nomad.NewBatchJob("printer", "printer", "global", 50)
	j.AddTaskGroup(nomad.NewTaskGroup("g", 1).AddTask(nomad.NewTask("p", "raw_exec").
		SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", "printf 0123456789ABCDEFGHIJ"})))
	if _, _, err := nc.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to end", time.Minute, func() bool {
		j, _, err := nc.Jobs().Info("printer", nil)
		return err == nil && *j.Status == "dead"
	})
	as, _, err := nc.Jobs().Allocations("printer", false, nil)
	if err != nil || len(as) != 1 {
		t.Fatal(err)
	}
	alloc, _, err := nc.Allocations().Info(as[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func(origin string, offset int64) string {
		cancel := make(chan struct{})
		defer close(cancel)
		frames, errs := nc.AllocFS().Logs(alloc, false, "p", "stdout", origin, offset, cancel, nil)
		var got strings.Builder
		for {
			select {
			case f, ok := <-frames:
				if !ok {
					return got.String()
				}
				got.Write(f.Data)
			case err := <-errs:
				return "error: " + err.Error()
			case <-time.After(20 * time.Second):
				return "timeout"
			}
		}
	}
	if got := read("start", 0); got != "0123456789ABCDEFGHIJ" {
		t.Fatalf("whole log %q", got)
	}
	if got := read("start", 5); got != "56789ABCDEFGHIJ" {
		t.Errorf("origin=start offset=5 gave %q, want %q", got, "56789ABCDEFGHIJ")
	}
	if got := read("end", 15); got != "56789ABCDEFGHIJ" {
		t.Errorf("origin=end offset=15 (tail -c 15) gave %q, want %q", got, "56789ABCDEFGHIJ")
	}
	// chunks=index is drover's own peer protocol, passed through.
	req, _ := http.NewRequest("GET", a.addr+"/v1/client/fs/logs/"+alloc.ID+"?task=p&type=stdout&plain=true&chunks=index", nil)
	req.Header.Set("X-Nomad-Token", a.token)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(b, []byte("0123456789")) {
			var x any
			_ = json.Unmarshal(b, &x)
			t.Errorf("chunks=index on the Nomad logs endpoint returns drover's chunk index %q instead of the log", b)
		}
	}
}
