package server

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/server/httpapi"
	"github.com/drover-sched/drover/server/leader"
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
	// PriceRefresh is how often launch configs that take the cloud's
	// price (price_from_cloud) have it read from their provider.
	PriceRefresh time.Duration
	// PriceRetry: how soon after a failed read, or while a config has no
	// price yet (0: a minute).
	PriceRetry time.Duration
}

// DefaultAutoscaleConfig returns the timings of a production autoscaler;
// set its providers and worker.
func DefaultAutoscaleConfig() *AutoscaleConfig {
	return &AutoscaleConfig{Interval: 15 * time.Second, MissingGrace: time.Minute, MemoryStep: 256 << 20, Deployment: "drover",
		PriceRefresh: leader.DefaultPriceRefresh}
}

// validate checks the timings.
func (c *AutoscaleConfig) validate() error {
	if c.Interval <= 0 || c.MissingGrace < 0 || c.MemoryStep < 0 {
		return fmt.Errorf("autoscale: the interval must be positive, the missing grace and memory step not negative (got %s, %s, %d)", c.Interval, c.MissingGrace, c.MemoryStep)
	}
	if c.PriceRefresh < 0 || (c.PriceRefresh > 0 && c.PriceRefresh < time.Second) {
		return fmt.Errorf("autoscale: the price refresh is 1s or more (0: hourly), not %s", c.PriceRefresh)
	}
	return nil
}

// ProviderFactory makes the provider a cluster declares (its kind and
// settings from the placement config); the servers' credentials are the
// factory's. It is the leader loop's type, named here for the config.
type ProviderFactory = leader.ProviderFactory

// runs reports whether the autoscaler has a provider to run with.
func (c *AutoscaleConfig) runs() bool {
	return c != nil && (c.Provider != nil || len(c.Providers) > 0 || c.Factory != nil)
}

// newAutoscaler wires the leader's autoscale round (package leader, which
// the simulator runs too) to this server: its state, Raft, liveness,
// the wall clock and the configured providers.
func (s *Server) newAutoscaler() *leader.Autoscaler {
	ac := s.cfg.Autoscale
	if ac == nil {
		ac = DefaultAutoscaleConfig()
	}
	return leader.NewAutoscaler(leader.AutoscalerConfig{
		Clock: leader.WallClock{}, State: s.state, Apply: func(c state.Command) (any, error) { return s.raft.Apply(c) },
		Heard: s.live.Heard, Provider: ac.Provider, Providers: ac.Providers, Factory: ac.Factory, Worker: s.machineWorker,
		WorkerSecret: s.cfg.WorkerSecret, Deployment: ac.Deployment, MissingGrace: ac.MissingGrace, MemoryStep: ac.MemoryStep, Log: s.log,
		PriceRefresh: ac.PriceRefresh, PriceRetry: ac.PriceRetry,
	})
}

// machineWorker is how a launched machine's worker reaches this
// deployment's servers: the configured addresses, else this server's.
func (s *Server) machineWorker() provider.Worker {
	worker := s.cfg.Autoscale.Worker
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
	return worker
}

// runAutoscaler decides every Interval while this server leads.
func (s *Server) runAutoscaler(ctx context.Context) {
	ac := s.cfg.Autoscale
	if !ac.runs() {
		return
	}
	s.autoscale.Reset()
	s.autoscaleStarted.Store(true)
	tick := time.NewTicker(ac.Interval)
	defer tick.Stop()
	for {
		if err := s.autoscaleOnce(ctx); err != nil && ctx.Err() == nil {
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
// carries the decision out (leader.Autoscaler.Round).
func (s *Server) autoscaleOnce(ctx context.Context) error {
	return s.autoscale.Round(ctx)
}

// providerInfo says what a cluster's provider can tell placement
// apply's check of launch configs: its zones (when it can list them),
// whether it reads the cloud's prices and whether it holds configs to a
// capacity. Known is false when no provider makes the cluster's
// machines.
func (s *Server) providerInfo(ctx context.Context, cluster, kind string, settings map[string]string) (httpapi.ProviderInfo, error) {
	ac := s.cfg.Autoscale
	if ac == nil {
		return httpapi.ProviderInfo{}, nil
	}
	var p provider.Provider
	switch {
	case kind != "" && ac.Factory != nil:
		made, err := ac.Factory(cluster, kind, settings)
		if err != nil {
			return httpapi.ProviderInfo{}, err
		}
		if c, ok := made.(io.Closer); ok {
			defer c.Close()
		}
		p = made
	case ac.Providers[cluster] != nil:
		p = ac.Providers[cluster]
	default:
		p = ac.Provider
	}
	if p == nil {
		return httpapi.ProviderInfo{}, nil
	}
	info := httpapi.ProviderInfo{Known: true}
	_, info.Prices = p.(provider.Pricer)
	if h, ok := p.(provider.CapacityHolder); ok {
		info.Capacity = h.HoldsCapacity()
	}
	if z, ok := p.(provider.Zoner); ok {
		zones, err := z.Zones(ctx)
		if err != nil {
			return httpapi.ProviderInfo{}, err
		}
		info.Zones = zones
	}
	return info, nil
}
