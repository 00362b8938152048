package server

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
	"google.golang.org/api/option"

	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/autoscaler/provider/gce"
	"github.com/drover-sched/drover/autoscaler/provider/gce/gcefake"
	localprov "github.com/drover-sched/drover/autoscaler/provider/local"
	"github.com/drover-sched/drover/autoscaler/provider/nomad"
	"github.com/drover-sched/drover/autoscaler/provider/nomad/nomadfake"
	"github.com/drover-sched/drover/autoscaler/provider/sim"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/testkit/simworker"
)

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// countingCloud wraps the simulated cloud every server shares: it counts
// launch calls, and can make one call's answer get lost (the leader dies
// with the request made but its answer never recorded).
type countingCloud struct {
	*sim.Cloud
	calls   atomic.Int64
	mu      sync.Mutex
	onFirst func()
}

func (c *countingCloud) Launch(ctx context.Context, req *provider.LaunchRequest) (*provider.LaunchResult, error) {
	c.calls.Add(1)
	res, err := c.Cloud.Launch(ctx, req)
	c.mu.Lock()
	f := c.onFirst
	c.onFirst = nil
	c.mu.Unlock()
	if f != nil {
		f()
		return nil, errors.New("connection reset (the answer was lost)")
	}
	return res, err
}

// joinTokenCloud is a cloud that tells the join token each machine was
// launched with, as the machine itself finds it.
type joinTokenCloud interface {
	provider.Provider
	JoinToken(name string) string
}

