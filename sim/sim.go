// Package sim is drover's discrete-event simulator: it runs the real
// state machine (every command applied to a server/state.State, apply's
// re-checks included), the real scheduling round (the leader's adapter
// and the scheduler), and the leader's own autoscale round
// (leader.Autoscaler: reconcile, plan, record, launch, delete) against the
// simulated cloud (autoscaler/provider/sim), on a virtual clock. The
// simulator itself plays only the parts outside drover: batches arriving,
// the machines' workers joining, running their jobs for the workload's
// durations and dying with their machines. A day runs in seconds; the
// same seed runs the same day.
//
// drover bench autoscale and the simulation property tests call Run;
// workloads are JSON files (testdata/ holds examples) or SyntheticDay.
package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/drover-sched/drover/autoscaler"
	simcloud "github.com/drover-sched/drover/autoscaler/provider/sim"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// Options shape a run. DefaultOptions gives the leader's timings.
type Options struct {
	// Seed seeds the simulated cloud (spot reclaims, injected errors).
	Seed uint64
	// Step is the virtual time between two steps; each step delivers
	// arrivals and completions, joins booted machines' workers and runs
	// one scheduling round.
	Step time.Duration
	// AutoscaleEvery is the leader's autoscale interval.
	AutoscaleEvery time.Duration
	// MaxPlacements bounds one scheduling round, as the server's setting.
	MaxPlacements int
	// Trace, when set, gets a line about the fleet every TraceEvery.
	Trace      io.Writer
	TraceEvery time.Duration
	// Check applies every command as the state harness does: encoded and
	// decoded as the Raft log carries it, the state's invariants checked
	// after each (slower; the tests set it).
	Check bool
	// Log gets the leader loop's log (nil: discarded).
	Log *slog.Logger
	// Policy decides the autoscale rounds: "" or "drover" (the leader's
	// own, autoscaler.Plan), "hail" (autoscaler.PlanHail) or "static" (a
	// fleet of StaticCores cores, autoscaler.PlanStatic).
	Policy      string
	StaticCores float64
}

// DefaultOptions steps every 5 s of virtual time and decides every 15 s,
// as the leader's autoscaler does by default.
func DefaultOptions() Options {
	return Options{Seed: 1, Step: 5 * time.Second, AutoscaleEvery: 15 * time.Second, MaxPlacements: 20000}
}

// Validate checks the options.
func (o *Options) Validate() error {
	switch o.Policy {
	case "", "drover", "hail":
	case "static":
		if o.StaticCores <= 0 {
			return errors.New("sim: a static fleet needs StaticCores > 0")
		}
	default:
		return fmt.Errorf("sim: policy %q is not drover, hail or static", o.Policy)
	}
	if o.Step <= 0 || o.AutoscaleEvery <= 0 || o.MaxPlacements <= 0 {
		return fmt.Errorf("sim: step, autoscale interval and max placements must be positive (got %s, %s, %d)", o.Step, o.AutoscaleEvery, o.MaxPlacements)
	}
	if o.Trace != nil && o.TraceEvery <= 0 {
		return fmt.Errorf("sim: a trace needs a positive interval (got %s)", o.TraceEvery)
	}
	return nil
}

// Result is what a run cost and what it saw.
type Result struct {
	Bench   string `json:"bench"`
	Batches int    `json:"batches"`
	Jobs    int    `json:"jobs"`
	Seed    uint64 `json:"seed"`
	// CostUSD is what the cloud billed; LowerBoundUSD the workload's
	// core-seconds at the cheapest price per core-second.
	// Both are rounded to the cent from exact sums (the cloud's bill is
	// an integer of nano-dollars); CostRatio is taken before rounding.
	CostUSD       money.Amount `json:"cost_usd"`
	LowerBoundUSD money.Amount `json:"lower_bound_usd"`
	CostRatio     float64      `json:"cost_ratio"`
	// MakespanHours: from the first arrival to the last completion.
	MakespanHours float64 `json:"makespan_h"`
	// Utilization: busy core-hours over paid core-hours.
	Utilization float64 `json:"utilization"`
	// CapViolations counts steps at which what the cloud bills passed the
	// node or spend cap (must be 0).
	CapViolations int `json:"cap_violations"`
	// CapacityLimitedLaunches counts machines a decision launched of a
	// config still marked capacity-limited (must be 0).
	CapacityLimitedLaunches int `json:"capacity_limited_launches"`
	// DisabledClusterLaunches counts machines a decision launched into a
	// cluster an operator had disabled (must be 0).
	DisabledClusterLaunches int                     `json:"disabled_cluster_launches"`
	MachinesLaunched        int                     `json:"machines_launched"`
	CapacityRefusals        int                     `json:"capacity_refusals"`
	SpotReclaimed           int                     `json:"spot_reclaimed"`
	PeakSpendPerHour        money.Rate              `json:"peak_spend_per_hour"`
	PeakNodes               int                     `json:"peak_nodes"`
	CostByConfig            map[string]money.Amount `json:"cost_by_config"`
	// AutoscaleRoundErrors counts autoscale rounds that ended early on a
	// cloud error (an injected failure, the rate limit), as a leader's
	// would, to be retried at the next.
	AutoscaleRoundErrors int `json:"autoscale_round_errors"`
	// What the jobs waited from Ready to the start of their last attempt
	// (queue wait), in minutes: median, 95th percentile, longest.
	WaitP50Min float64 `json:"wait_p50_min"`
	WaitP95Min float64 `json:"wait_p95_min"`
	WaitMaxMin float64 `json:"wait_max_min"`
	// What the jobs took from their batch's arrival to their end (job
	// latency, what a user waits for), in minutes: median, 99th
	// percentile, longest; and the attempts lost with a reclaimed spot
	// machine.
	LatencyP50Min float64 `json:"latency_p50_min"`
	LatencyP99Min float64 `json:"latency_p99_min"`
	LatencyMaxMin float64 `json:"latency_max_min"`
	LostAttempts  int     `json:"lost_attempts"`
	// AtCapHours is the virtual time jobs waited while the fleet could
	// not grow for a cap: its machines at max_nodes, or its spend within
	// the cheapest launch config's price of max_per_hour.
	AtCapHours float64 `json:"at_cap_h"`
	// Policy is the autoscale policy that ran; DemandP95Cores the 95th
	// percentile over the run (sampled each virtual minute) of the cores
	// the jobs wanted, running or waiting: what a static fleet is sized
	// to.
	Policy         string  `json:"policy"`
	DemandP95Cores float64 `json:"demand_p95_cores"`
	// Waste splits the core-hours paid for and not spent on the
	// workload's work.
	Waste Waste `json:"waste_core_h"`
	// ByQueue is each queue's jobs' wait, and Preempted the attempts the
	// preemption round stopped (a workload with queues).
	ByQueue   map[string]QueueWait `json:"by_queue,omitempty"`
	Preempted int                  `json:"preempted,omitempty"`
	// JobRecords holds every job's times, in batch and job order (for
	// queue-wait reports).
	JobRecords []JobRecord `json:"-"`
}

