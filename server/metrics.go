package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/why"
	"github.com/drover-sched/drover/version"
)

// metrics are registered in a registry of the server's own, so several
// servers can live in one test process.
type metrics struct {
	reg *prometheus.Registry

	isLeader        prometheus.Gauge
	applySeconds    *prometheus.HistogramVec
	fsmApply        prometheus.Histogram
	fsmEntries      prometheus.Counter
	snapshotBytes   prometheus.Gauge
	snapshotSeconds prometheus.Histogram
	schedRounds     prometheus.Counter
	schedSeconds    prometheus.Histogram
	decideSeconds   prometheus.Histogram
	roundCPUSeconds prometheus.Histogram
	placements      prometheus.Counter
	rejected        prometheus.Counter
	unplaced        *prometheus.GaugeVec
	events          prometheus.Counter
	preempted       *prometheus.CounterVec
	sloRuns         *prometheus.CounterVec
	workflowSLO     *prometheus.GaugeVec
	tierSLO         *prometheus.GaugeVec
	preemptSeconds  prometheus.Histogram
	lock            *lockMetrics

	historyUp           prometheus.Gauge
	historyWaiting      prometheus.Gauge
	historyExported     prometheus.Counter
	historyExportedJobs prometheus.Counter
	historyForgotten    prometheus.Counter
	queueUsagePruned    prometheus.Counter
}

// raftStats is what the metrics read from Raft at scrape time; *raft.Raft
// has it.
type raftStats interface {
	LastIndex() uint64
	CurrentTerm() uint64
	Stats() map[string]string
}

// newMetrics registers the server's metrics. The state and Raft are read at
// scrape time; raftOf returns nil until Raft has started. raftPositions
// adds the Raft term and indexes, which only metrics behind a token may
// show: anyone may read public ones, and the term and last index are what
// a forged Raft entry needs.
func newMetrics(st *state.State, raftOf func() raftStats, raftPositions bool) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.isLeader = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drover_is_leader", Help: "1 while this server leads the cluster."})
	m.applySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "drover_raft_apply_seconds", Help: "Time from submitting a command to Raft until it is applied, by command.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 1.25, 40)}, []string{"command"})
	m.fsmApply = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "drover_fsm_apply_seconds", Help: "Time the state machine spends applying a batch of log entries.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)})
	m.fsmEntries = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_fsm_entries_total", Help: "Log entries applied to the state machine."})
	m.snapshotBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drover_snapshot_bytes", Help: "Size of the last snapshot written."})
	m.snapshotSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_snapshot_seconds", Help: "Time to write a snapshot.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	m.sloRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_queue_slo_runs_total",
		Help: "Complete batches with an SLO or a deadline the leader stored in the history, by queue and whether they met it (the SLO success ratio: met / all)."}, []string{"queue", "met"})
	m.workflowSLO = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "drover_workflow_slo_ratio",
		Help: "The leader's last SLO report (-slo-window): each workflow's runs that met their SLO over its runs, for the workflows with the most runs (at most 1000 series)."}, []string{"project", "workflow", "tier"})
	m.tierSLO = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "drover_tier_slo_successful_ratio",
		Help: "The leader's last SLO report (-slo-window): the share of each tier's workflows that are SLO-successful (Monarch's goal: above 0.9)."}, []string{"tier"})
	m.preempted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_preempted_attempts_total",
		Help: "Attempts the leader told to stop for queues that wait: reclaim (a guarantee taken back from a borrower) or fair_share (Monarch's tier preemption)."}, []string{"reason"})
	m.preemptSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_preempt_decision_seconds",
		Help: "Time of one preemption round: its read of the state (view.Preemption) and the decision (scheduler.Preempt).", Buckets: prometheus.ExponentialBuckets(1e-5, 2, 18)})
	m.schedRounds = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_scheduler_rounds_total", Help: "Scheduling rounds run."})
	// Round buckets grow by 10%, so a percentile read off them is within
	// 10% of the truth.
	roundBuckets := prometheus.ExponentialBucketsRange(0.0001, 4, 112)
	m.schedSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_scheduler_round_seconds",
		Help:    "Time to compute one scheduling round: building its input under the state's read lock, and deciding (wall clock).",
		Buckets: roundBuckets})
	m.decideSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_scheduler_decide_seconds",
		Help:    "Time the scheduler spends deciding one round, from its input (a narrower figure than drover_scheduler_round_seconds, which also builds the input under the state's read lock).",
		Buckets: roundBuckets})
	m.roundCPUSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_scheduler_round_cpu_seconds",
		Help:    "CPU time one scheduling round used (its thread's clock: the round's own cost, without the time it waited for a core or for the state's lock).",
		Buckets: roundBuckets})
	m.placements = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_scheduler_placements_total", Help: "Jobs placed on instances."})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_scheduler_rejected_total", Help: "Placements the state machine rejected at apply (the state moved on)."})
	m.unplaced = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "drover_scheduler_unplaced_jobs",
		Help: "Jobs the last scheduling round looked at and could place on no instance (of at most 16 runs per user), by the reason that rejected most instances, or the queue quota that ruled them out."}, []string{"reason"})
	m.events = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_worker_events_total", Help: "Worker events committed."})
	m.historyUp = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drover_history_up",
		Help: "1 while the history store answers the leader's exporter, 0 while it fails (finished batches then stay in memory)."})
	m.historyWaiting = prometheus.NewGauge(prometheus.GaugeOpts{Name: "drover_history_waiting_batches",
		Help: "Complete batches the history store does not hold yet (the leader's count)."})
	m.historyExported = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_history_exported_batches_total", Help: "Batches this server exported to the history store."})
	m.historyExportedJobs = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_history_exported_jobs_total", Help: "Jobs this server exported to the history store."})
	m.historyForgotten = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_history_forgotten_batches_total",
		Help: "Batches this server, leading, removed from memory once the history store held them and their retention window had passed."})
	m.queueUsagePruned = prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_queue_usage_pruned_total",
		Help: "Queue samples this server, leading, deleted from the history store once older than -queue-usage-retention."})
	for _, c := range []prometheus.Collector{m.historyUp, m.historyWaiting, m.historyExported, m.historyExportedJobs, m.historyForgotten, m.queueUsagePruned} {
		f(c)
	}
	for _, c := range []prometheus.Collector{m.isLeader, m.applySeconds, m.fsmApply, m.fsmEntries, m.snapshotBytes, m.snapshotSeconds,
		m.schedRounds, m.schedSeconds, m.decideSeconds, m.roundCPUSeconds, m.placements, m.rejected, m.unplaced, m.events,
		m.preempted, m.preemptSeconds, m.sloRuns, m.workflowSLO, m.tierSLO} {
		f(c)
	}
	m.lock = newLockMetrics(m.reg)
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "drover_build_info", Help: "1, labelled with this server's drover version.",
		ConstLabels: prometheus.Labels{"version": version.Get()}})
	build.Set(1)
	f(build)
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f(&stateCollector{state: st, raft: raftOf, positions: raftPositions})
	return m
}

