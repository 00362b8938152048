package placement

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// Usage against capacity by cluster, after Monarch's reports: what each
// tier's queues used of each cluster over a window, in instance-hours,
// vcore-hours and memory-hours, against the cluster's capacity, judged by
// the dominant resource (the one whose usage/capacity is the larger); and
// the moves that rebalance clusters (Monarch's cross-cluster routing): a
// leaf queue's work from a cluster above a high mark to one below a low
// mark, where it fits.

// ClusterSample is what a leaf queue held in a cluster over Seconds, or
// with no Queue the cluster's capacity (Instances: its active workers).
type ClusterSample struct {
	Cluster, Queue   string
	Seconds          int64
	CPUMilli, Memory int64
	Instances        int64
}

// Hours is an amount of each resource over time.
type Hours struct {
	Instance, Vcore, MemoryGiB float64
}

// ClusterUse is what a tier (or a queue, or all the cluster's queues:
// Name "") used of a cluster: its hours, and its usage/capacity by the
// dominant resource (Dominant: "vcore" or "memory"). Instance-hours are
// the dominant share of the cluster's instance-hours.
type ClusterUse struct {
	Name     string
	Used     Hours
	Ratio    float64
	Dominant string
}

// ClusterReport is one cluster's capacity and use over the window.
type ClusterReport struct {
	Cluster  string
	Capacity Hours
	All      ClusterUse
	Tiers    []ClusterUse
	Queues   []ClusterUse
}

// ReportByCluster adds up samples by cluster, tier and leaf queue. The
// order of the samples does not matter; clusters, tiers and queues come
// by name.
func ReportByCluster(samples []ClusterSample) []ClusterReport {
	type acc struct {
		capInst, capMilli, capMem float64 // × seconds
		used                      map[string]*[2]float64
		queues                    map[string]*[2]float64
	}
	byCluster := map[string]*acc{}
	for _, s := range samples {
		a := byCluster[s.Cluster]
		if a == nil {
			a = &acc{used: map[string]*[2]float64{}, queues: map[string]*[2]float64{}}
			byCluster[s.Cluster] = a
		}
		sec := float64(s.Seconds)
		if s.Queue == "" {
			a.capInst += float64(s.Instances) * sec
			a.capMilli += float64(s.CPUMilli) * sec
			a.capMem += float64(s.Memory) * sec
			continue
		}
		for _, key := range []string{"", TierOf(s.Queue)} {
			u := a.used[key]
			if u == nil {
				u = &[2]float64{}
				a.used[key] = u
			}
			u[0] += float64(s.CPUMilli) * sec
			u[1] += float64(s.Memory) * sec
		}
		q := a.queues[s.Queue]
		if q == nil {
			q = &[2]float64{}
			a.queues[s.Queue] = q
		}
		q[0] += float64(s.CPUMilli) * sec
		q[1] += float64(s.Memory) * sec
	}
	const gib = 1 << 30
	out := []ClusterReport{}
	for _, name := range slices.Sorted(maps.Keys(byCluster)) {
		a := byCluster[name]
		r := ClusterReport{Cluster: name, Capacity: Hours{Instance: a.capInst / 3600, Vcore: a.capMilli / 1000 / 3600, MemoryGiB: a.capMem / gib / 3600}}
		use := func(n string, u *[2]float64) ClusterUse {
			cu := ClusterUse{Name: n, Used: Hours{Vcore: u[0] / 1000 / 3600, MemoryGiB: u[1] / gib / 3600}, Dominant: "vcore"}
			var vr, mr float64
			if a.capMilli > 0 {
				vr = u[0] / a.capMilli
			}
			if a.capMem > 0 {
				mr = u[1] / a.capMem
			}
			cu.Ratio = vr
			if mr > vr {
				cu.Ratio, cu.Dominant = mr, "memory"
			}
			cu.Used.Instance = cu.Ratio * r.Capacity.Instance
			return cu
		}
		if u := a.used[""]; u != nil {
			r.All = use("", u)
		}
		for _, t := range slices.SortedFunc(maps.Keys(a.used), compareTiers) {
			if t != "" {
				r.Tiers = append(r.Tiers, use(t, a.used[t]))
			}
		}
		for _, q := range slices.Sorted(maps.Keys(a.queues)) {
			r.Queues = append(r.Queues, use(q, a.queues[q]))
		}
		out = append(out, r)
	}
	return out
}

