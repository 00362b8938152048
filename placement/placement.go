// Package placement decides where a job group may run across regions and
// clusters: which clusters its constraints and its queue's quota allow, in
// what order the queue's strategy prefers them, and, when it can run
// nowhere, why. It is pure: it reads values the caller copied from the
// replicated state and returns decisions. The state machine keeps the
// accounting (quota in use, cluster state); the scheduler asks placement
// before it bin-packs inside a cluster, and apply re-checks every plan with
// the same functions (Constraint.Admits and its parts, PathRoom), so a
// rule of where a job may go or how much a queue may hold is written once.
package placement

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
)

// Strategy orders the clusters a queue's jobs go to.
type Strategy string

// Strategies. Spread balances each queue's use across the enabled clusters
// (Aurora's Placement API), so losing one cluster costs every queue a share
// of its running work instead of all of it; least-loaded prefers the
// cluster with the largest fraction of its cores free; pack the one with
// the smallest (so whole clusters drain and scale down); cheapest the one
// whose cores cost least.
const (
	Spread      Strategy = "spread"
	LeastLoaded Strategy = "least-loaded"
	Pack        Strategy = "pack"
	Cheapest    Strategy = "cheapest"
)

// DefaultStrategy applies to a queue that names none.
const DefaultStrategy = Spread

// Strategies lists the strategies in the order the docs present them.
func Strategies() []Strategy { return []Strategy{Spread, LeastLoaded, Pack, Cheapest} }

// ParseStrategy maps a name to a strategy; "" is the default.
func ParseStrategy(name string) (Strategy, error) {
	if name == "" {
		return DefaultStrategy, nil
	}
	for _, s := range Strategies() {
		if string(s) == name {
			return s, nil
		}
	}
	return "", fmt.Errorf("unknown placement strategy %q (spread, least-loaded, pack or cheapest)", name)
}

// Cluster is a cluster as placement sees it in one round.
type Cluster struct {
	Name     string
	Region   string
	Disabled bool
	// Down: every worker of the cluster has gone silent (the leader's
	// liveness view); placement avoids it until one syncs again.
	Down bool
	// CapacityMilli and FreeMilli are summed over its active workers.
	CapacityMilli int64
	FreeMilli     int64
	// PricePerCoreHour is the cheapest price of a core among its pools,
	// rounded to the nano-dollar an hour (0: unknown, ranks as free for
	// the cheapest strategy): an integer, so every server ranks alike.
	PricePerCoreHour money.Rate
	// Group is 1 + the index of the cluster's group in the round's
	// groups (0: in none).
	Group int32
}

// Group is a set of clusters an operator declared together, with a
// strategy of its own: a queue's strategy chooses between groups (and
// clusters in none) as if each group were one cluster, and the group's
// strategy chooses between its clusters. A group of GPU clusters that
// packs, for instance, fills one cluster before the next, so the others
// can drain and scale down, while every queue still spreads its work over
// the CPU clusters.
type Group struct {
	Name     string
	Strategy Strategy // empty: the queue's
}

// Constraint narrows where a job group may run. The zero value allows
// every enabled cluster and every pool.
type Constraint struct {
	Regions []string // allowed regions (none: any)
	Pool    string   // required pool name (empty: any)
	GPUType string   // the job's GPUs are of this type (empty: it needs none)
	// Clusters are the only clusters its new attempts may use (none:
	// any): its queue's home clusters, where an operator routes the
	// queue (Monarch's cross-cluster routing), not the job's own say.
	Clusters []string
	// Labels the worker must carry, each "key=value", sorted (none: any
	// worker): what a Nomad job's ${meta.KEY} constraint asks.
	Labels []string
	// JobClusters are the clusters the job itself names, sorted (none:
	// any): a Nomad job's datacenters.
	JobClusters []string
	// NoSpot keeps new attempts off spot machines (a job whose attempts
	// spot reclaims took max_spot_attempts times).
	NoSpot bool
}

// Empty reports whether the constraint allows everything.
func (k *Constraint) Empty() bool {
	return len(k.Regions) == 0 && k.Pool == "" && k.GPUType == "" && len(k.Clusters) == 0 && len(k.Labels) == 0 && len(k.JobClusters) == 0 && !k.NoSpot
}

