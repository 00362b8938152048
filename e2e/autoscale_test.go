package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/autoscaler/provider/gce"
	"github.com/drover-sched/drover/autoscaler/provider/gce/gcefake"
	"github.com/drover-sched/drover/testkit/simworker"
)

// workerProcs counts the worker processes running on machines of the
// agent's data dir.
func workerProcs(t *testing.T, dataDir string) int { return len(workerCmdlines(t, dataDir)) }

// workerCmdlines returns the command lines of the worker processes running
// on machines of the agent's data dir. A worker's child between fork and
// exec still shows the worker's command line, so processes whose parent
// is one of them are left out.
func workerCmdlines(t *testing.T, dataDir string) [][]string {
	pids, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	parent := map[string]string{} // candidate pid -> its parent's pid
	cmdline := map[string][]string{}
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "worker" && strings.Contains(string(b), filepath.Join(dataDir, "machines")+"/") {
			pid := filepath.Base(filepath.Dir(p))
			stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
			fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if len(fields) < 2 {
				continue
			}
			parent[pid] = fields[1]
			cmdline[pid] = args
		}
	}
	var out [][]string
	for pid, ppid := range parent {
		if _, forked := parent[ppid]; !forked {
			out = append(out, cmdline[pid])
		}
	}
	return out
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
	var credentials []string
	waitFor(t, "the batch to complete on launched workers", 2*time.Minute, func() bool {
		cmds := workerCmdlines(t, dir)
		most = max(most, len(cmds))
		for _, args := range cmds {
			// Each machine's worker joins with its own token, kept in its
			// data dir; none is given the agent's worker secret.
			for i, a := range args {
				if (a == "-join-token-file" || a == "-worker-secret-file") && i+1 < len(args) {
					credentials = append(credentials, a+" "+args[i+1])
				}
			}
		}
		bt, err := c.GetBatch(ctx, b.ID)
		return err == nil && bt.State == api.BatchComplete
	})
	if len(credentials) == 0 {
		t.Fatal("saw no machine's worker's credential flag")
	}
	for _, cred := range credentials {
		if !strings.HasPrefix(cred, "-join-token-file "+filepath.Join(dir, "machines")+"/") {
			t.Fatalf("a machine's worker joins with %s; want its own join token file in its data dir", cred)
		}
	}
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

// TestAutoscalerSurvivesLeaderKill9: three server processes autoscale a
// cluster whose provider is GCE (the in-process fake of the Compute API,
// shared by all three). The leader is killed with SIGKILL as its first
// machines are made, the answer to one insert lost. The next leader asks
// again under the same request IDs: every machine at the cloud is made
// once and is one the state knows (no duplicate, no orphan); simulated
// workers on the machines run the batch; once idle, every machine is
// deleted.
func TestAutoscalerSurvivesLeaderKill9(t *testing.T) {
	fake := gcefake.New("proj", "zone-a")
	defer fake.Close()
	c := newCluster(t, 3, "-autoscale", "-autoscale-interval", "300ms", "-deployment", "e2e")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters: []api.ClusterDecl{{Name: "gce-a", Region: "r", Provider: "gce",
			ProviderSettings: map[string]string{"project": "proj", "image": "projects/drover/global/images/worker", "endpoint": fake.URL}}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true, MaxNodes: 6, IdleTimeout: "3s", BootTimeout: "2m"},
		LaunchConfigs: []api.LaunchConfig{{Name: "n8", Cluster: "gce-a", MachineType: "n2-standard-8", Zone: "zone-a", CPU: 8, Memory: 32 << 30, PricePerHour: 390_000_000}},
	}); err != nil {
		t.Fatal(err)
	}
	leader := c.waitLeader(30 * time.Second)
	fake.LoseNextAnswers(1)
	b, err := cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "scale", Jobs: []api.JobSpec{{JobID: 1, Count: 96, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first insert at the cloud", time.Minute, func() bool { _, calls := fake.Inserts(); return calls > 0 })
	c.Servers[leader].Kill9()
	c.waitLeader(30 * time.Second)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	refused := make(chan error, 16)
	go runMachineWorkers(wctx, fake, c.HTTPAddrs(), refused)
	waitBatch(t, cl, b.ID, 2*time.Minute, "the batch on the autoscaled machines", func(b *api.Batch) bool { return b.State == api.BatchComplete })
	st, err := cl.AutoscalerStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	made := 0
	for _, m := range st.Machines {
		known[m.ID] = true
		if m.State != "failed" && m.State != "requested" {
			made++
		}
	}
	inserted, calls := fake.Inserts()
	t.Logf("the cloud made %d machines in %d insert calls; the state knows %d machines, %d made", inserted, calls, len(st.Machines), made)
	if inserted == 0 || inserted > 6 || inserted != made {
		t.Fatalf("the cloud made %d machines; the state counts %d made (cap 6)", inserted, made)
	}
	for _, name := range fake.Names() {
		if !known[name] {
			t.Fatalf("machine %s at the cloud is unknown to the state: an orphan or a duplicate", name)
		}
	}
	waitFor(t, "every idle machine deleted", time.Minute, func() bool {
		st, err := cl.AutoscalerStatus(ctx)
		return err == nil && st.Nodes == 0 && len(fake.Names()) == 0
	})
	select {
	case err := <-refused:
		t.Fatalf("a machine's worker could not join with the token in its metadata: %v", err)
	default:
	}
}

// runMachineWorkers starts a simulated worker on every machine the fake
// cloud holds, and stops it when the machine is deleted. Each joins with
// the one-time token in its machine's metadata, as the machine's startup
// script has the worker do; a machine made by a leader that was then
// killed joins with the token that leader minted.
func runMachineWorkers(ctx context.Context, fake *gcefake.Server, addrs string, refused chan<- error) {
	running := map[string]context.CancelFunc{}
	for ctx.Err() == nil {
		names := fake.Names()
		for _, n := range names {
			if _, ok := running[n]; ok {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			running[n] = cancel
			go func() {
				tok, _ := fake.Metadata(n, gce.MetadataJoinToken)
				err := simworker.Run(wctx, simworker.Config{Servers: addrs, JoinToken: tok, Name: n, Machine: n, Cores: 8, Memory: 32 << 30,
					SyncWait: 200 * time.Millisecond, Rec: simworker.NewRecorder(), Region: "r", Cluster: "gce-a"})
				if err != nil && wctx.Err() == nil && strings.HasPrefix(err.Error(), "activate") {
					select {
					case refused <- err:
					default:
					}
				}
			}()
		}
		for n, cancel := range running {
			if !slices.Contains(names, n) {
				cancel()
				delete(running, n)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, cancel := range running {
		cancel()
	}
}
