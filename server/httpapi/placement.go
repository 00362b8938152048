package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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

// usageDays reads the days of a report over the recorded queue usage:
// 1 to 365, and no more than the whole days of samples the server keeps
// (QueueUsageRetention), so that no window reaches back past what the
// leader deletes and reads a partial one as a quiet stretch; without
// days, 30 (or as many as it keeps, when fewer).
func (s *placementHandlers) usageDays(r *http.Request) (int, error) {
	most := s.maxUsageDays()
	v := r.URL.Query().Get("days")
	if v == "" {
		return min(30, most), nil
	}
	d, err := strconv.Atoi(v)
	if err != nil || d < 1 || d > 365 {
		return 0, codedf(http.StatusBadRequest, "days %.20q must be a whole number of days between 1 and 365", v)
	}
	if d > most {
		return 0, codedf(http.StatusBadRequest, "days %d reaches back past the %d days of queue usage this server keeps (server setting queue_usage_retention, %v): ask for %d or fewer",
			d, most, s.cfg.QueueUsageRetention, most)
	}
	return d, nil
}

// maxUsageDays is the longest window of queue usage a report may read:
// 365 days, or the whole days this server keeps when fewer.
func (s *placementHandlers) maxUsageDays() int {
	most := 365
	if keep := int(s.cfg.QueueUsageRetention / (24 * time.Hour)); s.cfg.QueueUsageRetention > 0 && keep < most {
		most = keep
	}
	return most
}

// handleRecommendQueues runs Monarch's percentile algorithm
// (placement.Recommend) over the usage the history store recorded in the
// last days, for every queue of the tree.
func (s *placementHandlers) handleRecommendQueues(w http.ResponseWriter, r *http.Request) (any, error) {
	days, err := s.usageDays(r)
	if err != nil {
		return nil, err
	}
	percentile := 95.0
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
	rec, err := apiview.Recommend(s.state.Queues(), usage, int64(days), int64(math.Round(percentile*10)))
	if err != nil {
		return nil, codedf(http.StatusInternalServerError, "%v", err)
	}
	return apiview.Recommendations(days, percentile, rec.Recs, rec.ByPath, rec.Checks), nil
}

// handleQueueSLO reports, per workflow, queue and tier, the SLO success
// of the runs that completed in the last days (Monarch's: runs meeting
// their SLO over runs; a workflow SLO-successful from a threshold; a tier
// by its share of SLO-successful workflows), from memory and the history
// store together, and each queue's usage/capacity ratio (core-hours used
// over its guarantee's core-hours in the window).
func (s *placementHandlers) handleQueueSLO(w http.ResponseWriter, r *http.Request) (any, error) {
	threshold := placement.DefaultSLOThreshold
	days, err := s.usageDays(r)
	if err != nil {
		return nil, err
	}
	if v := r.URL.Query().Get("threshold"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return nil, codedf(http.StatusBadRequest, "threshold %.20q must be a ratio more than 0 and at most 1 (e.g. 0.9: a workflow is SLO-successful when 90%% of its runs meet their SLO)", v)
		}
		threshold = f
	}
	st, err := s.historyStore("queue SLOs")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	from := now.Add(-time.Duration(days) * 24 * time.Hour)
	runs, more, err := apiview.SLORuns(r.Context(), s.state, st, from, now.Add(time.Second), api.MaxSLORuns)
	if err != nil {
		return nil, codedf(http.StatusServiceUnavailable, "queue SLOs: %v", err)
	}
	wr := make([]placement.WorkflowRun, len(runs))
	for i := range runs {
		wr[i] = runs[i].WorkflowRun
	}
	tally := placement.TallySLO(wr, threshold)
	usage, err := st.QueueUsage(r.Context(), from.Unix(), now.Unix()+1)
	if err != nil {
		return nil, codedf(http.StatusServiceUnavailable, "queue usage: %v", err)
	}
	return apiview.SLOReport(days, threshold, tally, more, usage, s.state.Queues(), s.state.VisibleProjects(viewerOf(r))), nil
}

// handleQueueHistory lists the versions kept of a tree's settings (tree
// absent: of every tree).
func (s *placementHandlers) handleQueueHistory(w http.ResponseWriter, r *http.Request) (any, error) {
	tree := r.URL.Query().Get("tree")
	if tree != "" {
		if err := placement.ValidateQueuePath(tree); err != nil {
			return nil, badRequest(err)
		}
	}
	var last int64
	s.state.Read(func(r state.Reader) { last = r.LastAutoApply(tree) })
	return apiview.QueueHistory(tree, last, s.state.QueueVersions(tree)), nil
}

