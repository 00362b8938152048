package httpapi

import (
	"cmp"
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// Regions, clusters, teams and quotas: reads for every user, changes for
// admins. A cluster's enabled state changes through Raft like everything
// else, so from the commit of a disable no new attempt goes there.

// placementHandlers serve where work runs: regions, clusters and cluster
// groups, queues and their recommendations and SLOs, the placement config
// and the autoscaler's status.
type placementHandlers struct{ *Server }

// clusters lists the clusters with their workers' health as this server
// hears it (the leader, for consistent reads).
func (s *placementHandlers) clusters() []api.Cluster {
	var insts []state.InstanceInfo
	var cls []state.ClusterInfo
	s.state.Read(func(r state.Reader) { insts, cls = r.InstanceRecords(), r.ClusterRecords() })
	heard := map[string]int{}
	now := time.Now()
	for _, in := range insts {
		if !in.Active {
			continue
		}
		if t, ok := s.live.Heard(in.ID); ok && now.Sub(t) < min(s.cfg.ClusterDownAfter, s.cfg.LostTimeout) {
			heard[in.Cluster]++
		}
	}
	out := []api.Cluster{}
	for _, c := range cls {
		ac := apiview.Cluster(&c)
		ac.Heard = heard[c.Name]
		ac.Down = ac.Workers > 0 && ac.Heard == 0
		out = append(out, ac)
	}
	return out
}

func (s *placementHandlers) handleListClusters(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.clusters(), nil
}

func (s *placementHandlers) cluster(name string) (api.Cluster, bool) {
	for _, c := range s.clusters() {
		if c.Name == name {
			return c, true
		}
	}
	return api.Cluster{}, false
}

func (s *placementHandlers) handleGetCluster(w http.ResponseWriter, r *http.Request) (any, error) {
	c, ok := s.cluster(r.PathValue("name"))
	if !ok {
		return nil, codedf(http.StatusNotFound, "cluster %q does not exist; drover cluster list shows the clusters", r.PathValue("name"))
	}
	return c, nil
}

func (s *placementHandlers) handleListClusterGroups(w http.ResponseWriter, r *http.Request) (any, error) {
	return apiview.ClusterGroups(s.state.ClusterGroups()), nil
}

func (s *placementHandlers) handleListRegions(w http.ResponseWriter, r *http.Request) (any, error) {
	return apiview.Regions(s.state.Clusters()), nil
}

func (s *placementHandlers) setClusterState(w http.ResponseWriter, r *http.Request, disabled bool) (any, error) {
	var req api.ClusterStateRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if len(req.Reason) > api.MaxEventMessage {
		return nil, codedf(http.StatusBadRequest, "reason is %d bytes; the limit is %d", len(req.Reason), api.MaxEventMessage)
	}
	if req.Evacuate && !disabled {
		return nil, coded(http.StatusBadRequest, "evacuate goes with disable, not enable")
	}
	name := r.PathValue("name")
	res, err := s.apply(&state.SetCluster{Now: time.Now().UnixNano(), Name: name, Disabled: disabled,
		Reason: req.Reason, By: userOf(r).Name, Evacuate: req.Evacuate})
	if err != nil {
		return nil, err
	}
	sr := res.(*state.SetClusterResult)
	c, _ := s.cluster(name)
	verb := "enabled"
	if disabled {
		verb = "disabled"
	}
	s.log.Info("cluster "+verb, "cluster", name, "by", userOf(r).Name, "reason", req.Reason, "preempted", sr.Preempted)
	return api.ClusterStateResponse{Cluster: c, Preempted: sr.Preempted}, nil
}

func (s *placementHandlers) handleDisableCluster(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.setClusterState(w, r, true)
}

func (s *placementHandlers) handleEnableCluster(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.setClusterState(w, r, false)
}

// removeDeclared removes one declared cluster, cluster group or launch
// config by name (refused, 409, while something depends on it).
func (s *placementHandlers) removeDeclared(kind string) func(w http.ResponseWriter, r *http.Request) (any, error) {
	return func(w http.ResponseWriter, r *http.Request) (any, error) {
		name := r.PathValue("name")
		if err := api.ValidatePlaceName(strings.ReplaceAll(kind, "-", " "), name); err != nil {
			return nil, codedf(http.StatusNotFound, "%v", err)
		}
		if _, err := s.apply(&state.RemoveDeclared{Now: time.Now().UnixNano(), Kind: kind, Name: name}); err != nil {
			return nil, err
		}
		s.log.Info(kind+" removed", "name", name, "by", userOf(r).Name)
		return map[string]string{"removed": name}, nil
	}
}

// handleListQueues lists the queues with what they use and what waits in
// them, of one read.
func (s *placementHandlers) handleListQueues(w http.ResponseWriter, r *http.Request) (any, error) {
	out := []api.Queue{}
	for _, q := range view.Queues(s.state, time.Now().UnixNano()) {
		out = append(out, apiview.QueueWaiting(&q.QueueInfo, q.Waiting, q.WaitingJobs, q.PastCoreHours))
	}
	return out, nil
}

func (s *placementHandlers) handleGetQueue(w http.ResponseWriter, r *http.Request) (any, error) {
	path := r.PathValue("path")
	for _, q := range view.Queues(s.state, time.Now().UnixNano()) {
		if q.Path == path {
			return apiview.QueueWaiting(&q.QueueInfo, q.Waiting, q.WaitingJobs, q.PastCoreHours), nil
		}
	}
	return nil, codedf(http.StatusNotFound, "queue %q does not exist; drover queue tree shows the queues", path)
}

func (s *placementHandlers) handlePutQueue(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.Queue
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	req.Path = r.PathValue("path")
	q, err := apiview.QueueFromAPI(req)
	if err != nil {
		return nil, badRequest(err)
	}
	if _, err := s.apply(&state.SetQueue{Now: time.Now().UnixNano(), Queue: q}); err != nil {
		return nil, err
	}
	out, _ := s.state.QueueByPath(q.Path)
	return apiview.Queue(&out), nil
}

// handleRecommendQueues runs Monarch's percentile algorithm
// (placement.Recommend) over the usage the history store recorded in the
// last days, for every queue of the tree.
func (s *placementHandlers) handleRecommendQueues(w http.ResponseWriter, r *http.Request) (any, error) {
	days, percentile := 30, 95.0
	if v := r.URL.Query().Get("days"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil || d < 1 || d > 365 {
			return nil, codedf(http.StatusBadRequest, "days %.20q must be a whole number of days between 1 and 365", v)
		}
		days = d
	}
	if v := r.URL.Query().Get("percentile"); v != "" {
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || p <= 0 || p > 100 || math.IsNaN(p) {
			return nil, codedf(http.StatusBadRequest, "percentile %.20q must be more than 0 and at most 100 (e.g. 95)", v)
		}
		percentile = p
	}
	st, err := s.historyStore("queue usage")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	usage, err := st.QueueUsage(r.Context(), now.Add(-time.Duration(days)*24*time.Hour).Unix(), now.Unix()+1)
	if err != nil {
		return nil, codedf(http.StatusServiceUnavailable, "queue usage: %v", err)
	}
	samples := map[string][]placement.UsageSample{}
	for _, u := range usage {
		samples[u.Queue] = append(samples[u.Queue], placement.UsageSample{Seconds: u.Seconds, CPUMilli: u.CPUMilli, Jobs: u.Jobs})
	}
	infos := s.state.Queues()
	list := make([]placement.Queue, len(infos))
	byPath := map[string]*state.QueueInfo{}
	for i := range infos {
		list[i] = infos[i].Queue.Queue
		byPath[infos[i].Path] = &infos[i]
	}
	tree, err := placement.NewQueueTree(list)
	if err != nil {
		return nil, codedf(http.StatusInternalServerError, "the queue tree: %v", err)
	}
	recs := placement.Recommend(tree, samples, int64(math.Round(percentile*10)))
	return apiview.Recommendations(days, percentile, recs, byPath), nil
}

// handleQueueSLO reports, per queue and per tier, the SLO success ratio
// of the batches the history store holds from the last days (Monarch's:
// runs meeting their SLO over runs) and the usage/capacity ratio (core-
// hours used over the guarantee's core-hours in the window).
func (s *placementHandlers) handleQueueSLO(w http.ResponseWriter, r *http.Request) (any, error) {
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil || d < 1 || d > 365 {
			return nil, codedf(http.StatusBadRequest, "days %.20q must be a whole number of days between 1 and 365", v)
		}
		days = d
	}
	st, err := s.historyStore("queue SLOs")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	from := now.Add(-time.Duration(days) * 24 * time.Hour)
	byQueue := map[string]*api.QueueSLO{}
	at := func(q string) *api.QueueSLO {
		if byQueue[q] == nil {
			byQueue[q] = &api.QueueSLO{Queue: q}
		}
		return byQueue[q]
	}
	var lastID uint64
	for pages := 0; ; pages++ {
		page, err := st.ListBatches(r.Context(), api.BatchQuery{}, nil, lastID)
		if err != nil {
			return nil, codedf(http.StatusServiceUnavailable, "queue SLOs: %v", err)
		}
		older := false
		for _, b := range page.Batches {
			if b.TimeCreated.Before(from) {
				older = true
				continue
			}
			if b.SLOMet != nil && b.Queue != "" {
				q := at(b.Queue)
				q.Runs++
				if *b.SLOMet {
					q.Met++
				}
			}
		}
		if older || page.LastID == 0 || pages >= 100_000 {
			break
		}
		lastID = uint64(page.LastID)
	}
	usage, err := st.QueueUsage(r.Context(), from.Unix(), now.Unix()+1)
	if err != nil {
		return nil, codedf(http.StatusServiceUnavailable, "queue usage: %v", err)
	}
	for _, u := range usage {
		at(u.Queue).CoreHours += float64(u.CPUMilli) / 1000 * float64(u.Seconds) / 3600
	}
	guarantee := map[string]int64{}
	leaf := map[string]bool{}
	for _, q := range s.state.Queues() {
		guarantee[q.Path], leaf[q.Path] = q.Guarantee.CPUMilli, q.Leaf
		at(q.Path)
	}
	hours := float64(days) * 24
	out := api.QueueSLOReport{Days: days, Queues: []api.QueueSLO{}, Tiers: []api.QueueSLO{}}
	tiers := map[string]*api.QueueSLO{}
	for _, path := range slices.Sorted(maps.Keys(byQueue)) {
		q := byQueue[path]
		if q.Runs > 0 {
			q.SuccessRatio = float64(q.Met) / float64(q.Runs)
		}
		if g := guarantee[path]; g > 0 {
			q.UsageCapacity = q.CoreHours / (float64(g) / 1000 * hours)
		}
		out.Queues = append(out.Queues, *q)
		if !leaf[path] {
			continue // tiers are leaves
		}
		tier := path[strings.LastIndex(path, "/")+1:]
		if tiers[tier] == nil {
			tiers[tier] = &api.QueueSLO{Queue: tier}
		}
		t := tiers[tier]
		t.Runs, t.Met, t.CoreHours = t.Runs+q.Runs, t.Met+q.Met, t.CoreHours+q.CoreHours
		t.UsageCapacity += float64(guarantee[path]) / 1000 * hours // capacity, for now
	}
	for _, name := range slices.Sorted(maps.Keys(tiers)) {
		t := tiers[name]
		if t.Runs > 0 {
			t.SuccessRatio = float64(t.Met) / float64(t.Runs)
		}
		if capacity := t.UsageCapacity; capacity > 0 {
			t.UsageCapacity = t.CoreHours / capacity
		}
		out.Tiers = append(out.Tiers, *t)
	}
	return out, nil
}