// machineWorkers starts a simulated worker on every machine the cloud runs
// and stops it when the machine goes, until ctx ends. Each joins with its
// machine's join token, as a real machine's worker does: no secret.
func machineWorkers(ctx context.Context, t *testing.T, cloud joinTokenCloud, addrs string) {
	go func() {
		running := map[string]context.CancelFunc{}
		defer func() {
			for _, cancel := range running {
				cancel()
			}
		}()
		for ctx.Err() == nil {
			insts, err := cloud.List(ctx)
			if err == nil {
				seen := map[string]bool{}
				for _, in := range insts {
					seen[in.Name] = true
					if _, ok := running[in.Name]; ok || !in.Running {
						continue
					}
					wctx, cancel := context.WithCancel(ctx)
					running[in.Name] = cancel
					go func() {
						err := simworker.Run(wctx, simworker.Config{Servers: addrs, JoinToken: cloud.JoinToken(in.Name), Name: in.Name, Machine: in.Name,
							Cores: 4, Memory: 16 << 30, SyncWait: 200 * time.Millisecond, Rec: simworker.NewRecorder(),
							Region: "r", Cluster: in.Labels[provider.LabelCluster]})
						if err != nil && wctx.Err() == nil && strings.HasPrefix(err.Error(), "activate") {
							t.Errorf("the worker of machine %s could not join: %v", in.Name, err)
						}
					}()
				}
				for name, cancel := range running {
					if !seen[name] {
						cancel()
						delete(running, name)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

// TestAutoscalerLeaderChangeLaunchesNothingTwice: three servers share one
// simulated cloud. The leader decides to scale up, asks the cloud, and
// dies before the answer is recorded. The next leader asks again with the
// same request key: the cloud makes nothing twice, every machine it made
// is one the state knows (no orphan), the machines' workers run the batch,
// and once idle every machine is deleted.
func TestAutoscalerLeaderChangeLaunchesNothingTwice(t *testing.T) {
	cloud := &countingCloud{Cloud: sim.New(sim.Options{Clock: wallClock{}, BootDelay: 200 * time.Millisecond})}
	c := startTestCluster(t, 3, ClusterOptions{Configure: func(i int, cfg *Config) {
		cfg.Autoscale = DefaultAutoscaleConfig()
		cfg.Autoscale.Provider = cloud
		cfg.Autoscale.Interval = 100 * time.Millisecond
		cfg.Autoscale.MissingGrace = time.Second
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := api.NewClient(c.HTTPAddrs(), c.Token)
	if err := admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true, MaxNodes: 4, IdleTimeout: "1s", BootTimeout: "1m"},
		LaunchConfigs: []api.LaunchConfig{{Name: "c4", Cluster: "a", MachineType: "n4", Zone: "z", CPU: 4, Memory: 16 << 30, PricePerHour: 200_000_000}}}); err != nil {
		t.Fatal(err)
	}
	old := c.Leader()
	died := make(chan struct{})
	cloud.onFirst = func() {
		go func() {
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			_ = old.Shutdown(sctx)
			close(died)
		}()
	}
	b, err := admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "a", Jobs: []api.JobSpec{{JobID: 1, Count: 64, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	<-died
	// The machines' workers start once the launch was asked again: had
	// they activated first, the next leader would find the machines
	// linked and have nothing to repeat (right, but not the case tested).
	waitFor(t, "the next leader to ask the cloud again", func() bool { return cloud.calls.Load() >= 2 })
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	machineWorkers(wctx, t, cloud, c.HTTPAddrs())
	var live *Server
	for _, s := range c.Servers {
		if s != old {
			live = s
		}
	}
	waitFor(t, "the batch to complete on autoscaled machines", func() bool {
		bt, err := admin.GetBatch(ctx, b.ID)
		return err == nil && bt.State == api.BatchComplete
	})
	// The config's price priced every attempt: a core of a 4-core,
	// 16 GiB machine of $0.20 an hour.
	jobs, err := admin.AllJobs(ctx, b.ID, "")
	if err != nil || len(jobs) != 64 {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
	perCore := 0.2 / (4 + 16*billing.MemoryWeight)
	for _, j := range jobs {
		a := j.Attempts[len(j.Attempts)-1]
		if a.Cost == nil || len(a.CostLines) == 0 || a.CostLines[0].Rate != "compute/default/c4" || math.Abs(a.CostLines[0].PricePerHour.Dollars()-perCore) > 1e-9 {
			t.Fatalf("job %d's attempt is not priced by launch config c4: %+v", j.JobID, a)
		}
	}
	// Every machine the cloud made is in the state once; none twice.
	insts, _ := cloud.List(ctx)
	known := map[string]state.MachineInfo{}
	for _, m := range live.State().Machines() {
		known[m.ID] = m
	}
	st := cloud.Stats()
	if st.Launched == 0 || st.Launched > 4 || cloud.calls.Load() < 2 {
		t.Fatalf("the cloud made %d machines in %d calls; want 1-4 (the node cap) over at least 2 calls (one repeated)", st.Launched, cloud.calls.Load())
	}
	for _, in := range insts {
		if _, ok := known[in.Name]; !ok {
			t.Fatalf("machine %s at the cloud is unknown to the state (an orphan or a duplicate)", in.Name)
		}
	}
	t.Logf("the cloud made %d machines in %d launch calls; the state knows %d", st.Launched, cloud.calls.Load(), len(known))
	launched := 0
	for _, m := range known {
		if m.State != state.MachineFailed {
			launched++
		}
	}
	if launched != st.Launched {
		t.Fatalf("the state has %d machines launched, the cloud made %d", launched, st.Launched)
	}
	// Idle: every machine is deleted, at the cloud and in the state.
	waitFor(t, "every idle machine to be deleted", func() bool {
		insts, err := cloud.List(ctx)
		if err != nil || len(insts) > 0 {
			return false
		}
		for _, m := range live.State().Machines() {
			if m.State != state.MachineDeleted {
				return false
			}
		}
		return true
	})
}

// TestJobWhyNamesTheAutoscaler: a waiting job's why says what the
// autoscaler does about it: machines coming up, and jobs held by the
// $/hour cap.
func TestJobWhyNamesTheAutoscaler(t *testing.T) {
	cloud := sim.New(sim.Options{Clock: wallClock{}, BootDelay: time.Hour})
	tc := startAutoscaled(t, cloud, nil, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true, MaxPerHour: 500_000_000},
		LaunchConfigs: []api.LaunchConfig{{Name: "n4", Cluster: "a", MachineType: "n2-standard-4", Zone: "r-a", CPU: 4, Memory: 16 << 30, PricePerHour: 200_000_000}}}); err != nil {
		t.Fatal(err)
	}
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "w", Jobs: []api.JobSpec{{JobID: 1, Count: 20, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	var why *api.JobWhy
	waitFor(t, "job why to name the autoscaler", func() bool {
		why, err = tc.admin.JobWhy(ctx, b.ID, 20)
		if err != nil {
			return false
		}
		var coming, held bool
		for _, r := range why.Reasons {
			coming = coming || r.Reason == "autoscaler_launching"
			held = held || (r.Reason == "autoscaler_held" && strings.Contains(r.Message, "$/hour cap"))
		}
		return coming && held
	})
	t.Logf("%+v", why.Reasons)
	// The why names machines once their launch is decided (committed);
	// the cloud is asked right after.
	waitFor(t, "the decided machines to be asked of the cloud", func() bool { return cloud.Stats().Launched >= 2 })
	if st := cloud.Stats(); st.Launched != 2 {
		t.Fatalf("the cloud made %d machines; $0.50 an hour buys 2 of $0.20", st.Launched)
	}
}

// TestClusterDeclaresItsProvider: a cluster declared with a Nomad provider
// gets its machines from that Nomad cluster, made by the server's factory
// from the declared settings.
func TestClusterDeclaresItsProvider(t *testing.T) {
	fake := nomadfake.New(4, 16000, 64<<10)
	defer fake.Close()
	tc := startAutoscaled(t, nil, func(cluster, kind string, settings map[string]string) (provider.Provider, error) {
		if kind != "nomad" {
			return nil, errors.New("only nomad here")
		}
		return nomad.New(nomad.Options{Address: settings["address"], Deployment: "test", Datacenters: []string{settings["datacenters"]}})
	}, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters:      []api.ClusterDecl{{Name: "nomad-east", Region: "east", Provider: "nomad", ProviderSettings: map[string]string{"address": fake.URL, "datacenters": "dc1"}}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true, MaxNodes: 2},
		LaunchConfigs: []api.LaunchConfig{{Name: "n8", Cluster: "nomad-east", CPU: 8, Memory: 16 << 30, PricePerHour: 300_000_000}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "w", Jobs: []api.JobSpec{{JobID: 1, Count: 16, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two machines as Nomad jobs", func() bool { return len(fake.Jobs()) == 2 })
	j := fake.Job(fake.Jobs()[0])
	if j.Meta[provider.LabelCluster] != "nomad-east" || j.Datacenters[0] != "dc1" {
		t.Fatalf("job %+v", j)
	}
}

// TestPrivateJobGetsItsOwnMachine: a job that names a machine type gets a
// machine of its own from the cloud, runs on it, and the machine is
// deleted once the job ends.
func TestPrivateJobGetsItsOwnMachine(t *testing.T) {
	cloud := sim.New(sim.Options{Clock: wallClock{}, BootDelay: 100 * time.Millisecond})
	tc := startAutoscaled(t, cloud, nil, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
		Autoscaler: &api.AutoscalerSettings{Enabled: true, IdleTimeout: "1s"},
		LaunchConfigs: []api.LaunchConfig{{Name: "std", Cluster: "a", MachineType: "n2-standard-4", CPU: 4, Memory: 16 << 30, PricePerHour: 200_000_000},
			{Name: "hm", Cluster: "a", MachineType: "n2-highmem-4", CPU: 4, Memory: 16 << 30, PricePerHour: 300_000_000}}}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	machineWorkers(wctx, t, cloud, "http://"+tc.srv.HTTPAddr())
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "p", Jobs: []api.JobSpec{
		{JobID: 1, Command: []string{"true"}, CPU: 2, Memory: 1 << 30, MachineType: "n2-highmem-4"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the private job to succeed", func() bool {
		bt, err := tc.admin.GetBatch(ctx, b.ID)
		return err == nil && bt.State == api.BatchComplete && bt.NSucceeded == 1
	})
	j, err := tc.admin.GetJob(ctx, b.ID, 1)
	if err != nil || len(j.Attempts) != 1 || j.MachineType != "n2-highmem-4" {
		t.Fatalf("job %+v %v", j, err)
	}
	ms := tc.srv.State().Machines()
	if len(ms) != 1 || ms[0].Config != "hm" || ms[0].ForBatch != uint64(b.ID) || j.Attempts[0].Instance == "" {
		t.Fatalf("machines %+v; want one hm machine for the job", ms)
	}
	waitFor(t, "its machine deleted", func() bool {
		insts, _ := cloud.List(ctx)
		return len(insts) == 0
	})
}

// TestJobWhySaysCapacityLimited: when the cloud cannot fill the only
// config that fits, job why says the config is capacity-limited, until
// when and why, instead of "launching" (the launch failed), and a config
// without a zone is named without one.
func TestJobWhySaysCapacityLimited(t *testing.T) {
	cloud := sim.New(sim.Options{Clock: wallClock{}, BootDelay: time.Hour, Capacity: map[string]int{"big": 0}})
	tc := startAutoscaled(t, cloud, nil, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true},
		LaunchConfigs: []api.LaunchConfig{{Name: "big", Cluster: "a", MachineType: "n2-standard-64", CPU: 64, Memory: 256 << 30, PricePerHour: 2_000_000_000}}}); err != nil {
		t.Fatal(err)
	}
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "w", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 60, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	// capacityLimited reads job why's capacity-limited reason.
	capacityLimited := func() (string, bool) {
		why, err := tc.admin.JobWhy(ctx, b.ID, 1)
		if err != nil {
			return "", false
		}
		for _, r := range why.Reasons {
			if r.Reason == "autoscaler_capacity_limited" {
				return r.Message, true
			}
		}
		return "", false
	}
	// First through the round whose launch failed, then through the
	// rounds after, which hold the job for the mark instead of
	// launching: both must say it.
	var msg string
	waitFor(t, "job why to say the config is capacity-limited", func() (ok bool) {
		msg, ok = capacityLimited()
		return ok
	})
	if !strings.Contains(msg, "launch config big is capacity-limited until") || strings.Contains(msg, "  ") || strings.Contains(msg, " in  ") {
		t.Fatalf("job why: %q", msg)
	}
	waitFor(t, "a round that holds the job for the mark", func() bool {
		st, err := tc.admin.AutoscalerStatus(ctx)
		return err == nil && st.LastRound != nil && len(st.LastRound.Launches) == 0 && len(st.LastRound.Held) == 1 && st.LastRound.Held[0].Config == "big"
	})
	msg, ok := capacityLimited()
	if !ok || !strings.Contains(msg, "launch config big is capacity-limited until") || !strings.Contains(msg, "1 waiting job") {
		t.Fatalf("job why after the failed launch's round: %q", msg)
	}
	t.Log(msg)
}

// TestNomadMisconfigurationIsNotCapacity: a Nomad cluster whose nodes lack
// the worker's task driver can never run a machine: the config is marked
// misconfigured (the longest backoff, not capacity's doubling from a
// minute), autoscaler status says so, and job why says the launch failed
// for it.
func TestNomadMisconfigurationIsNotCapacity(t *testing.T) {
	fake := nomadfake.New(2, 16000, 64<<10)
	defer fake.Close()
	fake.SetDrivers("exec")
	tc := startAutoscaled(t, nil, func(cluster, kind string, settings map[string]string) (provider.Provider, error) {
		return nomad.New(nomad.Options{Address: settings["address"], Deployment: "test", Datacenters: []string{"dc1"}, Driver: "docker"})
	}, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
		Clusters:      []api.ClusterDecl{{Name: "nomad-east", Region: "east", Provider: "nomad", ProviderSettings: map[string]string{"address": fake.URL}}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true, MaxBackoff: "45m"},
		LaunchConfigs: []api.LaunchConfig{{Name: "n8", Cluster: "nomad-east", CPU: 8, Memory: 16 << 30, PricePerHour: 300_000_000}}}); err != nil {
		t.Fatal(err)
	}
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "w", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	var st *api.AutoscalerStatus
	waitFor(t, "the config to be marked misconfigured", func() bool {
		st, err = tc.admin.AutoscalerStatus(ctx)
		return err == nil && len(st.LaunchConfigs) == 1 && st.LaunchConfigs[0].Misconfigured
	})
	c := st.LaunchConfigs[0]
	if c.CapacityLimited || !strings.Contains(c.Reason, "missing drivers") || time.Until(*c.Until) < 40*time.Minute {
		t.Fatalf("launch config status %+v (until %s)", c, c.Until)
	}
	why, err := tc.admin.JobWhy(ctx, b.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range why.Reasons {
		found = found || (r.Reason == "autoscaler_misconfigured" && strings.Contains(r.Message, "missing drivers") && strings.Contains(r.Message, "launch config n8"))
	}
	if !found {
		t.Fatalf("job why: %+v", why.Reasons)
	}
}

// TestPlacementRefusesAZoneTheCloudLacks: a launch config naming a zone
// its cluster's GCE project does not have is refused when applied (400
// naming the zone and the zones there are), instead of failing at its
// first launch; one naming a zone there is accepted. So is one taking the
// cloud's price on GCE; on Nomad, which cannot read prices, it is refused
// (it would wait for a price forever).
func TestPlacementRefusesAZoneTheCloudLacks(t *testing.T) {
	fake := gcefake.New("proj", "us-central1-a", "us-central1-b")
	defer fake.Close()
	nfake := nomadfake.New(1, 16000, 64<<10)
	defer nfake.Close()
	tc := startAutoscaled(t, nil, func(cluster, kind string, settings map[string]string) (provider.Provider, error) {
		if kind == "nomad" {
			return nomad.New(nomad.Options{Address: settings["address"], Deployment: "test", Datacenters: []string{"dc1"}, Driver: "raw_exec"})
		}
		return gce.New(context.Background(), gce.Options{Project: settings["project"], Deployment: "test", Image: "img",
			ClientOptions: []option.ClientOption{option.WithEndpoint(fake.URL), option.WithoutAuthentication(), option.WithHTTPClient(fake.Client())}})
	}, time.Hour)
	ctx := context.Background()
	place := func(lc api.LaunchConfig) error {
		return tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
			Clusters: []api.ClusterDecl{{Name: "gce-c", Region: "us-central1", Provider: "gce", ProviderSettings: map[string]string{"project": "proj"}},
				{Name: "nomad-c", Region: "us-central1", Provider: "nomad", ProviderSettings: map[string]string{"address": nfake.URL}}},
			LaunchConfigs: []api.LaunchConfig{lc}})
	}
	n8 := func(zone string) api.LaunchConfig {
		return api.LaunchConfig{Name: "n8", Cluster: "gce-c", MachineType: "n2-standard-8", Zone: zone, CPU: 8, Memory: 32 << 30, PricePerHour: 300_000_000}
	}
	err := place(n8("us-central1-z"))
	if ae, ok := err.(*api.Error); !ok || ae.StatusCode != 400 || !strings.Contains(ae.Message, `zone "us-central1-z" does not exist`) || !strings.Contains(ae.Message, "us-central1-a, us-central1-b") {
		t.Fatalf("a zone the project lacks: %v", err)
	}
	if err := place(n8("us-central1-b")); err != nil {
		t.Fatalf("a zone the project has: %v", err)
	}
	// The cloud's price: GCE reads it (the Catalog); Nomad cannot, and
	// such a config would never be launched.
	fromCloud := n8("us-central1-a")
	fromCloud.PricePerHour, fromCloud.PriceFromCloud = 0, true
	if err := place(fromCloud); err != nil {
		t.Fatalf("price_from_cloud on GCE: %v", err)
	}
	fromCloud.Name, fromCloud.Cluster, fromCloud.Zone = "nomad-8", "nomad-c", ""
	err = place(fromCloud)
	if ae, ok := err.(*api.Error); !ok || ae.StatusCode != 400 || !strings.Contains(ae.Message, "cannot read the cloud's prices") || !strings.Contains(ae.Message, "price_per_hour") {
		t.Fatalf("price_from_cloud on Nomad: %v", err)
	}
}

// TestMachinesSayTheirBootLatency: a machine that came up says how long it
// took to boot (launch to its worker joining), in autoscaler status and
// in drover_autoscaler_boot_seconds; one that runs nothing counts in
// drover_autoscaler_machines_without_work.
func TestMachinesSayTheirBootLatency(t *testing.T) {
	cloud := sim.New(sim.Options{Clock: wallClock{}, BootDelay: 200 * time.Millisecond})
	tc := startAutoscaled(t, cloud, nil, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "a", Region: "r"}},
		Autoscaler:    &api.AutoscalerSettings{Enabled: true, IdleTimeout: "1h"},
		LaunchConfigs: []api.LaunchConfig{{Name: "std", Cluster: "a", MachineType: "n2-standard-4", CPU: 4, Memory: 16 << 30, PricePerHour: 200_000_000}}}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	machineWorkers(wctx, t, cloud, "http://"+tc.srv.HTTPAddr())
	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "p", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 2, Memory: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to succeed", func() bool {
		bt, err := tc.admin.GetBatch(ctx, b.ID)
		return err == nil && bt.State == api.BatchComplete
	})
	st, err := tc.admin.AutoscalerStatus(ctx)
	if err != nil || len(st.Machines) != 1 || st.Machines[0].BootSeconds < 0.2 {
		t.Fatalf("machines %+v, %v; want one that booted in 0.2 s or more", st.Machines, err)
	}
	if n := metricValue(t, tc.srv, "drover_autoscaler_boot_seconds_count"); n != 1 {
		t.Fatalf("boot latencies counted: %v", n)
	}
	waitFor(t, "the idle machine to count as without work", func() bool {
		return metricValue(t, tc.srv, `drover_autoscaler_machines_without_work{cluster="a",pool="default"}`) == 1
	})
	// Status says since when it has run nothing: after its job ended.
	waitFor(t, "the machine's last job end in status", func() bool {
		st, err := tc.admin.AutoscalerStatus(ctx)
		return err == nil && len(st.Machines) == 1 && st.Machines[0].LastJobEnded != nil
	})
	st, _ = tc.admin.AutoscalerStatus(ctx)
	j, err := tc.admin.GetJob(ctx, b.ID, 1)
	if err != nil || len(j.Attempts) != 1 || j.Attempts[0].EndTime == nil {
		t.Fatalf("job %+v, %v", j, err)
	}
	if ended := *st.Machines[0].LastJobEnded; ended.Before(*j.Attempts[0].EndTime) || ended.Before(st.Machines[0].Created) {
		t.Fatalf("last job ended %s on a machine made at %s; its job ended at %s", ended, st.Machines[0].Created, *j.Attempts[0].EndTime)
	}
}

// startAutoscaled starts one server whose autoscaler runs every interval
// with a fixed provider, or with providers made by factory per cluster;
// tweaks change the rest of its autoscale config.
func startAutoscaled(t *testing.T, p provider.Provider, factory func(cluster, kind string, settings map[string]string) (provider.Provider, error), interval time.Duration,
	tweaks ...func(*AutoscaleConfig)) *testCluster {
	t.Helper()
	return startServer(t, "", func(cfg *Config) {
		cfg.Autoscale = DefaultAutoscaleConfig()
		cfg.Autoscale.Provider = p
		cfg.Autoscale.Factory = factory
		cfg.Autoscale.Interval = interval
		for _, tw := range tweaks {
			tw(cfg.Autoscale)
		}
	})
}

// TestCloudPriceReRanks: launch configs that take the cloud's price get it
// from the provider (the simulated cloud, a provider.Pricer) at the
// leader's first round, and the autoscaler launches the cheaper; when the
// cloud raises that one's price past the other's, the next refresh
// records it (status shows when it was read) and the next decision
// launches the other. A machine already running is billed by the cloud
// at the new price from the change.
func TestCloudPriceReRanks(t *testing.T) {
	cloud := sim.New(sim.Options{Clock: wallClock{}, BootDelay: time.Hour,
		Prices: map[string]money.Rate{"a": 300_000_000, "b": 400_000_000}})
	tc := startAutoscaled(t, cloud, nil, 50*time.Millisecond, func(ac *AutoscaleConfig) { ac.PriceRefresh = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "c", Region: "r"}},
		Autoscaler: &api.AutoscalerSettings{Enabled: true},
		LaunchConfigs: []api.LaunchConfig{
			{Name: "a", Cluster: "c", MachineType: "n2-standard-8", Zone: "r-a", CPU: 8, Memory: 32 << 30, PriceFromCloud: true},
			{Name: "b", Cluster: "c", MachineType: "n2-standard-8", Zone: "r-b", CPU: 8, Memory: 32 << 30, PriceFromCloud: true}}}); err != nil {
		t.Fatal(err)
	}
	submit := func() {
		t.Helper()
		if _, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "w", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 8, Memory: 1 << 30}}}); err != nil {
			t.Fatal(err)
		}
	}
	configsOf := func() map[string]int {
		n := map[string]int{}
		for _, m := range tc.srv.State().Machines() {
			n[m.Config]++
		}
		return n
	}
	submit()
	waitFor(t, "a machine of the cheaper config", func() bool { return configsOf()["a"] == 1 })
	st, err := tc.admin.AutoscalerStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.LaunchConfigs {
		if c.PricedAt == nil || c.PricePerHour != map[string]money.Rate{"a": 300_000_000, "b": 400_000_000}[c.Name] {
			t.Fatalf("launch config %s: $%s an hour read at %v", c.Name, c.PricePerHour, c.PricedAt)
		}
	}
	cloud.SetPrice("a", 500_000_000)
	waitFor(t, "the new price recorded", func() bool {
		_, cfgs, _ := tc.srv.State().AutoscalerSettings()
		for _, c := range cfgs {
			if c.Name == "a" {
				return c.PricePerHour == 500_000_000
			}
		}
		return false
	})
	submit()
	waitFor(t, "a machine of the config now cheaper", func() bool { return configsOf()["b"] == 1 })
	if n := configsOf(); n["a"] != 1 || n["b"] != 1 {
		t.Fatalf("machines by config %v", n)
	}
	// The rates billing uses follow: a version from the change.
	found := false
	for _, r := range tc.srv.State().Rates(time.Now(), true) {
		found = found || (r.Resource == "compute/default/a" && r.Version == 2 && r.InForce)
	}
	if !found {
		t.Fatalf("no second rate version in force for config a: %+v", tc.srv.State().Rates(time.Now(), true))
	}
	if v := metricValue(t, tc.srv, `drover_autoscaler_price_per_hour{config="a",source="cloud"}`); v != 0.5 {
		t.Fatalf("drover_autoscaler_price_per_hour of config a: %v, want 0.5", v)
	}
	if v := metricValue(t, tc.srv, `drover_autoscaler_price_read_timestamp_seconds{config="b"}`); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("drover_autoscaler_price_read_timestamp_seconds of config b: %v", v)
	}
}

