package placement

import (
	"cmp"
	"fmt"
	"maps"
	"math"
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

// ClusterReport is one cluster's capacity and use over the window. Span
// is the time its capacity was recorded (seconds): its rates are its
// hours over it.
type ClusterReport struct {
	Cluster  string
	Capacity Hours
	Span     int64
	All      ClusterUse
	Tiers    []ClusterUse
	Queues   []ClusterUse
}

// ReportByCluster adds up samples by cluster, tier and leaf queue, in
// integers (millicore-seconds, MiB-seconds), so the order of the samples
// does not matter; clusters, tiers and queues come by name.
func ReportByCluster(samples []ClusterSample) []ClusterReport {
	type sums struct{ milli, mib int64 }
	type acc struct {
		span, inst int64 // seconds, instance-seconds
		capa       sums
		used       map[string]*sums
		queues     map[string]*sums
	}
	byCluster := map[string]*acc{}
	add := func(m map[string]*sums, k string, s *ClusterSample) {
		u := m[k]
		if u == nil {
			u = &sums{}
			m[k] = u
		}
		u.milli += s.CPUMilli * s.Seconds
		u.mib += s.Memory >> 20 * s.Seconds
	}
	for i := range samples {
		s := &samples[i]
		if s.Seconds <= 0 || s.CPUMilli < 0 || s.Memory < 0 || s.Instances < 0 {
			continue
		}
		a := byCluster[s.Cluster]
		if a == nil {
			a = &acc{used: map[string]*sums{}, queues: map[string]*sums{}}
			byCluster[s.Cluster] = a
		}
		if s.Queue == "" {
			a.span += s.Seconds
			a.inst += s.Instances * s.Seconds
			a.capa.milli += s.CPUMilli * s.Seconds
			a.capa.mib += s.Memory >> 20 * s.Seconds
			continue
		}
		add(a.used, "", s)
		add(a.used, TierOf(s.Queue), s)
		add(a.queues, s.Queue, s)
	}
	out := []ClusterReport{}
	for _, name := range slices.Sorted(maps.Keys(byCluster)) {
		a := byCluster[name]
		r := ClusterReport{Cluster: name, Span: a.span,
			Capacity: Hours{Instance: float64(a.inst) / 3600, Vcore: float64(a.capa.milli) / 1000 / 3600, MemoryGiB: float64(a.capa.mib) / 1024 / 3600}}
		use := func(n string, u *sums) ClusterUse {
			cu := ClusterUse{Name: n, Used: Hours{Vcore: float64(u.milli) / 1000 / 3600, MemoryGiB: float64(u.mib) / 1024 / 3600}, Dominant: "vcore"}
			var vr, mr float64
			if a.capa.milli > 0 {
				vr = float64(u.milli) / float64(a.capa.milli)
			}
			if a.capa.mib > 0 {
				mr = float64(u.mib) / float64(a.capa.mib)
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
// leaf queue that may move (a queue it does not name stays; one no longer
// routed to a cluster does not move from it); a queue routed to several
// clusters moves only its From. Only the clusters targets names receive
// work (nil: any). A queue's share of a target is its rate in From (its
// hours over From's span) against the target's capacity rate, by the
// dominant resource, so clusters of other sizes, or recorded for part of
// the window, compare as they run. The answer is the same whatever the
// order of the reports.
func Rebalance(reports []ClusterReport, home map[string][]string, targets map[string]bool, high, low float64, max int) []Move {
	ratio := map[string]float64{}
	capa := map[string]Hours{}
	span := map[string]float64{}
	for _, r := range reports {
		ratio[r.Cluster], capa[r.Cluster], span[r.Cluster] = r.All.Ratio, r.Capacity, float64(r.Span)
		// What a queue ran there before it was routed elsewhere is no
		// load the cluster still has.
		for _, q := range r.Queues {
			if h, ok := home[q.Name]; ok && h != nil && !slices.Contains(h, r.Cluster) {
				ratio[r.Cluster] -= q.Ratio
			}
		}
	}
	// share is a queue's use of from, at its rate there, as a share of
	// to's capacity rate (by the dominant resource).
	share := func(u ClusterUse, from, to string) float64 {
		c, sf, st := capa[to], span[from], span[to]
		if sf <= 0 || st <= 0 {
			return math.Inf(1)
		}
		var out float64
		for _, p := range [][2]float64{{u.Used.Vcore, c.Vcore}, {u.Used.MemoryGiB, c.MemoryGiB}} {
			if p[0] <= 0 {
				continue
			}
			if p[1] <= 0 {
				return math.Inf(1)
			}
			out = math.Max(out, (p[0]/sf)/(p[1]/st))
		}
		return out
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
			if h, ok := home[q.Name]; ok && (h == nil || slices.Contains(h, r.Cluster)) {
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
			if to == c.from || (targets != nil && !targets[to]) || capa[to].Instance <= 0 || ratio[to] >= low {
				continue
			}
			if after := ratio[to] + share(c.use, c.from, to); after <= low && (best == "" || after < bestAfter) {
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