// QueueWait is one queue's jobs' queue wait, in minutes.
type QueueWait struct {
	Jobs       int     `json:"jobs"`
	WaitP50Min float64 `json:"wait_p50_min"`
	WaitP95Min float64 `json:"wait_p95_min"`
	WaitMaxMin float64 `json:"wait_max_min"`
}

// Waste is where paid core-hours went that did not run the workload's
// jobs to completion: machines booting (launched, their worker not yet
// joined), machines with nothing running (waiting out the idle timeout,
// or for work), the free cores of machines running something (packing
// and jobs ending at different times), and the work of attempts lost
// with a reclaimed spot machine.
type Waste struct {
	Booting    float64 `json:"booting"`
	Idle       float64 `json:"idle"`
	PartlyIdle float64 `json:"partly_idle"`
	Lost       float64 `json:"lost"`
}

// JobRecord is one job's life in virtual time, as the state's
// transitions told it.
type JobRecord struct {
	Batch uint64
	Job   uint32
	User  string
	// Submitted: its batch arrived. Ready: it first became Ready.
	// Started: its last attempt was placed. Ended: it reached a final
	// state. Attempts counts its placements (a reclaimed machine's jobs
	// run again).
	Submitted, Ready, Started, Ended time.Time
	Attempts                         int
	// Queue is the queue it ran in (a workload with queues).
	Queue string
	// Waited sums the job's time Ready before each attempt started: a
	// job whose machine was reclaimed waits again, but the time its lost
	// attempt ran is not queue wait. readyAgain is when it last became
	// Ready.
	Waited     time.Duration
	readyAgain time.Time
}

// Wait is how long the job waited in the queue: from Ready to its first
// attempt's start, and from each return to Ready to the next attempt's.
func (r *JobRecord) Wait() time.Duration { return r.Waited }

// start is the virtual time a run begins at.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is the virtual clock every part reads.
type clock struct{ t time.Time }

// Now is the virtual time.
func (c *clock) Now() time.Time { return c.t }

type attemptKey struct {
	b   uint64
	j   uint32
	att uint16
}

type runningJob struct {
	inst       uint32
	cpu        int64
	start, end time.Time
	// stopAt: told to stop (preempted), it ends then.
	stopAt time.Time
}

type jobKey struct {
	b uint64
	j uint32
}

// run is one simulation's world.
type run struct {
	raftLog
	scheduler *leader.Scheduler
	w         *Workload
	opts      Options
	// finished: every batch arrived and every job ended (a static fleet
	// goes then).
	finished bool
	// demand samples busy plus waiting cores, once a virtual minute.
	demand []int64
	cloud  *simcloud.Cloud
	auto   *leader.Autoscaler
	// The workers' side: what each job runs for, what runs where, what
	// each instance was handed, and when each worker was last heard.
	durations map[uint64][]time.Duration
	graces    map[uint64][]time.Duration
	cpus      map[uint64][]int64
	running   map[attemptKey]runningJob
	known     map[uint32][]state.AttemptID
	joined    map[string]uint32
	dead      map[uint32]bool
	heard     map[uint32]time.Time
	records   map[jobKey]*JobRecord
	marked    int
	// prices is what the cloud charges for each config now (the
	// workload's, changed by its events).
	prices map[string]money.Rate
	// cores of each config's machines; waste in core-seconds.
	cores map[string]float64
	waste Waste
	// disabled: clusters the workload's events disabled; intoDisabled
	// counts launches into them.
	disabled     map[string]bool
	intoDisabled int
	// pre is the leader's preemption round (a workload with queues).
	pre       *leader.Preemptor
	preempted int
	starts    []state.Event
}