// TestNewLaunchConfigIsPricedSoon: with an hourly refresh, a launch
// config added (or changed) after the cluster's prices were read gets
// the cloud's price within the retry, not at the next refresh an hour
// later (it is not launched until then).
func TestNewLaunchConfigIsPricedSoon(t *testing.T) {
	cloud := sim.New(sim.Options{Clock: wallClock{}, BootDelay: time.Hour,
		Prices: map[string]money.Rate{"a": 300_000_000, "c": 350_000_000}})
	tc := startAutoscaled(t, cloud, nil, 50*time.Millisecond, func(ac *AutoscaleConfig) { ac.PriceRefresh, ac.PriceRetry = time.Hour, 200*time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	placement := func(names ...string) {
		t.Helper()
		pc := &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "c", Region: "r"}}, Autoscaler: &api.AutoscalerSettings{Enabled: true}}
		for _, n := range names {
			pc.LaunchConfigs = append(pc.LaunchConfigs, api.LaunchConfig{Name: n, Cluster: "c", MachineType: "n2-standard-8", Zone: "r-" + n, CPU: 8, Memory: 32 << 30, PriceFromCloud: true})
		}
		if err := tc.admin.ApplyPlacement(ctx, pc); err != nil {
			t.Fatal(err)
		}
	}
	priced := func(name string) money.Rate {
		_, cfgs, _ := tc.srv.State().AutoscalerSettings()
		for _, c := range cfgs {
			if c.Name == name && c.PriceAt > 0 {
				return c.PricePerHour
			}
		}
		return 0
	}
	placement("a")
	waitFor(t, "config a priced", func() bool { return priced("a") == 300_000_000 })
	placement("a", "c")
	waitFor(t, "config c, added later, priced", func() bool { return priced("c") == 350_000_000 })
}