// observeUnplaced sets the unplaced-jobs gauge from a round, every reason
// included so a reason that cleared reads 0.
func (m *metrics) observeUnplaced(out *scheduler.Output) {
	counts := why.Unplaced(out)
	for _, r := range scheduler.Reasons() {
		m.unplaced.WithLabelValues(r.String()).Set(float64(counts[r]))
	}
}

// stateCollector reports gauges read from the state at scrape time.
type stateCollector struct {
	state     *state.State
	raft      func() raftStats
	positions bool // the Raft term and indexes (see newMetrics)
}

var (
	jobsDesc      = prometheus.NewDesc("drover_jobs", "Jobs by state.", []string{"state"}, nil)
	batchesDesc   = prometheus.NewDesc("drover_batches", "Batches held in the state, by state.", []string{"state"}, nil)
	instancesDesc = prometheus.NewDesc("drover_instances_active", "Active worker instances.", nil, nil)
	indexDesc     = prometheus.NewDesc("drover_raft_applied_index", "Last Raft index applied to the state machine.", nil, nil)
	lastIndexDesc = prometheus.NewDesc("drover_raft_last_index", "Last Raft index in this server's log.", nil, nil)
	termDesc      = prometheus.NewDesc("drover_raft_term", "Current Raft term.", nil, nil)
	commitDesc    = prometheus.NewDesc("drover_raft_commit_index", "Last Raft index known to be committed.", nil, nil)
	contactDesc   = prometheus.NewDesc("drover_raft_last_contact_seconds", "Time since this follower last heard from the leader (0 on the leader).", nil, nil)
	peersDesc     = prometheus.NewDesc("drover_raft_peers", "Voters in the Raft configuration.", nil, nil)

	clusterCPUDesc      = prometheus.NewDesc("drover_cluster_cpu_cores", "Cores of a cluster's active workers.", []string{"cluster", "region"}, nil)
	clusterReservedDesc = prometheus.NewDesc("drover_cluster_reserved_cores", "Cores held by attempts running in a cluster.", []string{"cluster", "region"}, nil)
	clusterEnabledDesc  = prometheus.NewDesc("drover_cluster_enabled", "1 while a cluster takes new work, 0 while it is disabled.", []string{"cluster", "region"}, nil)
	clusterWorkersDesc  = prometheus.NewDesc("drover_cluster_workers", "Active workers of a cluster.", []string{"cluster", "region"}, nil)
	queueGuaranteeDesc  = prometheus.NewDesc("drover_queue_guarantee_cores", "A queue's guaranteed cores (its nominal quota across all clusters).", []string{"queue"}, nil)
	queueCapDesc        = prometheus.NewDesc("drover_queue_cap_cores", "The most cores a queue may hold: its guarantee and borrow limit (0: no cap).", []string{"queue"}, nil)
	queueUsedDesc       = prometheus.NewDesc("drover_queue_used_cores", "Cores a queue's running jobs (and its children's) hold, per cluster.", []string{"queue", "cluster"}, nil)
	queueRunningDesc    = prometheus.NewDesc("drover_queue_running_jobs", "Jobs a queue (and its children) runs.", []string{"queue"}, nil)
	machinesDesc        = prometheus.NewDesc("drover_autoscaler_machines", "The autoscaler's live machines, by cluster, pool and state.", []string{"cluster", "pool", "state"}, nil)
	idleMachinesDesc    = prometheus.NewDesc("drover_autoscaler_machines_without_work", "The autoscaler's machines paid for and running no job: coming up, or up and idle, by cluster and pool.", []string{"cluster", "pool"}, nil)
	bootDesc            = prometheus.NewDesc("drover_autoscaler_boot_seconds", "How long the live machines took from their launch to their worker joining.", nil, nil)
	spendDesc           = prometheus.NewDesc("drover_autoscaler_spend_per_hour", "What the live machines (requested, launching, active, draining) cost an hour, by cluster and pool.", []string{"cluster", "pool"}, nil)
	spendCapDesc        = prometheus.NewDesc("drover_autoscaler_spend_cap_per_hour", "The autoscaler's $/hour cap over every config (0: none).", nil, nil)
	limitedDesc         = prometheus.NewDesc("drover_autoscaler_capacity_limited", "1 while a launch config is skipped as capacity-limited.", []string{"config"}, nil)
	priceDesc           = prometheus.NewDesc("drover_autoscaler_price_per_hour", "What one machine of a launch config costs an hour, as ranking and billing use it; source is cloud (read from the provider) or placement.", []string{"config", "source"}, nil)
	priceReadDesc       = prometheus.NewDesc("drover_autoscaler_price_read_timestamp_seconds", "When the cloud's price of a launch config with price_from_cloud was last read (absent: never).", []string{"config"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsDesc, batchesDesc, instancesDesc, contactDesc, peersDesc,
		clusterCPUDesc, clusterReservedDesc, clusterEnabledDesc, clusterWorkersDesc, queueGuaranteeDesc, queueCapDesc, queueUsedDesc, queueRunningDesc,
		machinesDesc, idleMachinesDesc, bootDesc, spendDesc, spendCapDesc, limitedDesc, priceDesc, priceReadDesc} {
		ch <- d
	}
	if c.positions {
		for _, d := range []*prometheus.Desc{indexDesc, lastIndexDesc, termDesc, commitDesc} {
			ch <- d
		}
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts, batches, running := c.state.Counts()
	for i, name := range state.StateNames() {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[i+1]), name)
	}
	ch <- prometheus.MustNewConstMetric(batchesDesc, prometheus.GaugeValue, float64(running), "running")
	ch <- prometheus.MustNewConstMetric(batchesDesc, prometheus.GaugeValue, float64(batches-running), "complete")
	ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(c.state.ActiveCount()))
	for _, cl := range c.state.Clusters() {
		enabled := 1.0
		if cl.Disabled {
			enabled = 0
		}
		ch <- prometheus.MustNewConstMetric(clusterCPUDesc, prometheus.GaugeValue, float64(cl.CapacityMilli)/1000, cl.Name, cl.Region)
		ch <- prometheus.MustNewConstMetric(clusterReservedDesc, prometheus.GaugeValue, float64(cl.CapacityMilli-cl.FreeMilli)/1000, cl.Name, cl.Region)
		ch <- prometheus.MustNewConstMetric(clusterEnabledDesc, prometheus.GaugeValue, enabled, cl.Name, cl.Region)
		ch <- prometheus.MustNewConstMetric(clusterWorkersDesc, prometheus.GaugeValue, float64(cl.Workers), cl.Name, cl.Region)
	}
	for _, q := range c.state.Queues() {
		ch <- prometheus.MustNewConstMetric(queueGuaranteeDesc, prometheus.GaugeValue, float64(q.Guarantee.CPUMilli)/1000, q.Path)
		ch <- prometheus.MustNewConstMetric(queueCapDesc, prometheus.GaugeValue, float64(q.Quota().CPUMilli)/1000, q.Path)
		ch <- prometheus.MustNewConstMetric(queueRunningDesc, prometheus.GaugeValue, float64(q.UsedJobs), q.Path)
		for cl, used := range q.UsedByCluster {
			ch <- prometheus.MustNewConstMetric(queueUsedDesc, prometheus.GaugeValue, float64(used)/1000, q.Path, cl)
		}
	}
	c.collectAutoscaler(ch)
	if c.positions {
		ch <- prometheus.MustNewConstMetric(indexDesc, prometheus.GaugeValue, float64(c.state.Index()))
	}
	if r := c.raft(); r != nil {
		stats := r.Stats()
		if c.positions {
			ch <- prometheus.MustNewConstMetric(lastIndexDesc, prometheus.GaugeValue, float64(r.LastIndex()))
			ch <- prometheus.MustNewConstMetric(termDesc, prometheus.GaugeValue, float64(r.CurrentTerm()))
			if v, err := strconv.ParseFloat(stats["commit_index"], 64); err == nil {
				ch <- prometheus.MustNewConstMetric(commitDesc, prometheus.GaugeValue, v)
			}
		}
		if v, err := strconv.ParseFloat(stats["num_peers"], 64); err == nil {
			ch <- prometheus.MustNewConstMetric(peersDesc, prometheus.GaugeValue, v+1)
		}
		contact := 0.0
		if d, err := time.ParseDuration(stats["last_contact"]); err == nil {
			contact = d.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(contactDesc, prometheus.GaugeValue, contact)
	}
}