// Key is the constraint as one string, equal for equal constraints (its
// lists sorted) and only for them: each part is prefixed with its length,
// so no name or label value can make two constraints' keys alike.
func (k *Constraint) Key() string {
	var b []byte
	part := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	list := func(l []string) {
		b = strconv.AppendInt(b, int64(len(l)), 10)
		b = append(b, '[')
		for _, s := range l {
			part(s)
		}
	}
	part(k.Pool)
	part(k.GPUType)
	list(k.Regions)
	list(k.Clusters)
	list(k.Labels)
	list(k.JobClusters)
	if k.NoSpot {
		b = append(b, '!')
	}
	return string(b)
}

// Clone returns a copy of k that shares no slice with it.
func (k Constraint) Clone() Constraint {
	k.Regions, k.Clusters, k.Labels, k.JobClusters = slices.Clone(k.Regions), slices.Clone(k.Clusters), slices.Clone(k.Labels), slices.Clone(k.JobClusters)
	return k
}

// AllowsJobCluster reports whether the clusters the job names let it run
// in the cluster named (nil: any).
func (k *Constraint) AllowsJobCluster(name string) bool {
	return k == nil || len(k.JobClusters) == 0 || slices.Contains(k.JobClusters, name)
}

// AllowsLabels reports whether a worker carrying labels may take the job:
// it carries every label the constraint names, with its value (nil: any).
func (k *Constraint) AllowsLabels(labels map[string]string) bool {
	if k == nil {
		return true
	}
	for _, kv := range k.Labels {
		key, value, _ := strings.Cut(kv, "=")
		if v, ok := labels[key]; !ok || v != value {
			return false
		}
	}
	return true
}

// OffSpot reports whether the constraint keeps the job off spot machines
// (nil: it does not).
func (k *Constraint) OffSpot() bool { return k != nil && k.NoSpot }

// AllowsSpot reports whether a worker that is a spot machine (spot) may
// take the job (nil: any).
func (k *Constraint) AllowsSpot(spot bool) bool {
	return k == nil || !spot || !k.NoSpot
}

// AllowsCluster reports whether the constraint lets a new attempt go to
// the cluster named (nil: any).
func (k *Constraint) AllowsCluster(name string) bool {
	return k == nil || len(k.Clusters) == 0 || slices.Contains(k.Clusters, name)
}

// Reason says why a cluster, a worker or a queue's quota rules a job out.
// Values appear in metrics and explanations: append, never renumber.
type Reason uint8

// Reasons, in the order placement checks them.
const (
	// ReasonRegion: the cluster is outside the job's allowed regions.
	ReasonRegion Reason = iota + 1
	// ReasonPool: the worker is not in the pool the job asks for.
	ReasonPool
	// ReasonDisabled: an operator disabled the cluster.
	ReasonDisabled
	// ReasonDown: every worker of the cluster has gone silent.
	ReasonDown
	// ReasonQuotaCPU: the queue has used its cpu quota.
	ReasonQuotaCPU
	// ReasonQuotaMemory: the queue has used its memory quota.
	ReasonQuotaMemory
	// ReasonQuotaGPU: the queue has used its quota of the job's GPU type.
	ReasonQuotaGPU
	// ReasonMaxRunning: the queue runs its max_running jobs or cores.
	ReasonMaxRunning
	// ReasonNotHome: the cluster is not among the job's queue's home
	// clusters (where an operator routed the queue).
	ReasonNotHome
	// ReasonLabels: the worker lacks a label the job asks for, or has
	// another value for it.
	ReasonLabels
	// ReasonCluster: the cluster is not among those the job names.
	ReasonCluster
	// ReasonSpot: the worker is a spot machine, and spot reclaims took
	// the job's attempts max_spot_attempts times.
	ReasonSpot
)

