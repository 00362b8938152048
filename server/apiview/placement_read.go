package apiview

import (
	"slices"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
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
func Recommendations(days int, percentile float64, recs []placement.Recommendation, byPath map[string]*state.QueueInfo, checks []placement.TierCheck) api.QueueRecommendations {
	out := api.QueueRecommendations{Days: days, Percentile: percentile, Queues: []api.QueueRecommendation{}, Tree: []api.Queue{}}
	for _, c := range checks {
		out.Checks = append(out.Checks, api.TierCheck{Check: c.Check, OK: c.OK, Detail: c.Detail})
	}
	for _, rec := range recs {
		q := byPath[rec.Path]
		a := rec.Allocation
		out.Queues = append(out.Queues, api.QueueRecommendation{Path: rec.Path,
			HoursInUse: float64(a.SecondsInUse) / 3600, HoursCovered: float64(a.SecondsCovered) / 3600,
			PeakCPU: float64(a.PeakMilli) / 1000, PeakJobs: a.PeakJobs,
			Guarantee: float64(rec.GuaranteeMilli) / 1000, CurrentGuarantee: float64(q.Guarantee.CPUMilli) / 1000,
			Weight: rec.Weight, CurrentWeight: q.EffectiveWeight(),
			MaxRunningJobs: rec.MaxRunningJobs, CurrentMaxRunningJobs: q.Limits.MaxRunningJobs,
			Percentile: float64(rec.Permille) / 1000, NoSamples: rec.NoSamples})
		aq := Queue(q)
		aq.Guarantee.CPU, aq.Weight, aq.MaxRunning.Jobs = float64(rec.GuaranteeMilli)/1000, rec.Weight, rec.MaxRunningJobs
		aq.Leaf, aq.Used, aq.UsedJobs, aq.UsedByCluster, aq.Cap = false, api.Quota{}, 0, nil, nil
		out.Tree = append(out.Tree, aq)
	}
	return out
}

// QueueHistory is the versions kept of a tree's settings as the API shows
// them.
func QueueHistory(tree string, last int64, versions []state.QueueVersion) api.QueueHistory {
	out := api.QueueHistory{Tree: tree, LastRun: timePtr(last), Versions: []api.QueueVersion{}}
	for _, v := range versions {
		out.Versions = append(out.Versions, QueueVersion(&v))
	}
	return out
}

// QueueVersion is one version of a tree's settings as the API shows it.
func QueueVersion(v *state.QueueVersion) api.QueueVersion {
	out := api.QueueVersion{Version: v.Seq, Tree: v.Tree, Time: unixTime(v.At), By: v.By, Kind: v.Kind, Applied: v.Applied, Note: v.Note,
		Changes: []api.QueueSettingChange{}}
	for i, a := range v.After {
		c := api.QueueSettingChange{Path: a.Path, Weight: a.Weight, Guarantee: float64(a.GuaranteeMilli) / 1000, MaxRunningJobs: a.MaxRunningJobs,
			HomeClusters: slices.Clone(a.HomeClusters)}
		if i < len(v.Before) {
			b := v.Before[i]
			c.WeightBefore, c.GuaranteeBefore, c.MaxRunningJobsBefore = b.Weight, float64(b.GuaranteeMilli)/1000, b.MaxRunningJobs
			c.HomeClustersBefore = slices.Clone(b.HomeClusters)
		}
		out.Changes = append(out.Changes, c)
	}
	return out
}

// ClusterSamples are the samples of one cluster (a leaf's use there, or
// its capacity) as placement's report reads them.
func ClusterSamples(usage []history.QueueSample) []placement.ClusterSample {
	var out []placement.ClusterSample
	for _, u := range usage {
		if !u.Whole() {
			out = append(out, placement.ClusterSample{Cluster: u.Cluster, Queue: u.Queue, Seconds: u.Seconds, CPUMilli: u.CPUMilli, Memory: u.Memory, Instances: u.Jobs})
		}
	}
	return out
}

// QueueReport is the report by cluster as the API shows it.
func QueueReport(days int, reps []placement.ClusterReport) api.QueueReport {
	out := api.QueueReport{Days: days, By: "cluster", Clusters: []api.ClusterUsage{}}
	hours := func(h placement.Hours) api.UsageHours {
		return api.UsageHours{InstanceHours: h.Instance, VcoreHours: h.Vcore, MemoryGiBHours: h.MemoryGiB}
	}
	use := func(u placement.ClusterUse) api.ClusterUse {
		return api.ClusterUse{Name: u.Name, Used: hours(u.Used), UsageCapacity: u.Ratio, Dominant: u.Dominant}
	}
	for _, r := range reps {
		cu := api.ClusterUsage{Cluster: r.Cluster, Capacity: hours(r.Capacity), All: use(r.All), Tiers: []api.ClusterUse{}, Queues: []api.ClusterUse{}}
		for _, t := range r.Tiers {
			cu.Tiers = append(cu.Tiers, use(t))
		}
		for _, q := range r.Queues {
			cu.Queues = append(cu.Queues, use(q))
		}
		out.Clusters = append(out.Clusters, cu)
	}
	return out
}

// QueueMoves are rebalancing moves as the API shows them.
func QueueMoves(moves []placement.Move) []api.QueueMove {
	out := []api.QueueMove{}
	for _, m := range moves {
		out = append(out, api.QueueMove{Queue: m.Queue, From: m.From, To: m.To, HomeClusters: m.HomeClusters, Share: m.Share,
			FromRatio: m.FromRatio, FromAfter: m.FromAfter, ToRatio: m.ToRatio, ToAfter: m.ToAfter, Reason: m.Reason})
	}
	return out
}
