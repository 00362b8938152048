package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestHostileNumbersAreBounded: numbers and references a tenant sets,
// each bounded where it is set (issue 41), on a real dev agent with two
// real workers of 2 cores and 4 GiB, as members and a manager of the
// default billing project would send them:
//
//   - priority: a member's priority 1,000,000 in a shared leaf is refused
//     (403 naming the caps and who raises them); the project's cap, a
//     manager's, and the queue's, an admin's, both hold;
//   - fair share: in that leaf a member at the cap (10) and one at 0
//     share the slots: the other is served within seconds, not once the
//     first has run out of work;
//   - sizes: memory 8 EiB, 1 TiB, 64 cores, inline or in a bunch of an
//     update, get a 400 naming the largest machine (or the API's bound);
//   - images: /etc/passwd, file:///etc/shadow, oci-archive:/tmp/x.tar,
//     docker://x and localhost:5999/../../x:1 get a 400 naming the
//     reference, and drover run points at the line.
//
// On the code before the bounds every one was accepted: priority
// 1,000,000 took all four slots of the leaf until its batch ran out,
// the 8 EiB job waited for ever, and the references reached the workers.
// The test sends raw JSON where the settings are new, so it builds
// against that code too.
func TestHostileNumbersAreBounded(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "2", "-worker-cores", "2", "-worker-memory", "4GiB")
	ctx := context.Background()
	admin := a.client()
	member := func(name, role string) *api.Client {
		tok := strings.TrimSpace(a.drover(a.token, "user", "create", name).must(t, 0).stdout)
		a.drover(a.token, "billing-project", "add-member", "default", name, "-role", role).must(t, 0)
		return api.NewClient(a.addr, tok)
	}
	alice, bob, carol := member("alice", "member"), member("bob", "member"), member("carol", "manager")
	waitWorkers(t, admin, 2)
	// One leaf shared by the project's members.
	putQueue := func(maxPriority int64) error {
		body := map[string]any{"path": "shared", "billing_projects": []string{"default"}}
		if maxPriority > 0 {
			body["max_priority"] = maxPriority
		}
		return admin.Do(ctx, http.MethodPut, "/api/v1/queues/shared", body, nil)
	}
	if err := putQueue(0); err != nil {
		t.Fatal(err)
	}
	setProjectCap := func(c *api.Client, v int64) error {
		return c.Do(ctx, http.MethodPut, "/api/v1/billing-projects/default/max-priority", map[string]int64{"max_priority": v}, nil)
	}
	empty := func(c *api.Client, prio int64) error {
		_, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: fmt.Sprintf("prio-%d", prio), Priority: prio})
		return err
	}
	refused := func(t *testing.T, what string, err error, status int, words ...string) {
		t.Helper()
		if !api.IsStatus(err, status) {
			t.Fatalf("%s: %v, want %d", what, err, status)
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %v, want it to say %q", what, err, w)
			}
		}
	}

	t.Run("priority above the cap", func(t *testing.T) {
		refused(t, "the issue's priority", empty(alice, 1_000_000), http.StatusForbidden,
			"priority 1000000 is above 0", "billing project default's max_priority is 0", "queue shared's is 0", "drover billing-project set default -max-priority N")
		refused(t, "priority 1", empty(alice, 1), http.StatusForbidden, "above 0")
		if err := empty(alice, -7); err != nil {
			t.Fatalf("lowering one's own priority: %v", err)
		}
		refused(t, "a member raising the project's cap", setProjectCap(alice, 1_000_000), http.StatusForbidden, "not a manager")
		if err := setProjectCap(carol, 1_000_001); !api.IsStatus(err, http.StatusBadRequest) {
			t.Fatalf("a cap beyond the bound: %v", err)
		}
		if err := setProjectCap(carol, 10); err != nil {
			t.Fatalf("the manager raises the project's cap: %v", err)
		}
		refused(t, "the project's cap raised, the queue's still 0", empty(alice, 10), http.StatusForbidden, "queue shared's is 0", "admins set it")
		if err := putQueue(10); err != nil {
			t.Fatalf("the admin raises the queue's cap: %v", err)
		}
		if err := empty(alice, 10); err != nil {
			t.Fatalf("priority 10 under both caps of 10: %v", err)
		}
		refused(t, "priority 11", empty(alice, 11), http.StatusForbidden, "priority 11 is above 10")
		if err := empty(admin, 1_000_000); err != nil {
			t.Fatalf("an admin's priority: %v", err)
		}
	})

	t.Run("fair share between users below the cap", func(t *testing.T) {
		// The caps of the subtest above (set again: it may have stopped
		// before them).
		if err := putQueue(10); err != nil {
			t.Errorf("the queue's max_priority: %v", err)
		}
		if err := setProjectCap(carol, 10); err != nil {
			t.Errorf("the project's max_priority: %v", err)
		}
		submit := func(c *api.Client, prio int64) int64 {
			b, err := c.Submit(ctx, &api.CreateBatchRequest{Name: fmt.Sprintf("flood-%d", prio), Priority: prio}, api.Jobs{
				{JobID: 1, Name: "j", Count: 40, Command: []string{"sleep", "2"}, CPU: 1, Memory: 256 << 20},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return b.ID
		}
		hog, other := submit(alice, 10), submit(bob, 0)
		defer func() {
			for _, id := range []int64{hog, other} {
				_ = admin.CancelBatch(ctx, id)
			}
		}()
		// Four slots, 40 jobs of 2 s each: the member at priority 10 has
		// 20 s of work. Fair share serves the other within a few rounds.
		start := time.Now()
		var b, h *api.Batch
		for {
			var err error
			if b, err = admin.GetBatch(ctx, other); err != nil {
				t.Fatal(err)
			}
			if h, err = admin.GetBatch(ctx, hog); err != nil {
				t.Fatal(err)
			}
			if b.NRunning+b.NCompleted >= 4 {
				break
			}
			if time.Since(start) > 15*time.Second {
				t.Fatalf("after %s the member at priority 0 has started %d jobs, the one at priority 10 %d (of 40): no fair share below the cap",
					time.Since(start).Round(time.Second), b.NRunning+b.NCompleted, h.NRunning+h.NCompleted)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if h.NCompleted >= 40 {
			t.Fatalf("the member at priority 0 started only once the other's batch was done")
		}
		t.Logf("after %s: priority 0 started %d, priority 10 started %d", time.Since(start).Round(100*time.Millisecond), b.NRunning+b.NCompleted, h.NRunning+h.NCompleted)
	})

	t.Run("sizes beyond the largest machine", func(t *testing.T) {
		job := func(cpu float64, mem int64) api.JobSpec {
			return api.JobSpec{JobID: 1, Name: "big", Command: []string{"true"}, CPU: cpu, Memory: mem}
		}
		inline := func(j api.JobSpec) error {
			_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{Name: "big", Jobs: []api.JobSpec{j}})
			return err
		}
		refused(t, "the issue's 8 EiB", inline(job(1, math.MaxInt64)), http.StatusBadRequest, "memory is 9223372036854775807 bytes", "64 TiB")
		refused(t, "1 TiB", inline(job(1, 1<<40)), http.StatusBadRequest, "memory 1TiB is more than the largest machine offers (4GiB: worker")
		refused(t, "64 cores", inline(job(64, 1<<30)), http.StatusBadRequest, "cpu 64 cores is more than the largest machine offers (2 cores: worker")
		// In a bunch of an open update.
		created, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{Name: "bunches", NJobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		refused(t, "1 TiB in a bunch", alice.AddJobs(ctx, created.Batch.ID, created.UpdateID, []api.JobSpec{job(1, 1<<30), {JobID: 2, Name: "big", Command: []string{"true"}, CPU: 1, Memory: 1 << 40}}),
			http.StatusBadRequest, "job 2 (\"big\"): memory 1TiB is more than the largest machine offers")
		if err := inline(job(2, 4<<30)); err != nil {
			t.Fatalf("a job the size of the largest machine: %v", err)
		}
	})

	t.Run("image references", func(t *testing.T) {
		for _, ref := range []string{"/etc/passwd", "file:///etc/shadow", "oci-archive:/tmp/x.tar", "docker://x", "localhost:5999/../../x:1", "registry.example.com/Tools/bwa:1"} {
			_, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{Name: "img", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, Image: ref}}})
			refused(t, ref, err, http.StatusBadRequest, fmt.Sprintf("%q is not an image reference", ref))
		}
		spec := writeSpec(t, "batch \"img\" {\n  job \"climb\" {\n    command = [\"true\"]\n    image   = \"localhost:5999/../../x:1\"\n  }\n}\n")
		r := a.drover(a.token, "run", spec)
		if r.code == 0 || !strings.Contains(r.stderr, "spec.hcl:4:15") || !strings.Contains(r.stderr, `path component ".."`) {
			t.Fatalf("drover run of a climbing image: exit %d\n%s", r.code, r.stderr)
		}
	})
}
