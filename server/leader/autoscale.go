package leader

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// Clock tells the time the loop decides at and stamps into its commands:
// the wall clock on a server, a virtual one in the simulator.
type Clock interface{ Now() time.Time }

// WallClock is the real time.
type WallClock struct{}

// Now is time.Now.
func (WallClock) Now() time.Time { return time.Now() }

// State is the read side of the replicated state the autoscale round
// decides on: a consistent read (*state.State has it), from which
// server/view builds the round's input.
type State = view.Source

// Apply commits a command and returns its result; an *state.ApplyError
// comes back as the error (the server's Raft node does so; the simulator
// applies to its own state).
type Apply func(c state.Command) (any, error)

// ProviderFactory makes the provider a cluster declares (its kind and
// settings from the placement config); the servers' credentials are the
// factory's.
type ProviderFactory func(cluster, kind string, settings map[string]string) (provider.Provider, error)

// AutoscalerConfig wires the autoscale round to its world. Clock, State
// and Apply are required; without a provider the round finds no machines
// and launches nothing.
type AutoscalerConfig struct {
	Clock Clock
	State State
	Apply Apply
	// Heard tells when an instance's worker was last heard from (the
	// leader's liveness; nil: never heard, its activation counts).
	Heard func(inst uint32) (time.Time, bool)
	// Provider makes the machines of every cluster not in Providers.
	Provider  provider.Provider
	Providers map[string]provider.Provider
	// Factory makes the providers clusters declare (nil: only Provider
	// and Providers are used).
	Factory ProviderFactory
	// Worker says how a launched machine's worker reaches the servers,
	// asked at each launch (a server knows its address once it listens).
	// The launch config fills in where it is.
	Worker func() provider.Worker
	// WorkerSecret is what machines' one-time join tokens derive from.
	WorkerSecret string
	// Deployment labels this deployment's machines, so listing finds them
	// and no other deployment's.
	Deployment string
	// MissingGrace: a machine the provider no longer lists is gone once
	// it has been missing this long (a provider may list late).
	MissingGrace time.Duration
	// MemoryStep rounds jobs' memory up for demand shapes.
	MemoryStep int64
	Log        *slog.Logger
	// Decided, if set, sees every decision with the input it was made
	// from, before it is recorded (the simulator checks it launches no
	// capacity-limited config).
	Decided func(in *autoscaler.Input, out *autoscaler.Output)
	// Plan decides a round (nil: autoscaler.Plan). The simulator puts
	// other policies here to compare them with drover's.
	Plan func(in *autoscaler.Input) *autoscaler.Output
	// PriceRefresh is how often the prices of launch configs that take
	// the cloud's are read from their cluster's provider (a
	// provider.Pricer; 0: DefaultPriceRefresh). A new leader reads them
	// at its first round.
	PriceRefresh time.Duration
	// PriceRetry is how soon prices are asked for again after a provider
	// could not answer, or while a config has none yet (0:
	// DefaultPriceRetry).
	PriceRetry time.Duration
}

// DefaultPriceRefresh: clouds change list prices rarely and spot prices
// at most about once a month (GCE) to once a day, so an hour is fresh.
const DefaultPriceRefresh = time.Hour

// DefaultPriceRetry: a minute between asks while prices cannot be read
// or a config has none yet (GCE's Catalog is a large read).
const DefaultPriceRetry = time.Minute

// Autoscaler is the leader's autoscale round and what it remembers
// between rounds: not Raft state, started afresh by a new leader (idle
// timers then restart, so machines live a little longer; nothing is
// launched twice).
type Autoscaler struct {
	cfg AutoscalerConfig
	// Holds, when set (before the rounds start), tells the room the last
	// scheduling round held for gangs first in line (Scheduler.Holds):
	// what of it is free now is not free for other jobs' demand.
	Holds func() ([]scheduler.GangHold, time.Time)

	mu        sync.Mutex
	idleSince map[string]time.Time
	missing   map[string]time.Time
	last      *autoscaler.Output
	lastAt    time.Time
	demand    int64 // millicores in the window at the last decision
	// sizes: the machines the last decision could launch (nil: none,
	// disabled, or no decision yet), for the scheduling round.
	sizes []scheduler.PoolSize
	// priceDue: when each cluster's prices are next read; priceTried:
	// when they were last asked for (a config without a price yet, new
	// or changed, is asked for a minute after, not at the next refresh).
	priceDue, priceTried map[string]time.Time

	// Of the round's goroutine only.
	built    map[string]builtProvider
	resolved map[string]provider.Provider
}

