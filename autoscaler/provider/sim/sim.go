// Package sim is a simulated cloud for the autoscaler: machines with
// prices and a boot delay, a capacity per launch config, spot machines
// that are reclaimed, API errors and a request rate limit, all driven by
// an injected clock and a seeded random source, so a day of autoscaling
// runs in a second and the same seed runs the same day.
package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/money"
)

// Clock tells the simulated time.
type Clock interface{ Now() time.Time }

// Options shape the simulated cloud.
type Options struct {
	Clock Clock
	Seed  uint64
	// BootDelay: a machine runs this long after its launch.
	BootDelay time.Duration
	// Capacity bounds the machines of a config at once (absent: none).
	Capacity map[string]int
	// SpotReclaimsPerHour is the rate at which the cloud reclaims each
	// spot machine (a machine lives an exponential time of mean 1/rate).
	SpotReclaimsPerHour float64
	// ErrorRate is the fraction of calls that fail with a transient error.
	ErrorRate float64
	// RequestsPerMinute bounds API calls (0: none); more fail as rate
	// limited.
	RequestsPerMinute int
	// Prices are the cloud's own prices by launch config name: a machine
	// of one is billed at it (and at each price SetPrice sets later,
	// from then), whatever the launch request said; Prices answers them.
	// A config without one is billed at the request's price.
	Prices map[string]money.Rate
}

// ErrRateLimited is a call refused by the request rate limit.
var ErrRateLimited = errors.New("sim: rate limited: too many requests")

// ErrTransient is an injected API failure.
var ErrTransient = errors.New("sim: internal error (injected)")

// Cloud is the simulated cloud. It implements provider.Provider.
type Cloud struct {
	mu        sync.Mutex
	opts      Options
	rng       *rand.Rand
	machines  map[string]*machine
	requests  map[string]*provider.LaunchResult
	calls     []time.Time
	cost      money.Amount // of machines already deleted
	costBy    map[string]money.Amount
	coreHours float64 // paid for by machines already deleted
	launches  int     // machines created, in all
	refusals  int
	reclaimed int
	prices    map[string]money.Rate
}

type machine struct {
	inst      provider.Instance
	joinToken string
	cores     float64
	// price is billed from since; paid is what it cost before.
	price    money.Rate
	since    time.Time
	paid     money.Amount
	spot     bool
	created  time.Time
	reclaim  time.Time // zero: never
	reclaimd bool
}

var (
	_ provider.Provider = (*Cloud)(nil)
	_ provider.Pricer   = (*Cloud)(nil)
)

// New makes a simulated cloud.
func New(opts Options) *Cloud {
	opts.Capacity = maps.Clone(opts.Capacity)
	if opts.Capacity == nil {
		opts.Capacity = map[string]int{}
	}
	return &Cloud{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0x5eed)), machines: map[string]*machine{}, requests: map[string]*provider.LaunchResult{},
		costBy: map[string]money.Amount{}, prices: maps.Clone(opts.Prices)}
}

// SetCapacity bounds a config's machines at once from now (n < 0: no
// bound): 0 is a zone out of capacity. Machines already made run on.
func (c *Cloud) SetCapacity(config string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < 0 {
		delete(c.opts.Capacity, config)
		return
	}
	c.opts.Capacity[config] = n
}

// SetPrice changes the cloud's price of a config's machines from now:
// the live ones too, as a cloud's list and spot prices apply to running
// machines.
func (c *Cloud) SetPrice(config string, price money.Rate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prices == nil {
		c.prices = map[string]money.Rate{}
	}
	c.prices[config] = price
	now := c.opts.Clock.Now()
	for _, m := range c.machines {
		if m.inst.Config == config {
			m.paid = m.costUntil(now)
			m.price, m.since = price, now
		}
	}
}

// Prices answers the cloud's price of each config (0: none), as an API
// call: rate limited, and failing as injected.
func (c *Cloud) Prices(ctx context.Context, configs []autoscaler.LaunchConfig) ([]money.Rate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call(c.opts.Clock.Now()); err != nil {
		return nil, err
	}
	out := make([]money.Rate, len(configs))
	for i := range configs {
		out[i] = c.prices[configs[i].Name]
	}
	return out, nil
}

// call counts an API call against the rate limit and draws an injected
// error. Call with mu.
func (c *Cloud) call(now time.Time) error {
	if lim := c.opts.RequestsPerMinute; lim > 0 {
		c.calls = slices.DeleteFunc(c.calls, func(t time.Time) bool { return now.Sub(t) >= time.Minute })
		if len(c.calls) >= lim {
			return ErrRateLimited
		}
		c.calls = append(c.calls, now)
	}
	if c.opts.ErrorRate > 0 && c.rng.Float64() < c.opts.ErrorRate {
		return ErrTransient
	}
	return nil
}