// Run simulates the workload and reports what it cost. The error is a
// command the state refused that the simulation relies on (a bug), a
// workload that does not finish within 72 hours of its last arrival, or
// ctx's.
func Run(ctx context.Context, w *Workload, opts Options) (*Result, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if w.Synthetic != nil {
		cp := *w
		cp.Batches = SyntheticDay(opts.Seed, time.Duration(w.Synthetic.Hours*float64(time.Hour))).Batches
		w = &cp
	}
	if len(w.Batches) == 0 {
		return nil, errors.New("sim: the workload has no batches")
	}
	if w.Settings == nil {
		w.Settings = &Settings{}
	}
	r := &run{raftLog: raftLog{st: state.New(), clk: &clock{t: start}, check: opts.Check}, w: w, opts: opts, durations: map[uint64][]time.Duration{}, cpus: map[uint64][]int64{},
		graces:  map[uint64][]time.Duration{},
		running: map[attemptKey]runningJob{}, known: map[uint32][]state.AttemptID{}, joined: map[string]uint32{}, dead: map[uint32]bool{}, heard: map[uint32]time.Time{},
		records: map[jobKey]*JobRecord{}}
	r.st.SetHooks(state.Hooks{Transition: r.transition})
	cheapest, err := r.setUp()
	if err != nil {
		return nil, err
	}
	r.prices, r.cores = map[string]money.Rate{}, map[string]float64{}
	for _, c := range w.Configs {
		r.prices[c.Name], r.cores[c.Name] = c.PricePerHour, c.CPU
	}
	r.cloud = simcloud.New(simcloud.Options{Clock: r.clk, Seed: opts.Seed, BootDelay: time.Duration(w.Boot), Capacity: w.Capacity, SpotReclaimsPerHour: w.Reclaims,
		ErrorRate: w.ErrorRate, RequestsPerMinute: w.RequestsPerMinute, Prices: maps.Clone(r.prices)})
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The leader's own autoscale round, on the virtual clock, applying to
	// this state.
	var plan func(*autoscaler.Input) *autoscaler.Output
	switch opts.Policy {
	case "hail":
		plan = autoscaler.PlanHail
	case "static":
		largest := r.largestJob()
		plan = func(in *autoscaler.Input) *autoscaler.Output {
			return autoscaler.PlanStatic(in, int64(opts.StaticCores*1000), largest, r.finished)
		}
	}
	r.auto = leader.NewAutoscaler(leader.AutoscalerConfig{Clock: r.clk, State: r.st, Apply: r.apply, Heard: r.heardFrom, Provider: r.cloud,
		WorkerSecret: "sim worker secret", Deployment: "sim", MissingGrace: time.Minute, MemoryStep: 256 << 20, Log: log,
		Decided: r.decided, Plan: plan})
	r.scheduler = &leader.Scheduler{Clock: r.clk, MaxJobs: opts.MaxPlacements, Launchable: r.auto.Launchable}
	if r.pre != nil {
		r.pre.Holds = r.scheduler.Holds
	}
	r.auto.Holds = r.scheduler.Holds
	return r.loop(ctx, cheapest)
}

// raftLog applies commands to a simulation's state as the leader's
// Raft node does: the next index, an *state.ApplyError as the error; with
// check, each command goes through the log's encoding first and the
// state's invariants are checked after it.
type raftLog struct {
	st    *state.State
	clk   *clock
	index uint64
	check bool
}

func (l *raftLog) apply(c state.Command) (any, error) {
	if l.check {
		data, err := state.Encode(c)
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", c, err)
		}
		if c, err = state.Decode(data); err != nil {
			return nil, err
		}
	}
	l.index++
	res := l.st.Apply(l.index, c)
	if l.check {
		if err := l.st.CheckInvariants(); err != nil {
			return nil, fmt.Errorf("after %T at %s: %w", c, l.clk.t.Sub(start), err)
		}
	}
	if err, ok := res.(*state.ApplyError); ok {
		return nil, fmt.Errorf("%T: %w", c, err)
	}
	return res, nil
}

// transition records a job's times (the state's hook: it holds the
// state's lock, so it only writes down).
func (r *run) transition(_, batch uint64, job uint32, _, to state.JobState) {
	rec := r.records[jobKey{batch, job}]
	if rec == nil {
		return
	}
	now := r.clk.t
	switch {
	case to == state.Ready:
		if rec.Ready.IsZero() {
			rec.Ready = now
		}
		rec.readyAgain = now
	case to == state.Running:
		rec.Started = now
		rec.Attempts++
		if !rec.readyAgain.IsZero() {
			rec.Waited += now.Sub(rec.readyAgain)
			rec.readyAgain = time.Time{}
		}
	case to.Final():
		rec.Ended = now
	}
}

// heardFrom is when an instance's worker last synced: every step while
// its machine lives.
func (r *run) heardFrom(inst uint32) (time.Time, bool) {
	t, ok := r.heard[inst]
	return t, ok
}

// decided counts the machines a decision launches of configs still
// marked capacity-limited.
func (r *run) decided(in *autoscaler.Input, out *autoscaler.Output) {
	cluster := map[string]string{}
	for _, c := range in.Configs {
		cluster[c.Name] = c.Cluster
	}
	for _, l := range out.Launches {
		if r.disabled[cluster[l.Config]] {
			r.intoDisabled += l.Count
		}
		for _, mk := range in.Marks {
			if mk.Config == l.Config && in.Now.Before(mk.Until) {
				r.marked += l.Count
			}
		}
	}
}