// NewAutoscaler makes the round.
func NewAutoscaler(cfg AutoscalerConfig) *Autoscaler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Heard == nil {
		cfg.Heard = func(uint32) (time.Time, bool) { return time.Time{}, false }
	}
	if cfg.Worker == nil {
		cfg.Worker = func() provider.Worker { return provider.Worker{} }
	}
	if cfg.PriceRefresh <= 0 {
		cfg.PriceRefresh = DefaultPriceRefresh
	}
	if cfg.PriceRetry <= 0 {
		cfg.PriceRetry = DefaultPriceRetry
	}
	return &Autoscaler{cfg: cfg, idleSince: map[string]time.Time{}, missing: map[string]time.Time{}, built: map[string]builtProvider{},
		priceDue: map[string]time.Time{}, priceTried: map[string]time.Time{}}
}

// Reset forgets the idle and missing timers and the last decision: a
// server that becomes leader starts afresh.
func (a *Autoscaler) Reset() {
	a.mu.Lock()
	a.idleSince, a.missing, a.last, a.sizes = map[string]time.Time{}, map[string]time.Time{}, nil, nil
	a.priceDue, a.priceTried = map[string]time.Time{}, map[string]time.Time{}
	a.mu.Unlock()
}

// builtProvider is a provider made for a cluster's declaration.
type builtProvider struct {
	key string
	p   provider.Provider
}

// resolveProviders decides which provider makes each cluster's machines
// this round: one configured for it, else the one its declaration names
// (made by the factory, again only when the declaration changes), else the
// default.
func (a *Autoscaler) resolveProviders(st *view.Autoscale) {
	resolved := map[string]provider.Provider{}
	for _, c := range st.Clusters {
		if p, ok := a.cfg.Providers[c.Name]; ok {
			resolved[c.Name] = p
			continue
		}
		kind, settings := st.Providers[c.Name].Kind, st.Providers[c.Name].Settings
		if kind == "" || a.cfg.Factory == nil {
			if a.cfg.Provider != nil {
				resolved[c.Name] = a.cfg.Provider
			}
			continue
		}
		key := kind
		for _, k := range slices.Sorted(maps.Keys(settings)) {
			key += "\x00" + k + "=" + settings[k]
		}
		if b, ok := a.built[c.Name]; ok && b.key == key {
			resolved[c.Name] = b.p
			continue
		}
		p, err := a.cfg.Factory(c.Name, kind, settings)
		if err != nil {
			a.cfg.Log.Warn("autoscaler: cannot make the provider a cluster declares; its machines wait", "cluster", c.Name, "provider", kind, "err", err)
			continue
		}
		a.built[c.Name] = builtProvider{key: key, p: p}
		resolved[c.Name] = p
	}
	a.resolved = resolved
}

// providerFor returns the provider of a cluster's machines this round.
func (a *Autoscaler) providerFor(cluster string) provider.Provider {
	if p, ok := a.resolved[cluster]; ok {
		return p
	}
	return a.cfg.Provider
}

