package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestCLI runs the README's quick start and the other CLI flows against one
// dev agent with two real worker processes.
func TestCLI(t *testing.T) {
	// Where jobs leave marks for the test to find (a job sees the rest
	// of the host read-only).
	marks := jobWritableDir(t)
	a := startAgent(t, "", "", "-workers", "2", "-worker-cores", "4", "-worker-memory", "4GiB", "-job-writable-dir", marks)

	t.Run("quick start", func(t *testing.T) {
		r := a.drover(a.token, "run", "-wait", "examples/scatter-gather.hcl").must(t, 0)
		if !strings.Contains(r.stdout, "succeeded") {
			t.Fatalf("run output: %s", r.stdout)
		}
		id := batchID(t, r.stdout)
		list := a.drover(a.token, "batch", "list").must(t, 0)
		if !strings.Contains(list.stdout, "scatter-gather") {
			t.Fatalf("batch list: %s", list.stdout)
		}
		st := decodeJSON[map[string]any](t, a.drover(a.token, "batch", "status", id, "-json").must(t, 0).stdout)
		want := map[string]any{"state": "complete", "n_jobs": 10.0, "n_succeeded": 10.0, "n_failed": 0.0, "n_cancelled": 0.0}
		for k, v := range want {
			if st[k] != v {
				t.Errorf("batch status %s = %v, want %v", k, st[k], v)
			}
		}
		if st["id"] == nil {
			t.Error("batch status has no id")
		}
		jobs := decodeJSON[api.JobList](t, a.drover(a.token, "job", "list", id, "-json").must(t, 0).stdout)
		if len(jobs.Jobs) != 10 || jobs.Jobs[0].Name != "split" || jobs.Jobs[9].Name != "merge" || jobs.Jobs[4].Name != "align[3]" {
			t.Fatalf("job list: %+v", jobs.Jobs)
		}
		table := a.drover(a.token, "job", "list", id).must(t, 0)
		if !strings.Contains(table.stdout, "align[7]") {
			t.Fatalf("job list table: %s", table.stdout)
		}
		logs := a.drover(a.token, "job", "logs", id, "5").must(t, 0)
		if logs.stdout != fmt.Sprintf("aligning shard 3 of batch %s\n", id) {
			t.Fatalf("job logs: %q", logs.stdout)
		}
		j := decodeJSON[map[string]any](t, a.drover(a.token, "job", "status", id, "5", "-json").must(t, 0).stdout)
		for _, k := range []string{"job_id", "name", "state", "exit_code", "attempts"} {
			if _, ok := j[k]; !ok {
				t.Errorf("job JSON lacks %q: %v", k, j)
			}
		}
		if j["state"] != "success" || j["exit_code"] != 0.0 || len(j["attempts"].([]any)) != 1 {
			t.Errorf("job JSON %v", j)
		}
	})

	t.Run("failure exits 2 and cancels dependents", func(t *testing.T) {
		r := a.drover(a.token, "run", "-wait", "examples/dag.hcl").must(t, 2)
		id := batchID(t, r.stdout)
		if !strings.Contains(r.stdout, "right failed") {
			t.Fatalf("summary does not name the failed job: %s", r.stdout)
		}
		jobs := decodeJSON[api.JobList](t, a.drover(a.token, "job", "list", id, "-json").must(t, 0).stdout)
		states := map[string]string{}
		for _, j := range jobs.Jobs {
			states[j.Name] = j.State
		}
		want := map[string]string{"fetch": "success", "left": "success", "right": "failed", "publish": "cancelled", "report": "success"}
		for k, v := range want {
			if states[k] != v {
				t.Errorf("%s is %s, want %s", k, states[k], v)
			}
		}
		if log := a.drover(a.token, "job", "logs", id, "3").must(t, 0).stdout; log != "right is about to fail\n" {
			t.Errorf("stderr not in the log: %q", log)
		}
	})

	t.Run("array indexes and variables", func(t *testing.T) {
		r := a.drover(a.token, "run", "-wait", "-var", "n=30", "examples/array.hcl").must(t, 0)
		id := batchID(t, r.stdout)
		b := decodeJSON[api.Batch](t, a.drover(a.token, "batch", "status", id, "-json").must(t, 0).stdout)
		if b.NJobs != 30 || b.NSucceeded != 30 {
			t.Fatalf("batch %+v", b)
		}
		for _, jid := range []int{1, 17, 30} {
			out := a.drover(a.token, "job", "logs", id, strconv.Itoa(jid)).must(t, 0).stdout
			if want := fmt.Sprintf("%d\n", (jid-1)*(jid-1)); out != want {
				t.Errorf("job %d printed %q, want %q", jid, out, want)
			}
		}
	})

	t.Run("timeouts, errors and retries", func(t *testing.T) {
		spec := writeSpec(t, `
batch "edge" {
  job "slow" {
    command = ["sleep", "30"]
    timeout = "1s"
    memory  = "64MiB"
  }
  job "missing" {
    command = ["/no/such/program"]
    memory  = "64MiB"
  }
  job "retried" {
    command = "exit 4"
    retries = 2
    memory  = "64MiB"
  }
}`)
		start := time.Now()
		r := a.drover(a.token, "run", "-wait", spec).must(t, 2)
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("took %s", took)
		}
		id := batchID(t, r.stdout)
		jobs := decodeJSON[api.JobList](t, a.drover(a.token, "job", "list", id, "-json").must(t, 0).stdout)
		slow, missing, retried := jobs.Jobs[0], jobs.Jobs[1], jobs.Jobs[2]
		if slow.State != "failed" || !strings.Contains(slow.Message, "timed out") {
			t.Errorf("slow: %+v", slow)
		}
		if missing.State != "error" || !strings.Contains(missing.Message, "no such file") {
			t.Errorf("missing: %+v", missing)
		}
		if retried.State != "failed" || len(retried.Attempts) != 3 || *retried.ExitCode != 4 {
			t.Errorf("retried: %+v", retried)
		}
	})

	t.Run("cancel_after_n_failures stops a sweep", func(t *testing.T) {
		// Two of the points fail at once; the rest would sleep a minute.
		spec := writeSpec(t, `
batch "sweep" {
  cancel_after_n_failures = 2
  job "point" {
    count   = 20
    command = ["sh", "-c", "if [ $DROVER_INDEX -lt 2 ]; then exit 1; fi; sleep 60"]
    memory  = "64MiB"
  }
}`)
		r := a.drover(a.token, "run", "-wait", spec).must(t, 2)
		if !strings.Contains(r.stdout, "was cancelled (2 of its jobs failed (cancel_after_n_failures = 2))") {
			t.Fatalf("run output: %s", r.stdout)
		}
		id := batchID(t, r.stdout)
		b := decodeJSON[api.Batch](t, a.drover(a.token, "batch", "status", id, "-json").must(t, 0).stdout)
		if !b.Cancelled || b.CancelAfterNFailures != 2 || b.NFailed != 2 || b.NSucceeded != 0 || b.NCancelled != 18 {
			t.Fatalf("batch %+v: want cancelled after its 2 failures, the other 18 points cancelled (none slept to the end)", b)
		}
	})

	t.Run("cancel kills running jobs", func(t *testing.T) {
		marker := filepath.Join(marks, "ran-to-the-end")
		spec := writeSpec(t, fmt.Sprintf(`
batch "long" {
  job "sleepers" {
    count   = 20
    command = ["sh", "-c", "sleep 30; touch %s"]
    memory  = "64MiB"
  }
  job "after" {
    depends_on = ["sleepers"]
    command    = ["true"]
  }
}`, marker))
		id := strings.TrimSpace(a.drover(a.token, "run", "-quiet", spec).must(t, 0).stdout)
		waitFor(t, "jobs to start", 20*time.Second, func() bool {
			b := decodeJSON[api.Batch](t, a.drover(a.token, "batch", "status", id, "-json").must(t, 0).stdout)
			return b.NRunning == 8
		})
		start := time.Now()
		a.drover(a.token, "batch", "cancel", id).must(t, 0)
		r := a.drover(a.token, "batch", "wait", id, "-json").must(t, 2)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("cancellation took %s", took)
		}
		b := decodeJSON[api.Batch](t, r.stdout)
		if !b.Cancelled || b.NCancelled != 21 || b.State != "complete" {
			t.Fatalf("batch %+v", b)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("a cancelled job ran to the end")
		}
	})

	t.Run("validate", func(t *testing.T) {
		r := a.drover(a.token, "validate", "jobspec/testdata/bad/unknown-dependency.hcl").must(t, 1)
		if !strings.Contains(r.stderr, "jobspec/testdata/bad/unknown-dependency.hcl:6:19: error: Unknown dependency") {
			t.Fatalf("validate stderr: %s", r.stderr)
		}
		if n := strings.Count(r.stderr, "Unknown dependency"); n != 2 {
			t.Fatalf("validate reported %d of 2 problems: %s", n, r.stderr)
		}
		for _, f := range []string{"cycle", "bad-unit", "negative-count", "unknown-attribute"} {
			r := a.drover(a.token, "validate", "jobspec/testdata/bad/"+f+".hcl").must(t, 1)
			if !strings.Contains(r.stderr, "jobspec/testdata/bad/"+f+".hcl:") {
				t.Errorf("%s: %s", f, r.stderr)
			}
		}
		a.drover(a.token, "validate", "examples/scatter-gather.hcl").must(t, 0)
		// run refuses an invalid spec the same way, and submits nothing.
		before := decodeJSON[api.BatchList](t, a.drover(a.token, "batch", "list", "-json").must(t, 0).stdout)
		a.drover(a.token, "run", "jobspec/testdata/bad/cycle.hcl").must(t, 1)
		after := decodeJSON[api.BatchList](t, a.drover(a.token, "batch", "list", "-json").must(t, 0).stdout)
		if len(after.Batches) != len(before.Batches) {
			t.Fatal("an invalid spec was submitted")
		}
	})

	t.Run("tenancy", func(t *testing.T) {
		alice := strings.TrimSpace(a.drover(a.token, "user", "create", "alice").must(t, 0).stdout)
		bob := strings.TrimSpace(a.drover(a.token, "user", "create", "bob").must(t, 0).stdout)
		if len(alice) != 64 || alice == bob {
			t.Fatalf("tokens %q %q", alice, bob)
		}
		a.drover(a.token, "billing-project", "create", "genomics", "-member", "alice").must(t, 0)
		r := a.drover(alice, "run", "-wait", "-billing-project", "genomics", "examples/hello.hcl").must(t, 0)
		id := batchID(t, r.stdout)
		denied := a.drover(bob, "batch", "status", id).must(t, 1)
		if !strings.Contains(denied.stderr, "not a member") || !strings.Contains(denied.stderr, "403") {
			t.Errorf("bob's status: %s", denied.stderr)
		}
		denied = a.drover(bob, "batch", "cancel", id).must(t, 1)
		if !strings.Contains(denied.stderr, "403") {
			t.Errorf("bob's cancel: %s", denied.stderr)
		}
		denied = a.drover(bob, "run", "-billing-project", "genomics", "examples/hello.hcl").must(t, 1)
		if !strings.Contains(denied.stderr, `not a member of billing project "genomics"`) {
			t.Errorf("bob's run: %s", denied.stderr)
		}
		if out := a.drover(bob, "batch", "list").must(t, 0).stdout; strings.Contains(out, "hello") {
			t.Errorf("bob lists alice's batch: %s", out)
		}
		if out := a.drover(a.token, "batch", "list", "-filter", "user=alice").must(t, 0).stdout; !strings.Contains(out, "hello") {
			t.Errorf("admin does not see alice's batch: %s", out)
		}
		a.drover(bob, "user", "create", "mallory").must(t, 1)
		a.drover(a.token, "billing-project", "add-member", "genomics", "bob", "-role", "viewer").must(t, 0)
		a.drover(bob, "batch", "status", id).must(t, 0)
		if r := a.drover(bob, "batch", "cancel", id).must(t, 1); !strings.Contains(r.stderr, "403") {
			t.Errorf("a viewer's cancel: %s", r.stderr)
		}
		if r := a.drover(bob, "run", "-billing-project", "genomics", "examples/hello.hcl").must(t, 1); !strings.Contains(r.stderr, "viewer") {
			t.Errorf("a viewer's run: %s", r.stderr)
		}
		// Alice, a member, may not manage the project; a manager may.
		a.drover(alice, "billing-project", "set-limit", "genomics", "100").must(t, 1)
		a.drover(a.token, "billing-project", "add-member", "genomics", "alice", "-role", "manager").must(t, 0)
		a.drover(alice, "billing-project", "set-limit", "genomics", "100").must(t, 0)
		if out := a.drover(alice, "billing-project", "show", "genomics").must(t, 0).stdout; !strings.Contains(out, "$100.00") || !strings.Contains(out, "alice") {
			t.Errorf("billing-project show: %s", out)
		}
		a.drover(alice, "billing-project", "add-member", "genomics", "bob", "-role", "member").must(t, 0)
	})

	t.Run("rates and cost", func(t *testing.T) {
		a.drover(a.token, "rate", "set", "compute", "0.05").must(t, 0)
		a.drover(a.token, "rate", "set", "service-fee", "0.01").must(t, 0)
		if r := a.drover(a.token, "rate", "set", "compute", "0.06", "-from", "2020-01-01T00:00:00Z").must(t, 1); !strings.Contains(r.stderr, "in the past") {
			t.Errorf("a rate in the past: %s", r.stderr)
		}
		list := a.drover(a.token, "rate", "list").must(t, 0).stdout
		if !strings.Contains(list, "compute") || !strings.Contains(list, "0.05") || !strings.Contains(list, "service-fee") {
			t.Errorf("rate list: %s", list)
		}
		r := a.drover(a.token, "run", "-wait", "examples/hello.hcl").must(t, 0)
		id := batchID(t, r.stdout)
		j := decodeJSON[api.Job](t, a.drover(a.token, "job", "status", id, "1", "-json").must(t, 0).stdout)
		at := j.Attempts[len(j.Attempts)-1]
		if at.Cost == nil || at.PricePerHour <= 0 || at.StartTime == nil || at.EndTime == nil {
			t.Fatalf("attempt without a cost: %+v", at)
		}
		// The price is shown rounded to a nano-dollar an hour; the cost
		// is the exact price × the time, rounded once.
		want := at.PricePerHour.Dollars() * at.EndTime.Sub(*at.StartTime).Hours()
		if math.Abs(at.Cost.Dollars()-want) > 2e-9 {
			t.Errorf("cost %v, want price × duration %v", *at.Cost, want)
		}
		if out := a.drover(a.token, "job", "status", id, "1").must(t, 0).stdout; !strings.Contains(out, "COST") || !strings.Contains(out, "$") {
			t.Errorf("job status: %s", out)
		}
		a.drover(a.token, "rate", "list", "-json").must(t, 0)
		b := decodeJSON[api.Batch](t, a.drover(a.token, "batch", "status", id, "-json").must(t, 0).stdout)
		if b.Cost != *at.Cost {
			t.Errorf("batch cost %v, its one attempt's %v", b.Cost, *at.Cost)
		}
		if out := a.drover(a.token, "billing-project", "list").must(t, 0).stdout; !strings.Contains(out, "COST") {
			t.Errorf("billing-project list: %s", out)
		}
		pc := decodeJSON[api.ProjectCost](t, a.drover(a.token, "billing", "show", "-project", "default", "-json").must(t, 0).stdout)
		today := time.Now().UTC().Format(time.DateOnly)
		if len(pc.Rows) == 0 || pc.Rows[len(pc.Rows)-1].Day != today || pc.Rows[len(pc.Rows)-1].Cost < *at.Cost || pc.Cost < *at.Cost {
			t.Errorf("billing show: %+v (the attempt cost %v today)", pc, *at.Cost)
		}
		pc = decodeJSON[api.ProjectCost](t, a.drover(a.token, "billing", "show", "-project", "default", "-by", "batch", "-limit", "10000", "-json").must(t, 0).stdout)
		if i := slices.IndexFunc(pc.Rows, func(r api.CostRow) bool { return r.Batch == b.ID }); i < 0 || pc.Rows[i].Cost != b.Cost || pc.Rows[i].User != b.User {
			t.Errorf("billing show -by batch: no row for batch %d costing %v: %+v", b.ID, b.Cost, pc)
		}
		if r := a.drover(a.token, "billing", "show", "-project", "default", "-by", "week").must(t, 1); !strings.Contains(r.stderr, `"day", "user" or "batch"`) {
			t.Errorf("billing show -by week: %s", r.stderr)
		}
		if out := a.drover(a.token, "billing", "show", "-project", "default").must(t, 0).stdout; !strings.Contains(out, today) {
			t.Errorf("billing show table: %s", out)
		}
		// Once the batch is stored in the history, the project's
		// efficiency over the period counts its attempt.
		if at.Usage == nil {
			t.Errorf("the attempt reported no usage: %+v", at)
		} else {
			var eff api.EfficiencyPeriod
			waitFor(t, "the batch's attempt in the project's efficiency", time.Minute, func() bool {
				eff = decodeJSON[api.EfficiencyPeriod](t, a.drover(a.token, "billing", "efficiency", "-project", "default", "-json").must(t, 0).stdout)
				return slices.ContainsFunc(eff.Groups, func(g api.EfficiencyGroup) bool { return g.Name == "hello" && g.Cost >= *at.Cost })
			})
			if out := a.drover(a.token, "billing", "efficiency", "-project", "default").must(t, 0).stdout; !strings.Contains(out, "hello") || !strings.Contains(out, "WOULD-COST") {
				t.Errorf("billing efficiency table: %s", out)
			}
		}
		if r := a.drover(strings.Repeat("0", 64), "rate", "set", "compute", "1").must(t, 1); !strings.Contains(r.stderr, "401") {
			t.Errorf("rate set with a bad token: %s", r.stderr)
		}
	})

	t.Run("tokens and audit", func(t *testing.T) {
		carol := strings.TrimSpace(a.drover(a.token, "user", "create", "carol").must(t, 0).stdout)
		r := a.drover(carol, "token", "create", "-name", "laptop", "-ttl", "2h").must(t, 0)
		laptop := strings.TrimSpace(r.stdout)
		if len(laptop) != 64 || !strings.Contains(r.stderr, "laptop") || !strings.Contains(r.stderr, "expires") {
			t.Fatalf("token create: %q %q", r.stdout, r.stderr)
		}
		if r := a.drover(carol, "token", "create", "-ttl", "0").must(t, 1); !strings.Contains(r.stderr, "admin") {
			t.Errorf("a never-expiring token by a user: %s", r.stderr)
		}
		list := decodeJSON[[]api.Token](t, a.drover(laptop, "token", "list", "-json").must(t, 0).stdout)
		var acc string
		for _, tk := range list {
			if tk.Name == "laptop" {
				acc = tk.Accessor
			}
		}
		if len(list) != 2 || acc == "" {
			t.Fatalf("carol's tokens: %+v", list)
		}
		rot := a.drover(laptop, "token", "rotate", acc).must(t, 0)
		rotated := strings.TrimSpace(rot.stdout)
		a.drover(laptop, "batch", "list").must(t, 1) // the old one stopped working
		a.drover(rotated, "batch", "list").must(t, 0)
		a.drover(carol, "user", "delete", "carol").must(t, 1) // admins only
		a.drover(a.token, "user", "delete", "carol").must(t, 0)
		if r := a.drover(rotated, "batch", "list").must(t, 1); !strings.Contains(r.stderr, "401") {
			t.Errorf("a deleted user's token: %s", r.stderr)
		}
		var entries []api.AuditEntry
		for range 50 {
			entries = decodeJSON[[]api.AuditEntry](t, a.drover(a.token, "audit", "-since", "10m", "-user", "carol", "-json").must(t, 0).stdout)
			if len(entries) >= 4 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		routes := map[string]bool{}
		for _, e := range entries {
			routes[e.Route+" "+fmt.Sprint(e.Status)] = true
		}
		for _, want := range []string{"POST /api/v1/tokens 201", "POST /api/v1/tokens 403", "POST /api/v1/tokens/{accessor}/rotate 200", "DELETE /api/v1/users/{name} 403"} {
			if !routes[want] {
				t.Errorf("audit log lacks %s: %+v", want, entries)
			}
		}
		for i := 0; ; i++ {
			out := a.drover(a.token, "audit", "-since", "10m").must(t, 0).stdout
			if strings.Contains(out, "DELETE /api/v1/users/carol") {
				break
			}
			if i == 50 {
				t.Fatalf("audit table: %s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("errors", func(t *testing.T) {
		r := a.drover("wrong-token", "batch", "list").must(t, 1)
		if !strings.Contains(r.stderr, "invalid token") {
			t.Errorf("bad token: %s", r.stderr)
		}
		r = runCLI(t, []string{"DROVER_ADDR=http://127.0.0.1:1", "DROVER_TOKEN=x"}, "batch", "list").must(t, 1)
		if !strings.Contains(r.stderr, "no drover server reachable") {
			t.Errorf("unreachable: %s", r.stderr)
		}
		r = a.drover(a.token, "run", "-wait", "examples/nope.hcl").must(t, 1)
		if !strings.Contains(r.stderr, "no such file") {
			t.Errorf("missing file: %s", r.stderr)
		}
		r = a.drover(a.token, "batch", "status", "999999").must(t, 1)
		if !strings.Contains(r.stderr, "does not exist") {
			t.Errorf("missing batch: %s", r.stderr)
		}
		a.drover(a.token, "frobnicate").must(t, 1)
	})

	// The operator snapshot commands, end to end through the CLI; restoring
	// into other clusters is tested in process (server/cluster_test.go).
	t.Run("snapshot save and restore", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "backup.snap")
		out := a.drover(a.token, "operator", "snapshot", "save", file).must(t, 0)
		if !strings.Contains(out.stdout, "Saved snapshot") {
			t.Fatalf("save: %s", out.stdout)
		}
		// It holds the gossip key and token hashes: the owner's alone.
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the snapshot file: %v %v; want mode 0600", fi.Mode(), err)
		}
		before := a.drover(a.token, "batch", "list", "-json").must(t, 0).stdout
		// A batch that completes after the save is gone after the restore.
		// (It is waited for: attempts running during a restore belong to
		// no batch any more and their workers' reports are refused.)
		a.drover(a.token, "run", "-wait", "examples/scatter-gather.hcl").must(t, 0)
		a.drover(a.token, "operator", "snapshot", "restore", file).must(t, 0)
		if after := a.drover(a.token, "batch", "list", "-json").must(t, 0).stdout; after != before {
			t.Fatalf("batch list after restore:\n%s\nwant, as saved:\n%s", after, before)
		}
		bad := filepath.Join(t.TempDir(), "bad.snap")
		os.WriteFile(bad, []byte("not a snapshot\n"), 0o600)
		if r := a.drover(a.token, "operator", "snapshot", "restore", bad).must(t, 1); !strings.Contains(r.stderr, "not a drover snapshot") {
			t.Fatalf("restore of a bad file: %s", r.stderr)
		}
	})
}

func batchID(t *testing.T, out string) string {
	t.Helper()
	var id int
	for _, line := range strings.Split(out, "\n") {
		if _, err := fmt.Sscanf(line, "Submitted batch %d", &id); err == nil {
			return strconv.Itoa(id)
		}
	}
	t.Fatalf("no batch ID in %q", out)
	return ""
}