// setUp bootstraps the state, the clusters, the autoscaler's settings and
// configs, and the workload's users; it returns the config cheapest per
// core-hour (compared exactly), for the lower bound.
func (r *run) setUp() (*autoscaler.LaunchConfig, error) {
	now := r.clk.t.UnixNano()
	if _, err := r.apply(&state.Bootstrap{Now: now, Admin: "root", TokenHash: "h", DefaultProject: "default"}); err != nil {
		return nil, err
	}
	w, set := r.w, r.w.Settings
	clusters := w.Clusters
	if len(clusters) == 0 {
		clusters = []Cluster{{Name: "sim", Region: "us-central1"}}
	}
	cfg := &state.ApplyPlacement{Now: now}
	for _, c := range clusters {
		cfg.Clusters = append(cfg.Clusters, state.Cluster{Name: c.Name, Region: c.Region})
	}
	cfg.Autoscaler = &state.Autoscaler{Enabled: true, Strategy: set.Strategy, MaxNodes: set.MaxNodes, MaxPerHour: set.MaxPerHour, MaxAddsPerMinute: set.MaxAddsPerMinute,
		IdleTimeout: int64(set.IdleTimeout), BootTimeout: int64(10 * time.Minute), Window: int64(150 * time.Second), Consolidate: !set.NoConsolidate}
	var cheapest *autoscaler.LaunchConfig
	for _, c := range w.Configs {
		mem, err := units.ParseBytes(c.Memory)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", c.Name, err)
		}
		cluster := c.Cluster
		if cluster == "" {
			cluster = clusters[0].Name
		}
		cfg.LaunchConfigs = append(cfg.LaunchConfigs, state.LaunchConfig{Name: c.Name, Cluster: cluster, MachineType: c.MachineType, Zone: c.Zone, Spot: c.Spot,
			CPUMilli: int64(c.CPU * 1000), Memory: mem, PricePerHour: c.PricePerHour, MaxNodes: c.MaxNodes, PriceFromCloud: c.PriceFromCloud})
		ac := &autoscaler.LaunchConfig{CPUMilli: int64(c.CPU * 1000), PricePerHour: c.PricePerHour}
		if cheapest == nil || autoscaler.ComparePricePerCore(ac, cheapest) < 0 {
			cheapest = ac
		}
	}
	if cheapest == nil {
		return nil, errors.New("sim: the workload has no launch config")
	}
	if _, err := r.apply(cfg); err != nil {
		return nil, err
	}
	users, projects := map[string]bool{}, map[string]bool{"default": true}
	for _, b := range w.Batches {
		project := cmp.Or(b.Project, "default")
		if !projects[project] {
			projects[project] = true
			if _, err := r.apply(&state.CreateBillingProject{Now: now, Name: project, Members: []string{"root"}}); err != nil {
				return nil, err
			}
		}
		if !users[b.User] {
			users[b.User] = true
			if _, err := r.apply(&state.CreateUser{Now: now, Name: b.User, TokenHash: "h-" + b.User}); err != nil {
				return nil, err
			}
		}
		if _, err := r.apply(&state.SetMember{Project: project, User: b.User, Member: true}); err != nil {
			return nil, err
		}
	}
	if len(w.Queues) > 0 {
		qs := &state.ApplyPlacement{Now: now}
		for _, q := range w.Queues {
			sq, err := apiview.QueueFromAPI(q)
			if err != nil {
				return nil, fmt.Errorf("queue %s: %w", q.Path, err)
			}
			qs.Queues = append(qs.Queues, sq)
		}
		if _, err := r.apply(qs); err != nil {
			return nil, err
		}
		r.pre = leader.NewPreemptor()
	}
	return cheapest, nil
}