// providers lists the distinct providers of this round.
func (a *Autoscaler) providers() []provider.Provider {
	var out []provider.Provider
	for _, name := range slices.Sorted(maps.Keys(a.resolved)) {
		if p := a.resolved[name]; !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if p := a.cfg.Provider; p != nil && !slices.Contains(out, p) {
		out = append(out, p)
	}
	return out
}

// Round reconciles the providers with the state, then decides and
// carries the decision out: the leader's autoscaler every interval, the
// simulator's every 15 virtual seconds.
func (a *Autoscaler) Round(ctx context.Context) error {
	now := a.cfg.Clock.Now()
	st := view.AutoscaleState(a.cfg.State)
	// Disabled, it launches nothing but still deletes what it made once
	// that is idle, timed out or without a config (autoscaler.Input's
	// ShrinkOnly): with nothing live, there is nothing to do.
	enabled := st.Settings.Enabled
	if !enabled && !slices.ContainsFunc(st.Machines, func(m state.Machine) bool { return autoscaler.State(m.State).Live() }) {
		a.mu.Lock()
		a.sizes = nil
		a.mu.Unlock()
		return nil
	}
	a.resolveProviders(st)
	if enabled {
		if a.refreshPrices(ctx, st, now) {
			st = view.AutoscaleState(a.cfg.State)
		}
	}
	seen, listed := a.listMachines(ctx)
	if err := a.reconcile(ctx, st, seen, listed, now); err != nil {
		return err
	}
	// Requested machines: launch them (again, after a leader change: the
	// key makes it harmless); drained ones: delete them.
	if enabled {
		if err := a.launchRequested(ctx, st); err != nil {
			return err
		}
	}
	if err := a.deleteDrained(ctx, st); err != nil {
		return err
	}
	st = view.AutoscaleState(a.cfg.State)
	in, out := a.decide(st, seen, now)
	if a.cfg.Decided != nil {
		a.cfg.Decided(in, out)
	}
	if len(out.Launches) == 0 && len(out.Deletes) == 0 && len(out.Revives) == 0 && len(out.Private) == 0 {
		return nil
	}
	res, err := a.cfg.Apply(scaleCommand(out, now))
	if err != nil {
		return fmt.Errorf("record scale decision: %w", err)
	}
	sr := res.(*state.ScaleResult)
	a.cfg.Log.Info("autoscaler decided", "launch", len(out.Launches), "delete", len(out.Deletes), "capped_at_apply", sr.Capped)
	if enabled {
		if err := a.launchRequested(ctx, view.AutoscaleState(a.cfg.State)); err != nil {
			return err
		}
	}
	return a.deleteDrained(ctx, view.AutoscaleState(a.cfg.State))
}

// refreshPrices reads, from each cluster's provider that can say it, the
// prices of the launch configs that take the cloud's, when due, and
// records them (SetCloudPrices) if one changed or was never read. It
// reports whether it recorded any. A provider that cannot answer is
// asked again a minute later; the configs keep the price they have.
func (a *Autoscaler) refreshPrices(ctx context.Context, st *view.Autoscale, now time.Time) bool {
	byCluster := map[string][]autoscaler.LaunchConfig{}
	regions := map[string]string{}
	for _, c := range st.Clusters {
		regions[c.Name] = c.Region
	}
	current := map[string]*state.LaunchConfig{}
	unpriced := map[string]bool{}
	for i := range st.Configs {
		c := &st.Configs[i]
		if c.PriceFromCloud {
			byCluster[c.Cluster] = append(byCluster[c.Cluster], launchConfig(c, regions))
			current[c.Name] = c
			unpriced[c.Cluster] = unpriced[c.Cluster] || c.PriceAt == 0
		}
	}
	cmd := &state.SetCloudPrices{Now: now.UnixNano()}
	for _, cluster := range slices.Sorted(maps.Keys(byCluster)) {
		a.mu.Lock()
		due, tried := a.priceDue[cluster], a.priceTried[cluster]
		a.mu.Unlock()
		if retry := tried.Add(a.cfg.PriceRetry); unpriced[cluster] && retry.Before(due) {
			due = retry
		}
		if now.Before(due) {
			continue
		}
		pr, ok := a.providerFor(cluster).(provider.Pricer)
		if !ok {
			continue
		}
		cfgs := byCluster[cluster]
		prices, err := pr.Prices(ctx, cfgs)
		next := now.Add(a.cfg.PriceRefresh)
		if err != nil || len(prices) != len(cfgs) {
			a.cfg.Log.Warn("autoscaler: cannot read the cloud's prices; launch configs keep theirs", "cluster", cluster, "err", err, "retry_in", a.cfg.PriceRetry)
			next = now.Add(a.cfg.PriceRetry)
		}
		a.mu.Lock()
		a.priceDue[cluster], a.priceTried[cluster] = next, now
		a.mu.Unlock()
		if err != nil || len(prices) != len(cfgs) {
			continue
		}
		for i, p := range prices {
			c := current[cfgs[i].Name]
			switch {
			case p <= 0:
				if c.PricePerHour == 0 {
					a.cfg.Log.Warn("autoscaler: the cloud has no price for a launch config that takes the cloud's; it is not launched until it has one (or set price_from_cloud = false and a price_per_hour)",
						"config", c.Name, "machine_type", c.MachineType, "zone", c.Zone)
				}
			case p != c.PricePerHour || c.PriceAt == 0:
				cmd.Prices = append(cmd.Prices, state.CloudPrice{Config: c.Name, PricePerHour: p})
			}
		}
	}
	if len(cmd.Prices) == 0 {
		return false
	}
	res, err := a.cfg.Apply(cmd)
	if err != nil {
		a.cfg.Log.Warn("autoscaler: cannot record the cloud's prices", "err", err)
		return false
	}
	a.cfg.Log.Info("autoscaler: the cloud's prices", "read", len(cmd.Prices), "changed", res.(*state.SetCloudPricesResult).Changed)
	return true
}

// Input reads the state and builds the planner's input as the round does,
// without listing the providers (no machine answers a probe): drover
// bench autoscale -decision times it and autoscaler.Plan.
func (a *Autoscaler) Input() *autoscaler.Input {
	return a.autoscaleInput(view.AutoscaleState(a.cfg.State), nil, a.cfg.Clock.Now())
}

// decide builds the planner's input, plans and remembers the decision for
// LastRound.
func (a *Autoscaler) decide(st *view.Autoscale, seen map[string]provider.Instance, now time.Time) (*autoscaler.Input, *autoscaler.Output) {
	in := a.autoscaleInput(st, seen, now)
	plan := a.cfg.Plan
	if plan == nil {
		plan = autoscaler.Plan
	}
	out := plan(in)
	var demand int64
	for _, sh := range in.Demand {
		demand += sh.CPUMilli * sh.Count
	}
	a.mu.Lock()
	a.last, a.lastAt, a.demand, a.sizes = out, now, demand, out.Sizes
	a.mu.Unlock()
	return in, out
}

// listMachines lists every provider's machines by name; listed says which
// providers answered (a provider that did not answer says nothing about
// what is missing).
func (a *Autoscaler) listMachines(ctx context.Context) (map[string]provider.Instance, map[provider.Provider]bool) {
	seen := map[string]provider.Instance{}
	listed := map[provider.Provider]bool{}
	for _, p := range a.providers() {
		insts, err := p.List(ctx)
		if err != nil {
			a.cfg.Log.Warn("autoscaler: list machines", "err", err)
			continue
		}
		listed[p] = true
		for _, in := range insts {
			if d := a.cfg.Deployment; d != "" && in.Labels[provider.LabelDeployment] != "" && in.Labels[provider.LabelDeployment] != d {
				continue
			}
			seen[in.Name] = in
		}
	}
	return seen, listed
}

// reconcile records machines that are gone (reclaimed, or missing at the
// provider past the grace), deletes orphans (machines with drover's
// labels the state does not have live) and drained machines.
func (a *Autoscaler) reconcile(ctx context.Context, st *view.Autoscale, seen map[string]provider.Instance, listed map[provider.Provider]bool, now time.Time) error {
	live := map[string]*state.Machine{}
	for i := range st.Machines {
		m := &st.Machines[i]
		if m.State >= state.MachineRequested && m.State <= state.MachineDraining {
			live[m.ID] = m
		}
	}
	// Orphans: nothing in the state will ever use them.
	var orphans []string
	for name := range seen {
		if live[name] == nil {
			orphans = append(orphans, name)
		}
	}
	slices.Sort(orphans)
	for _, name := range orphans {
		p := a.providerFor(clusterOf(st, name, seen))
		if p == nil {
			continue
		}
		if err := p.Delete(ctx, []string{name}); err != nil {
			a.cfg.Log.Warn("autoscaler: delete orphan", "machine", name, "err", err)
			continue
		}
		a.cfg.Log.Warn("autoscaler: deleted an orphan machine (drover's labels, not in the state)", "machine", name)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(live)) {
		m := live[id]
		in, ok := seen[id]
		p := a.providerFor(m.Cluster)
		switch {
		case ok && in.Preempted:
			if err := a.gone(ctx, p, m, "reclaimed by the cloud (spot)", true, now); err != nil {
				return err
			}
		case !ok && m.State != state.MachineRequested && listed[p]:
			first, was := a.missing[id]
			if !was {
				a.missing[id] = now
				continue
			}
			if now.Sub(first) >= a.cfg.MissingGrace {
				if err := a.gone(ctx, p, m, "no longer at the provider", false, now); err != nil {
					return err
				}
				delete(a.missing, id)
			}
		default:
			delete(a.missing, id)
		}
	}
	return nil
}

// clusterOf is the cluster of a machine name, from the state or its labels.
func clusterOf(st *view.Autoscale, name string, seen map[string]provider.Instance) string {
	for _, m := range st.Machines {
		if m.ID == name {
			return m.Cluster
		}
	}
	return seen[name].Labels[provider.LabelCluster]
}

// gone deletes a machine at its provider (if it is there) and records it.
// Call with a.mu.
func (a *Autoscaler) gone(ctx context.Context, p provider.Provider, m *state.Machine, reason string, preempted bool, now time.Time) error {
	if p != nil {
		if err := p.Delete(ctx, []string{m.ID}); err != nil {
			return fmt.Errorf("delete machine %s: %w", m.ID, err)
		}
	}
	if _, err := a.cfg.Apply(&state.MachineGone{Now: now.UnixNano(), Machine: m.ID, Reason: reason, Preempted: preempted}); err != nil {
		return fmt.Errorf("record machine %s gone: %w", m.ID, err)
	}
	delete(a.idleSince, m.ID)
	return nil
}

// launchRequested asks the providers for every requested machine, one
// call per launch request, and records what they made.
func (a *Autoscaler) launchRequested(ctx context.Context, st *view.Autoscale) error {
	cfgs := map[string]*state.LaunchConfig{}
	for i := range st.Configs {
		cfgs[st.Configs[i].Name] = &st.Configs[i]
	}
	regions := map[string]string{}
	for _, c := range st.Clusters {
		regions[c.Name] = c.Region
	}
	tokens, err := a.joinTokens(st, a.cfg.Clock.Now())
	if err != nil {
		return err
	}
	byReq := map[string][]*state.Machine{}
	var keys []string
	for i := range st.Machines {
		m := &st.Machines[i]
		if m.State != state.MachineRequested || tokens[m.ID] == "" {
			continue
		}
		if _, ok := byReq[m.Request]; !ok {
			keys = append(keys, m.Request)
		}
		byReq[m.Request] = append(byReq[m.Request], m)
	}
	for _, key := range keys {
		ms := byReq[key]
		cfg := cfgs[ms[0].Config]
		p := a.providerFor(ms[0].Cluster)
		if cfg == nil || p == nil {
			continue
		}
		req := &provider.LaunchRequest{Config: launchConfig(cfg, regions), RequestID: key, Worker: a.cfg.Worker(), JoinTokens: map[string]string{},
			Labels: map[string]string{provider.LabelDeployment: a.cfg.Deployment, provider.LabelCluster: cfg.Cluster, provider.LabelConfig: cfg.Name}}
		req.Worker.Region, req.Worker.Cluster, req.Worker.Pool = regions[cfg.Cluster], cfg.Cluster, cfg.Pool
		req.Labels[provider.LabelMachine] = ms[0].ID
		for _, m := range ms {
			req.Names = append(req.Names, m.ID)
			req.JoinTokens[m.ID] = tokens[m.ID]
		}
		res, err := p.Launch(ctx, req)
		done := launchDone(key, res, err, a.cfg.Clock.Now())
		if done == nil {
			a.cfg.Log.Warn("autoscaler: launch failed; will retry", "config", cfg.Name, "machines", len(ms), "err", err)
			continue
		}
		if _, err := a.cfg.Apply(done); err != nil {
			return fmt.Errorf("record launch of %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// joinTokens returns the one-time join token of every requested machine,
// after recording (in one JoinTokens entry) the hashes of those the state
// has none of yet, so a machine can join as soon as it boots. A token is
// derived from the worker secret, the machine and its launch
// (token.Derive): any server that leads makes the same, so a launch
// repeated under its idempotency key (a lost answer, a new leader
// finishing what the old one started) hands the provider the token the
// state holds, never a second one, and a machine the first try made
// still joins. A machine whose recorded hash is not that of the token
// derived here (minted by a server with another worker secret) is left
// out: it could not join, and its boot timeout replaces it.
func (a *Autoscaler) joinTokens(st *view.Autoscale, now time.Time) (map[string]string, error) {
	boot := timeoutsOf(&st.Settings).Boot
	tokens := map[string]string{}
	mint := &state.JoinTokens{Now: now.UnixNano()}
	for i := range st.Machines {
		m := &st.Machines[i]
		if m.State != state.MachineRequested {
			continue
		}
		tok := token.Derive(a.cfg.WorkerSecret, "drover join token v1", m.ID, m.Request, strconv.FormatInt(m.Created, 10))
		switch h := token.Hash(tok); {
		case m.JoinHash == "":
			mint.Tokens = append(mint.Tokens, state.JoinToken{Machine: m.ID, Hash: h, Expires: m.Created + int64(boot)})
		case m.JoinHash != h:
			a.cfg.Log.Error("autoscaler: a server with another worker secret minted this machine's join token; not launching it (its boot timeout replaces it): give every server the same -worker-secret-file",
				"machine", m.ID)
			continue
		}
		tokens[m.ID] = tok
	}
	if len(mint.Tokens) > 0 {
		if _, err := a.cfg.Apply(mint); err != nil {
			return nil, fmt.Errorf("record the join tokens of %d machines: %w", len(mint.Tokens), err)
		}
	}
	return tokens, nil
}

// launchDone is the command that records what a provider's launch made:
// the machines it created, and, when it refused the rest for capacity,
// that they are refused (the config is marked). nil: the launch failed
// otherwise (nothing is recorded: the machines stay requested and are
// asked for again, under the same key).
func launchDone(key string, res *provider.LaunchResult, err error, now time.Time) *state.LaunchDone {
	done := &state.LaunchDone{Now: now.UnixNano(), Request: key}
	if err != nil {
		if reason, ok := provider.IsConfig(err); ok {
			done.Refused, done.Misconfigured, done.Reason = true, true, reason
			return done
		}
		reason, capacity := provider.IsCapacity(err)
		if !capacity {
			return nil
		}
		done.Refused, done.CapacityLimited, done.Reason = true, true, reason
		return done
	}
	for _, in := range res.Created {
		done.Created = append(done.Created, state.LaunchedMachine{Machine: in.Name, ProviderID: in.ID})
	}
	// The rest are refused only when the provider said so (capacity); a
	// machine it could not make for another reason stays requested.
	done.Refused, done.CapacityLimited, done.Reason = res.CapacityLimited, res.CapacityLimited, res.Reason
	return done
}

// deleteDrained deletes draining machines that run nothing (or whose
// worker is gone).
func (a *Autoscaler) deleteDrained(ctx context.Context, st *view.Autoscale) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range st.Machines {
		m := &st.Machines[i]
		if m.State != state.MachineDraining || st.Running[m.Instance] > 0 {
			continue
		}
		if err := a.gone(ctx, a.providerFor(m.Cluster), m, "deleted: "+m.Reason, false, a.cfg.Clock.Now()); err != nil {
			return err
		}
	}
	return nil
}

// launchConfig is a state launch config as the planner and providers see
// it.
func launchConfig(c *state.LaunchConfig, regions map[string]string) autoscaler.LaunchConfig {
	return autoscaler.LaunchConfig{Name: c.Name, Cluster: c.Cluster, Region: regions[c.Cluster], Pool: c.Pool, MachineType: c.MachineType, Zone: c.Zone,
		Spot: c.Spot, Reserved: c.Reserved, CPUMilli: c.CPUMilli, Memory: c.Memory, GPUType: c.GPUType, GPUs: c.GPUs, PricePerHour: c.PricePerHour,
		MaxNodes: int(c.MaxNodes), MaxPerHour: c.MaxPerHour, MaxAddsPerMinute: int(c.MaxAddsPerMinute), MaxRemovesPerMinute: int(c.MaxRemovesPerMinute),
		AwaitingPrice: c.PriceFromCloud && c.PricePerHour == 0, Capacity: int(c.Capacity)}
}

// autoscaleInput builds the planner's input from the state, the leader's
// liveness and the providers' lists (seen nil: no machine answers its
// probe).
func (a *Autoscaler) autoscaleInput(st *view.Autoscale, seen map[string]provider.Instance, now time.Time) *autoscaler.Input {
	running := map[string]bool{}
	for name, in := range seen {
		running[name] = in.Running
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return plannerInput(st, func(budget int64) *view.Demand {
		return view.AutoscaleDemand(a.cfg.State, budget, a.cfg.MemoryStep, now.UnixNano())
	}, now, a.cfg.Heard, a.idleSince, running, freshHolds(a.Holds, now))
}

// freshHolds reads the last scheduling round's holds (Scheduler.Holds),
// unless they are older than maxHoldAge (the gangs may have started
// since) or holds is nil.
func freshHolds(holds func() ([]scheduler.GangHold, time.Time), now time.Time) []scheduler.GangHold {
	if holds == nil {
		return nil
	}
	if h, at := holds(); len(h) > 0 && !now.Before(at) && now.Sub(at) <= maxHoldAge {
		return h
	}
	return nil
}

// plannerInput builds the autoscaler's input: the state's copy (st), the
// windowed demand it reads for a budget of cores (demand), the time, when
// each worker was last heard from (heard), the idle timers it keeps
// (idleSince, updated here: a machine running nothing gets one, a busy
// one loses it), what the providers' probes say (probe: the machine is
// up) and the room held for gangs (held: what of it is free now is no
// other job's).
func plannerInput(st *view.Autoscale, demand func(budget int64) *view.Demand, now time.Time,
	heard func(inst uint32) (time.Time, bool), idleSince map[string]time.Time, probe map[string]bool, held []scheduler.GangHold) *autoscaler.Input {
	a := &st.Settings
	in := &autoscaler.Input{Now: now, Regions: map[string]string{}, Unavailable: map[string]bool{},
		Limits:   autoscaler.Limits{MaxNodes: int(a.MaxNodes), MaxPerHour: a.MaxPerHour, MaxAddsPerMinute: int(a.MaxAddsPerMinute), MaxRemovesPerMinute: int(a.MaxRemovesPerMinute)},
		Timeouts: timeoutsOf(a), Consolidate: a.Consolidate, ShrinkOnly: !a.Enabled}
	in.Strategy, _ = autoscaler.ParseStrategy(a.Strategy)
	freeOf := map[string]view.FreeRoom{}
	for _, r := range st.Free {
		if r.Machine != "" {
			freeOf[r.Machine] = r
		}
	}
	for _, r := range st.DrainingFree {
		in.Draining = append(in.Draining, autoscaler.Room{Machine: r.Machine, Region: r.Region, Cluster: r.Cluster, Pool: r.Pool, GPUType: r.GPUType, CPUMilli: r.CPUMilli, Memory: r.Memory, GPUs: r.GPUs, TotalMilli: r.TotalMilli, Spot: r.Spot})
	}
	for _, c := range st.Clusters {
		in.Regions[c.Name] = c.Region
		if c.Disabled {
			in.Unavailable[c.Name] = true
		}
	}
	var maxCores int64
	for i := range st.Configs {
		c := launchConfig(&st.Configs[i], in.Regions)
		in.Configs = append(in.Configs, c)
		maxCores = max(maxCores, c.CPUMilli)
	}
	for _, mk := range st.Marks {
		in.Marks = append(in.Marks, autoscaler.Mark{Config: mk.Config, Until: time.Unix(0, mk.Until), Backoff: time.Duration(mk.Backoff), Reason: mk.Reason, SpotPreemptions: int(mk.SpotPreemptions), Misconfigured: mk.Misconfigured})
	}
	var liveNodes int64
	var liveSpend money.Rate
	for i := range st.Machines {
		m := &st.Machines[i]
		am := autoscaler.Machine{ID: m.ID, Config: m.Config, State: autoscaler.State(m.State), PricePerHour: m.PricePerHour,
			CPUMilli: m.CPUMilli, Memory: m.Memory, Created: time.Unix(0, m.Created), Since: time.Unix(0, m.Since)}
		if m.Deleted != 0 {
			am.Deleted = time.Unix(0, m.Deleted)
		}
		if m.State == state.MachineActive {
			if r, ok := freeOf[m.ID]; ok {
				am.FreeMilli, am.FreeMemory = r.CPUMilli, r.Memory
			}
			if t, ok := heard(m.Instance); ok {
				am.Heard = t
			} else {
				am.Heard = time.Unix(0, m.Since)
			}
			am.ProbeOK = probe[m.ID]
			if st.Running[m.Instance] == 0 {
				if _, ok := idleSince[m.ID]; !ok {
					idleSince[m.ID] = now
				}
				am.IdleSince = idleSince[m.ID]
			} else {
				delete(idleSince, m.ID)
			}
		}
		if m.State >= state.MachineRequested && m.State <= state.MachineDraining {
			liveNodes++
			liveSpend = liveSpend.Add(m.PricePerHour)
		}
		in.Machines = append(in.Machines, am)
	}
	heldOn := map[uint32][3]int64{}
	for i := range held {
		for _, on := range held[i].On {
			cpu, mem, gpus := on.HeldNow()
			h := heldOn[on.Instance]
			heldOn[on.Instance] = [3]int64{h[0] + cpu, h[1] + mem, h[2] + gpus}
		}
	}
	var free int64
	for _, r := range st.Free {
		h := heldOn[r.Instance]
		room := autoscaler.Room{Machine: r.Machine, Region: r.Region, Cluster: r.Cluster, Pool: r.Pool, GPUType: r.GPUType,
			CPUMilli: max(r.CPUMilli-h[0], 0), Memory: max(r.Memory-h[1], 0), GPUs: max(r.GPUs-h[2], 0), TotalMilli: r.TotalMilli, Spot: r.Spot}
		in.Free = append(in.Free, room)
		free += room.CPUMilli
	}
	budget := free + windowCores(a, in.Configs, liveNodes, liveSpend, maxCores)
	for _, m := range in.Machines {
		if m.State == autoscaler.Requested || m.State == autoscaler.Launching {
			budget += m.CPUMilli
		}
	}
	d := demand(budget)
	users := make([]autoscaler.UserQueue, len(d.Users))
	for i, u := range d.Users {
		users[i] = autoscaler.UserQueue{Name: u.Name, RunningMilli: u.RunningMilli, PastMilli: u.PastMilli, Ready: make([]autoscaler.Shape, 0, len(u.Shapes))}
		for _, sh := range u.Shapes {
			ash := autoscaler.Shape{CPUMilli: sh.CPUMilli, Memory: sh.Memory, GPUs: sh.GPUs, Count: sh.Count, Gang: sh.Gang, GangUniform: sh.GangUniform}
			for _, pt := range sh.Parts {
				ash.Parts = append(ash.Parts, autoscaler.Shape{CPUMilli: pt.CPUMilli, Memory: pt.Memory, GPUs: pt.GPUs, Count: pt.Count})
			}
			if sh.Constraint > 0 {
				ash.Constraint = d.Constraints[sh.Constraint-1]
			}
			users[i].Ready = append(users[i].Ready, ash)
		}
	}
	in.Demand = autoscaler.WindowedDemand(users, budget)
	for _, pj := range st.Private {
		in.Private = append(in.Private, autoscaler.PrivateDemand{Ref: fmt.Sprintf("%d/%d", pj.Batch, pj.Job), MachineType: pj.MachineType,
			Constraint: pj.Constraint, CPUMilli: pj.CPUMilli, Memory: pj.Memory, GPUs: pj.GPUs})
	}
	return in
}

// scaleCommand records a decision.
func scaleCommand(out *autoscaler.Output, now time.Time) *state.Scale {
	cmd := &state.Scale{Now: now.UnixNano(), Revives: out.Revives}
	for _, l := range out.Launches {
		cmd.Launches = append(cmd.Launches, state.ScaleLaunch{Config: l.Config, Count: int64(l.Count), Reason: l.Reason})
	}
	for _, d := range out.Deletes {
		cmd.Deletes = append(cmd.Deletes, state.ScaleDelete{Machine: d.Machine, Reason: d.Reason})
	}
	for _, pl := range out.Private {
		var b uint64
		var j uint32
		if _, err := fmt.Sscanf(pl.Ref, "%d/%d", &b, &j); err == nil {
			cmd.Private = append(cmd.Private, state.ScalePrivate{Config: pl.Config, Batch: b, Job: j, Reason: pl.Reason})
		}
	}
	for _, h := range out.Held {
		cmd.Notes = append(cmd.Notes, fmt.Sprintf("%d jobs (%g cores) wait: %s", h.Jobs, float64(h.CPUMilli)/1000, h.Reason))
	}
	return cmd
}

// windowCores is the cores new machines can add within the window: what
// the node and spend caps leave, and what the add rate can launch in the
// window. No cap and no rate: as much as anyone waits for.
func windowCores(a *state.Autoscaler, cfgs []autoscaler.LaunchConfig, liveNodes int64, liveSpend money.Rate, maxCores int64) int64 {
	const unbounded = int64(1) << 50
	room := unbounded
	if a.MaxNodes > 0 {
		room = min(room, max(a.MaxNodes-liveNodes, 0)*maxCores)
	}
	if a.MaxPerHour > 0 {
		// What the cap leaves buys the most cores of the config that is
		// cheapest per core (configs at no price bound nothing).
		var cheapest *autoscaler.LaunchConfig
		for i := range cfgs {
			c := &cfgs[i]
			if c.PricePerHour > 0 && c.CPUMilli > 0 && (cheapest == nil || autoscaler.ComparePricePerCore(c, cheapest) < 0) {
				cheapest = c
			}
		}
		if cheapest != nil {
			room = min(room, max(a.MaxPerHour.Sub(liveSpend), 0).Buys(cheapest.PricePerHour, cheapest.CPUMilli))
		}
	}
	if a.MaxAddsPerMinute > 0 && a.Window > 0 {
		minutes := max(time.Duration(a.Window).Minutes(), 1)
		room = min(room, int64(float64(a.MaxAddsPerMinute)*minutes)*maxCores)
	}
	return room
}

// timeoutsOf converts the settings' timeouts, with defaults for those not
// set.
func timeoutsOf(a *state.Autoscaler) autoscaler.Timeouts {
	t := autoscaler.DefaultTimeouts()
	set := func(dst *time.Duration, ns int64) {
		if ns > 0 {
			*dst = time.Duration(ns)
		}
	}
	set(&t.Boot, a.BootTimeout)
	set(&t.Idle, a.IdleTimeout)
	set(&t.Lame, a.LameTimeout)
	set(&t.Backoff, a.Backoff)
	set(&t.MaxBackoff, a.MaxBackoff)
	if a.SpotPreemptions > 0 {
		t.SpotPreemptions = int(a.SpotPreemptions)
	}
	return t
}

// Launchable is what the last decision could launch, by cluster and pool
// (autoscaler.Output.Sizes), for the scheduling round's
// scheduler.Input.Launchable: the scheduler then leaves to larger jobs the
// idle workers the decision did not count as room for small ones. Nil
// before the first decision of this leadership and while disabled.
func (a *Autoscaler) Launchable() []scheduler.PoolSize {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sizes
}

// LastRound reports the leader's last decision for the API (nil before
// the first).
func (a *Autoscaler) LastRound() *api.AutoscaleRound {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		return nil
	}
	r := &api.AutoscaleRound{At: a.lastAt.UTC(), DemandCPU: float64(a.demand) / 1000, Skipped: maps.Clone(a.last.Skipped)}
	for _, l := range a.last.Launches {
		r.Launches = append(r.Launches, api.AutoscaleAction{Config: l.Config, Count: l.Count, Reason: l.Reason})
	}
	for _, d := range a.last.Deletes {
		r.Deletes = append(r.Deletes, api.AutoscaleAction{Machine: d.Machine, Reason: d.Reason})
	}
	for _, h := range a.last.Held {
		r.Held = append(r.Held, api.AutoscaleHeld{Jobs: h.Jobs, CPU: float64(h.CPUMilli) / 1000, Reason: h.Reason, Config: h.Marked})
	}
	return r
}