// bootBuckets bound drover_autoscaler_boot_seconds (a machine boots in
// seconds to a few minutes).
var bootBuckets = []float64{5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// collectAutoscaler reports the machines and spend by pool, and the
// configs skipped as capacity-limited.
func (c *stateCollector) collectAutoscaler(ch chan<- prometheus.Metric) {
	settings, cfgs, marks := c.state.AutoscalerSettings()
	type pool struct{ cluster, pool string }
	count := map[pool]map[uint8]int{}
	spend := map[pool]money.Rate{}
	idle := map[pool]int{}
	boots := map[float64]uint64{}
	var bootN uint64
	var bootSum float64
	for _, m := range c.state.Machines() {
		if m.State < state.MachineRequested || m.State > state.MachineDraining {
			continue
		}
		k := pool{m.Cluster, m.Pool}
		if count[k] == nil {
			count[k] = map[uint8]int{}
		}
		count[k][m.State]++
		spend[k] = spend[k].Add(m.PricePerHour)
		if m.Running == 0 {
			idle[k]++
		}
		if b := m.BootSeconds(); b > 0 {
			bootN++
			bootSum += b
			for _, ub := range bootBuckets {
				if b <= ub {
					boots[ub]++
				}
			}
		}
	}
	ch <- prometheus.MustNewConstHistogram(bootDesc, bootN, bootSum, boots)
	for k, byState := range count {
		for st := state.MachineRequested; st <= state.MachineDraining; st++ {
			ch <- prometheus.MustNewConstMetric(machinesDesc, prometheus.GaugeValue, float64(byState[st]), k.cluster, k.pool, state.MachineStateName(st))
		}
		ch <- prometheus.MustNewConstMetric(spendDesc, prometheus.GaugeValue, spend[k].Dollars(), k.cluster, k.pool)
		ch <- prometheus.MustNewConstMetric(idleMachinesDesc, prometheus.GaugeValue, float64(idle[k]), k.cluster, k.pool)
	}
	ch <- prometheus.MustNewConstMetric(spendCapDesc, prometheus.GaugeValue, settings.MaxPerHour.Dollars())
	now := time.Now().UnixNano()
	for _, cfg := range cfgs {
		limited := 0.0
		if mk, ok := marks[cfg.Name]; ok && mk.Until > now {
			limited = 1
		}
		ch <- prometheus.MustNewConstMetric(limitedDesc, prometheus.GaugeValue, limited, cfg.Name)
		source := "placement"
		if cfg.PriceFromCloud {
			source = "cloud"
			if cfg.PriceAt > 0 {
				ch <- prometheus.MustNewConstMetric(priceReadDesc, prometheus.GaugeValue, float64(cfg.PriceAt)/1e9, cfg.Name)
			}
		}
		ch <- prometheus.MustNewConstMetric(priceDesc, prometheus.GaugeValue, cfg.PricePerHour.Dollars(), cfg.Name, source)
	}
}