// loop steps the virtual clock until every job is done and every machine
// deleted.
func (r *run) loop(ctx context.Context, cheapest *autoscaler.LaunchConfig) (*Result, error) {
	batches := r.w.arrivals()
	set := r.w.Settings
	events := slices.Clone(r.w.Events)
	slices.SortStableFunc(events, func(x, y Event) int { return cmp.Compare(x.At, y.At) })
	nextEvent := 0
	var busyCoreSec, lower float64
	totalJobs, next, done, roundErrors := 0, 0, 0, 0
	var first, last, lastScale time.Time
	var peakSpend money.Rate
	peakNodes, violations := 0, 0
	var atCap time.Duration
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := r.clk.t
		for nextEvent < len(events) && !start.Add(time.Duration(events[nextEvent].At)).After(now) {
			if err := r.event(&events[nextEvent], now); err != nil {
				return nil, err
			}
			nextEvent++
		}
		for next < len(batches) && !start.Add(time.Duration(batches[next].At)).After(now) {
			cores, n, err := r.arrive(&batches[next], now)
			if err != nil {
				return nil, err
			}
			next++
			busyCoreSec += cores
			lower += cores * r.cheapestPerCoreSecond()
			totalJobs += n
			if first.IsZero() {
				first = now
			}
		}
		n, err := r.complete(now)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			done += n
			last = now
		}
		if err := r.machines(now); err != nil {
			return nil, err
		}
		r.account()
		// The leader's autoscale round. A round a cloud error cut short is
		// retried at the next, as on a server.
		if now.Sub(lastScale) >= r.opts.AutoscaleEvery {
			lastScale = now
			if err := r.auto.Round(ctx); err != nil {
				var ae *state.ApplyError
				if errors.As(err, &ae) || ctx.Err() != nil {
					return nil, fmt.Errorf("autoscale round at %s: %w", now.Sub(start), err)
				}
				roundErrors++
			}
		}
		if err := r.schedule(now); err != nil {
			return nil, err
		}
		if err := r.preempt(now); err != nil {
			return nil, err
		}
		if r.opts.Trace != nil && now.Sub(start)%r.opts.TraceEvery < r.opts.Step {
			r.trace(now)
		}
		// The caps, as the cloud bills.
		cs := r.cloud.Stats()
		peakSpend, peakNodes = max(peakSpend, cs.SpendRate), max(peakNodes, cs.Live)
		if (set.MaxPerHour > 0 && cs.SpendRate > set.MaxPerHour) || (set.MaxNodes > 0 && int64(cs.Live) > set.MaxNodes) {
			violations++
		}
		if (set.MaxPerHour > 0 && cs.SpendRate+cheapest.PricePerHour > set.MaxPerHour) || (set.MaxNodes > 0 && int64(cs.Live) >= set.MaxNodes) {
			if counts, _, _ := r.st.Counts(); counts[state.Ready] > 0 {
				atCap += r.opts.Step
			}
		}
		r.finished = next == len(batches) && done == totalJobs
		if r.finished && cs.Live == 0 {
			break
		}
		if now.Sub(start)%time.Minute < r.opts.Step {
			r.demand = append(r.demand, r.demandCores())
		}
		if now.Sub(start) > time.Duration(batches[len(batches)-1].At)+72*time.Hour {
			return nil, fmt.Errorf("sim: the workload did not finish within 72 hours of its last arrival (%d of %d jobs done)", done, totalJobs)
		}
		r.clk.t = now.Add(r.opts.Step)
	}
	cs := r.cloud.Stats()
	// The lower bound is the busy core-seconds, each batch's at the
	// cheapest price of a core-second the cloud charged when it arrived
	// (an estimate, in float; the bill is exact).
	res := &Result{Bench: "autoscale-sim", Batches: len(batches), Jobs: totalJobs, Seed: r.opts.Seed,
		CostUSD: cs.Cost.Round(money.Cent), LowerBoundUSD: money.FromDollars(lower).Round(money.Cent), CostRatio: round(cs.Cost.Dollars()/lower, 3),
		MakespanHours: round(last.Sub(first).Hours(), 3), Utilization: round(busyCoreSec/max(cs.CoreHours*3600, 1), 3),
		CapViolations: violations, CapacityLimitedLaunches: r.marked, DisabledClusterLaunches: r.intoDisabled, MachinesLaunched: cs.Launched, CapacityRefusals: cs.Refusals, SpotReclaimed: cs.Reclaimed,
		PeakSpendPerHour: peakSpend.Round(money.CentPerHour), PeakNodes: peakNodes, CostByConfig: map[string]money.Amount{}, AutoscaleRoundErrors: roundErrors}
	for k, v := range cs.CostByConfig {
		res.CostByConfig[k] = v.Round(money.Cent)
	}
	for _, rec := range r.records {
		res.JobRecords = append(res.JobRecords, *rec)
	}
	res.AtCapHours = round(atCap.Hours(), 3)
	res.Waste = Waste{Booting: round(r.waste.Booting/3600, 1), Idle: round(r.waste.Idle/3600, 1), PartlyIdle: round(r.waste.PartlyIdle/3600, 1), Lost: round(r.waste.Lost/3600, 1)}
	res.Policy = cmp.Or(r.opts.Policy, "drover")
	if len(r.demand) > 0 {
		d := slices.Sorted(slices.Values(r.demand))
		res.DemandP95Cores = round(float64(d[min(len(d)-1, len(d)*95/100)])/1000, 1)
	}
	waits := make([]time.Duration, 0, len(res.JobRecords))
	byQueue := map[string][]time.Duration{}
	var latencies []time.Duration
	for i := range res.JobRecords {
		rec := &res.JobRecords[i]
		if !rec.Ended.IsZero() {
			latencies = append(latencies, rec.Ended.Sub(rec.Submitted))
		}
		res.LostAttempts += max(rec.Attempts-1, 0)
		if !rec.Started.IsZero() {
			waits = append(waits, rec.Wait())
			if rec.Queue != "" {
				byQueue[rec.Queue] = append(byQueue[rec.Queue], rec.Wait())
			}
		}
	}
	res.WaitP50Min, res.WaitP95Min, res.WaitMaxMin = waitFigures(waits)
	if len(latencies) > 0 {
		slices.Sort(latencies)
		q := func(p float64) float64 {
			return round(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Minutes(), 2)
		}
		res.LatencyP50Min, res.LatencyP99Min, res.LatencyMaxMin = q(0.5), q(0.99), round(latencies[len(latencies)-1].Minutes(), 2)
	}
	if len(byQueue) > 0 {
		res.ByQueue, res.Preempted = map[string]QueueWait{}, r.preempted
		for q, ws := range byQueue {
			qw := QueueWait{Jobs: len(ws)}
			qw.WaitP50Min, qw.WaitP95Min, qw.WaitMaxMin = waitFigures(ws)
			res.ByQueue[q] = qw
		}
	}
	slices.SortFunc(res.JobRecords, func(x, y JobRecord) int {
		if x.Batch != y.Batch {
			return int(x.Batch) - int(y.Batch)
		}
		return int(x.Job) - int(y.Job)
	})
	return res, nil
}

