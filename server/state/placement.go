package state

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
)

// Regions, clusters, pools and teams: the federation's shape and the
// accounting placement relies on. Every worker is in one cluster of one
// region and one pool of that cluster; every billing project is in at most
// one team, and a team's quota bounds what its projects' jobs hold across
// all clusters. Quota in use is counted where free cores are, on every
// placement and release, so a plan that would pass a quota is rejected at
// apply like one that would oversubscribe a worker.

// MaxGPUs bounds the GPUs of one worker and of one job.
const MaxGPUs = 64

// Default location of a worker that names none.
const (
	DefaultRegion  = "default"
	DefaultCluster = "default"
	DefaultPool    = "default"
)

// Cluster is a set of workers in one region that an operator can take out
// of service as a whole.
type Cluster struct {
	Name     string
	Region   string
	Disabled bool
	// Reason, By and Since describe the last enable or disable.
	Reason string
	By     string
	Since  int64
	// Declared: the cluster comes from a placement config (otherwise a
	// worker named it when it activated).
	Declared bool
	Pools    []Pool // declared pools, by name
	Created  int64
	// Group is the cluster group it is declared in (empty: none).
	Group string
	// Provider makes the autoscaler's machines in this cluster (local,
	// gce, nomad; empty: the servers' default), with its settings (a
	// Nomad cluster's address, region, namespace, datacenters; a GCE
	// project and image). Credentials are the servers', never here.
	Provider         string
	ProviderSettings StringMap
}

// Providers the autoscaler can make machines with.
var Providers = []string{"local", "gce", "nomad"}

// ValidateProvider checks a cluster's provider and its settings as apply
// will, so the API refuses them before they reach the log.
func ValidateProvider(cl *Cluster) error {
	if err := validateProvider(cl); err != nil {
		return err
	}
	return nil
}

// validateProvider checks a cluster's provider and its settings.
func validateProvider(cl *Cluster) *ApplyError {
	if cl.Provider != "" && !slices.Contains(Providers, cl.Provider) {
		return errorf(ErrInvalid, "cluster %s: unknown provider %.40q (local, gce or nomad)", cl.Name, cl.Provider)
	}
	if len(cl.ProviderSettings) > 32 {
		return errorf(ErrInvalid, "cluster %s: at most 32 provider settings", cl.Name)
	}
	for k, v := range cl.ProviderSettings {
		if len(k) > 64 || len(v) > 1024 {
			return errorf(ErrInvalid, "cluster %s: a provider setting's name is at most 64 bytes and its value 1024", cl.Name)
		}
	}
	return nil
}

// ClusterGroup is a set of clusters with a placement strategy of its
// own: a team's strategy chooses between groups (and clusters in none),
// the group's between its clusters. Clusters name their group.
type ClusterGroup struct {
	Name     string
	Strategy string // empty: the team's
	Created  int64
}

// Pool is a machine class of a cluster.
type Pool struct {
	Name         string
	CPUMilli     int64
	Memory       int64
	Preemptible  bool
	PricePerHour money.Rate // of one machine (a float of dollars before integral prices)
	GPUType      string
	GPUs         int64
}

// SetCluster creates a cluster or enables or disables it. Evacuate (with
// Disabled) preempts the attempts running there: their jobs return to
// Ready with a new attempt elsewhere, and the preemption counts neither as
// a failure nor as a lost attempt.
type SetCluster struct {
	Now      int64
	Name     string
	Region   string // for a new cluster; must match an existing one
	Disabled bool
	Reason   string
	By       string
	Evacuate bool
	// Create: make the cluster if it does not exist (otherwise 404).
	Create bool
}

// ApplyPlacement declares regions, clusters with their pools, and queues.
// Declared clusters and queues are created or updated; a cluster's
// enabled state is kept (disable is an operator's act, not config).
// Queues not named are removed when Prune is set.
type ApplyPlacement struct {
	Now      int64
	Clusters []Cluster
	// Teams are an entry's from before queues: each sets the queue at
	// the top named as the team (Team.queue).
	Teams []Team
	Prune bool
	// Groups declares cluster groups (created or updated; with Prune,
	// those not named are removed). A declared cluster's Group must be
	// one of them or one that exists; empty takes it out of its group.
	Groups []ClusterGroup
	// Autoscaler replaces the autoscaler's settings (nil: kept).
	Autoscaler *Autoscaler
	// LaunchConfigs are created or replaced (with Prune, those not named
	// are removed; their live machines are then deleted by the leader).
	// A config's cluster must be declared here or exist.
	LaunchConfigs []LaunchConfig
	// Queues are declared whole: with Prune, the tree is exactly these;
	// without, they are set over the queues there are.
	Queues []Queue
}

