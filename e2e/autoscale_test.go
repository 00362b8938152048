package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// workerProcs counts the worker processes running on machines of the
// agent's data dir.
func workerProcs(t *testing.T, dataDir string) int {
	pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "worker" && strings.Contains(string(b), filepath.Join(dataDir, "machines")+"/") {
			n++
		}
	}
	return n
}

// TestDevAgentAutoscalesFromZero: a dev agent started with -autoscale has
// no worker; a 500-job batch makes it launch worker processes (no more
// than its caps), the batch completes on them, and once they are idle
// they are stopped: back to zero.
func TestDevAgentAutoscalesFromZero(t *testing.T) {
	dir := t.TempDir()
	a := startAgent(t, dir, "", "-autoscale", "-clusters", "east/a:2x2,west/b:2x2", "-idle-timeout", "3s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := a.client()
	var st *api.AutoscalerStatus
	waitFor(t, "the agent to declare its autoscaler", 30*time.Second, func() bool {
		var err error
		st, err = c.AutoscalerStatus(ctx)
		return err == nil && len(st.LaunchConfigs) > 0
	})
	if !st.Settings.Enabled || len(st.LaunchConfigs) != 2 || st.Nodes != 0 || workerProcs(t, dir) != 0 {
		t.Fatalf("before any job: %+v, %d worker processes", st, workerProcs(t, dir))
	}
	b, err := c.CreateBatch(ctx, &api.CreateBatchRequest{Name: "fan", Jobs: []api.JobSpec{{JobID: 1, Count: 500, Command: []string{"true"}, CPU: 0.25, Memory: 16 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	waitFor(t, "the batch to complete on launched workers", 2*time.Minute, func() bool {
		most = max(most, workerProcs(t, dir))
		bt, err := c.GetBatch(ctx, b.ID)
		return err == nil && bt.State == api.BatchComplete
	})
	bt, _ := c.GetBatch(ctx, b.ID)
	if bt.NSucceeded != 500 {
		t.Fatalf("batch: %+v", bt)
	}
	if most == 0 || most > 4 {
		t.Fatalf("saw at most %d worker processes; want 1 to 4 (2 a cluster)", most)
	}
	st, _ = c.AutoscalerStatus(ctx)
	launched := 0
	for _, m := range st.Machines {
		launched++
		if m.Config != "local-a" && m.Config != "local-b" {
			t.Fatalf("machine %+v", m)
		}
	}
	t.Logf("%d machines launched, at most %d worker processes at once", launched, most)
	waitFor(t, "the idle workers to be stopped", time.Minute, func() bool {
		st, err := c.AutoscalerStatus(ctx)
		return err == nil && st.Nodes == 0 && workerProcs(t, dir) == 0
	})
	r := a.drover(a.token, "autoscaler", "status").must(t, 0)
	if !strings.Contains(r.stdout, "0 live of 4") || !strings.Contains(r.stdout, "local-a") {
		t.Fatalf("autoscaler status:\n%s", r.stdout)
	}
}