// waitFigures are the median, 95th percentile and longest of waits, in
// minutes (0s for none); waits is sorted in place.
func waitFigures(waits []time.Duration) (p50, p95, longest float64) {
	if len(waits) == 0 {
		return 0, 0, 0
	}
	slices.Sort(waits)
	q := func(p float64) float64 {
		return round(waits[min(len(waits)-1, int(p*float64(len(waits))))].Minutes(), 2)
	}
	return q(0.5), q(0.95), round(waits[len(waits)-1].Minutes(), 2)
}

// largestJob is the most cores and the most memory a job of the workload
// asks for: what a static fleet's machines must hold.
func (r *run) largestJob() autoscaler.Shape {
	var sh autoscaler.Shape
	for _, b := range r.w.Batches {
		for _, j := range b.Jobs {
			mem, _ := units.ParseBytes(j.Memory) // checked when it arrives
			sh.CPUMilli, sh.Memory = max(sh.CPUMilli, int64(j.CPU*1000)), max(sh.Memory, mem)
		}
	}
	return sh
}

// cheapestPerCoreSecond is the cloud's cheapest price of a core-second
// now, in dollars.
func (r *run) cheapestPerCoreSecond() float64 {
	best := math.Inf(1)
	for _, c := range r.w.Configs {
		if c.CPU > 0 {
			best = min(best, r.prices[c.Name].Dollars()/c.CPU/3600)
		}
	}
	return best
}

// event changes the world: the cloud's price of a config, a zone's
// capacity, a cluster disabled or enabled (as an operator's command).
func (r *run) event(e *Event, now time.Time) error {
	switch {
	case e.PricePerHour != nil:
		r.prices[e.Config] = *e.PricePerHour
		r.cloud.SetPrice(e.Config, *e.PricePerHour)
	case e.Capacity != nil:
		for _, c := range r.w.Configs {
			if c.Zone != e.Zone {
				continue
			}
			n := *e.Capacity
			if n < 0 {
				n = -1
				if v, ok := r.w.Capacity[c.Name]; ok {
					n = v
				}
			}
			r.cloud.SetCapacity(c.Name, n)
		}
	case e.Disabled != nil:
		if r.disabled == nil {
			r.disabled = map[string]bool{}
		}
		r.disabled[e.Cluster] = *e.Disabled
		if _, err := r.apply(&state.SetCluster{Now: now.UnixNano(), Name: e.Cluster, Disabled: *e.Disabled, Reason: "scenario", By: "root"}); err != nil {
			return fmt.Errorf("event at %s: %w", time.Duration(e.At), err)
		}
	}
	return nil
}

// arrive submits a batch; it returns its core-seconds of work and its
// number of jobs.
func (r *run) arrive(b *Batch, now time.Time) (float64, int, error) {
	var entries []state.JobEntry
	var durs, graces []time.Duration
	var cs []int64
	var coreSec float64
	queue := b.Queue
	if queue == "" {
		for _, q := range r.w.Queues {
			if slices.Contains(q.BillingProjects, cmp.Or(b.Project, "default")) {
				queue = q.Path
			}
		}
	}
	id := uint32(1)
	for _, j := range b.Jobs {
		mem, err := units.ParseBytes(j.Memory)
		if err != nil {
			return 0, 0, fmt.Errorf("a job of %s's batch at %s: %w", b.User, time.Duration(b.At), err)
		}
		n := max(j.Count, 1)
		sp := &state.Spec{Name: "j", Array: n > 1, Command: []string{"true"}, CPUMilli: int64(j.CPU * 1000), Memory: mem}
		grace := time.Duration(j.PreemptionGrace)
		if grace > 0 {
			sp.Run = &state.Run{PreemptGraceMs: grace.Milliseconds()}
		}
		if r.w.MaxSpotAttempts > 0 {
			if sp.Run == nil {
				sp.Run = &state.Run{}
			}
			sp.Run.Policy = &state.Policy{MaxSpot: int16(r.w.MaxSpotAttempts)}
		}
		entries = append(entries, state.JobEntry{First: id, Count: uint32(n), Spec: sp})
		for k := 0; k < n; k++ {
			durs = append(durs, time.Duration(j.Duration))
			graces = append(graces, grace)
			cs = append(cs, sp.CPUMilli)
			coreSec += j.CPU * time.Duration(j.Duration).Seconds()
		}
		id += uint32(n)
	}
	// The records exist before the batch does, so its first transitions
	// are seen: the next batch ID is the one the state gives.
	bid := uint64(len(r.durations) + 1)
	for k := range durs {
		r.records[jobKey{bid, uint32(k + 1)}] = &JobRecord{Batch: bid, Job: uint32(k + 1), User: b.User, Submitted: now, Queue: queue}
	}
	res, err := r.apply(&state.CreateBatch{Now: now.UnixNano(), User: b.User, BillingProject: cmp.Or(b.Project, "default"), Name: "sim", Jobs: entries,
		Queue: b.Queue, Priority: b.Priority})
	if err != nil {
		return 0, 0, err
	}
	if got := res.(*state.UpdateResult).Batch; got != bid {
		return 0, 0, fmt.Errorf("sim: the state numbered batch %d as %d", bid, got)
	}
	// A job with no parents (every workload job) is Ready as its batch is
	// made, without a transition.
	for k := range durs {
		if rec := r.records[jobKey{bid, uint32(k + 1)}]; rec.Ready.IsZero() {
			rec.Ready, rec.readyAgain = now, now
		}
	}
	r.durations[bid], r.cpus[bid], r.graces[bid] = durs, cs, graces
	return coreSec, len(durs), nil
}

