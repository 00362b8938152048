package gce

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/option"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/autoscaler/provider/gce/gcefake"
)

func newGCE(t *testing.T) (*GCE, *gcefake.Server) {
	fake := gcefake.New("proj", "us-central1-a", "us-central1-b")
	t.Cleanup(fake.Close)
	g, err := New(context.Background(), Options{Project: "proj", Deployment: "prod", Image: "projects/drover/global/images/worker",
		ClientOptions: []option.ClientOption{option.WithEndpoint(fake.URL), option.WithoutAuthentication(), option.WithHTTPClient(fake.Client())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, fake
}

func request(key string, spot bool, names ...string) *provider.LaunchRequest {
	tokens := map[string]string{}
	for _, n := range names {
		tokens[n] = "join-" + n
	}
	return &provider.LaunchRequest{RequestID: key, Names: names, JoinTokens: tokens,
		Config: autoscaler.LaunchConfig{Name: "n8", MachineType: "n2-standard-8", Zone: "us-central1-a", Spot: spot, CPUMilli: 8000, Memory: 32 << 30, PricePerHour: 390_000_000},
		Labels: map[string]string{provider.LabelCluster: "us-central1", provider.LabelConfig: "n8"},
		Worker: provider.Worker{Servers: "https://drover.example:4650", Region: "us-central1", Cluster: "us-central1", Pool: "default"}}
}

// TestGCEThroughTheOfficialClient: create, list by label, delete; a
// capacity error; a quota error; and a request repeated after its answer
// was lost, which makes nothing twice.
func TestGCEThroughTheOfficialClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, fake := newGCE(t)
	zones, err := g.Zones(ctx)
	if err != nil || len(zones) != 2 {
		t.Fatalf("zones %v %v", zones, err)
	}
	res, err := g.Launch(ctx, request("key-1", true, "drover-5-0", "drover-5-1"))
	if err != nil || len(res.Created) != 2 || res.CapacityLimited {
		t.Fatalf("launch: %+v %v", res, err)
	}
	list, err := g.List(ctx)
	if err != nil || len(list) != 2 || !list[0].Running || list[0].Labels[provider.LabelDeployment] != "prod" || list[0].Config != "n8" {
		t.Fatalf("list: %+v %v", list, err)
	}
	// Each machine's metadata holds its own join token, which its startup
	// script hands the worker.
	for _, name := range []string{"drover-5-0", "drover-5-1"} {
		tok, ok := fake.Metadata(name, MetadataJoinToken)
		script, _ := fake.Metadata(name, "startup-script")
		if !ok || tok != "join-"+name || !strings.Contains(script, "attributes/"+MetadataJoinToken+" > "+joinTokenFile) ||
			!strings.Contains(script, "'-join-token-file' '"+joinTokenFile+"'") || !strings.Contains(script, "'-machine' '"+name+"'") {
			t.Fatalf("machine %s: join token %q (%v), startup script:\n%s", name, tok, ok, script)
		}
	}
	// A launch without a machine's token makes nothing of it.
	noToken := request("key-0", false, "drover-4-0")
	noToken.JoinTokens = nil
	if _, err := g.Launch(ctx, noToken); err == nil || !strings.Contains(err.Error(), "no join token") || slices.Contains(fake.Names(), "drover-4-0") {
		t.Fatalf("a launch without a join token: %v; machines %v", err, fake.Names())
	}
	// The spot machine the cloud takes back is listed as preempted.
	fake.Preempt("drover-5-1")
	if list, _ = g.List(ctx); !list[1].Preempted || list[1].Running {
		t.Fatalf("after preemption: %+v", list[1])
	}
	// Capacity: one more n2-standard-8 fits in the zone; a request for two
	// makes one and says the config is capacity-limited.
	fake.SetCapacity("us-central1-a", "n2-standard-8", 3)
	res, err = g.Launch(ctx, request("key-2", false, "drover-6-0", "drover-6-1"))
	if err != nil || len(res.Created) != 1 || !res.CapacityLimited || res.Reason != "ZONE_RESOURCE_POOL_EXHAUSTED" {
		t.Fatalf("partial fill: %+v %v", res, err)
	}
	if _, err = g.Launch(ctx, request("key-3", false, "drover-7-0")); err == nil {
		t.Fatal("no capacity, no error")
	} else if reason, ok := provider.IsCapacity(err); !ok || reason != "ZONE_RESOURCE_POOL_EXHAUSTED" {
		t.Fatalf("error %v", err)
	}
	// Quota: 24 vCPUs in use of 24.
	fake.SetCapacity("us-central1-a", "n2-standard-8", 100)
	fake.SetQuotaCPUs(24)
	if _, err = g.Launch(ctx, request("key-4", false, "drover-8-0")); err == nil {
		t.Fatal("over quota, no error")
	} else if reason, ok := provider.IsCapacity(err); !ok || reason != "QUOTA_EXCEEDED" {
		t.Fatalf("quota error %v", err)
	}
	fake.SetQuotaCPUs(0)
	// The API's request rate limit is not capacity: the launch fails, the
	// config is not marked, and the same request made later goes through.
	fake.RateLimitNext(1)
	if _, err = g.Launch(ctx, request("key-rl", false, "drover-rl-0")); err == nil {
		t.Fatal("rate limited, no error")
	} else if _, ok := provider.IsCapacity(err); ok || !strings.Contains(err.Error(), "request rate limit") {
		t.Fatalf("a rate limit reported as %v", err)
	}
	if res, err = g.Launch(ctx, request("key-rl", false, "drover-rl-0")); err != nil || len(res.Created) != 1 {
		t.Fatalf("after the rate limit: %+v %v", res, err)
	}
	// A request whose answer was lost, repeated with the same key (a new
	// leader): the machine is made once.
	fake.LoseNextAnswers(1)
	if _, err = g.Launch(ctx, request("key-5", false, "drover-9-0")); err == nil {
		t.Fatal("a lost answer must be an error")
	}
	made, calls := fake.Inserts()
	res, err = g.Launch(ctx, request("key-5", false, "drover-9-0"))
	if err != nil || len(res.Created) != 1 {
		t.Fatalf("repeat: %+v %v", res, err)
	}
	if made2, calls2 := fake.Inserts(); made2 != made || calls2 != calls+1 {
		t.Fatalf("the repeat made %d machines in %d calls, want 0 in 1", made2-made, calls2-calls)
	}
	// Delete: by name, in the zone it was listed in; twice is harmless.
	if err := g.Delete(ctx, []string{"drover-5-0", "drover-5-1", "drover-6-0", "drover-9-0", "drover-rl-0"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Delete(ctx, []string{"drover-5-0"}); err != nil {
		t.Fatal(err)
	}
	if names := fake.Names(); len(names) != 0 {
		t.Fatalf("left after delete: %v", names)
	}
}

// TestGCEListsOnlyItsDeployment: another deployment's instances in the
// project are not this one's (not orphans to delete).
func TestGCEListsOnlyItsDeployment(t *testing.T) {
	ctx := context.Background()
	g, fake := newGCE(t)
	other, err := New(ctx, Options{Project: "proj", Deployment: "staging",
		ClientOptions: []option.ClientOption{option.WithEndpoint(fake.URL), option.WithoutAuthentication(), option.WithHTTPClient(fake.Client())}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Launch(ctx, request("k", false, "staging-1-0")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Launch(ctx, request("k2", false, "drover-1-0")); err != nil {
		t.Fatal(err)
	}
	list, err := g.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "drover-1-0" {
		t.Fatalf("prod lists %+v %v", list, err)
	}
	if sp := startupScript("/usr/local/bin/drover", request("k", true, "m"), "m"); !strings.Contains(sp, "'-spot-notice' '"+spotNoticeURL+"'") {
		t.Errorf("a spot machine's worker does not watch for the notice:\n%s", sp)
	}
	// The worker starts on its machine, with the launch config's size.
	if sp := startupScript("/usr/local/bin/drover", request("k", false, "m"), "m"); !strings.Contains(sp, "'-machine' 'm'") ||
		!strings.Contains(sp, "'-cores' '8' '-memory' '34359738368B'") {
		t.Fatalf("the startup script does not start the worker on its machine with its size:\n%s", sp)
	}
}