// Move is one proposed move of a leaf queue's work to another cluster: its
// home clusters become To (Monarch's cross-cluster routing), and why.
type Move struct {
	Queue    string
	From, To string
	// Share is the queue's usage/capacity in From; FromRatio and ToRatio
	// the clusters' before the move, FromAfter and ToAfter after it (the
	// queue's use counted in To as its share of To's capacity).
	Share, FromRatio, ToRatio, FromAfter, ToAfter float64
	HomeClusters                                  []string
	Reason                                        string
}

// Rebalance proposes moves from clusters above high (usage/capacity by
// the dominant resource) to clusters below low, largest queue first
// (lowest tier first among equals: a tier-3 queue moves before a tier-1
// one), each only where the target stays at or below low after it, and
// at most max moves. home gives the home clusters now (nil: any) of each
// leaf queue that may move (a queue it does not name stays); a queue
// routed to several clusters moves only its From. The answer is the same
// whatever the order of the reports.
func Rebalance(reports []ClusterReport, home map[string][]string, high, low float64, max int) []Move {
	ratio := map[string]float64{}
	capa := map[string]Hours{}
	for _, r := range reports {
		ratio[r.Cluster], capa[r.Cluster] = r.All.Ratio, r.Capacity
	}
	type cand struct {
		queue, from string
		use         ClusterUse
	}
	var cands []cand
	for _, r := range reports {
		if r.All.Ratio <= high {
			continue
		}
		for _, q := range r.Queues {
			if _, ok := home[q.Name]; ok {
				cands = append(cands, cand{q.Name, r.Cluster, q})
			}
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		return cmp.Or(cmp.Compare(b.use.Ratio, a.use.Ratio), -compareTiers(TierOf(a.queue), TierOf(b.queue)), cmp.Compare(a.queue, b.queue), cmp.Compare(a.from, b.from))
	})
	var out []Move
	moved := map[string]bool{}
	for _, c := range cands {
		if len(out) >= max || moved[c.queue] || ratio[c.from] <= high {
			continue
		}
		// Its use as a share of each target's capacity.
		var best string
		var bestAfter float64
		for _, to := range slices.Sorted(maps.Keys(ratio)) {
			if to == c.from || capa[to].Instance <= 0 || ratio[to] >= low {
				continue
			}
			share := c.use.Used.Instance / capa[to].Instance
			if after := ratio[to] + share; after <= low && (best == "" || after < bestAfter) {
				best, bestAfter = to, after
			}
		}
		if best == "" {
			continue
		}
		m := Move{Queue: c.queue, From: c.from, To: best, Share: c.use.Ratio, FromRatio: ratio[c.from], ToRatio: ratio[best],
			FromAfter: ratio[c.from] - c.use.Ratio, ToAfter: bestAfter}
		hs := slices.DeleteFunc(slices.Clone(home[c.queue]), func(h string) bool { return h == c.from || h == best })
		m.HomeClusters = append(hs, best)
		slices.Sort(m.HomeClusters)
		m.Reason = fmt.Sprintf("%s is at %.0f%% of its capacity (%s), above %.0f%%; %s used %.0f%% of it; %s is at %.0f%%, %.0f%% with it, within %.0f%%",
			c.from, m.FromRatio*100, c.use.Dominant, high*100, c.queue, m.Share*100, best, m.ToRatio*100, m.ToAfter*100, low*100)
		ratio[c.from], ratio[best] = m.FromAfter, m.ToAfter
		moved[c.queue] = true
		out = append(out, m)
	}
	return out
}