var reasonNames = map[Reason]string{
	ReasonRegion:      "region_not_allowed",
	ReasonPool:        "pool_mismatch",
	ReasonDisabled:    "cluster_disabled",
	ReasonDown:        "cluster_down",
	ReasonQuotaCPU:    "quota_cpu",
	ReasonQuotaMemory: "quota_memory",
	ReasonQuotaGPU:    "quota_gpu",
	ReasonMaxRunning:  "max_running",
	ReasonNotHome:     "cluster_not_home",
	ReasonLabels:      "labels_mismatch",
	ReasonCluster:     "cluster_not_allowed",
	ReasonSpot:        "spot_excluded",
}

// String is the reason's code, as metrics label it.
func (r Reason) String() string {
	if n, ok := reasonNames[r]; ok {
		return n
	}
	return fmt.Sprintf("placement_reason(%d)", uint8(r))
}

// Admits returns 0 when a job under constraint k may run on a worker of
// pool, carrying labels, in cluster c (a spot machine when spot), or the
// first reason it may not.
// Constraints are checked before the cluster's state, so a job that could
// never run there is told so rather than that the cluster is disabled. It is the one rule
// of where a job may go: the scheduler, apply's re-check of a plan, the
// state's read of each constraint's reach and the autoscaler all call it
// (or, where they count each reason apart, the parts it is made of).
func (k *Constraint) Admits(c *Cluster, pool string, labels map[string]string, spot bool) Reason {
	if !k.AllowsRegion(c.Region) {
		return ReasonRegion
	}
	if !k.AllowsJobCluster(c.Name) {
		return ReasonCluster
	}
	if !k.AllowsCluster(c.Name) {
		return ReasonNotHome
	}
	if !k.AllowsPool(pool) {
		return ReasonPool
	}
	if !k.AllowsLabels(labels) {
		return ReasonLabels
	}
	if !k.AllowsSpot(spot) {
		return ReasonSpot
	}
	return c.Available()
}

// AdmitsCluster is Admits for any pool of the cluster.
func (k *Constraint) AdmitsCluster(c *Cluster) Reason {
	if !k.AllowsRegion(c.Region) {
		return ReasonRegion
	}
	if !k.AllowsJobCluster(c.Name) {
		return ReasonCluster
	}
	if !k.AllowsCluster(c.Name) {
		return ReasonNotHome
	}
	return c.Available()
}

// AllowsRegion reports whether the constraint lets a job run in region.
// A nil constraint allows every region, so callers holding an optional
// constraint need not test for it.
func (k *Constraint) AllowsRegion(region string) bool {
	return k == nil || len(k.Regions) == 0 || slices.Contains(k.Regions, region)
}

// AllowsPool reports whether the constraint lets a job run on a worker of
// pool (nil: any pool).
func (k *Constraint) AllowsPool(pool string) bool {
	return k == nil || k.Pool == "" || k.Pool == pool
}

// AllowsGPUType reports whether a worker whose GPUs are of gpuType may
// take the job: any worker when the job needs no GPUs (its constraint
// names no type), otherwise one with GPUs of the job's type. How many
// GPUs it has is HoldsGPUs' question.
func (k *Constraint) AllowsGPUType(gpuType string) bool {
	return k == nil || k.GPUType == "" || k.GPUType == gpuType
}

// HoldsGPUs reports whether a worker (or a machine) with gpus GPUs of
// gpuType is large enough for one job that needs need GPUs of the
// constraint's type: always when it needs none.
func (k *Constraint) HoldsGPUs(need int64, gpuType string, gpus int64) bool {
	if need <= 0 {
		return true
	}
	want := ""
	if k != nil {
		want = k.GPUType
	}
	return want == gpuType && gpus >= need
}

// Serves reports whether a worker or a machine in region, of pool, with
// gpus GPUs of gpuType (a spot machine when spot) can take a job under
// the constraint that needs
// need GPUs: Admits' constraint checks and HoldsGPUs, for the autoscaler's
// machines and launch configs, whose cluster's state it checks apart.
// The autoscaler's machines carry no labels: a job that asks for labels
// runs on the workers an operator labelled.
func (k *Constraint) Serves(cluster, region, pool, gpuType string, gpus, need int64, spot bool) bool {
	return k.AllowsRegion(region) && k.AllowsJobCluster(cluster) && k.AllowsCluster(cluster) && k.AllowsPool(pool) && k.AllowsLabels(nil) && k.AllowsSpot(spot) && k.HoldsGPUs(need, gpuType, gpus)
}