func (*SetCluster) Type() CommandType     { return CmdSetCluster }
func (*ApplyPlacement) Type() CommandType { return CmdApplyPlacementQueues }

// SetClusterResult counts what a disable with evacuation preempted.
type SetClusterResult struct {
	Preempted int
	Changed   bool
}

// checkPlaceName applies the rule of region, cluster, pool, queue and GPU type
// names (placement.ValidateName: the API checks with it first; a log
// entry is checked again).
func checkPlaceName(kind, name string) *ApplyError {
	if err := placement.ValidateName(kind, name); err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	return nil
}

func (s *placeBook) applySetCluster(c *SetCluster) any {
	cl := s.clusters[c.Name]
	if cl == nil {
		if !c.Create {
			return errorf(ErrNotFound, "cluster %q does not exist", c.Name)
		}
		if err := checkPlaceName("cluster", c.Name); err != nil {
			return err
		}
		region := c.Region
		if region == "" {
			region = DefaultRegion
		}
		if err := checkPlaceName("region", region); err != nil {
			return err
		}
		cl = &Cluster{Name: c.Name, Region: region, Created: c.Now, Since: c.Now}
		s.clusters[c.Name] = cl
	} else if c.Region != "" && c.Region != cl.Region {
		return errorf(ErrConflict, "cluster %q is in region %q, not %q", c.Name, cl.Region, c.Region)
	}
	res := &SetClusterResult{}
	if cl.Disabled != c.Disabled || c.Reason != "" {
		res.Changed = cl.Disabled != c.Disabled
		cl.Disabled = c.Disabled
		cl.Reason, cl.By, cl.Since = c.Reason, c.By, c.Now
	}
	if c.Disabled && c.Evacuate {
		res.Preempted = s.evacuate(cl, c.Now)
	}
	s.notifyWork()
	return res
}

func sortedAttempts(m map[attemptKey]struct{}) []attemptKey {
	keys := make([]attemptKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].batch != keys[j].batch {
			return keys[i].batch < keys[j].batch
		}
		return keys[i].job < keys[j].job
	})
	return keys
}

// validStrategy checks a team's or a group's strategy ("": the default).
func validStrategy(whose, strategy string) *ApplyError {
	switch strategy {
	case "", "spread", "least-loaded", "pack", "cheapest":
		return nil
	}
	return errorf(ErrInvalid, "%s: unknown placement strategy %.70q (spread, least-loaded, pack or cheapest)", whose, strategy)
}

// ValidateGroup checks a cluster group as apply will, so the API refuses
// it before it reaches the log.
func ValidateGroup(g *ClusterGroup) error {
	if err := validateGroup(g); err != nil {
		return err
	}
	return nil
}

func validateGroup(g *ClusterGroup) *ApplyError {
	if err := checkPlaceName("cluster group", g.Name); err != nil {
		return err
	}
	return validStrategy("cluster group "+g.Name, g.Strategy)
}