// complete reports the jobs whose time is up, and the attempts told to
// stop whose grace is over, as their workers do: one Events entry. It
// returns how many jobs succeeded.
func (r *run) complete(now time.Time) (int, error) {
	var evs []state.Event
	for k, j := range r.running {
		switch {
		case !j.end.After(now):
			evs = append(evs, state.Event{Instance: j.inst, Batch: k.b, Job: k.j, Attempt: k.att, Outcome: state.OutcomeSuccess, Start: j.start.UnixNano(), End: j.end.UnixNano()})
		case !j.stopAt.IsZero() && !j.stopAt.After(now):
			// Told to stop, it stopped within its grace: its work is
			// lost, as a reclaimed machine's.
			r.waste.Lost += float64(j.cpu) / 1000 * now.Sub(j.start).Seconds()
			evs = append(evs, state.Event{Instance: j.inst, Batch: k.b, Job: k.j, Attempt: k.att, Outcome: state.OutcomePreempted, Start: j.start.UnixNano(), End: now.UnixNano(),
				Message: "preempted"})
		}
	}
	if len(evs) == 0 {
		return 0, nil
	}
	slices.SortFunc(evs, func(x, y state.Event) int {
		if x.Batch != y.Batch {
			return int(x.Batch) - int(y.Batch)
		}
		return int(x.Job) - int(y.Job)
	})
	if _, err := r.apply(&state.Events{Now: now.UnixNano(), Events: evs}); err != nil {
		return 0, err
	}
	done := 0
	for _, e := range evs {
		delete(r.running, attemptKey{e.Batch, e.Job, e.Attempt})
		r.known[e.Instance] = slices.DeleteFunc(r.known[e.Instance], func(x state.AttemptID) bool { return x.Batch == e.Batch && x.Job == e.Job })
		if e.Outcome == state.OutcomeSuccess {
			done++
		}
	}
	return done, nil
}

// machines plays the machines: a booted one's worker joins with the join
// token its launch gave it (apply checks it), a live worker is heard
// from, and a reclaimed machine's worker dies with what it ran (the
// leader's autoscale round finds the machine gone and its jobs run
// again).
func (r *run) machines(now time.Time) error {
	var byID map[string]*state.Machine
	var regions map[string]string
	for _, in := range r.cloud.Machines() {
		inst, joined := r.joined[in.Name]
		switch {
		case in.Preempted:
			if !joined || inst == 0 {
				continue
			}
			for k, j := range r.running {
				if j.inst == inst {
					r.waste.Lost += float64(j.cpu) / 1000 * now.Sub(j.start).Seconds()
					delete(r.running, k)
				}
			}
			delete(r.known, inst)
			delete(r.heard, inst)
			r.joined[in.Name], r.dead[inst] = 0, true
		case joined:
			if inst != 0 {
				r.heard[inst] = now
			}
		case in.Running:
			if byID == nil {
				// Read once a step, and only when a worker joins.
				st := view.AutoscaleState(r.st)
				byID, regions = map[string]*state.Machine{}, map[string]string{}
				for i := range st.Machines {
					byID[st.Machines[i].ID] = &st.Machines[i]
				}
				for _, c := range st.Clusters {
					regions[c.Name] = c.Region
				}
			}
			m := byID[in.Name]
			if m == nil || m.State != state.MachineLaunching {
				continue
			}
			tok := r.cloud.JoinToken(in.Name)
			res, err := r.apply(&state.Activate{Now: now.UnixNano(), Name: in.Name, NodeID: in.Name, CPUMilli: m.CPUMilli, Memory: m.Memory,
				TokenHash: token.Hash("instance " + in.Name), Region: regions[m.Cluster], Cluster: m.Cluster, Pool: m.Pool, Machine: in.Name, JoinHash: token.Hash(tok)})
			if err != nil {
				return fmt.Errorf("machine %s's worker joins: %w", in.Name, err)
			}
			id := res.(*state.ActivateResult).Instance
			r.joined[in.Name], r.heard[id] = id, now
		}
	}
	return nil
}

// account adds one step's waste: each live machine's cores while it
// boots, all of them while it runs nothing, its free ones while it runs
// something.
func (r *run) account() {
	busy := map[uint32]float64{}
	for _, j := range r.running {
		busy[j.inst] += float64(j.cpu) / 1000
	}
	step := r.opts.Step.Seconds()
	for _, in := range r.cloud.Machines() {
		if in.Preempted {
			continue
		}
		cores := r.cores[in.Config]
		inst := r.joined[in.Name]
		switch b := busy[inst]; {
		case inst == 0:
			r.waste.Booting += cores * step
		case b == 0:
			r.waste.Idle += cores * step
		default:
			r.waste.PartlyIdle += max(cores-b, 0) * step
		}
	}
}

// schedule runs the leader's scheduling round: the view read from the
// state, the scheduler, the plan through apply; the workers
// then take what they were handed.
func (r *run) schedule(now time.Time) error {
	p := r.scheduler.Round(r.st).Plan
	if p == nil {
		return nil
	}
	if _, err := r.apply(p); err != nil {
		return err
	}
	touched := map[uint32]bool{}
	for _, pl := range p.Placements {
		touched[pl.Instance] = true
	}
	for _, inst := range slices.Sorted(maps.Keys(touched)) {
		if r.dead[inst] {
			// Its machine was reclaimed: no worker takes what it was
			// handed; the autoscale round finds the machine gone and
			// the jobs run again.
			continue
		}
		r.sync(inst, now)
	}
	return r.started(now)
}