// Available returns 0 when new work may go to the cluster, or why not.
func (c *Cluster) Available() Reason {
	if c.Disabled {
		return ReasonDisabled
	}
	if c.Down {
		return ReasonDown
	}
	return 0
}

// Quota is a queue's hard limits and what its attempts hold now: its cap
// (guarantee and borrow_limit) and its max_running. A zero limit means
// none.
type Quota struct {
	CPUMilli      int64
	Memory        int64
	UsedMilli     int64
	UsedMemory    int64
	UsedByCluster []int64 // millicores in use per cluster (index as in the round's clusters)
	// GPUs bounds GPUs per type (a type not named: no limit).
	GPUs     map[string]int64
	UsedGPUs map[string]int64
	// MaxJobs and MaxMilli are the queue's max_running: attempts and
	// their cores (0: no cap). UsedJobs counts its running attempts.
	MaxJobs  int64
	MaxMilli int64
	UsedJobs int64
}

// RoomGPU returns how many more jobs of a size (cpu millicores, mem bytes,
// gpus GPUs of gpuType each) one queue's quota admits, up to limit, and at
// zero which of its limits stops them: the rule of one queue's quota,
// which PathRoom applies along a queue's path and Explain words. Limits are
// checked GPUs first, then cores, then memory; a size of zero is bounded
// by no limit, even one already passed (a quota lowered below its use).
func (q *Quota) RoomGPU(cpu, mem int64, gpuType string, gpus int64, limit int64) (int64, Reason) {
	n := limit
	if q.MaxJobs > 0 {
		n = min(n, max(q.MaxJobs-q.UsedJobs, 0))
		if n == 0 {
			return 0, ReasonMaxRunning
		}
	}
	if q.MaxMilli > 0 && cpu > 0 {
		n = min(n, max(q.MaxMilli-q.UsedMilli, 0)/cpu)
		if n == 0 {
			return 0, ReasonMaxRunning
		}
	}
	if gpus > 0 {
		if most, ok := q.GPUs[gpuType]; ok {
			n = min(n, max(most-q.UsedGPUs[gpuType], 0)/gpus)
			if n == 0 {
				return 0, ReasonQuotaGPU
			}
		}
	}
	if q.CPUMilli > 0 && cpu > 0 {
		n = min(n, max(q.CPUMilli-q.UsedMilli, 0)/cpu)
		if n == 0 {
			return 0, ReasonQuotaCPU
		}
	}
	if q.Memory > 0 && mem > 0 {
		n = min(n, max(q.Memory-q.UsedMemory, 0)/mem)
		if n == 0 {
			return 0, ReasonQuotaMemory
		}
	}
	return n, 0
}

// Size is what one job holds, as the quota rule reads it.
type Size struct {
	CPUMilli int64
	Memory   int64
	GPUType  string
	GPUs     int64
}

// Free is what a worker has free now.
type Free struct {
	CPUMilli int64
	Memory   int64
	GPUs     int64
}

// Fits is the rule of node fit: one job of a size fits a worker when each
// resource it needs is free there (the worker's GPU type is the
// constraint's rule, AllowsGPUType). Apply re-checks every placement with
// it; the scheduler's filter chain asks its parts one by one (FitsCPU,
// FitsMemory, FitsGPUs) to name what a busy worker lacks.
func (f Free) Fits(sz Size) bool { return f.FitsCPU(sz) && f.FitsMemory(sz) && f.FitsGPUs(sz) }

// FitsCPU: the job's cores are free.
func (f Free) FitsCPU(sz Size) bool { return f.CPUMilli >= sz.CPUMilli }

// FitsMemory: the job's memory is free.
func (f Free) FitsMemory(sz Size) bool { return f.Memory >= sz.Memory }

// FitsGPUs: the job's GPUs are free.
func (f Free) FitsGPUs(sz Size) bool { return f.GPUs >= sz.GPUs }

