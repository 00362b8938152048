package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// Regions, clusters, teams and quotas: reads for every user, changes for
// admins. A cluster's enabled state changes through Raft like everything
// else, so from the commit of a disable no new attempt goes there.

// clusters lists the clusters with their workers' health as this server
// hears it (the leader, for consistent reads).
func (s *Server) clusters() []api.Cluster {
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

func (s *Server) handleListClusters(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.clusters(), nil
}

func (s *Server) cluster(name string) (api.Cluster, bool) {
	for _, c := range s.clusters() {
		if c.Name == name {
			return c, true
		}
	}
	return api.Cluster{}, false
}

func (s *Server) handleGetCluster(w http.ResponseWriter, r *http.Request) (any, error) {
	c, ok := s.cluster(r.PathValue("name"))
	if !ok {
		return nil, codedf(http.StatusNotFound, "cluster %q does not exist; drover cluster list shows the clusters", r.PathValue("name"))
	}
	return c, nil
}

func (s *Server) handleListClusterGroups(w http.ResponseWriter, r *http.Request) (any, error) {
	out := []api.ClusterGroup{}
	for _, g := range s.state.ClusterGroups() {
		out = append(out, api.ClusterGroup{Name: g.Name, Strategy: g.Strategy, Clusters: g.Clusters})
	}
	return out, nil
}

func (s *Server) handleListRegions(w http.ResponseWriter, r *http.Request) (any, error) {
	byName := map[string]*api.Region{}
	var names []string
	for _, c := range s.state.Clusters() {
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
	return out, nil
}

func (s *Server) setClusterState(w http.ResponseWriter, r *http.Request, disabled bool) (any, error) {
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

func (s *Server) handleDisableCluster(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.setClusterState(w, r, true)
}

func (s *Server) handleEnableCluster(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.setClusterState(w, r, false)
}

// removeDeclared removes one declared cluster, cluster group or launch
// config by name (refused, 409, while something depends on it).
func (s *Server) removeDeclared(kind string) func(w http.ResponseWriter, r *http.Request) (any, error) {
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

func (s *Server) handleListQueues(w http.ResponseWriter, r *http.Request) (any, error) {
	out := []api.Queue{}
	for _, q := range s.state.Queues() {
		out = append(out, apiview.Queue(&q))
	}
	return out, nil
}

func (s *Server) handleGetQueue(w http.ResponseWriter, r *http.Request) (any, error) {
	q, ok := s.state.QueueByPath(r.PathValue("path"))
	if !ok {
		return nil, codedf(http.StatusNotFound, "queue %q does not exist; drover queue tree shows the queues", r.PathValue("path"))
	}
	return apiview.Queue(&q), nil
}

func (s *Server) handlePutQueue(w http.ResponseWriter, r *http.Request) (any, error) {
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
func (s *Server) handleRecommendQueues(w http.ResponseWriter, r *http.Request) (any, error) {
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
	out := api.QueueRecommendations{Days: days, Percentile: percentile, Queues: []api.QueueRecommendation{}, Tree: []api.Queue{}}
	for _, rec := range placement.Recommend(tree, samples, int64(math.Round(percentile*10))) {
		q := byPath[rec.Path]
		a := rec.Allocation
		out.Queues = append(out.Queues, api.QueueRecommendation{Path: rec.Path,
			HoursInUse: float64(a.SecondsInUse) / 3600, HoursCovered: float64(a.SecondsCovered) / 3600,
			PeakCPU: float64(a.PeakMilli) / 1000, PeakJobs: a.PeakJobs,
			Guarantee: float64(rec.GuaranteeMilli) / 1000, CurrentGuarantee: float64(q.Guarantee.CPUMilli) / 1000,
			Weight: rec.Weight, CurrentWeight: q.EffectiveWeight(),
			MaxRunningJobs: rec.MaxRunningJobs, CurrentMaxRunningJobs: q.Limits.MaxRunningJobs})
		aq := apiview.Queue(q)
		aq.Guarantee.CPU, aq.Weight, aq.MaxRunning.Jobs = float64(rec.GuaranteeMilli)/1000, rec.Weight, rec.MaxRunningJobs
		aq.Leaf, aq.Used, aq.UsedJobs, aq.UsedByCluster, aq.Cap = false, api.Quota{}, 0, nil, nil
		out.Tree = append(out.Tree, aq)
	}
	return out, nil
}

// handleQueueSLO reports, per queue and per tier, the SLO success ratio
// of the batches the history store holds from the last days (Monarch's:
// runs meeting their SLO over runs) and the usage/capacity ratio (core-
// hours used over the guarantee's core-hours in the window).
func (s *Server) handleQueueSLO(w http.ResponseWriter, r *http.Request) (any, error) {
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

func (s *Server) handleDeleteQueue(w http.ResponseWriter, r *http.Request) (any, error) {
	path := r.PathValue("path")
	if err := placement.ValidateQueuePath(path); err != nil {
		return nil, badRequest(err)
	}
	if _, err := s.apply(&state.SetQueue{Now: time.Now().UnixNano(), Queue: state.Queue{Queue: placement.Queue{Path: path}}, Delete: true}); err != nil {
		return nil, err
	}
	return nil, nil
}

func (s *Server) handleApplyPlacement(w http.ResponseWriter, r *http.Request) (any, error) {
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
}

// checkProviders refuses a launch config its cluster's provider cannot
// serve as declared: a zone the provider does not have (a typo would
// otherwise be found only at the first launch, as a failure), or
// price_from_cloud where the provider cannot read prices (the config
// would never be launched). A provider that cannot be asked
// (unreachable) refuses nothing: the launch says so later.
func (s *Server) checkProviders(ctx context.Context, req *api.PlacementConfig) error {
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
		if lc.Zone == "" && !lc.PriceFromCloud {
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
	}
	return nil
}

// handleJobWhy says why a job is where it is: the parents it waits for, the
// reason the leader's last scheduling round recorded for a Ready job, or
// where it runs.
func (s *Server) handleJobWhy(w http.ResponseWriter, r *http.Request) (any, error) {
	id, jid, err := s.visibleJob(r)
	if err != nil {
		return nil, err
	}
	var jp view.JobPlace
	var found bool
	s.state.Read(func(r state.Reader) { jp, found = view.Place(r, id, jid) })
	if !found {
		return nil, codedf(http.StatusNotFound, "batch %d has no job %d", id, jid)
	}
	out := api.JobWhy{BatchID: int64(id), JobID: int64(jid), State: jp.State.String()}
	add := func(reason, msg string) {
		out.Reasons = append(out.Reasons, api.WhyReason{Reason: reason, Message: msg})
	}
	switch jp.State {
	case state.Pending:
		for i, p := range jp.Parents {
			if i == 8 {
				add("parents", fmt.Sprintf("and %d more parent ranges not finished", len(jp.Parents)-i))
				break
			}
			if p.Range.Lo == p.Range.Hi {
				add("parents", fmt.Sprintf("parent %d not finished", p.Range.Lo))
			} else {
				add("parents", fmt.Sprintf("parents %d-%d not finished (%d of %d)", p.Range.Lo, p.Range.Hi, p.Unfinished, p.Range.Len()))
			}
		}
		if len(jp.Parents) == 0 {
			add("parents", "its parents are finishing")
		}
	case state.Ready:
		// The first queue on the way up whose quota refuses one more
		// job, as the round checks them.
		quota, quotaWhy, quotaOf := jp.QuotaRefusal()
		var wt *api.Waiting
		if s.waiting != nil && !isStale(r) {
			wt = s.waiting.Job(id, jid)
		}
		switch {
		case wt != nil:
			add(wt.Reason, wt.Message)
		case jp.Budget.Reached(time.Now().UnixNano()):
			// The round passes on one run of a project at its spend
			// limit: the others are told from the project's spend.
			add("spend_limit", billing.LimitReason(jp.BillingProject, jp.Budget.Limit, jp.Budget.Cost(time.Now().UnixNano())))
		case quotaWhy != 0:
			// The round passes on one run of those a team's quota blocks:
			// the others are told from the team's use, by the rule and
			// in the words the round uses.
			add(quotaWhy.String(), quota.Explain(quotaOf, quotaWhy, jp.GPUType))
		case jp.Usable == 0 && len(jp.DisabledClusters) > 0:
			add("cluster_disabled", s.disabledMessage(jp.DisabledClusters)+"; no other cluster it may use has workers")
		case jp.Active == 0:
			add("no_workers", "no worker is active (an autoscaler launches them for waiting jobs)")
		case jp.Usable == 0:
			add("region_not_allowed", "no active worker in a cluster it may use")
		case jp.Busy && jp.Ahead > 0:
			// A round with no free cores records nothing: say it from the
			// state, in the scheduler's terms.
			add("fair_share", fmt.Sprintf("waiting for fair share behind %s: every worker it may use is busy", plural(jp.Ahead, "user")))
		case jp.Busy:
			add("cpu_exhausted", "waiting for cores: every worker it may use is busy")
		default:
			add("queued", "waiting for its turn: the last scheduling round gave the free cores to other users' jobs (fair share) or to earlier jobs of its user (oldest batch first)")
		}
		if jp.AheadByPriority > 0 && len(jp.Queues) > 0 {
			add("priority", fmt.Sprintf("behind %d Ready jobs of its user's batches of higher priority in queue %s", jp.AheadByPriority, jp.Queues[0].Path))
		}
		if s.waiting != nil && !isStale(r) && len(jp.Queues) > 0 {
			for _, w := range s.waiting.Queue(jp.Queues[0].Path) {
				add(w.Reason, w.Message)
			}
		}
		if len(jp.DisabledClusters) > 0 && jp.Usable > 0 {
			add("cluster_disabled", "not used while disabled: "+s.disabledMessage(jp.DisabledClusters))
		}
		for _, r := range s.autoscalerReasons() {
			add(r[0], r[1])
		}
	case state.Creating:
		msg := "waiting for a machine of its own"
		for _, m := range s.state.Machines() {
			if m.ForBatch == id && m.ForJob == jid && m.State >= state.MachineRequested && m.State <= state.MachineLaunching {
				msg = fmt.Sprintf("waiting for its own machine: %s (%s, %s), %s for %s", m.ID, m.Config, jp.MachineType,
					state.MachineStateName(m.State), time.Since(time.Unix(0, m.Created)).Round(time.Second))
			}
		}
		add("creating", msg)
	case state.Running:
		add("running", fmt.Sprintf("running on %s in cluster %s (region %s)", jp.Instance, jp.Cluster, jp.Region))
	default:
		msg := "finished: " + jp.State.String()
		if jp.BatchCancelled {
			msg += " (batch cancelled)"
		}
		add("finished", msg)
	}
	if len(jp.Regions) > 0 || jp.Pool != "" || len(jp.HomeClusters) > 0 {
		var parts []string
		if len(jp.Regions) > 0 {
			parts = append(parts, "regions "+strings.Join(jp.Regions, ", "))
		}
		if jp.Pool != "" {
			parts = append(parts, "pool "+jp.Pool)
		}
		if len(jp.HomeClusters) > 0 {
			parts = append(parts, "clusters "+strings.Join(jp.HomeClusters, ", ")+" (where its queue is routed)")
		}
		add("constraint", "may run only in "+strings.Join(parts, " and "))
	}
	if jp.Budget.Limit > 0 {
		add("spend", fmt.Sprintf("billing project %s has spent $%.2f of its $%.2f spend limit", jp.BillingProject, jp.Budget.Cost(time.Now().UnixNano()).Dollars(), jp.Budget.Limit.Dollars()))
	}
	for i := range jp.Queues {
		q := &jp.Queues[i]
		c := q.Quota()
		msg := fmt.Sprintf("queue %s runs %d jobs holding %g cores and %s memory", q.Path, q.UsedJobs, float64(q.UsedMilli)/1000, units.FormatBytes(q.UsedMemory))
		if g := q.Guarantee; g.CPUMilli > 0 || g.Memory > 0 {
			msg += fmt.Sprintf("; guaranteed %g cores, %s memory", float64(g.CPUMilli)/1000, quotaMem(g.Memory))
		}
		if c.CPUMilli > 0 || c.Memory > 0 {
			msg += fmt.Sprintf("; may hold %s cores, %s memory", quotaCores(c.CPUMilli), quotaMem(c.Memory))
		}
		if c.MaxJobs > 0 || c.MaxMilli > 0 {
			msg += fmt.Sprintf("; max_running %s jobs, %s cores", quotaCount(c.MaxJobs), quotaCores(c.MaxMilli))
		}
		add("queue", msg)
	}
	return out, nil
}

// autoscalerReasons says what the autoscaler does about waiting work: the
// machines coming up, what its last decision launched, and what it held
// and why (a cap, capacity).
func (s *Server) autoscalerReasons() [][2]string {
	if s.autoscaler == nil {
		return nil
	}
	var out [][2]string
	coming := 0
	for _, m := range s.state.Machines() {
		if m.State == state.MachineRequested || m.State == state.MachineLaunching {
			coming++
		}
	}
	r := s.autoscaler.LastRound()
	if r == nil {
		if coming > 0 {
			out = append(out, [2]string{"autoscaler_launching", plural(coming, "machine") + " coming up (drover autoscaler status)"})
		}
		return out
	}
	_, _, marks := s.state.AutoscalerSettings()
	now := time.Now().UnixNano()
	// marked says, for a config the cloud could not fill, which of the
	// two marks holds it and until when, in the words of job why.
	marked := func(config, what string) (code, msg string, ok bool) {
		m, ok := marks[config]
		if !ok || m.Until <= now {
			return "", "", false
		}
		until := time.Unix(0, m.Until).UTC().Format(time.RFC3339)
		if m.Misconfigured {
			return "autoscaler_misconfigured", fmt.Sprintf("autoscaler could not launch %s: the provider can never fill launch config %s as it is (tried again at %s): %s", what, config, until, m.Reason), true
		}
		return "autoscaler_capacity_limited", fmt.Sprintf("autoscaler could not launch %s: launch config %s is capacity-limited until %s: %s", what, config, until, m.Reason), true
	}
	for _, l := range r.Launches {
		// The launch may have failed since: the cloud could not fill
		// the config, which is then marked.
		if code, msg, ok := marked(l.Config, l.Reason); ok {
			out = append(out, [2]string{code, msg})
			continue
		}
		out = append(out, [2]string{"autoscaler_launching", "autoscaler launching " + l.Reason})
	}
	if coming > 0 && len(out) == 0 {
		out = append(out, [2]string{"autoscaler_launching", plural(coming, "machine") + " coming up (drover autoscaler status)"})
	}
	for _, h := range r.Held {
		// Rounds after the failed launch hold the jobs for the mark.
		if h.Config != "" {
			if code, msg, ok := marked(h.Config, "machines for "+plural(int(h.Jobs), "waiting job")); ok {
				out = append(out, [2]string{code, msg})
				continue
			}
		}
		out = append(out, [2]string{"autoscaler_held", fmt.Sprintf("autoscaler holds %s: %s", plural(int(h.Jobs), "waiting job"), h.Reason)})
	}
	return out
}

// disabledMessage says which clusters are disabled, and for one, why,
// since when and by whom.
func (s *Server) disabledMessage(names []string) string {
	return state.DisabledClustersMessage(names, func(name string) (string, string, int64, bool) {
		for _, c := range s.state.Clusters() {
			if c.Name == name {
				return c.Reason, c.By, c.Since, true
			}
		}
		return "", "", 0, false
	})
}

func quotaMem(b int64) string {
	if b == 0 {
		return "unlimited"
	}
	return units.FormatBytes(b)
}

func quotaCores(milli int64) string {
	if milli == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%g", float64(milli)/1000)
}

func quotaCount(n int64) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
