package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// AutoscaleConfig connects the leader's autoscaler to the providers that
// make machines. With no provider the autoscaler does not run.
type AutoscaleConfig struct {
	// Provider makes the machines of every cluster not in Providers.
	Provider  provider.Provider
	Providers map[string]provider.Provider
	// Factory makes the providers clusters declare (nil: only Provider and
	// Providers are used).
	Factory ProviderFactory
	// Interval between decisions (Hail runs every 15 s).
	Interval time.Duration
	// Worker is how a new machine's worker reaches the servers; where it
	// is and its size come from the launch config, and its credential is
	// the machine's one-time join token (derived from the server's worker
	// secret, which no machine receives). No servers: this server's API
	// address.
	Worker provider.Worker
	// Deployment labels this deployment's machines, so List finds them
	// and no other deployment's.
	Deployment string
	// MissingGrace: a machine the provider no longer lists is gone once
	// it has been missing this long (a provider may list late).
	MissingGrace time.Duration
	// MemoryStep rounds jobs' memory up for demand shapes.
	MemoryStep int64
}

// DefaultAutoscaleConfig returns the timings of a production autoscaler;
// set its providers and worker.
func DefaultAutoscaleConfig() *AutoscaleConfig {
	return &AutoscaleConfig{Interval: 15 * time.Second, MissingGrace: time.Minute, MemoryStep: 256 << 20, Deployment: "drover"}
}

// validate checks the timings.
func (c *AutoscaleConfig) validate() error {
	if c.Interval <= 0 || c.MissingGrace < 0 || c.MemoryStep < 0 {
		return fmt.Errorf("autoscale: the interval must be positive, the missing grace and memory step not negative (got %s, %s, %d)", c.Interval, c.MissingGrace, c.MemoryStep)
	}
	return nil
}

// ProviderFactory makes the provider a cluster declares (its kind and
// settings from the placement config); the servers' credentials are the
// factory's.
type ProviderFactory func(cluster, kind string, settings map[string]string) (provider.Provider, error)

// builtProvider is a provider made for a cluster's declaration.
type builtProvider struct {
	key string
	p   provider.Provider
}

// resolveProviders decides which provider makes each cluster's machines
// this round: one configured for it, else the one its declaration names
// (made by the factory, again only when the declaration changes), else the
// default.
func (s *Server) resolveProviders(st *state.AutoscaleState) {
	ac := s.cfg.Autoscale
	m := s.autoscale
	resolved := map[string]provider.Provider{}
	for _, c := range st.Clusters {
		if p, ok := ac.Providers[c.Name]; ok {
			resolved[c.Name] = p
			continue
		}
		kind, settings := st.Providers[c.Name].Kind, st.Providers[c.Name].Settings
		if kind == "" || ac.Factory == nil {
			if ac.Provider != nil {
				resolved[c.Name] = ac.Provider
			}
			continue
		}
		key := kind
		for _, k := range slices.Sorted(maps.Keys(settings)) {
			key += "\x00" + k + "=" + settings[k]
		}
		if b, ok := m.built[c.Name]; ok && b.key == key {
			resolved[c.Name] = b.p
			continue
		}
		p, err := ac.Factory(c.Name, kind, settings)
		if err != nil {
			s.log.Warn("autoscaler: cannot make the provider a cluster declares; its machines wait", "cluster", c.Name, "provider", kind, "err", err)
			continue
		}
		m.built[c.Name] = builtProvider{key: key, p: p}
		resolved[c.Name] = p
	}
	m.resolved = resolved
}

// providerFor returns the provider of a cluster's machines this round.
func (s *Server) providerFor(cluster string) provider.Provider {
	if p, ok := s.autoscale.resolved[cluster]; ok {
		return p
	}
	return s.cfg.Autoscale.Provider
}

