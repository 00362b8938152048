package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/testkit/regions"
	"github.com/drover-sched/drover/testkit/testcluster"
)

// The multi-region drills: three regions, each a network namespace with
// one server and a worker, joined through a bridge, with WAN latency on
// every path between two regions (30, 60 and 80 ms one way, through a
// fault proxy: this kernel has no netem) and faults made with nftables.
// Servers run with -raft-multiplier 3 (election timeout 1.5 s). Each
// drill runs a batch and a prober of acknowledged writes through the
// fault, then checks that every job succeeded exactly once, that every
// acknowledged write is there once, and that the servers' histories
// agree.

// Ports every region's server listens on (each region has addresses of
// its own).
var regionPorts = [3]int{7001, 7002, 7003}

// regionDrillArgs are the servers' flags: WAN timing, and workers lost
// after 12 s (they fence themselves after 9 s without the leader).
var regionDrillArgs = []string{"-raft-multiplier", "3", "-lost-timeout", "12s"}

type regionCluster struct {
	*testCluster
	t       *testing.T
	net     *regions.Net
	workers map[int]*testcluster.Process
}

// upRegions lays out the regions once for every drill.
func upRegions(t *testing.T) *regions.Net {
	t.Helper()
	if why := regions.Available(); why != "" {
		t.Skip("regions: " + why)
	}
	cfg := regions.DefaultConfig()
	cfg.Ports = []uint16{uint16(regionPorts[0]), uint16(regionPorts[1]), uint16(regionPorts[2])}
	n, err := regions.Up(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	for _, l := range []struct{ a, b, ms, jitter int }{{0, 1, 30, 3}, {0, 2, 60, 5}, {1, 2, 80, 5}} {
		if err := n.Latency(l.a, l.b, l.ms, l.jitter); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// startRegionCluster starts one server and one worker (8 cores, cluster
// cN) in each region.
func startRegionCluster(t *testing.T, n *regions.Net) *regionCluster {
	t.Helper()
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, r := range n.Regions {
		ips = append(ips, r.IPs[0].String())
	}
	ports := regionPorts
	c := startCluster(t, testcluster.Options{Servers: len(n.Regions), IPs: ips, Ports: &ports, Args: regionDrillArgs,
		Wrap: func(i int) []string { return n.Regions[i].Wrap() }})
	rc := &regionCluster{testCluster: c, t: t, net: n, workers: map[int]*testcluster.Process{}}
	for i := range n.Regions {
		rc.startRegionWorker(i, fmt.Sprintf("w%d", i+1))
	}
	waitWorkers(t, c.client(), len(n.Regions))
	return rc
}

func (rc *regionCluster) startRegionWorker(i int, name string) {
	rc.t.Helper()
	r := rc.net.Regions[i]
	p, err := rc.StartWorkerIn(r.Wrap(), name, 8, "8GiB", "-region", r.Name, "-cluster", fmt.Sprintf("c%d", i+1))
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.workers[i] = p
}

// drillBatch submits n jobs of 0.4 s each on any region.
func drillBatch(t *testing.T, cl *api.Client, name string, n int64, where ...string) int64 {
	t.Helper()
	res, err := cl.CreateBatch(context.Background(), &api.CreateBatchRequest{Name: name, IdempotencyKey: name, Jobs: []api.JobSpec{
		{JobID: 1, Name: name, Count: n, Command: []string{"sleep", "0.4"}, CPU: 1, Memory: 32 << 20, Regions: where}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// succeededOnce checks that every job of a batch has exactly one
// successful attempt, and returns how many ran more than once and the
// regions' workers that ran attempts.
func succeededOnce(t *testing.T, cl *api.Client, id int64) (rerun int, on map[string]int) {
	t.Helper()
	all, err := cl.AllJobs(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	on = map[string]int{}
	for _, j := range all {
		ok := 0
		for _, a := range j.Attempts {
			on[a.Instance]++
			if a.State == api.OutcomeSuccess {
				ok++
			}
		}
		if ok != 1 {
			t.Fatalf("batch %d job %d has %d successful attempts: %+v", id, j.JobID, ok, j.Attempts)
		}
		if len(j.Attempts) > 1 {
			rerun++
		}
	}
	return rerun, on
}

// waitAllComplete waits until no batch runs (the prober's last ones
// included), so the servers' histories end at the same place.
func waitAllComplete(t *testing.T, cl *api.Client) {
	t.Helper()
	waitFor(t, "every batch to complete", 2*time.Minute, func() bool {
		l, err := cl.ListBatches(context.Background(), "state=running", 0)
		return err == nil && len(l.Batches) == 0
	})
}

// leaderIn is the region whose server leads, once every running server
// agrees.
func (rc *regionCluster) leaderIn() int { return rc.waitLeader(60 * time.Second) }

// waitLeaderAmong waits until the servers of the regions given agree on
// a leader among them, and returns its region and how long it took.
func (rc *regionCluster) waitLeaderAmong(limit time.Duration, idx ...int) (int, time.Duration) {
	rc.t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		leader := ""
		agree := true
		for _, i := range idx {
			h, err := rc.Servers[i].Health()
			if err != nil || h.LeaderID == "" || (leader != "" && h.LeaderID != leader) {
				agree = false
				break
			}
			leader = h.LeaderID
		}
		if agree {
			for _, i := range idx {
				if rc.Servers[i].ID() == leader && rc.Servers[i].IsReadyLeader() {
					return i, time.Since(start)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	rc.t.Fatalf("no leader among servers %v within %s", idx, limit)
	return -1, 0
}

// drill is one drill under way: its cluster, a client of every server,
// the leader at its start, a prober of acknowledged writes and the batch
// that runs through the fault.
type drill struct {
	*regionCluster
	cl     *api.Client
	leader int
	probe  *prober
	batch  int64
	jobs   int64
}

// startDrill starts a cluster over the regions, a prober and a batch of
// jobs (after what before submits, when given), and waits until a
// quarter of the batch is done.
func startDrill(t *testing.T, n *regions.Net, name string, jobs int64, before ...func(*drill)) *drill {
	t.Helper()
	rc := startRegionCluster(t, n)
	d := &drill{regionCluster: rc, cl: rc.client(), leader: rc.leaderIn(), jobs: jobs}
	for _, f := range before {
		f(d)
	}
	d.probe = startProber(d.cl)
	d.batch = drillBatch(t, d.cl, name, jobs)
	waitBatch(t, d.cl, d.batch, 2*time.Minute, "a quarter of the batch", func(b *api.Batch) bool { return b.NCompleted >= jobs/4 })
	return d
}

// complete waits for the batch to complete, every job of it.
func (d *drill) complete(what string) {
	d.t.Helper()
	b := waitBatch(d.t, d.cl, d.batch, 4*time.Minute, what, func(b *api.Batch) bool { return b.State == api.BatchComplete })
	if b.NSucceeded != d.jobs {
		d.t.Fatalf("batch %+v", b)
	}
}

// heal lifts the faults and lets every worker report again, then checks
// that every job succeeded once and returns how many ran more than once.
func (d *drill) heal() int {
	d.t.Helper()
	if err := d.net.Heal(); err != nil {
		d.t.Fatal(err)
	}
	waitWorkers(d.t, d.cl, 3)
	time.Sleep(3 * time.Second) // a few syncs: late reports arrive
	rerun, on := succeededOnce(d.t, d.cl, d.batch)
	d.t.Logf("%d jobs ran again; attempts by worker: %v", rerun, on)
	return rerun
}

// finish checks the prober's writes and, once every batch is complete and
// the servers applied the same log, their histories (minWhole of them
// from the start).
func (d *drill) finish(minWhole int) {
	d.t.Helper()
	d.probe.finish(d.t)
	waitAllComplete(d.t, d.cl)
	waitApplied(d.t, d.testCluster)
	checkHistories(d.t, d.testCluster, minWhole)
}

// TestRegionDrills runs the four drills, each on a fresh cluster over the
// same regions.
func TestRegionDrills(t *testing.T) {
	n := upRegions(t)
	t.Run("PartitionOneRegion", func(t *testing.T) { drillPartition(t, n) })
	t.Run("PartitionTheLeadersRegion", func(t *testing.T) { drillLeaderRegion(t, n) })
	t.Run("RegionDiesAndIsReplaced", func(t *testing.T) { drillReplaceRegion(t, n) })
	t.Run("AsymmetricCutAndLoss", func(t *testing.T) { drillLossy(t, n) })
}

// drillPartition cuts a region without the leader off in the middle of a
// batch: the majority keeps scheduling, the isolated worker's attempts
// run again elsewhere after -lost-timeout (the worker fences itself
// first), and when the partition heals its late reports change nothing,
// and its server catches up.
func drillPartition(t *testing.T, n *regions.Net) {
	ctx := context.Background()
	// A job that still runs in the region when its worker's lease runs
	// out (the batch's jobs take 0.4 s, and a worker with nothing
	// running has nothing to fence), submitted first so that it starts
	// at once.
	var victim int
	var long int64
	d := startDrill(t, n, "partition", 400, func(d *drill) {
		victim = (d.leader + 1) % 3
		res, err := d.cl.CreateBatch(ctx, &api.CreateBatchRequest{Name: "partition-long", Jobs: []api.JobSpec{
			{JobID: 1, Command: []string{"sleep", "120"}, CPU: 1, Memory: 32 << 20, Regions: []string{n.Regions[victim].Name}}}})
		if err != nil {
			t.Fatal(err)
		}
		long = res.ID
		waitBatch(t, d.cl, long, time.Minute, "the long job to run in the region", func(b *api.Batch) bool { return b.NRunning == 1 })
	})
	if err := n.Isolate(victim); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	t.Logf("region %s (server %s) cut off; %s leads", n.Regions[victim].Name, d.Servers[victim].ID(), d.Servers[d.leader].ID())
	b0, err := d.cl.GetBatch(ctx, d.batch)
	if err != nil {
		t.Fatal(err)
	}
	waitBatch(t, d.cl, d.batch, time.Minute, "the majority to go on scheduling", func(b *api.Batch) bool { return b.NCompleted >= b0.NCompleted+50 })
	d.complete("the batch to complete without the isolated region")
	t.Logf("the batch completed %s after the cut", time.Since(cut).Round(100*time.Millisecond))
	if d.heal() == 0 {
		t.Fatal("no job of the isolated worker ran again elsewhere: the drill cut nothing that was running")
	}
	// It stopped its attempts itself before the servers ran them again.
	if log, err := os.ReadFile(d.workers[victim].Log); err != nil || !strings.Contains(string(log), "fenced: no sync with the servers succeeded") {
		t.Fatalf("the isolated worker did not fence itself (%v):\n%s", err, log)
	}
	if err := d.cl.CancelBatch(ctx, long); err != nil {
		t.Fatal(err)
	}
	d.finish(3)
}

// drillLeaderRegion cuts off the leader's region: the other two elect a
// leader within a few election timeouts, clients that know every server
// go on writing through it, and the old leader steps down and catches up
// after the heal.
func drillLeaderRegion(t *testing.T, n *regions.Net) {
	d := startDrill(t, n, "leader-region", 300)
	others := []int{(d.leader + 1) % 3, (d.leader + 2) % 3}
	if err := n.Isolate(d.leader); err != nil {
		t.Fatal(err)
	}
	next, took := d.waitLeaderAmong(30*time.Second, others...)
	t.Logf("leader %s's region cut off; %s leads after %s", d.Servers[d.leader].ID(), d.Servers[next].ID(), took.Round(10*time.Millisecond))
	// The old leader steps down once its lease runs out: it never
	// acknowledges a write it could not commit.
	waitFor(t, "the cut-off leader to step down", 30*time.Second, func() bool { return !d.Servers[d.leader].IsReadyLeader() })
	d.complete("the batch to complete")
	d.heal()
	d.finish(3)
}

// drillReplaceRegion kills everything in the leader's region (SIGKILL)
// and replaces its server as the runbook says: a new server with an
// empty data dir joins, the dead one is removed, and the region's
// cluster takes work again from a new worker.
func drillReplaceRegion(t *testing.T, n *regions.Net) {
	d := startDrill(t, n, "region-dies", 300)
	rc, cl := d.regionCluster, d.cl
	ctx := context.Background()
	dead := d.leader
	rc.Servers[dead].Kill9()
	rc.workers[dead].Kill9()
	killed := time.Now()
	others := []int{(dead + 1) % 3, (dead + 2) % 3}
	next, took := rc.waitLeaderAmong(30*time.Second, others...)
	t.Logf("region %s killed; %s leads after %s", n.Regions[dead].Name, rc.Servers[next].ID(), took.Round(10*time.Millisecond))

	// The runbook: list the peers, start a replacement (empty data dir,
	// the region's spare address, the live servers' -join), remove the
	// dead one, wait for the replacement to be a reachable voter that has
	// caught up.
	env := []string{"DROVER_ADDR=" + rc.HTTPAddrs(), "DROVER_TOKEN=" + rc.token()}
	out := runCLI(t, env, "operator", "raft", "list-peers").must(t, 0)
	if !strings.Contains(out.stdout, rc.Servers[dead].ID()) {
		t.Fatalf("list-peers does not show the dead server:\n%s", out.stdout)
	}
	var join []string
	for _, i := range others {
		join = append(join, rc.Servers[i].Gossip)
	}
	region := n.Regions[dead]
	repl, err := rc.AddServer(rc.Servers[dead].ID()+"-new", region.IPs[1].String(), region.Wrap(), join)
	if err != nil {
		t.Fatal(err)
	}
	runCLI(t, env, "operator", "raft", "remove-peer", rc.Servers[dead].ID()).must(t, 0)
	waitFor(t, "the replacement to be a reachable voter, caught up", time.Minute, func() bool {
		p, err := cl.Operator().Peers(ctx)
		if err != nil {
			return false
		}
		voters, caughtUp := 0, false
		for _, s := range p.Servers {
			if s.Voter && s.Alive {
				voters++
			}
			if s.ID == repl.ID() && s.Voter && s.Alive && s.AppliedIndex > 0 && p.AppliedIndex-s.AppliedIndex < 50 {
				caughtUp = true
			}
		}
		return voters == 3 && caughtUp && len(p.Servers) == 3
	})
	t.Logf("replacement %s is a voter %s after the kill", repl.ID(), time.Since(killed).Round(100*time.Millisecond))
	d.complete("the batch to complete")
	// The region's cluster takes work again.
	rc.startRegionWorker(dead, fmt.Sprintf("w%d-new", dead+1))
	local := drillBatch(t, cl, "region-back", 16, region.Name)
	waitBatch(t, cl, local, 2*time.Minute, "the region's batch to complete", func(b *api.Batch) bool { return b.State == api.BatchComplete })
	_, on := succeededOnce(t, cl, local)
	for inst := range on {
		if !strings.HasPrefix(inst, fmt.Sprintf("w%d-new", dead+1)) {
			t.Fatalf("a job for region %s ran on %s", region.Name, inst)
		}
	}
	succeededOnce(t, cl, d.batch)
	d.finish(2)
}

// drillLossy drops 5% of the packets between regions, and everything one
// follower's region sends to the leader's (what the leader sends still
// arrives): no two leaders accept writes, no job succeeds twice, and
// nothing acknowledged is lost.
func drillLossy(t *testing.T, n *regions.Net) {
	d := startDrill(t, n, "lossy", 300)
	if err := n.Loss(5); err != nil {
		t.Fatal(err)
	}
	deaf := (d.leader + 1) % 3
	if err := n.OneWay(deaf, d.leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("5%% loss between regions; nothing from %s reaches %s", n.Regions[deaf].Name, n.Regions[d.leader].Name)
	d.complete("the batch to complete")
	d.heal()
	d.finish(3)
}
