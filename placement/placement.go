// Package placement decides where a job group may run across regions and
// clusters: which clusters its constraints and its team's quota allow, in
// what order the team's strategy prefers them, and, when it can run
// nowhere, why. It is pure: it reads values the caller copied from the
// replicated state and returns decisions. The state machine keeps the
// accounting (quota in use, cluster state); the scheduler asks placement
// before it bin-packs inside a cluster.
package placement

import (
	"cmp"
	"fmt"
	"slices"
)

// Strategy orders the clusters a team's jobs go to.
type Strategy string

// Strategies. Spread balances each team's use across the enabled clusters
// (Aurora's Placement API), so losing one cluster costs every team a share
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

// DefaultStrategy applies to a team that names none.
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
	// PricePerCoreHour is the cheapest price of a core among its pools
	// (0: unknown, ranks as free for the cheapest strategy).
	PricePerCoreHour float64
}

// Constraint narrows where a job group may run. The zero value allows
// every enabled cluster and every pool.
type Constraint struct {
	Regions []string // allowed regions (none: any)
	Pool    string   // required pool name (empty: any)
	GPUType string   // the job's GPUs are of this type (empty: it needs none)
}

// Empty reports whether the constraint allows everything.
func (k *Constraint) Empty() bool { return len(k.Regions) == 0 && k.Pool == "" && k.GPUType == "" }

// Reason says why a cluster, a worker or a team's quota rules a job out.
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
	// ReasonQuotaCPU: the team has used its cpu quota.
	ReasonQuotaCPU
	// ReasonQuotaMemory: the team has used its memory quota.
	ReasonQuotaMemory
	// ReasonQuotaGPU: the team has used its quota of the job's GPU type.
	ReasonQuotaGPU
)

var reasonNames = map[Reason]string{
	ReasonRegion:      "region_not_allowed",
	ReasonPool:        "pool_mismatch",
	ReasonDisabled:    "cluster_disabled",
	ReasonDown:        "cluster_down",
	ReasonQuotaCPU:    "quota_cpu",
	ReasonQuotaMemory: "quota_memory",
	ReasonQuotaGPU:    "quota_gpu",
}

// String is the reason's code, as metrics label it.
func (r Reason) String() string {
	if n, ok := reasonNames[r]; ok {
		return n
	}
	return fmt.Sprintf("placement_reason(%d)", uint8(r))
}

// Admits returns 0 when a job under constraint k may run on a worker of
// pool in cluster c, or the first reason it may not. Constraints are
// checked before the cluster's state, so a job that could never run there
// is told so rather than that the cluster is disabled.
func (k *Constraint) Admits(c *Cluster, pool string) Reason {
	if len(k.Regions) > 0 && !slices.Contains(k.Regions, c.Region) {
		return ReasonRegion
	}
	if k.Pool != "" && k.Pool != pool {
		return ReasonPool
	}
	return c.Available()
}

// AdmitsCluster is Admits for any pool of the cluster.
func (k *Constraint) AdmitsCluster(c *Cluster) Reason {
	if len(k.Regions) > 0 && !slices.Contains(k.Regions, c.Region) {
		return ReasonRegion
	}
	return c.Available()
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

// Quota is a team's limit and what it uses now. A zero limit means none.
type Quota struct {
	CPUMilli      int64
	Memory        int64
	UsedMilli     int64
	UsedMemory    int64
	UsedByCluster []int64 // millicores in use per cluster (index as in the round's clusters)
	// GPUs bounds GPUs per type (a type not named: no limit).
	GPUs     map[string]int64
	UsedGPUs map[string]int64
}

// Room returns how many more jobs of a size the quota admits (limit: no
// bound) and, at zero, which limit stops them.
func (q *Quota) Room(cpu, mem int64, limit int64) (int64, Reason) {
	return q.RoomGPU(cpu, mem, "", 0, limit)
}

// RoomGPU is Room for jobs that also need gpus GPUs of gpuType each.
func (q *Quota) RoomGPU(cpu, mem int64, gpuType string, gpus int64, limit int64) (int64, Reason) {
	n := limit
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

// Order returns the clusters (indices into clusters) that allowed[i]
// marks, best first for the strategy. Ties break by name, so the order is
// the same on every leader. quota may be nil (a user in no team: spread
// then balances the clusters' own load).
func Order(s Strategy, clusters []Cluster, allowed []bool, quota *Quota, dst []int) []int {
	dst = dst[:0]
	for i := range clusters {
		if allowed[i] {
			dst = append(dst, i)
		}
	}
	if len(dst) < 2 {
		return dst
	}
	slices.SortStableFunc(dst, func(a, b int) int { return compare(s, clusters, quota, a, b) })
	return dst
}

// Best returns the first cluster Order would return, or -1, without
// sorting: the scheduler tries it before it asks for the whole order.
func Best(s Strategy, clusters []Cluster, allowed []bool, quota *Quota) int {
	best := -1
	for i := range clusters {
		if allowed[i] && (best < 0 || compare(s, clusters, quota, i, best) < 0) {
			best = i
		}
	}
	return best
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

// used is the team's cores in a cluster, or, for no team, the cluster's
// reserved cores.
func used(clusters []Cluster, quota *Quota, i int) int64 {
	if quota != nil && i < len(quota.UsedByCluster) {
		return quota.UsedByCluster[i]
	}
	return clusters[i].CapacityMilli - clusters[i].FreeMilli
}

// busy compares the fraction of cores reserved without dividing:
// (cap_a - free_a) / cap_a vs (cap_b - free_b) / cap_b.
func busy(clusters []Cluster, a, b int) int {
	ca, cb := &clusters[a], &clusters[b]
	if ca.CapacityMilli == 0 || cb.CapacityMilli == 0 {
		return cmp.Compare(cb.CapacityMilli, ca.CapacityMilli)
	}
	return cmp.Compare(float64(ca.CapacityMilli-ca.FreeMilli)*float64(cb.CapacityMilli),
		float64(cb.CapacityMilli-cb.FreeMilli)*float64(ca.CapacityMilli))
}