func (s *placeBook) applyApplyPlacement(c *ApplyPlacement) any {
	groups := map[string]bool{}
	for i := range c.Groups {
		g := &c.Groups[i]
		if err := validateGroup(g); err != nil {
			return err
		}
		if groups[g.Name] {
			return errorf(ErrInvalid, "cluster group %s is declared twice", g.Name)
		}
		groups[g.Name] = true
	}
	// The groups there will be once this applies.
	exists := func(name string) bool { return groups[name] || (!c.Prune && s.groups[name] != nil) }
	declared := map[string]bool{}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		declared[cl.Name] = true
		if cl.Group != "" && !exists(cl.Group) {
			return errorf(ErrInvalid, "cluster %s: cluster group %q is not declared", cl.Name, cl.Group)
		}
		if err := validateProvider(cl); err != nil {
			return err
		}
	}
	if c.Autoscaler != nil {
		if err := validateAutoscaler(c.Autoscaler); err != nil {
			return err
		}
	}
	configs := map[string]bool{}
	for i := range c.LaunchConfigs {
		lc := &c.LaunchConfigs[i]
		if err := validateLaunchConfig(lc); err != nil {
			return err
		}
		if configs[lc.Name] {
			return errorf(ErrInvalid, "launch config %s is declared twice", lc.Name)
		}
		configs[lc.Name] = true
		if !declared[lc.Cluster] && s.clusters[lc.Cluster] == nil {
			return errorf(ErrInvalid, "launch config %s: cluster %q is not declared", lc.Name, lc.Cluster)
		}
	}
	for _, name := range sortedKeys(s.clusters) {
		if g := s.clusters[name].Group; g != "" && !declared[name] && !exists(g) {
			return errorf(ErrConflict, "cluster %s is in cluster group %s, which the config removes; declare the cluster without it", name, g)
		}
	}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		if err := checkPlaceName("cluster", cl.Name); err != nil {
			return err
		}
		if err := checkPlaceName("region", cl.Region); err != nil {
			return err
		}
		if old := s.clusters[cl.Name]; old != nil && old.Region != cl.Region {
			return errorf(ErrConflict, "cluster %q is in region %q, not %q", cl.Name, old.Region, cl.Region)
		}
		for _, p := range cl.Pools {
			if err := checkPlaceName("pool", p.Name); err != nil {
				return err
			}
			// Apply refuses only a negative price, as it did when prices
			// were floats: an entry of that time with a pool priced past
			// MaxPricePerHour (the API bounds it now, ValidatePrice)
			// applies on replay as it did then.
			if p.CPUMilli < 0 || p.Memory < 0 || p.PricePerHour < 0 {
				return errorf(ErrInvalid, "pool %s/%s: sizes and price must not be negative", cl.Name, p.Name)
			}
		}
	}
	declaredQueues := slices.Clone(c.Queues)
	for i := range c.Teams {
		declaredQueues = append(declaredQueues, c.Teams[i].queue())
	}
	nextQueues := map[string]*Queue{}
	if !c.Prune {
		nextQueues = maps.Clone(s.queues)
	}
	names := map[string]bool{}
	for i := range declaredQueues {
		q := &declaredQueues[i]
		if err := validateQueue(q); err != nil {
			return err
		}
		if names[q.Path] {
			return errorf(ErrInvalid, "queue %s is declared twice", q.Path)
		}
		names[q.Path] = true
		nextQueues[q.Path] = q
	}
	if err := s.checkTree(nextQueues); err != nil {
		return err
	}
	// A config that takes the cloud's price keeps the one read for the
	// same machine: applying the placement again does not undo it.
	incoming := slices.Clone(c.LaunchConfigs)
	for i := range incoming {
		if old := s.launchConfigs[incoming[i].Name]; old != nil && old.PriceAt > 0 && incoming[i].sameMachine(old) {
			incoming[i].PricePerHour, incoming[i].PriceAt = old.PricePerHour, old.PriceAt
		}
	}
	// The rates the configs give, checked before anything changes.
	derived := s.machineRates(incoming)
	if err := s.checkRates(derived, c.Now); err != nil {
		return errorf(ErrInvalid, "the launch configs' rates: %s", err.Msg)
	}
	for _, decl := range c.Clusters {
		cl := s.clusters[decl.Name]
		if cl == nil {
			cl = &Cluster{Name: decl.Name, Region: decl.Region, Created: c.Now, Since: c.Now}
			s.clusters[decl.Name] = cl
		}
		cl.Declared = true
		cl.Group = decl.Group
		cl.Provider, cl.ProviderSettings = decl.Provider, decl.ProviderSettings
		cl.Pools = slices.Clone(decl.Pools)
		slices.SortFunc(cl.Pools, func(a, b Pool) int { return strings.Compare(a.Name, b.Name) })
	}
	if c.Prune {
		for path := range s.queues {
			if !names[path] {
				delete(s.queues, path)
			}
		}
		for name := range s.groups {
			if !groups[name] {
				delete(s.groups, name)
			}
		}
	}
	if c.Autoscaler != nil {
		s.autoscaler = *c.Autoscaler
	}
	if c.Prune {
		for name := range s.launchConfigs {
			if !configs[name] {
				delete(s.launchConfigs, name)
			}
		}
	}
	s.addRates(derived, c.Now)
	for _, lc := range incoming {
		s.launchConfigs[lc.Name] = &lc
	}
	for _, g := range c.Groups {
		if old := s.groups[g.Name]; old != nil {
			g.Created = old.Created
		} else {
			g.Created = c.Now
		}
		s.groups[g.Name] = &g
	}
	for i := range declaredQueues {
		q := declaredQueues[i]
		s.putQueue(&q, s.queues[q.Path], c.Now)
	}
	s.recomputeQueueUse()
	s.notifyWork()
	return nil
}