// sync plays a worker's sync: it takes what it was handed (and will say
// it started: started) and starts stopping what it is told to preempt
// (ending it after the grace the order gives).
func (r *run) sync(inst uint32, now time.Time) {
	wv := r.st.WorkerView(inst, r.known[inst])
	for _, as := range wv.Assign {
		r.starts = append(r.starts, state.Event{Instance: inst, Batch: as.Batch, Job: as.Job, Attempt: as.Attempt, Started: true, Start: now.UnixNano()})
		r.known[inst] = append(r.known[inst], as.AttemptID)
		r.running[attemptKey{as.Batch, as.Job, as.Attempt}] = runningJob{inst: inst, cpu: r.cpus[as.Batch][as.Job-1], start: now, end: now.Add(r.durations[as.Batch][as.Job-1])}
	}
	for _, p := range wv.Preempt {
		k := attemptKey{p.Batch, p.Job, p.Attempt}
		if j, ok := r.running[k]; ok && j.stopAt.IsZero() {
			j.stopAt = now.Add(time.Duration(p.GraceMs) * time.Millisecond)
			r.running[k] = j
		}
	}
}

// started tells the state the attempts the workers took have started, as
// a worker's next sync does (their charge and run time count from then).
func (r *run) started(now time.Time) error {
	if len(r.starts) == 0 {
		return nil
	}
	_, err := r.apply(&state.Events{Now: now.UnixNano(), Events: r.starts})
	r.starts = r.starts[:0]
	return err
}

// preempt runs the leader's preemption round (a workload with queues) and
// has the workers of the attempts it stops hear of it.
func (r *run) preempt(now time.Time) error {
	if r.pre == nil {
		return nil
	}
	cmd, _, _ := r.pre.Round(r.st, now)
	if cmd == nil {
		return nil
	}
	if _, err := r.apply(cmd); err != nil {
		return err
	}
	r.preempted += len(cmd.Attempts)
	insts := map[uint32]bool{}
	for _, j := range r.running {
		insts[j.inst] = true
	}
	for _, inst := range slices.Sorted(maps.Keys(insts)) {
		if !r.dead[inst] {
			r.sync(inst, now)
		}
	}
	return r.started(now)
}

// trace prints the fleet: machines, spend, cores busy, free and waiting.
// demandCores is what the jobs want now, in millicores: those running
// and those waiting.
func (r *run) demandCores() int64 {
	var d int64
	for _, j := range r.running {
		d += j.cpu
	}
	for _, u := range view.AutoscaleDemand(r.st, 1<<50, 0, 0).Users {
		for _, sh := range u.Shapes {
			d += sh.CPUMilli * sh.Count
		}
	}
	return d
}

func (r *run) trace(now time.Time) {
	var busy int64
	for _, j := range r.running {
		busy += j.cpu
	}
	var free int64
	for _, f := range view.AutoscaleState(r.st).Free {
		free += f.CPUMilli
	}
	var ready int64
	for _, u := range view.AutoscaleDemand(r.st, 1<<50, 0, 0).Users {
		for _, sh := range u.Shapes {
			ready += sh.CPUMilli * sh.Count
		}
	}
	cs := r.cloud.Stats()
	_, _ = fmt.Fprintf(r.opts.Trace, "%6.2fh  machines %3d  $%6.2f/h  busy %5.0f  free %5.0f  waiting %6.0f cores\n",
		now.Sub(start).Hours(), cs.Live, cs.SpendRate.Dollars(), float64(busy)/1000, float64(free)/1000, float64(ready)/1000)
}

func round(f float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(f*p) / p
}

// Comparison is one workload under drover's policy, Hail's and a static
// fleet, and drover's cost and p95 wait as ratios to each.
type Comparison struct {
	Drover, Hail, Static *Result
	// Ratios of drover's to the other's (below 1: drover did better).
	CostVsHail, CostVsStatic       float64
	WaitP95VsHail, WaitP95VsStatic float64
}

// Compare runs w again under Hail's policy and under a static fleet
// sized to the p95 of the demand drover's run (drover) saw, and puts the
// three side by side.
func Compare(ctx context.Context, w *Workload, opts Options, drover *Result) (*Comparison, error) {
	c := &Comparison{Drover: drover}
	ho := opts
	ho.Policy, ho.Trace = "hail", nil
	var err error
	if c.Hail, err = Run(ctx, w, ho); err != nil {
		return nil, fmt.Errorf("hail's policy: %w", err)
	}
	so := opts
	so.Policy, so.StaticCores, so.Trace = "static", max(drover.DemandP95Cores, 1), nil
	if c.Static, err = Run(ctx, w, so); err != nil {
		return nil, fmt.Errorf("a static fleet: %w", err)
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return round(a/b, 3)
	}
	c.CostVsHail, c.CostVsStatic = ratio(drover.CostUSD.Dollars(), c.Hail.CostUSD.Dollars()), ratio(drover.CostUSD.Dollars(), c.Static.CostUSD.Dollars())
	c.WaitP95VsHail, c.WaitP95VsStatic = ratio(drover.WaitP95Min, c.Hail.WaitP95Min), ratio(drover.WaitP95Min, c.Static.WaitP95Min)
	return c, nil
}