// PathRoom is the queue rule: how many of n jobs of a size a leaf queue's
// quota and the quota of every queue above it admit (path yields them leaf
// first, RoomGPU for each), and at zero which limit refuses and the depth
// along the path of the queue whose it is (0: the leaf). The scheduler
// bounds its placements with it, apply re-checks each placement with it,
// the leader's read models bound what they list and what the autoscaler
// launches for with it, and job why names the queue it returns.
func PathRoom(path iter.Seq[*Quota], sz Size, n int64) (int64, Reason, int) {
	depth := 0
	for q := range path {
		var why Reason
		if n, why = q.RoomGPU(sz.CPUMilli, sz.Memory, sz.GPUType, sz.GPUs, n); n == 0 {
			return 0, why, depth
		}
		depth++
	}
	return n, 0, -1
}

// PathCharge adds n jobs of a size to the use of every quota along path
// (n < 0 takes them back), as a placement holds them in the leaf and in
// every queue above it. Use per cluster is the caller's.
func PathCharge(path iter.Seq[*Quota], sz Size, n int64) {
	for q := range path {
		q.UsedMilli += n * sz.CPUMilli
		q.UsedMemory += n * sz.Memory
		q.UsedJobs += n
		if sz.GPUs > 0 {
			if q.UsedGPUs == nil {
				q.UsedGPUs = map[string]int64{}
			}
			q.UsedGPUs[sz.GPUType] += n * sz.GPUs
		}
	}
}

// Explain words a refusal of a queue's quota (a reason PathRoom or RoomGPU
// returned) for a person, with what the queue uses of the limit: "queue
// physics at its cpu quota (4 of 4 cores)". gpuType is the job's. The
// scheduling round's waiting reasons and job why both print it.
func (q *Quota) Explain(queue string, why Reason, gpuType string) string {
	switch why {
	case ReasonMaxRunning:
		if q.MaxJobs > 0 && q.UsedJobs >= q.MaxJobs {
			return fmt.Sprintf("queue %s at max_running (%d of %d jobs)", queue, q.UsedJobs, q.MaxJobs)
		}
		return fmt.Sprintf("queue %s at max_running (%g of %g cores)", queue, float64(q.UsedMilli)/1000, float64(q.MaxMilli)/1000)
	case ReasonQuotaGPU:
		return fmt.Sprintf("queue %s at its %s GPU quota (%d of %d)", queue, gpuType, q.UsedGPUs[gpuType], q.GPUs[gpuType])
	case ReasonQuotaMemory:
		return fmt.Sprintf("queue %s at its memory quota (%s of %s)", queue, units.FormatBytes(q.UsedMemory), units.FormatBytes(q.Memory))
	case ReasonQuotaCPU:
		return fmt.Sprintf("queue %s at its cpu quota (%g of %g cores)", queue, float64(q.UsedMilli)/1000, float64(q.CPUMilli)/1000)
	}
	return fmt.Sprintf("queue %s at its quota", queue)
}

// Order returns the clusters (indices into clusters) that allowed[i]
// marks, best first for the strategy, with no groups. Ties break by name,
// so the order is the same on every leader. quota may be nil (a user in
// no queue: spread then balances the clusters' own load).
func Order(s Strategy, clusters []Cluster, allowed []bool, quota *Quota, dst []int) []int {
	r := Ranker{Clusters: clusters}
	return r.Order(s, allowed, quota, dst)
}

// Best returns the first cluster Order would return, or -1, without
// sorting.
func Best(s Strategy, clusters []Cluster, allowed []bool, quota *Quota) int {
	r := Ranker{Clusters: clusters}
	return r.Best(s, allowed, quota)
}

// Ranker orders the clusters of a round for a queue's strategy and the
// groups' own. It keeps scratch space between calls, so one ranker serves
// one goroutine.
type Ranker struct {
	// Clusters as the round sees them now; the caller may change their
	// free cores between calls.
	Clusters []Cluster
	Groups   []Group
	units    []unit
}

// unit is a group, or a cluster in none, as the queue's strategy sees it:
// its allowed clusters summed.
type unit struct {
	name     string
	n        int64 // allowed clusters
	used     int64 // the queue's cores in them (the clusters' reserved cores, for no queue)
	capacity int64
	free     int64
	price    money.Rate // the cheapest of them
	best     int        // an allowed member
}

