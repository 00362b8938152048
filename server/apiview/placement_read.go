package apiview

import (
	"slices"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// ClusterGroups are the state's cluster groups as the API lists them.
func ClusterGroups(groups []state.ClusterGroupInfo) []api.ClusterGroup {
	out := []api.ClusterGroup{}
	for _, g := range groups {
		out = append(out, api.ClusterGroup{Name: g.Name, Strategy: g.Strategy, Clusters: g.Clusters})
	}
	return out
}

// Regions are the clusters summed by region, by name.
func Regions(clusters []state.ClusterInfo) []api.Region {
	byName := map[string]*api.Region{}
	var names []string
	for _, c := range clusters {
		reg := byName[c.Region]
		if reg == nil {
			reg = &api.Region{Name: c.Region}
			byName[c.Region] = reg
			names = append(names, c.Region)
		}
		reg.Clusters = append(reg.Clusters, c.Name)
		if !c.Disabled {
			reg.Enabled++
		}
		reg.Workers += c.Workers
		reg.CPU += float64(c.CapacityMilli) / 1000
		reg.FreeCPU += float64(c.FreeMilli) / 1000
	}
	slices.Sort(names)
	out := []api.Region{}
	for _, n := range names {
		out = append(out, *byName[n])
	}
	return out
}

// Recommendations are Monarch's recommended settings of each queue beside
// its current ones, and the tree as it would be with them (byPath: the
// queues as the state holds them).
func Recommendations(days int, percentile float64, recs []placement.Recommendation, byPath map[string]*state.QueueInfo) api.QueueRecommendations {
	out := api.QueueRecommendations{Days: days, Percentile: percentile, Queues: []api.QueueRecommendation{}, Tree: []api.Queue{}}
	for _, rec := range recs {
		q := byPath[rec.Path]
		a := rec.Allocation
		out.Queues = append(out.Queues, api.QueueRecommendation{Path: rec.Path,
			HoursInUse: float64(a.SecondsInUse) / 3600, HoursCovered: float64(a.SecondsCovered) / 3600,
			PeakCPU: float64(a.PeakMilli) / 1000, PeakJobs: a.PeakJobs,
			Guarantee: float64(rec.GuaranteeMilli) / 1000, CurrentGuarantee: float64(q.Guarantee.CPUMilli) / 1000,
			Weight: rec.Weight, CurrentWeight: q.EffectiveWeight(),
			MaxRunningJobs: rec.MaxRunningJobs, CurrentMaxRunningJobs: q.Limits.MaxRunningJobs})
		aq := Queue(q)
		aq.Guarantee.CPU, aq.Weight, aq.MaxRunning.Jobs = float64(rec.GuaranteeMilli)/1000, rec.Weight, rec.MaxRunningJobs
		aq.Leaf, aq.Used, aq.UsedJobs, aq.UsedByCluster, aq.Cap = false, api.Quota{}, 0, nil, nil
		out.Tree = append(out.Tree, aq)
	}
	return out
}