// Constraint is the spec's placement constraint as placement reads it
// (its regions the spec's: read-only):
// a GPU type only when the job needs GPUs.
func (sp *Spec) Constraint() placement.Constraint {
	w := sp.Where
	if w == nil {
		return placement.Constraint{}
	}
	k := placement.Constraint{Regions: w.Regions, Pool: w.Pool, Labels: w.Labels, JobClusters: w.Clusters, NoSpot: w.NoSpot}
	if w.GPUs > 0 {
		k.GPUType = w.GPUType
	}
	return k
}

// placeable reports whether a job of spec (of batch b) may run on inst at
// all: placement's rule (the instance's cluster is enabled, in the job's
// regions and clusters and among its queue's home clusters, its pool the
// one the job asks for, its labels those the job asks for) and the
// instance has GPUs of the job's type, enough of them.
func (s *placeBook) placeable(b *Batch, sp *Spec, inst *Instance) bool {
	k := s.constraint(b, sp)
	cl := placement.Cluster{Name: inst.Cluster, Region: inst.Region}
	if c := s.clusters[inst.Cluster]; c != nil {
		cl.Disabled = c.Disabled
	}
	_, gpus := sp.GPUs()
	return k.Admits(&cl, inst.Pool, inst.Labels, s.spot(inst)) == 0 && k.HoldsGPUs(gpus, inst.GPUType, inst.GPUs)
}

// spot reports whether an instance runs on a spot machine: the launch
// config of the autoscaler's machine it runs on is spot, or its cluster
// declares its pool preemptible.
func (s *placeBook) spot(inst *Instance) bool {
	if cfg := s.launchConfigs[inst.Config]; inst.Config != "" && cfg != nil && cfg.Spot {
		return true
	}
	if c := s.clusters[inst.Cluster]; c != nil {
		for _, p := range c.Pools {
			if p.Name == inst.Pool {
				return p.Preemptible
			}
		}
	}
	return false
}

// ensureCluster records the cluster a worker activates into. A cluster
// that exists in another region is a conflict.
func (s *placeBook) ensureCluster(name, region string, now int64) *ApplyError {
	if err := checkPlaceName("cluster", name); err != nil {
		return err
	}
	if err := checkPlaceName("region", region); err != nil {
		return err
	}
	cl := s.clusters[name]
	if cl == nil {
		s.clusters[name] = &Cluster{Name: name, Region: region, Created: now, Since: now}
		return nil
	}
	if cl.Region != region {
		return errorf(ErrConflict, "cluster %q is in region %q, not %q", name, cl.Region, region)
	}
	return nil
}

// ClusterInfo is a cluster as a read returns it, with its workers' totals.
type ClusterInfo struct {
	Cluster
	Workers       int // active
	CapacityMilli int64
	FreeMilli     int64
	Memory        int64
	FreeMemory    int64
	Running       int
}

// Clusters lists every cluster by name with its active workers' totals.
func (s *placeBook) Clusters() (out []ClusterInfo) {
	s.Read(func(r Reader) { out = r.ClusterRecords() })
	return
}

// ClusterRecords is Clusters within a consistent read.
func (r Reader) ClusterRecords() []ClusterInfo {
	s := r.s
	byName := map[string]*ClusterInfo{}
	for _, name := range sortedKeys(s.clusters) {
		cl := *s.clusters[name]
		cl.Pools = slices.Clone(cl.Pools)
		byName[name] = &ClusterInfo{Cluster: cl}
	}
	for _, id := range s.instByIdentity { // the active instances, not the retired
		inst := s.instances[id]
		ci := byName[inst.Cluster]
		if ci == nil || !inst.Active {
			continue
		}
		ci.Workers++
		ci.CapacityMilli += inst.CPUMilli
		ci.FreeMilli += inst.FreeMilli
		ci.Memory += inst.Memory
		ci.FreeMemory += inst.FreeMem
		ci.Running += len(inst.running)
	}
	out := make([]ClusterInfo, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		out = append(out, *byName[name])
	}
	return out
}

// ClusterGroupInfo is a cluster group with its clusters.
type ClusterGroupInfo struct {
	ClusterGroup
	Clusters []string // by name
}

// ClusterGroups lists every cluster group by name.
func (s *placeBook) ClusterGroups() []ClusterGroupInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ClusterGroupInfo, 0, len(s.groups))
	for _, name := range sortedKeys(s.groups) {
		gi := ClusterGroupInfo{ClusterGroup: *s.groups[name]}
		for _, cn := range sortedKeys(s.clusters) {
			if s.clusters[cn].Group == name {
				gi.Clusters = append(gi.Clusters, cn)
			}
		}
		out = append(out, gi)
	}
	return out
}