// Best returns the first cluster Order would return, or -1, without
// sorting: the scheduler tries it before it asks for the whole order.
func (r *Ranker) Best(s Strategy, allowed []bool, quota *Quota) int {
	if len(r.Groups) == 0 {
		best := -1
		for i := range r.Clusters {
			if allowed[i] && (best < 0 || compare(s, r.Clusters, quota, i, best) < 0) {
				best = i
			}
		}
		return best
	}
	r.sum(allowed, quota)
	bu := -1
	for u := range r.units {
		if r.units[u].n > 0 && (bu < 0 || compareUnits(s, &r.units[u], &r.units[bu]) < 0) {
			bu = u
		}
	}
	if bu < 0 {
		return -1
	}
	if bu >= len(r.Groups) {
		return r.units[bu].best
	}
	gs := r.groupStrategy(bu, s)
	best := -1
	for i := range r.Clusters {
		if allowed[i] && int(r.Clusters[i].Group) == bu+1 && (best < 0 || compare(gs, r.Clusters, quota, i, best) < 0) {
			best = i
		}
	}
	return best
}

// Order returns the allowed clusters best first: groups (and clusters in
// none) in the order of the queue's strategy s, and the clusters of each
// group in the order of the group's strategy. Ties break by name.
func (r *Ranker) Order(s Strategy, allowed []bool, quota *Quota, dst []int) []int {
	dst = dst[:0]
	for i := range r.Clusters {
		if allowed[i] {
			dst = append(dst, i)
		}
	}
	if len(dst) < 2 {
		return dst
	}
	if len(r.Groups) == 0 {
		slices.SortStableFunc(dst, func(a, b int) int { return compare(s, r.Clusters, quota, a, b) })
		return dst
	}
	r.sum(allowed, quota)
	unitOf := func(i int) int {
		if g := r.Clusters[i].Group; g > 0 && int(g) <= len(r.Groups) {
			return int(g) - 1
		}
		return len(r.Groups) + i
	}
	slices.SortStableFunc(dst, func(a, b int) int {
		ua, ub := unitOf(a), unitOf(b)
		if ua != ub {
			if c := compareUnits(s, &r.units[ua], &r.units[ub]); c != 0 {
				return c
			}
			return cmp.Compare(ua, ub)
		}
		return compare(r.groupStrategy(ua, s), r.Clusters, quota, a, b)
	})
	return dst
}

// groupStrategy is group g's strategy, or the queue's when it has none.
func (r *Ranker) groupStrategy(g int, queue Strategy) Strategy {
	if gs := r.Groups[g].Strategy; gs != "" {
		return gs
	}
	return queue
}

// sum fills r.units: one per group, then one per cluster (those in a
// group stay empty), over the allowed clusters.
func (r *Ranker) sum(allowed []bool, quota *Quota) {
	n := len(r.Groups) + len(r.Clusters)
	if cap(r.units) < n {
		r.units = make([]unit, n)
	}
	r.units = r.units[:n]
	clear(r.units)
	for g := range r.Groups {
		r.units[g].name = r.Groups[g].Name
	}
	for i := range r.Clusters {
		c := &r.Clusters[i]
		u := &r.units[len(r.Groups)+i]
		if g := c.Group; g > 0 && int(g) <= len(r.Groups) {
			u = &r.units[g-1]
		} else {
			u.name = c.Name
		}
		if !allowed[i] {
			continue
		}
		if u.n == 0 || c.PricePerCoreHour < u.price {
			u.price = c.PricePerCoreHour
		}
		u.n++
		u.used += used(r.Clusters, quota, i)
		u.capacity += c.CapacityMilli
		u.free += c.FreeMilli
		u.best = i
	}
}