// providers lists the distinct providers of this round.
func (s *Server) providers() []provider.Provider {
	var out []provider.Provider
	for _, name := range slices.Sorted(maps.Keys(s.autoscale.resolved)) {
		if p := s.autoscale.resolved[name]; !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if p := s.cfg.Autoscale.Provider; p != nil && !slices.Contains(out, p) {
		out = append(out, p)
	}
	return out
}

// autoscaleMemory is what the leader's autoscaler remembers between
// decisions: not Raft state, started afresh by a new leader (idle timers
// then restart, so machines live a little longer; nothing is launched
// twice).
type autoscaleMemory struct {
	mu        sync.Mutex
	idleSince map[string]time.Time
	missing   map[string]time.Time
	last      *autoscaler.Output
	lastAt    time.Time
	built     map[string]builtProvider
	resolved  map[string]provider.Provider
	demand    int64 // millicores in the window at the last decision
}

// runs reports whether the autoscaler has a provider to run with.
func (c *AutoscaleConfig) runs() bool {
	return c != nil && (c.Provider != nil || len(c.Providers) > 0 || c.Factory != nil)
}

// runAutoscaler decides every Interval while this server leads.
func (s *Server) runAutoscaler(ctx context.Context) {
	ac := s.cfg.Autoscale
	if !ac.runs() {
		return
	}
	s.autoscale.mu.Lock()
	s.autoscale.idleSince, s.autoscale.missing, s.autoscale.last = map[string]time.Time{}, map[string]time.Time{}, nil
	if s.autoscale.built == nil {
		s.autoscale.built = map[string]builtProvider{}
	}
	s.autoscale.mu.Unlock()
	tick := time.NewTicker(ac.Interval)
	defer tick.Stop()
	for {
		if err := s.autoscaleOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("autoscaler decision failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// autoscaleOnce reconciles the providers with the state, then decides and
// carries the decision out.
func (s *Server) autoscaleOnce(ctx context.Context, now time.Time) error {
	st := s.state.AutoscaleState()
	if !st.Settings.Enabled {
		return nil
	}
	s.resolveProviders(st)
	seen, listed := s.listMachines(ctx)
	if err := s.reconcile(ctx, st, seen, listed, now); err != nil {
		return err
	}
	// Requested machines: launch them (again, after a leader change: the
	// key makes it harmless); drained ones: delete them.
	if err := s.launchRequested(ctx, st); err != nil {
		return err
	}
	if err := s.deleteDrained(ctx, st); err != nil {
		return err
	}
	st = s.state.AutoscaleState()
	in := s.autoscaleInput(st, seen, now)
	out := autoscaler.Plan(in)
	var demand int64
	for _, sh := range in.Demand {
		demand += sh.CPUMilli * sh.Count
	}
	s.autoscale.mu.Lock()
	s.autoscale.last, s.autoscale.lastAt, s.autoscale.demand = out, now, demand
	s.autoscale.mu.Unlock()
	if len(out.Launches) == 0 && len(out.Deletes) == 0 && len(out.Revives) == 0 && len(out.Private) == 0 {
		return nil
	}
	res, err := s.raft.Apply(scaleCommand(out, now))
	if err != nil {
		return fmt.Errorf("record scale decision: %w", err)
	}
	sr := res.(*state.ScaleResult)
	s.log.Info("autoscaler decided", "launch", len(out.Launches), "delete", len(out.Deletes), "capped_at_apply", sr.Capped)
	if err := s.launchRequested(ctx, s.state.AutoscaleState()); err != nil {
		return err
	}
	return s.deleteDrained(ctx, s.state.AutoscaleState())
}

// listMachines lists every provider's machines by name; listed says which
// providers answered (a provider that did not answer says nothing about
// what is missing).
func (s *Server) listMachines(ctx context.Context) (map[string]provider.Instance, map[provider.Provider]bool) {
	seen := map[string]provider.Instance{}
	listed := map[provider.Provider]bool{}
	for _, p := range s.providers() {
		insts, err := p.List(ctx)
		if err != nil {
			s.log.Warn("autoscaler: list machines", "err", err)
			continue
		}
		listed[p] = true
		for _, in := range insts {
			if d := s.cfg.Autoscale.Deployment; d != "" && in.Labels[provider.LabelDeployment] != "" && in.Labels[provider.LabelDeployment] != d {
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
func (s *Server) reconcile(ctx context.Context, st *state.AutoscaleState, seen map[string]provider.Instance, listed map[provider.Provider]bool, now time.Time) error {
	ac := s.cfg.Autoscale
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
		p := s.providerFor(clusterOf(st, name, seen))
		if p == nil {
			continue
		}
		if err := p.Delete(ctx, []string{name}); err != nil {
			s.log.Warn("autoscaler: delete orphan", "machine", name, "err", err)
			continue
		}
		s.log.Warn("autoscaler: deleted an orphan machine (drover's labels, not in the state)", "machine", name)
	}
	s.autoscale.mu.Lock()
	defer s.autoscale.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(live)) {
		m := live[id]
		in, ok := seen[id]
		p := s.providerFor(m.Cluster)
		switch {
		case ok && in.Preempted:
			if err := s.gone(ctx, p, m, "reclaimed by the cloud (spot)", true, now); err != nil {
				return err
			}
		case !ok && m.State != state.MachineRequested && listed[p]:
			first, was := s.autoscale.missing[id]
			if !was {
				s.autoscale.missing[id] = now
				continue
			}
			if now.Sub(first) >= ac.MissingGrace {
				if err := s.gone(ctx, p, m, "no longer at the provider", false, now); err != nil {
					return err
				}
				delete(s.autoscale.missing, id)
			}
		default:
			delete(s.autoscale.missing, id)
		}
	}
	return nil
}

// clusterOf is the cluster of a machine name, from the state or its labels.
func clusterOf(st *state.AutoscaleState, name string, seen map[string]provider.Instance) string {
	for _, m := range st.Machines {
		if m.ID == name {
			return m.Cluster
		}
	}
	return seen[name].Labels[provider.LabelCluster]
}

// gone deletes a machine at its provider (if it is there) and records it.
func (s *Server) gone(ctx context.Context, p provider.Provider, m *state.Machine, reason string, preempted bool, now time.Time) error {
	if p != nil {
		if err := p.Delete(ctx, []string{m.ID}); err != nil {
			return fmt.Errorf("delete machine %s: %w", m.ID, err)
		}
	}
	if _, err := s.raft.Apply(&state.MachineGone{Now: now.UnixNano(), Machine: m.ID, Reason: reason, Preempted: preempted}); err != nil {
		return fmt.Errorf("record machine %s gone: %w", m.ID, err)
	}
	delete(s.autoscale.idleSince, m.ID)
	return nil
}

// launchRequested asks the providers for every requested machine, one
// call per launch request, and records what they made.
func (s *Server) launchRequested(ctx context.Context, st *state.AutoscaleState) error {
	ac := s.cfg.Autoscale
	cfgs := map[string]*state.LaunchConfig{}
	for i := range st.Configs {
		cfgs[st.Configs[i].Name] = &st.Configs[i]
	}
	regions := map[string]string{}
	for _, c := range st.Clusters {
		regions[c.Name] = c.Region
	}
	tokens, err := s.joinTokens(st, time.Now())
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
		p := s.providerFor(ms[0].Cluster)
		if cfg == nil || p == nil {
			continue
		}
		worker := ac.Worker
		if worker.Servers == "" {
			worker.Servers = "http://" + s.HTTPAddr()
			if s.tls != nil {
				worker.Servers = "https://" + s.HTTPAddr()
			}
		}
		if s.tls != nil && !slices.Contains(worker.ExtraFlags, "-ca-file") {
			// The machine verifies the servers with the cluster's CA (a
			// path on its own disk: the local provider shares ours).
			worker.ExtraFlags = append(slices.Clone(worker.ExtraFlags), "-ca-file", s.cfg.CAFile)
		}
		req := &provider.LaunchRequest{Config: launchConfig(cfg, regions), RequestID: key, Worker: worker, JoinTokens: map[string]string{},
			Labels: map[string]string{provider.LabelDeployment: ac.Deployment, provider.LabelCluster: cfg.Cluster, provider.LabelConfig: cfg.Name}}
		req.Worker.Region, req.Worker.Cluster, req.Worker.Pool = regions[cfg.Cluster], cfg.Cluster, cfg.Pool
		req.Labels[provider.LabelMachine] = ms[0].ID
		for _, m := range ms {
			req.Names = append(req.Names, m.ID)
			req.JoinTokens[m.ID] = tokens[m.ID]
		}
		res, err := p.Launch(ctx, req)
		done := LaunchDone(key, res, err, time.Now())
		if done == nil {
			s.log.Warn("autoscaler: launch failed; will retry", "config", cfg.Name, "machines", len(ms), "err", err)
			continue
		}
		if _, err := s.raft.Apply(done); err != nil {
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
func (s *Server) joinTokens(st *state.AutoscaleState, now time.Time) (map[string]string, error) {
	boot := timeoutsOf(&st.Settings).Boot
	tokens := map[string]string{}
	mint := &state.JoinTokens{Now: now.UnixNano()}
	for i := range st.Machines {
		m := &st.Machines[i]
		if m.State != state.MachineRequested {
			continue
		}
		tok := token.Derive(s.cfg.WorkerSecret, "drover join token v1", m.ID, m.Request, strconv.FormatInt(m.Created, 10))
		switch h := token.Hash(tok); {
		case m.JoinHash == "":
			mint.Tokens = append(mint.Tokens, state.JoinToken{Machine: m.ID, Hash: h, Expires: m.Created + int64(boot)})
		case m.JoinHash != h:
			s.log.Error("autoscaler: a server with another worker secret minted this machine's join token; not launching it (its boot timeout replaces it): give every server the same -worker-secret-file",
				"machine", m.ID)
			continue
		}
		tokens[m.ID] = tok
	}
	if len(mint.Tokens) > 0 {
		if _, err := s.raft.Apply(mint); err != nil {
			return nil, fmt.Errorf("record the join tokens of %d machines: %w", len(mint.Tokens), err)
		}
	}
	return tokens, nil
}

// LaunchDone is the command that records what a provider's launch made:
// the machines it created, and, when it refused the rest for capacity,
// that they are refused (the config is marked). nil: the launch failed
// otherwise (nothing is recorded: the machines stay requested and are
// asked for again, under the same key). drover bench autoscale records
// its launches as the leader does.
func LaunchDone(key string, res *provider.LaunchResult, err error, now time.Time) *state.LaunchDone {
	done := &state.LaunchDone{Now: now.UnixNano(), Request: key}
	if err != nil {
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
func (s *Server) deleteDrained(ctx context.Context, st *state.AutoscaleState) error {
	for i := range st.Machines {
		m := &st.Machines[i]
		if m.State != state.MachineDraining || st.Running[m.Instance] > 0 {
			continue
		}
		if err := s.gone(ctx, s.providerFor(m.Cluster), m, "deleted: "+m.Reason, false, time.Now()); err != nil {
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
		MaxNodes: int(c.MaxNodes), MaxPerHour: c.MaxPerHour, MaxAddsPerMinute: int(c.MaxAddsPerMinute), MaxRemovesPerMinute: int(c.MaxRemovesPerMinute)}
}

// autoscaleInput builds the planner's input from the state, the leader's
// liveness and the providers' lists.
func (s *Server) autoscaleInput(st *state.AutoscaleState, seen map[string]provider.Instance, now time.Time) *autoscaler.Input {
	running := map[string]bool{}
	for name, in := range seen {
		running[name] = in.Running
	}
	return PlannerInput(st, func(budget int64) *state.AutoscaleDemand {
		return s.state.AutoscaleDemand(budget, fairShares, s.cfg.Autoscale.MemoryStep)
	}, now, s.live.Heard, s.autoscale.idleSince, running)
}

// PlannerInput builds the autoscaler's input: the state's copy (st), the
// windowed demand it reads for a budget of cores (demand), the time, when
// each worker was last heard from (heard), the idle timers it keeps
// (idleSince, updated here: a machine running nothing gets one, a busy
// one loses it) and what the providers' probes say (probe: the machine
// is up). The leader and drover bench autoscale both call it.
func PlannerInput(st *state.AutoscaleState, demand func(budget int64) *state.AutoscaleDemand, now time.Time,
	heard func(inst uint32) (time.Time, bool), idleSince map[string]time.Time, probe map[string]bool) *autoscaler.Input {
	a := &st.Settings
	in := &autoscaler.Input{Now: now, Regions: map[string]string{}, Unavailable: map[string]bool{},
		Limits:   autoscaler.Limits{MaxNodes: int(a.MaxNodes), MaxPerHour: a.MaxPerHour, MaxAddsPerMinute: int(a.MaxAddsPerMinute), MaxRemovesPerMinute: int(a.MaxRemovesPerMinute)},
		Timeouts: timeoutsOf(a), Consolidate: a.Consolidate}
	in.Strategy, _ = autoscaler.ParseStrategy(a.Strategy)
	freeOf := map[string]state.FreeRoom{}
	for _, r := range st.Free {
		if r.Machine != "" {
			freeOf[r.Machine] = r
		}
	}
	for _, r := range st.DrainingFree {
		in.Draining = append(in.Draining, autoscaler.Room{Machine: r.Machine, Region: r.Region, Cluster: r.Cluster, Pool: r.Pool, GPUType: r.GPUType, CPUMilli: r.CPUMilli, Memory: r.Memory, GPUs: r.GPUs})
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
		in.Marks = append(in.Marks, autoscaler.Mark{Config: mk.Config, Until: time.Unix(0, mk.Until), Backoff: time.Duration(mk.Backoff), Reason: mk.Reason, SpotPreemptions: int(mk.SpotPreemptions)})
	}
	var liveNodes int64
	var liveSpend float64
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
			liveSpend += m.PricePerHour
		}
		in.Machines = append(in.Machines, am)
	}
	var free int64
	for _, r := range st.Free {
		in.Free = append(in.Free, autoscaler.Room{Machine: r.Machine, Region: r.Region, Cluster: r.Cluster, Pool: r.Pool, GPUType: r.GPUType, CPUMilli: r.CPUMilli, Memory: r.Memory, GPUs: r.GPUs})
		free += r.CPUMilli
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
		users[i] = autoscaler.UserQueue{Name: u.Name, RunningMilli: u.RunningMilli, Ready: make([]autoscaler.Shape, 0, len(u.Shapes))}
		for _, sh := range u.Shapes {
			ash := autoscaler.Shape{CPUMilli: sh.CPUMilli, Memory: sh.Memory, GPUs: sh.GPUs, Count: sh.Count}
			if sh.Constraint > 0 {
				ash.Constraint = d.Constraints[sh.Constraint-1]
			}
			users[i].Ready = append(users[i].Ready, ash)
		}
	}
	in.Demand = autoscaler.WindowedDemand(users, budget)
	for _, pj := range st.Private {
		in.Private = append(in.Private, autoscaler.PrivateDemand{Ref: fmt.Sprintf("%d/%d", pj.Batch, pj.Job), MachineType: pj.MachineType,
			Constraint: placement.Constraint{Regions: pj.Regions, Pool: pj.Pool, GPUType: pj.GPUType}, CPUMilli: pj.CPUMilli, Memory: pj.Memory, GPUs: pj.GPUs})
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

// ScaleCommand is the command that records a decision (drover bench
// autoscale records its decisions as the leader does).
func ScaleCommand(out *autoscaler.Output, now time.Time) *state.Scale { return scaleCommand(out, now) }

// FairShares is the scheduler's fair share as the state's reads want it.
func FairShares(running, ready []int64, free int64) []int64 { return fairShares(running, ready, free) }

// windowCores is the cores new machines can add within the window: what
// the node and spend caps leave, and what the add rate can launch in the
// window. No cap and no rate: as much as anyone waits for.
func windowCores(a *state.Autoscaler, cfgs []autoscaler.LaunchConfig, liveNodes int64, liveSpend float64, maxCores int64) int64 {
	const unbounded = int64(1) << 50
	room := unbounded
	if a.MaxNodes > 0 {
		room = min(room, max(a.MaxNodes-liveNodes, 0)*maxCores)
	}
	if a.MaxPerHour > 0 {
		cheapest := 0.0
		for i := range cfgs {
			if pc := cfgs[i].PricePerCoreHour(); cheapest == 0 || pc < cheapest {
				cheapest = pc
			}
		}
		if cheapest > 0 {
			room = min(room, int64(max(a.MaxPerHour-liveSpend, 0)/cheapest*1000))
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

// LastRound reports the leader's last decision for the API (nil before
// the first).
func (m *autoscaleMemory) LastRound() *api.AutoscaleRound {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		return nil
	}
	r := &api.AutoscaleRound{At: m.lastAt.UTC(), DemandCPU: float64(m.demand) / 1000, Skipped: maps.Clone(m.last.Skipped)}
	for _, l := range m.last.Launches {
		r.Launches = append(r.Launches, api.AutoscaleAction{Config: l.Config, Count: l.Count, Reason: l.Reason})
	}
	for _, d := range m.last.Deletes {
		r.Deletes = append(r.Deletes, api.AutoscaleAction{Machine: d.Machine, Reason: d.Reason})
	}
	for _, h := range m.last.Held {
		r.Held = append(r.Held, api.AutoscaleHeld{Jobs: h.Jobs, CPU: float64(h.CPUMilli) / 1000, Reason: h.Reason})
	}
	return r
}