func (s *placementHandlers) handleDeleteQueue(w http.ResponseWriter, r *http.Request) (any, error) {
	path := r.PathValue("path")
	if err := placement.ValidateQueuePath(path); err != nil {
		return nil, badRequest(err)
	}
	if _, err := s.apply(&state.SetQueue{Now: time.Now().UnixNano(), Queue: state.Queue{Queue: placement.Queue{Path: path}}, Delete: true}); err != nil {
		return nil, err
	}
	return nil, nil
}

func (s *placementHandlers) handleApplyPlacement(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.PlacementConfig
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	c, err := apiview.PlacementFromAPI(&req)
	if err != nil {
		return nil, badRequest(err)
	}
	if err := s.checkProviders(r.Context(), &req); err != nil {
		return nil, err
	}
	c.Now = time.Now().UnixNano()
	if _, err := s.apply(c); err != nil {
		return nil, err
	}
	s.log.Info("placement config applied", "by", userOf(r).Name, "clusters", len(c.Clusters), "queues", len(c.Queues), "cluster_groups", len(c.Groups))
	return map[string]int{"clusters": len(c.Clusters), "queues": len(c.Queues), "cluster_groups": len(c.Groups)}, nil
}

// ProviderInfo is what placement apply can learn of a cluster's
// provider.
type ProviderInfo struct {
	// Known: a provider makes the cluster's machines (none: nothing is
	// checked).
	Known bool
	// Zones it launches in (nil: it cannot list them).
	Zones []string
	// Prices: it reads the cloud's prices (price_from_cloud).
	Prices bool
	// Capacity: it holds launch configs to their capacity (the local
	// provider; provider.CapacityHolder).
	Capacity bool
}