// TestSmallJobsLeaveALargeIdleWorker: with a 2-core launch config to be
// had, a 1-core job does not take an idle 8-core worker (it would keep the
// whole machine paid for while it runs): job why says so, the autoscaler
// launches a 2-core machine for it, and an 8-core job submitted after it
// takes the idle worker. The same job takes the worker at once when no
// smaller machine can be launched.
func TestSmallJobsLeaveALargeIdleWorker(t *testing.T) {
	cloud := sim.New(sim.Options{Clock: wallClock{}, BootDelay: time.Hour})
	tc := startAutoscaled(t, cloud, nil, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	placement := func(configs ...api.LaunchConfig) {
		t.Helper()
		if err := tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{{Name: "c", Region: "r"}},
			Autoscaler: &api.AutoscalerSettings{Enabled: true}, LaunchConfigs: configs, Prune: true}); err != nil {
			t.Fatal(err)
		}
	}
	two := api.LaunchConfig{Name: "two", Cluster: "c", MachineType: "n2-standard-2", CPU: 2, Memory: 8 << 30, PricePerHour: 100_000_000}
	eight := api.LaunchConfig{Name: "eight", Cluster: "c", MachineType: "n2-standard-8", CPU: 8, Memory: 32 << 30, PricePerHour: 400_000_000}
	placement(two, eight)
	c := api.NewClient(tc.url, "")
	res, err := c.Workers().Activate(ctx, &api.ActivateRequest{Name: "big", CPU: 8, Memory: 32 << 30, Region: "r", Cluster: "c", Secret: "test-secret"})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(res.Token)
	w := &simWorker{t: t, c: c, id: res.InstanceID}
	// The rule holds from the leader's first decision with the configs.
	applied := time.Now()
	waitFor(t, "an autoscaler decision with the launch configs", func() bool {
		st, err := tc.admin.AutoscalerStatus(ctx)
		return err == nil && st.LastRound != nil && st.LastRound.At.After(applied)
	})
	small, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "small", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 1, Memory: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	// idle syncs the worker (so it is not lost while the test waits) and
	// fails the test if it was handed anything.
	idle := func() {
		if got := w.sync(0); len(got.Assign) != 0 {
			t.Fatalf("the idle 8-core worker was handed %+v", got.Assign)
		}
	}
	var msg string
	waitFor(t, "job why to say the small job leaves the large worker", func() bool {
		idle()
		why, err := tc.admin.JobWhy(ctx, small.ID, 1)
		if err != nil {
			return false
		}
		for _, r := range why.Reasons {
			if r.Reason == "left_for_larger" {
				msg = r.Message
				return true
			}
		}
		return false
	})
	if !strings.Contains(msg, "1 worker at least twice its size is idle") || !strings.Contains(msg, "launch a 2-core machine") {
		t.Fatalf("job why: %q", msg)
	}
	waitFor(t, "a 2-core machine launched for the small job", func() bool {
		idle()
		for _, m := range tc.srv.State().Machines() {
			if m.Config == "two" {
				return true
			}
		}
		return false
	})
	for _, m := range tc.srv.State().Machines() {
		if m.Config != "two" {
			t.Fatalf("machine %s of config %s: want only the 2-core one", m.ID, m.Config)
		}
	}
	if got := w.sync(200 * time.Millisecond); len(got.Assign) != 0 {
		t.Fatalf("the idle 8-core worker was handed %+v", got.Assign)
	}
	large, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "large", Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 8, Memory: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	got := w.sync(5 * time.Second)
	if len(got.Assign) != 1 || got.Assign[0].BatchID != large.ID {
		t.Fatalf("the 8-core worker was handed %+v, want the 8-core job", got.Assign)
	}
	// Once the 8-core job ends, the only config left is the 8-core one:
	// nothing smaller can be launched, and the small job takes the idle
	// worker.
	now := time.Now()
	w.events = append(w.events, api.AttemptEvent{AttemptRef: got.Assign[0].AttemptRef, Kind: api.EventCompleted, Outcome: api.OutcomeSuccess, StartTime: now, EndTime: now})
	placement(eight)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = w.sync(time.Second)
		if len(got.Assign) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the small job never took the idle worker once no smaller machine could be launched")
		}
	}
	if got.Assign[0].BatchID != small.ID {
		t.Fatalf("handed %+v, want the small job", got.Assign)
	}
}