// handleQueueAutoApply regenerates a tree's settings now, as its
// auto_apply schedule does (Regenerate).
func (s *placementHandlers) handleQueueAutoApply(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.QueueAutoApplyRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if err := placement.ValidateQueuePath(req.Tree); err != nil || strings.Contains(req.Tree, placement.QueueSep) {
		return nil, codedf(http.StatusBadRequest, "tree %.80q: name a top queue (drover queue tree shows them)", req.Tree)
	}
	st, err := s.historyStore("queue usage")
	if err != nil {
		return nil, err
	}
	cmd, err := apiview.Regenerate(r.Context(), s.state.Queues(), s.state.Clusters(), st, req.Tree, time.Now(), userOf(r).Name)
	switch {
	case errors.Is(err, apiview.ErrNoTree):
		return nil, codedf(http.StatusNotFound, "%v; drover queue tree shows the queues", err)
	case err != nil:
		return nil, codedf(http.StatusServiceUnavailable, "%v", err)
	}
	cmd.DryRun = cmd.DryRun || req.DryRun
	res, err := s.apply(cmd)
	if err != nil {
		return nil, err
	}
	v := res.(*state.AutoApplyResult).Version
	s.log.Info("queue settings regenerated", "tree", req.Tree, "by", userOf(r).Name, "version", v.Seq, "kind", v.Kind, "changes", len(v.After))
	return apiview.QueueVersion(&v), nil
}

// handleQueueReport reports each cluster's capacity and what each tier
// and leaf queue used of it over the last days (by=cluster).
func (s *placementHandlers) handleQueueReport(w http.ResponseWriter, r *http.Request) (any, error) {
	if by := r.URL.Query().Get("by"); by != "" && by != "cluster" {
		return nil, codedf(http.StatusBadRequest, "by %.20q: the report is by cluster (by=cluster)", by)
	}
	days, err := s.usageDays(r)
	if err != nil {
		return nil, err
	}
	reps, err := s.clusterReports(r.Context(), days)
	if err != nil {
		return nil, err
	}
	return apiview.QueueReport(days, reps), nil
}

func (s *placementHandlers) clusterReports(ctx context.Context, days int) ([]placement.ClusterReport, error) {
	st, err := s.historyStore("queue usage")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	usage, err := st.QueueUsage(ctx, now.Add(-time.Duration(days)*24*time.Hour).Unix(), now.Unix()+1)
	if err != nil {
		return nil, codedf(http.StatusServiceUnavailable, "queue usage: %v", err)
	}
	return placement.ReportByCluster(apiview.ClusterSamples(usage)), nil
}

// Rebalancing's defaults and bounds.
const (
	defaultRebalanceDays = 7
	defaultRebalanceHigh = 0.8
	defaultRebalanceLow  = 0.6
	defaultRebalanceMax  = 10
	maxRebalanceMoves    = 1000
)

// rebalance computes the moves of a rebalance request.
func (s *placementHandlers) rebalance(ctx context.Context, req api.QueueRebalanceRequest) (api.QueueRebalance, []placement.Move, error) {
	out := api.QueueRebalance{Days: cmp.Or(req.Days, defaultRebalanceDays), High: cmp.Or(req.High, defaultRebalanceHigh), Low: cmp.Or(req.Low, defaultRebalanceLow)}
	maxMoves := cmp.Or(req.MaxMoves, defaultRebalanceMax)
	most := s.maxUsageDays()
	switch {
	case out.Days < 1 || out.Days > most:
		return out, nil, codedf(http.StatusBadRequest, "days %d must be between 1 and %d (the days of queue usage this server keeps, server setting queue_usage_retention)", out.Days, most)
	case !(out.Low > 0 && out.Low < out.High && out.High <= 1):
		return out, nil, codedf(http.StatusBadRequest, "high %g and low %g: want 0 < low < high <= 1 (usage/capacity ratios, e.g. 0.8 and 0.6)", out.High, out.Low)
	case maxMoves < 1 || maxMoves > maxRebalanceMoves:
		return out, nil, codedf(http.StatusBadRequest, "max_moves %d must be between 1 and %d", maxMoves, maxRebalanceMoves)
	}
	reps, err := s.clusterReports(ctx, out.Days)
	if err != nil {
		return out, nil, err
	}
	home := apiview.LeafHomes(s.state.Queues())
	moves := placement.Rebalance(reps, home, apiview.Targets(s.state.Clusters()), out.High, out.Low, maxMoves)
	// Only leaves that still exist move (the window may name removed ones).
	moves = slices.DeleteFunc(moves, func(m placement.Move) bool { _, ok := home[m.Queue]; return !ok })
	out.Moves = apiview.QueueMoves(moves)
	return out, moves, nil
}