// checkProviders refuses a launch config its cluster's provider cannot
// serve as declared: a zone the provider does not have (a typo would
// otherwise be found only at the first launch, as a failure),
// price_from_cloud where the provider cannot read prices (the config
// would never be launched), or a capacity where the provider does not
// hold configs to one (a cloud's capacity is the cloud's: the setting
// would do nothing). A provider that cannot be asked (unreachable)
// refuses nothing: the launch says so later.
func (s *placementHandlers) checkProviders(ctx context.Context, req *api.PlacementConfig) error {
	if s.provider == nil {
		return nil
	}
	decls := map[string]api.ClusterDecl{}
	for _, cl := range s.state.Clusters() {
		decls[cl.Name] = api.ClusterDecl{Name: cl.Name, Provider: cl.Provider, ProviderSettings: cl.ProviderSettings}
	}
	for _, d := range req.Clusters {
		decls[d.Name] = d
	}
	infoOf := map[string]ProviderInfo{}
	for _, lc := range req.LaunchConfigs {
		if lc.Zone == "" && !lc.PriceFromCloud && lc.Capacity == 0 {
			continue
		}
		info, seen := infoOf[lc.Cluster]
		if !seen {
			d := decls[lc.Cluster]
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			got, err := s.provider(pctx, lc.Cluster, d.Provider, d.ProviderSettings)
			cancel()
			if err != nil {
				s.log.Warn("could not ask a cluster's provider to check a launch config", "cluster", lc.Cluster, "err", err)
				got = ProviderInfo{}
			}
			infoOf[lc.Cluster], info = got, got
		}
		if lc.Zone != "" && info.Zones != nil && !slices.Contains(info.Zones, lc.Zone) {
			return codedf(http.StatusBadRequest, "launch config %s: zone %q does not exist where cluster %s launches; its zones are %s",
				lc.Name, lc.Zone, lc.Cluster, strings.Join(info.Zones, ", "))
		}
		if lc.PriceFromCloud && info.Known && !info.Prices {
			kind := cmp.Or(decls[lc.Cluster].Provider, "the servers' default")
			return codedf(http.StatusBadRequest, "launch config %s: price_from_cloud, but cluster %s's provider (%s) cannot read the cloud's prices; give a price_per_hour instead",
				lc.Name, lc.Cluster, kind)
		}
		if lc.Capacity > 0 && info.Known && !info.Capacity {
			kind := cmp.Or(decls[lc.Cluster].Provider, "the servers' default")
			return codedf(http.StatusBadRequest, "launch config %s: capacity = %d, but cluster %s's provider (%s) has a capacity of its own that drover cannot set; "+
				"only the local provider (the dev agent's) takes one: leave capacity out",
				lc.Name, lc.Capacity, lc.Cluster, kind)
		}
	}
	return nil
}