// sleepingWorker writes a stand-in for the drover binary the local
// provider starts a worker with: a process that sleeps (its worker never
// joins, so the machine stays launching) until it is stopped.
func sleepingWorker(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "drover")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLocalCapacityMarksTheConfig: the local provider holds a launch
// config to its capacity as a cloud holds it to what it has. Three
// 4-core jobs ask for three machines of a config of capacity 1: the
// provider starts one worker process and refuses the rest, the config is
// marked capacity-limited (autoscaler status), and job why says so for
// the jobs that wait. Placement apply refuses a capacity out of range,
// and one for a cluster whose provider (Nomad) has a capacity of its own.
func TestLocalCapacityMarksTheConfig(t *testing.T) {
	local := localprov.New(localprov.Options{Binary: sleepingWorker(t), Dir: t.TempDir(), Logger: testLogger(t)})
	t.Cleanup(local.Stop)
	fake := nomadfake.New(1, 16000, 64<<10)
	defer fake.Close()
	tc := startAutoscaled(t, local, func(cluster, kind string, settings map[string]string) (provider.Provider, error) {
		return nomad.New(nomad.Options{Address: settings["address"], Deployment: "test", Datacenters: []string{"dc1"}, Driver: "raw_exec"})
	}, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := api.LaunchConfig{Name: "local-4c", Cluster: "a", MachineType: "local-4c", Zone: "local", CPU: 4, Memory: 8 << 30, PricePerHour: 160_000_000,
		MaxNodes: 3, Capacity: 1}
	place := func(lc api.LaunchConfig) error {
		return tc.admin.ApplyPlacement(ctx, &api.PlacementConfig{
			Clusters: []api.ClusterDecl{{Name: "a", Region: "r"},
				{Name: "nomad-c", Region: "r", Provider: "nomad", ProviderSettings: map[string]string{"address": fake.URL}}},
			Autoscaler:    &api.AutoscalerSettings{Enabled: true, BootTimeout: "1h"},
			LaunchConfigs: []api.LaunchConfig{lc}})
	}
	tooMany := cfg
	tooMany.Capacity = state.MaxCapacity + 1
	err := place(tooMany)
	if ae, ok := err.(*api.Error); !ok || ae.StatusCode != 400 || !strings.Contains(ae.Message, "capacity 100001 is out of range") || !strings.Contains(ae.Message, "100000") {
		t.Fatalf("a capacity past the limit: %v", err)
	}
	onNomad := cfg
	onNomad.Name, onNomad.Cluster, onNomad.Zone = "nomad-4c", "nomad-c", ""
	err = place(onNomad)
	if ae, ok := err.(*api.Error); !ok || ae.StatusCode != 400 || !strings.Contains(ae.Message, "capacity = 1") || !strings.Contains(ae.Message, "provider (nomad)") {
		t.Fatalf("a capacity on Nomad: %v", err)
	}
	if err := place(cfg); err != nil {
		t.Fatal(err)
	}

	b, err := tc.admin.CreateBatch(ctx, &api.CreateBatchRequest{Name: "w", Jobs: []api.JobSpec{{JobID: 1, Count: 3, Command: []string{"true"}, CPU: 4, Memory: 1 << 30}}})
	if err != nil {
		t.Fatal(err)
	}
	var st *api.AutoscalerStatus
	waitFor(t, "the config to be marked capacity-limited", func() bool {
		st, err = tc.admin.AutoscalerStatus(ctx)
		return err == nil && len(st.LaunchConfigs) == 1 && st.LaunchConfigs[0].CapacityLimited
	})
	c := st.LaunchConfigs[0]
	if c.Capacity != 1 || !strings.Contains(c.Reason, "local provider: launch config local-4c holds at most 1 machine at once (capacity = 1)") || c.Until == nil {
		t.Fatalf("launch config status %+v", c)
	}
	insts, err := local.List(ctx)
	if err != nil || len(insts) != 1 || !insts[0].Running || insts[0].Config != "local-4c" {
		t.Fatalf("the local provider runs %+v (%v); want one machine of local-4c", insts, err)
	}
	made, failed := 0, 0
	for _, m := range tc.srv.State().Machines() {
		switch m.State {
		case state.MachineLaunching:
			made++
		case state.MachineFailed:
			failed++
		}
	}
	if made != 1 || failed != 2 {
		t.Fatalf("%d machines launching and %d refused; want 1 and 2", made, failed)
	}
	var msg string
	waitFor(t, "job why to say the config is capacity-limited", func() bool {
		why, err := tc.admin.JobWhy(ctx, b.ID, 3)
		if err != nil || why.State != api.JobReady {
			return false
		}
		for _, r := range why.Reasons {
			if r.Reason == "autoscaler_capacity_limited" {
				msg = r.Message
				return true
			}
		}
		return false
	})
	if !strings.Contains(msg, "launch config local-4c is capacity-limited until") || !strings.Contains(msg, "capacity = 1") {
		t.Fatalf("job why: %q", msg)
	}
	t.Log(msg)
}