// compareUnits orders two units for strategy s, as compare orders
// clusters; spread compares the queue's use per allowed cluster, so a
// group of three clusters takes three times a lone cluster's share.
func compareUnits(s Strategy, a, b *unit) int {
	var c int
	switch s {
	case LeastLoaded:
		c = busyFraction(a.capacity, a.free, b.capacity, b.free)
	case Pack:
		c = -busyFraction(a.capacity, a.free, b.capacity, b.free)
	case Cheapest:
		c = cmp.Compare(a.price, b.price)
	default: // Spread
		c = cmp.Compare(float64(a.used)*float64(b.n), float64(b.used)*float64(a.n))
		if c == 0 {
			c = -cmp.Compare(float64(a.free)*float64(b.n), float64(b.free)*float64(a.n))
		}
	}
	if c == 0 {
		c = cmp.Compare(a.name, b.name)
	}
	return c
}

// compare orders clusters a and b for strategy s.
func compare(s Strategy, clusters []Cluster, quota *Quota, a, b int) int {
	var c int
	switch s {
	case LeastLoaded:
		c = busy(clusters, a, b)
	case Pack:
		c = -busy(clusters, a, b)
	case Cheapest:
		c = cmp.Compare(clusters[a].PricePerCoreHour, clusters[b].PricePerCoreHour)
	default: // Spread
		c = cmp.Compare(used(clusters, quota, a), used(clusters, quota, b))
		if c == 0 {
			c = -cmp.Compare(clusters[a].FreeMilli, clusters[b].FreeMilli)
		}
	}
	if c == 0 {
		c = cmp.Compare(clusters[a].Name, clusters[b].Name)
	}
	return c
}

// used is the queue's cores in a cluster, or, for no queue, the cluster's
// reserved cores.
func used(clusters []Cluster, quota *Quota, i int) int64 {
	if quota != nil && i < len(quota.UsedByCluster) {
		return quota.UsedByCluster[i]
	}
	return clusters[i].CapacityMilli - clusters[i].FreeMilli
}

// busy compares the fraction of cores reserved of clusters a and b.
func busy(clusters []Cluster, a, b int) int {
	ca, cb := &clusters[a], &clusters[b]
	return busyFraction(ca.CapacityMilli, ca.FreeMilli, cb.CapacityMilli, cb.FreeMilli)
}

// busyFraction compares (capA - freeA) / capA with (capB - freeB) / capB
// without dividing; no capacity ranks last.
func busyFraction(capA, freeA, capB, freeB int64) int {
	if capA == 0 || capB == 0 {
		return cmp.Compare(capB, capA)
	}
	return cmp.Compare(float64(capA-freeA)*float64(capB), float64(capB-freeB)*float64(capA))
}

// PathRefuses is the queue rule for n jobs that start at once (a gang):
// whether the quotas along path (leaf first) admit all n, and if not,
// which limit of which queue (its depth along path) admits fewer: the
// first queue whose room (RoomGPU) is below n, and of its limits the one
// that alone admits fewer.
func PathRefuses(path iter.Seq[*Quota], sz Size, n int64) (Reason, int) {
	depth := 0
	for q := range path {
		if m, _ := q.RoomGPU(sz.CPUMilli, sz.Memory, sz.GPUType, sz.GPUs, n); m < n {
			return q.binding(sz, n), depth
		}
		depth++
	}
	return 0, -1
}

// binding is the limit of q that alone admits fewer than n jobs of a size.
func (q *Quota) binding(sz Size, n int64) Reason {
	for _, one := range []struct {
		q   Quota
		why Reason
	}{
		{Quota{MaxJobs: q.MaxJobs, UsedJobs: q.UsedJobs, MaxMilli: q.MaxMilli, UsedMilli: q.UsedMilli}, ReasonMaxRunning},
		{Quota{GPUs: q.GPUs, UsedGPUs: q.UsedGPUs}, ReasonQuotaGPU},
		{Quota{CPUMilli: q.CPUMilli, UsedMilli: q.UsedMilli}, ReasonQuotaCPU},
		{Quota{Memory: q.Memory, UsedMemory: q.UsedMemory}, ReasonQuotaMemory},
	} {
		if m, _ := one.q.RoomGPU(sz.CPUMilli, sz.Memory, sz.GPUType, sz.GPUs, n); m < n {
			return one.why
		}
	}
	return ReasonQuotaCPU
}