// handleProposeRebalance proposes the moves (Monarch's cross-cluster
// routing) that bring clusters above high usage/capacity down.
func (s *placementHandlers) handleProposeRebalance(w http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	var req api.QueueRebalanceRequest
	for _, f := range []struct {
		name string
		set  func(string) error
	}{
		{"days", func(v string) (err error) { req.Days, err = strconv.Atoi(v); return }},
		{"max_moves", func(v string) (err error) { req.MaxMoves, err = strconv.Atoi(v); return }},
		{"high", func(v string) (err error) { req.High, err = strconv.ParseFloat(v, 64); return }},
		{"low", func(v string) (err error) { req.Low, err = strconv.ParseFloat(v, 64); return }},
	} {
		if v := q.Get(f.name); v != "" {
			if err := f.set(v); err != nil {
				return nil, codedf(http.StatusBadRequest, "%s %.20q is not a number", f.name, v)
			}
		}
	}
	out, _, err := s.rebalance(r.Context(), req)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// handleApplyRebalance makes the moves a rebalance proposes now: every
// moved queue's home clusters, one AutoApplyQueues entry a tree (audited
// as the request it is, and a version of the tree).
func (s *placementHandlers) handleApplyRebalance(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.QueueRebalanceRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	out, moves, err := s.rebalance(r.Context(), req)
	if err != nil || len(moves) == 0 {
		return out, err
	}
	// One entry a tree, each move a change of the leaf's home clusters
	// from what they are now: a queue changed or removed since this read
	// is left as it is (the entry's Before), and each is a version the
	// tree keeps (drover queue history, rollback).
	byTree := map[string]*state.AutoApplyQueues{}
	now := time.Now().UnixNano()
	for _, m := range moves {
		q, ok := s.state.QueueByPath(m.Queue)
		if !ok {
			continue
		}
		tree, _, _ := strings.Cut(m.Queue, placement.QueueSep)
		cmd := byTree[tree]
		if cmd == nil {
			cmd = &state.AutoApplyQueues{Now: now, Tree: tree, By: userOf(r).Name, Rebalance: true}
			byTree[tree] = cmd
		}
		before := state.SettingOf(&q.Queue)
		after := before
		after.HomeClusters = m.HomeClusters
		cmd.Before, cmd.After = append(cmd.Before, before), append(cmd.After, after)
		cmd.Note = apiview.JoinNote(cmd.Note, fmt.Sprintf("moved %s from %s to %s: %s", m.Queue, m.From, m.To, m.Reason))
	}
	for _, tree := range slices.Sorted(maps.Keys(byTree)) {
		if _, err := s.apply(byTree[tree]); err != nil {
			return nil, err
		}
	}
	out.Applied = true
	for _, m := range moves {
		s.log.Info("queue moved to another cluster", "queue", m.Queue, "from", m.From, "to", m.To, "by", userOf(r).Name, "reason", m.Reason)
	}
	return out, nil
}

// handleQueueRollback puts back a tree's settings from before a version.
func (s *placementHandlers) handleQueueRollback(w http.ResponseWriter, r *http.Request) (any, error) {
	var req api.QueueRollbackRequest
	if err := decode(w, r, &req); err != nil {
		return nil, err
	}
	if err := placement.ValidateQueuePath(req.Tree); err != nil {
		return nil, badRequest(err)
	}
	res, err := s.apply(&state.RollbackQueues{Now: time.Now().UnixNano(), Tree: req.Tree, Seq: req.Version, By: userOf(r).Name})
	if err != nil {
		return nil, err
	}
	v := res.(*state.AutoApplyResult).Version
	s.log.Info("queue settings rolled back", "tree", req.Tree, "to_before", req.Version, "by", userOf(r).Name, "version", v.Seq)
	return apiview.QueueVersion(&v), nil
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