// WaitingParent is a parent range of a Pending job with unfinished jobs.
type WaitingParent struct {
	Range      Range
	Unfinished uint32
}

// What a RemoveDeclared removes.
const (
	KindCluster      = "cluster"
	KindClusterGroup = "cluster-group"
	KindLaunchConfig = "launch-config"
)

// RemoveDeclared removes one declared cluster, cluster group or launch
// config (what a placement config with Prune removes of groups and
// configs, one at a time; the only way a cluster goes). It is refused
// while something still depends on the object: a cluster with active
// workers, live autoscaler machines, a launch config or a queue routed to
// it; a group with clusters in it. A removed launch config's live
// machines are deleted by the leader, as when a config prunes it. A
// removed cluster that retired workers name keeps its record, undeclared
// (as a cluster a worker named), so their history still reads.
type RemoveDeclared struct {
	Now  int64
	Kind string
	Name string
}

func (*RemoveDeclared) Type() CommandType { return CmdRemoveDeclared }

func (s *placeBook) applyRemoveDeclared(c *RemoveDeclared) any {
	switch c.Kind {
	case KindLaunchConfig:
		if s.launchConfigs[c.Name] == nil {
			return errorf(ErrNotFound, "launch config %q does not exist", c.Name)
		}
		delete(s.launchConfigs, c.Name)
		s.notifyWork()
		return nil
	case KindClusterGroup:
		if s.groups[c.Name] == nil {
			return errorf(ErrNotFound, "cluster group %q does not exist", c.Name)
		}
		for _, name := range sortedKeys(s.clusters) {
			if s.clusters[name].Group == c.Name {
				return errorf(ErrConflict, "cluster %s is in cluster group %s; declare it in another group or none first", name, c.Name)
			}
		}
		delete(s.groups, c.Name)
		return nil
	case KindCluster:
		if err := s.removeCluster(c.Name); err != nil {
			return err
		}
		return nil
	}
	return errorf(ErrInvalid, "cannot remove a %.40q: a cluster, cluster-group or launch-config", c.Kind)
}

func (s *placeBook) removeCluster(name string) *ApplyError {
	cl := s.clusters[name]
	if cl == nil || !cl.Declared {
		return errorf(ErrNotFound, "cluster %q is not declared", name)
	}
	for _, lc := range sortedKeys(s.launchConfigs) {
		if s.launchConfigs[lc].Cluster == name {
			return errorf(ErrConflict, "launch config %s makes machines in cluster %s; remove it first", lc, name)
		}
	}
	for _, id := range sortedKeys(s.machines) {
		if m := s.machines[id]; m.Cluster == name && m.State != MachineDeleted && m.State != MachineFailed {
			return errorf(ErrConflict, "cluster %s still has the autoscaler's machine %s (%s); wait until it is deleted", name, id, MachineStateName(m.State))
		}
	}
	active, named := 0, false
	for _, in := range s.instances {
		if in.Cluster == name {
			named = true
			if in.Active {
				active++
			}
		}
	}
	if active > 0 {
		return errorf(ErrConflict, "cluster %s has %d active workers; disable it with evacuate and stop them first", name, active)
	}
	for _, path := range sortedKeys(s.queues) {
		if slices.Contains(s.queues[path].HomeClusters, name) {
			return errorf(ErrConflict, "queue %s is routed to cluster %s; route it elsewhere first", path, name)
		}
	}
	if !named {
		delete(s.clusters, name)
		return nil
	}
	cl.Declared, cl.Group, cl.Pools, cl.Provider, cl.ProviderSettings = false, "", nil, "", nil
	return nil
}

// configAdmits reports whether a job of spec may run on a machine of the
// config: its size, and placement's rule for its regions, pool and GPUs.
func (s *placeBook) configAdmits(cfg *LaunchConfig, b *Batch, sp *Spec) bool {
	if sp.CPUMilli > cfg.CPUMilli || sp.Memory > cfg.Memory {
		return false
	}
	region := ""
	if cl := s.clusters[cfg.Cluster]; cl != nil {
		region = cl.Region
	}
	k := s.constraint(b, sp)
	_, gpus := sp.GPUs()
	return k.Serves(cfg.Cluster, region, cfg.Pool, cfg.GPUType, cfg.GPUs, gpus, cfg.Spot)
}
