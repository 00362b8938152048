package nomad

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/autoscaler/provider/nomad/nomadfake"
)

func launch(key string, names ...string) *provider.LaunchRequest {
	tokens := map[string]string{}
	for _, n := range names {
		tokens[n] = "join-" + n
	}
	return &provider.LaunchRequest{RequestID: key, Names: names, JoinTokens: tokens,
		Config: autoscaler.LaunchConfig{Name: "c8", CPUMilli: 8000, Memory: 16 << 30, PricePerHour: 300_000_000},
		Labels: map[string]string{provider.LabelCluster: "nomad-east", provider.LabelConfig: "c8"},
		Worker: provider.Worker{Servers: "http://drover:4650", Region: "east", Cluster: "nomad-east"}}
}

// TestNomadThroughTheOfficialClient: machines are jobs on the Nomad
// cluster: created, listed by the deployment's meta, registered again
// without a second machine, refused when no node has room, deleted.
func TestNomadThroughTheOfficialClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Two nodes of 16 cores (16,000 MHz) and 64 GiB: four 8-core machines.
	fake := nomadfake.New(2, 16000, 64<<10)
	defer fake.Close()
	n, err := New(Options{Address: fake.URL, Deployment: "prod", Datacenters: []string{"dc1"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.Launch(ctx, launch("k1", "drover-3-0", "drover-3-1", "drover-3-2"))
	if err != nil || len(res.Created) != 3 || res.CapacityLimited {
		t.Fatalf("launch: %+v %v", res, err)
	}
	j := fake.Job("drover-3-0")
	if j == nil || *j.TaskGroups[0].Count != 1 || *j.TaskGroups[0].Tasks[0].Resources.CPU != 8000 || *j.TaskGroups[0].Tasks[0].Resources.MemoryMB != 16<<10 ||
		len(j.TaskGroups[0].Tasks[0].Env) != 1 || j.TaskGroups[0].Tasks[0].Env[provider.JoinTokenEnv] != "join-drover-3-0" || j.Meta[provider.LabelDeployment] != "prod" {
		t.Fatalf("job %+v", j)
	}
	args := j.TaskGroups[0].Tasks[0].Config["args"].([]any)
	if args[0] != "worker" || !slices.Contains(args, any("-machine")) || !slices.Contains(args, any("drover-3-0")) {
		t.Fatalf("worker args %v", args)
	}
	// Again (a new leader): the same jobs, no new machine.
	if res, err = n.Launch(ctx, launch("k1", "drover-3-0", "drover-3-1", "drover-3-2")); err != nil || len(res.Created) != 3 || len(fake.Jobs()) != 3 {
		t.Fatalf("repeat: %+v %v, jobs %v", res, err, fake.Jobs())
	}
	// One more fits; the next is placed nowhere: capacity, and its job goes.
	res, err = n.Launch(ctx, launch("k2", "drover-4-0", "drover-4-1"))
	if err != nil || len(res.Created) != 1 || !res.CapacityLimited {
		t.Fatalf("partial: %+v %v", res, err)
	}
	if _, err = n.Launch(ctx, launch("k3", "drover-5-0")); err == nil {
		t.Fatal("a full cluster, no error")
	} else if _, ok := provider.IsCapacity(err); !ok {
		t.Fatalf("error %v, want capacity", err)
	}
	if jobs := fake.Jobs(); len(jobs) != 4 || slices.Contains(jobs, "drover-4-1") {
		t.Fatalf("jobs %v: the unplaced ones must be gone", jobs)
	}
	list, err := n.List(ctx)
	if err != nil || len(list) != 4 || !list[0].Running || list[0].Config != "c8" {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := n.Delete(ctx, []string{"drover-3-0", "drover-3-1", "drover-3-2", "drover-4-0", "drover-4-0"}); err != nil {
		t.Fatal(err)
	}
	if jobs := fake.Jobs(); len(jobs) != 0 {
		t.Fatalf("left: %v", jobs)
	}
}

// TestNomadAgent runs against a real Nomad agent (NOMAD_ADDR) with a
// raw_exec driver: a machine's job is registered, listed and removed.
func TestNomadAgent(t *testing.T) {
	addr := os.Getenv("NOMAD_ADDR")
	if addr == "" {
		t.Skip("NOMAD_ADDR is not set: no Nomad agent to test against (the fake covers the API in every run)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := New(Options{Address: addr, Deployment: "drover-test", Datacenters: []string{"dc1"}, Binary: "/bin/sleep", Token: os.Getenv("NOMAD_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	req := launch("k", "drover-test-0")
	req.Config.CPUMilli, req.Config.Memory = 100, 64<<20
	if _, err := n.Launch(ctx, req); err != nil {
		t.Fatal(err)
	}
	defer n.Delete(context.Background(), []string{"drover-test-0"})
	list, err := n.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "drover-test-0" {
		t.Fatalf("list %+v %v", list, err)
	}
}

// TestNomadConfigurationErrors: a machine no node can ever run (its task
// driver is on none; the evaluation, pending at first, then says every
// node was filtered out for "missing drivers") is a configuration error,
// not capacity, and its job goes; deregistering a job that is not there
// answers 200, as Nomad does, and is not an error.
func TestNomadConfigurationErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fake := nomadfake.New(2, 16000, 64<<10)
	defer fake.Close()
	fake.SetDrivers("exec")
	n, err := New(Options{Address: fake.URL, Deployment: "prod", Datacenters: []string{"dc1"}, Driver: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.Launch(ctx, launch("k1", "drover-1-0"))
	reason, isConfig := provider.IsConfig(err)
	if _, isCapacity := provider.IsCapacity(err); !isConfig || isCapacity || !strings.Contains(reason, "missing drivers on 2") {
		t.Fatalf("a driver no node has: %v (config %v)", err, isConfig)
	}
	if jobs := fake.Jobs(); len(jobs) != 0 {
		t.Fatalf("the unplaceable job stayed: %v", jobs)
	}
	if err := n.Delete(ctx, []string{"never-made"}); err != nil {
		t.Fatalf("deleting a machine Nomad never had: %v", err)
	}
}
