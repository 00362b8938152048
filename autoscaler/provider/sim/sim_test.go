package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/money"
)

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func req(id string, cfg autoscaler.LaunchConfig, names ...string) *provider.LaunchRequest {
	return &provider.LaunchRequest{Config: cfg, Names: names, RequestID: id}
}

func TestCloudCapacityIdempotencyBootAndCost(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New(Options{Clock: clk, BootDelay: 90 * time.Second, Capacity: map[string]int{"n2": 2}})
	cfg := autoscaler.LaunchConfig{Name: "n2", PricePerHour: 2 * money.DollarPerHour}
	ctx := context.Background()
	res, err := c.Launch(ctx, req("r1", cfg, "a", "b", "c"))
	if err != nil || len(res.Created) != 2 || !res.CapacityLimited || res.Reason != "ZONE_RESOURCE_POOL_EXHAUSTED" {
		t.Fatalf("partial fill: %+v %v", res, err)
	}
	// The same request again (a new leader) makes nothing more.
	again, err := c.Launch(ctx, req("r1", cfg, "a", "b", "c"))
	if err != nil || len(again.Created) != 2 || c.Stats().Launched != 2 {
		t.Fatalf("repeat: %+v %v launched %d", again, err, c.Stats().Launched)
	}
	// A new request with no room is refused for capacity.
	if _, err := c.Launch(ctx, req("r2", cfg, "d")); err == nil {
		t.Fatal("no room, no error")
	} else if reason, ok := provider.IsCapacity(err); !ok || reason != "ZONE_RESOURCE_POOL_EXHAUSTED" {
		t.Fatalf("error %v", err)
	}
	list, _ := c.List(ctx)
	if len(list) != 2 || list[0].Running {
		t.Fatalf("before the boot delay: %+v", list)
	}
	clk.t = clk.t.Add(30 * time.Minute)
	if list, _ = c.List(ctx); !list[0].Running {
		t.Fatalf("after the boot delay: %+v", list)
	}
	if err := c.Delete(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(30 * time.Minute)
	// a: half an hour, b: an hour, at $2: $3, exactly.
	if s := c.Stats(); s.Cost != 3*money.Dollar || s.CostByConfig["n2"] != 3*money.Dollar || s.Live != 1 || s.SpendRate != 2*money.DollarPerHour {
		t.Fatalf("stats %+v", s)
	}
}

func TestCloudSpotReclaimsErrorsAndRateLimit(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New(Options{Clock: clk, Seed: 1, SpotReclaimsPerHour: 1, RequestsPerMinute: 3})
	ctx := context.Background()
	if _, err := c.Launch(ctx, req("r1", autoscaler.LaunchConfig{Name: "spot", Spot: true, PricePerHour: money.DollarPerHour}, "a", "b", "c", "d")); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(10 * time.Hour)
	list, _ := c.List(ctx)
	reclaimed := 0
	for _, in := range list {
		if in.Preempted {
			reclaimed++
		}
	}
	if reclaimed == 0 {
		t.Fatal("no spot machine was reclaimed in 10 hours at one an hour")
	}
	c.List(ctx)
	c.List(ctx)
	if _, err := c.List(ctx); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("the 4th call in a minute: %v", err)
	}
	e := New(Options{Clock: clk, Seed: 2, ErrorRate: 1})
	if _, err := e.List(ctx); !errors.Is(err, ErrTransient) {
		t.Fatalf("error rate 1: %v", err)
	}
}

// TestMachinesIsNoAPICall: what the machines see (Machines) is what List
// says, without spending the rate limit or drawing an injected error.
func TestMachinesIsNoAPICall(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := New(Options{Clock: clk, Seed: 1, BootDelay: time.Minute, RequestsPerMinute: 2})
	ctx := context.Background()
	if _, err := c.Launch(ctx, req("r1", autoscaler.LaunchConfig{Name: "m", PricePerHour: money.DollarPerHour}, "a", "b")); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Minute)
	for range 10 {
		if ms := c.Machines(); len(ms) != 2 || !ms[0].Running || !ms[1].Running {
			t.Fatalf("machines %+v", ms)
		}
	}
	if list, err := c.List(ctx); err != nil || len(list) != 2 {
		t.Fatalf("the first List after ten Machines: %v, %v", list, err)
	}
	e := New(Options{Clock: clk, ErrorRate: 1})
	if ms := e.Machines(); ms == nil {
		t.Fatal("Machines failed like an API call")
	}
}
