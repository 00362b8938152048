package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestKill9AndRestart kills the agent with SIGKILL in the middle of a batch,
// restarts it on the same data dir, and checks that the batch finishes with
// every job final, that a job running at the crash was re-run as a new
// attempt (never reported twice), and that a batch accepted just before the
// crash survived it.
func TestKill9AndRestart(t *testing.T) {
	dir := t.TempDir()
	addr := freePort(t)
	args := []string{"-workers", "2", "-worker-cores", "4", "-worker-memory", "4GiB"}
	a := startAgent(t, dir, addr, args...)
	spec := writeSpec(t, `
batch "durable" {
  job "work" {
    count   = 48
    command = ["sh", "-c", "sleep 0.5; echo done $DROVER_INDEX"]
    memory  = "64MiB"
  }
  job "final" {
    depends_on = ["work"]
    command    = ["echo", "all done"]
    memory     = "64MiB"
  }
}`)
	id := strings.TrimSpace(a.drover(a.token, "run", "-quiet", spec).must(t, 0).stdout)
	c := a.client()
	ctx := context.Background()
	var bid int64
	fmt.Sscan(id, &bid)
	waitFor(t, "some jobs to finish and others to run", 30*time.Second, func() bool {
		b, err := c.GetBatch(ctx, bid)
		return err == nil && b.NSucceeded >= 8 && b.NRunning > 0
	})
	// Accepted just before the crash: must not be lost.
	late := strings.TrimSpace(a.drover(a.token, "run", "-quiet", "examples/hello.hcl").must(t, 0).stdout)
	workers := workerPIDs(t, dir, a.cmd.Process.Pid)
	if len(workers) != 2 {
		t.Fatalf("found %d worker processes, want 2", len(workers))
	}
	a.kill9()
	waitFor(t, "workers to die with the agent", 10*time.Second, func() bool { return len(workerPIDs(t, dir, 0)) == 0 })

	a2 := startAgent(t, dir, addr, args...)
	if a2.token != a.token {
		t.Fatal("the admin token changed across a restart")
	}
	r := a2.drover(a2.token, "batch", "wait", id, "-json", "-timeout", "60s")
	jobs, err := a2.client().AllJobs(ctx, bid, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.code != 0 {
		for _, j := range jobs {
			if j.State != api.JobSuccess {
				t.Errorf("job %d is %s: %s (attempts %+v)", j.JobID, j.State, j.Message, j.Attempts)
			}
		}
	}
	r.must(t, 0)
	b := decodeJSON[api.Batch](t, r.stdout)
	if b.NJobs != 49 || b.NSucceeded != 49 {
		t.Fatalf("batch after restart: %+v", b)
	}
	rerun := 0
	for _, j := range jobs {
		if j.State != api.JobSuccess {
			t.Fatalf("job %d is %s", j.JobID, j.State)
		}
		successes := 0
		for i, at := range j.Attempts {
			if at.State == api.OutcomeSuccess {
				successes++
			} else if at.State != "lost" || i == len(j.Attempts)-1 {
				t.Fatalf("job %d attempts %+v", j.JobID, j.Attempts)
			}
		}
		if successes != 1 {
			t.Fatalf("job %d has %d successful attempts", j.JobID, successes)
		}
		if len(j.Attempts) > 1 {
			rerun++
		}
	}
	if rerun == 0 {
		t.Fatal("no job was running at the crash; the test did not test anything")
	}
	t.Logf("%d jobs were running at the crash and were re-run", rerun)
	a2.drover(a2.token, "batch", "wait", late, "-timeout", "30s").must(t, 0)
}

// workerPIDs finds the worker processes of the agent using dataDir: those
// whose parent is parent (0: any parent). A worker's child between fork
// and exec (a job starting) has its worker's command line too: only the
// agent's own children are its workers.
func workerPIDs(t *testing.T, dataDir string, parent int) []string {
	args := []string{"-f", "worker .*" + dataDir}
	if parent != 0 {
		args = append([]string{"-P", strconv.Itoa(parent)}, args...)
	}
	out, _ := exec.Command("pgrep", args...).Output()
	return strings.Fields(string(out))
}