// Launch makes the request's machines, as many as the config's capacity
// allows; a request seen before returns its first result.
func (c *Cloud) Launch(ctx context.Context, req *provider.LaunchRequest) (*provider.LaunchResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	if res, ok := c.requests[req.RequestID]; ok && req.RequestID != "" {
		if len(res.Created) == 0 && res.CapacityLimited {
			return nil, &provider.CapacityError{Reason: res.Reason}
		}
		return res, nil
	}
	if err := c.call(now); err != nil {
		return nil, err
	}
	room := len(req.Names)
	if limit, ok := c.opts.Capacity[req.Config.Name]; ok {
		live := 0
		for _, m := range c.machines {
			if m.inst.Config == req.Config.Name && !m.reclaimd {
				live++
			}
		}
		room = max(min(room, limit-live), 0)
	}
	res := &provider.LaunchResult{}
	if room < len(req.Names) {
		res.CapacityLimited, res.Reason = true, "ZONE_RESOURCE_POOL_EXHAUSTED"
		c.refusals++
	}
	if room == 0 {
		c.requests[req.RequestID] = res
		return nil, &provider.CapacityError{Reason: res.Reason}
	}
	for _, name := range req.Names[:room] {
		if _, ok := c.machines[name]; ok {
			continue
		}
		m := &machine{inst: provider.Instance{Name: name, ID: fmt.Sprintf("sim-%d", c.launches), Config: req.Config.Name, Labels: req.Labels},
			joinToken: req.JoinTokens[name], price: req.Config.PricePerHour, cores: float64(req.Config.CPUMilli) / 1000, spot: req.Config.Spot, created: now, since: now}
		if p, ok := c.prices[req.Config.Name]; ok {
			m.price = p
		}
		if m.spot && c.opts.SpotReclaimsPerHour > 0 {
			hours := c.rng.ExpFloat64() / c.opts.SpotReclaimsPerHour
			m.reclaim = now.Add(time.Duration(hours * float64(time.Hour)))
		}
		c.machines[name] = m
		c.launches++
		res.Created = append(res.Created, m.inst)
	}
	c.requests[req.RequestID] = res
	return res, nil
}

// JoinToken is the join token a machine was launched with, as a real
// machine finds it where its provider put it (a test's worker on the
// machine joins with it); empty for a machine the cloud does not have.
func (c *Cloud) JoinToken(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.machines[name]; ok {
		return m.joinToken
	}
	return ""
}

// Delete removes machines; their cost up to now is kept.
func (c *Cloud) Delete(ctx context.Context, names []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	if err := c.call(now); err != nil {
		return err
	}
	for _, name := range names {
		m, ok := c.machines[name]
		if !ok {
			continue
		}
		cost := m.costUntil(now)
		c.cost = c.cost.Add(cost)
		c.costBy[m.inst.Config] = c.costBy[m.inst.Config].Add(cost)
		c.coreHours += m.coreHoursUntil(now)
		delete(c.machines, name)
	}
	return nil
}

// costUntil is what a machine cost from its launch to t (a reclaimed one
// stops costing when it is reclaimed): each price over its time, each
// rounded once to the nano-dollar.
func (m *machine) costUntil(t time.Time) money.Amount {
	return m.paid.Add(m.price.Over(max(m.paidUntil(t)-m.since.Sub(m.created), 0)))
}

// coreHoursUntil is the core-hours it was paid for until t.
func (m *machine) coreHoursUntil(t time.Time) float64 { return m.cores * m.paidUntil(t).Hours() }

// paidUntil is how long the machine was paid for until t.
func (m *machine) paidUntil(t time.Time) time.Duration {
	end := t
	if !m.reclaim.IsZero() && m.reclaim.Before(end) {
		end = m.reclaim
	}
	return max(end.Sub(m.created), 0)
}

// List returns every machine, running once its boot delay has passed, and
// reclaimed (not running, preempted) once its reclaim time has.
func (c *Cloud) List(ctx context.Context) ([]provider.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	if err := c.call(now); err != nil {
		return nil, err
	}
	return c.list(now), nil
}

// Machines is what List returns, as the machines themselves see it: not
// an API call, so no rate limit and no injected error. A simulation's
// workers boot and die by it; the autoscaler sees the cloud only through
// List.
func (c *Cloud) Machines() []provider.Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.list(c.opts.Clock.Now())
}

// list is every machine at now. Call with mu.
func (c *Cloud) list(now time.Time) []provider.Instance {
	out := make([]provider.Instance, 0, len(c.machines))
	for _, name := range c.sortedNames() {
		m := c.machines[name]
		inst := m.inst
		if !m.reclaim.IsZero() && !now.Before(m.reclaim) {
			if !m.reclaimd {
				m.reclaimd = true
				c.reclaimed++
			}
			inst.Preempted = true
		} else {
			inst.Running = now.Sub(m.created) >= c.opts.BootDelay
		}
		out = append(out, inst)
	}
	return out
}

func (c *Cloud) sortedNames() []string {
	names := make([]string, 0, len(c.machines))
	for n := range c.machines {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Stats is what the simulated cloud saw.
type Stats struct {
	// Cost of every machine until now: integers, the same in any order.
	Cost money.Amount
	// Launched counts machines made; Live those not deleted.
	Launched, Live int
	// Refusals counts launches cut short for capacity; Reclaimed spot
	// machines the cloud took back.
	Refusals, Reclaimed int
	// SpendRate is what the live machines cost an hour now.
	SpendRate money.Rate
	// CoreHours is the core-hours paid for until now.
	CoreHours float64
	// CostByConfig splits Cost by launch config.
	CostByConfig map[string]money.Amount
}

// Stats reports the cost so far and the counts.
func (c *Cloud) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	s := Stats{Cost: c.cost, CoreHours: c.coreHours, Launched: c.launches, Refusals: c.refusals, Reclaimed: c.reclaimed, CostByConfig: maps.Clone(c.costBy)}
	// The money sums are integers, the same in any order; the core-hours
	// (a figure, not money) stay a float sum, as before.
	for _, m := range c.machines {
		cost := m.costUntil(now)
		s.Cost = s.Cost.Add(cost)
		s.CostByConfig[m.inst.Config] = s.CostByConfig[m.inst.Config].Add(cost)
		s.CoreHours += m.coreHoursUntil(now)
		if m.reclaim.IsZero() || now.Before(m.reclaim) {
			s.Live++
			s.SpendRate = s.SpendRate.Add(m.price)
		}
	}
	return s
}
