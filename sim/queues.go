package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/internal/token"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/leader"
	"github.com/drover-sched/drover/server/state"
	"github.com/drover-sched/drover/server/view"
)

// Queue scenarios: queues sharing a fixed fleet over regions and
// clusters, run through the real state machine, the leader's scheduling
// round and its preemption round (leader.Preemptor) on a virtual clock.
// The simulator plays the workers: they run each attempt for its job's
// duration, and an attempt told to stop ends preempted once its
// preemption grace has passed (or succeeds, if its time is up first).
// Scenarios are JSON files (testdata/queues/) that say what they expect.

// QueueScenario is a fleet, a queue tree, batches over time and what the
// run must show.
type QueueScenario struct {
	Name    string       `json:"name"`
	Fleet   []FleetGroup `json:"fleet"`
	Queues  []api.Queue  `json:"queues"`
	Batches []QueueBatch `json:"batches"`
	// Until stops the run (absent: once every job is done).
	Until Duration `json:"until,omitempty"`
	// Step is the virtual time between two steps (absent: the options').
	Step   Duration    `json:"step,omitempty"`
	Expect QueueExpect `json:"expect"`
}

// FleetGroup is Workers workers of one size in one cluster.
type FleetGroup struct {
	Cluster string  `json:"cluster"`
	Region  string  `json:"region"`
	Workers int     `json:"workers"`
	CPU     float64 `json:"cpu"`
	Memory  string  `json:"memory"`
}

// QueueBatch is a batch of a billing project arriving at At, in the
// project's queue or the one it names; with Every, one arrives every
// Every until Until (a flood).
type QueueBatch struct {
	At       Duration   `json:"at"`
	Every    Duration   `json:"every,omitempty"`
	Until    Duration   `json:"until,omitempty"`
	User     string     `json:"user"`
	Project  string     `json:"project"`
	Queue    string     `json:"queue,omitempty"`
	Priority int32      `json:"priority,omitempty"`
	Jobs     []QueueJob `json:"jobs"`
	// JobGroups are the batch's job groups (api.JobGroupSpec), which
	// its jobs name (QueueJob.Group).
	JobGroups []api.JobGroupSpec `json:"job_groups,omitempty"`
	// SLO is the batch's runtime target (api's slo_seconds), Workflow its
	// workflow attribute (absent: its name, "sim").
	SLO      Duration `json:"slo,omitempty"`
	Workflow string   `json:"workflow,omitempty"`
}

// QueueJob is Count jobs alike.
type QueueJob struct {
	CPU             float64  `json:"cpu"`
	Memory          string   `json:"memory"`
	Duration        Duration `json:"duration"`
	Count           int      `json:"count,omitempty"`
	PreemptionGrace Duration `json:"preemption_grace,omitempty"`
	// PeakMemory is what the job uses (absent: what it asks for): an
	// attempt given less is ended by the out-of-memory killer halfway
	// through its run, and runs again with more if OOMRetry says so.
	PeakMemory string        `json:"peak_memory,omitempty"`
	OOMRetry   *api.OOMRetry `json:"oom_retry,omitempty"`
	// Group is the path of the job group the jobs are in (empty: none);
	// Fail: each attempt fails (exit 1) at its end.
	Group string `json:"group,omitempty"`
	Fail  bool   `json:"fail,omitempty"`
	// Gang makes the Count jobs a gang (api.JobSpec.Gang).
	Gang bool `json:"gang,omitempty"`
}

// QueueExpect is what a scenario must show (each part absent: not
// checked).
type QueueExpect struct {
	// Shares are each queue's share of the cores its queues hold
	// together, averaged over [SharesFrom, SharesTo), within Tolerance of
	// it (a fraction of the target).
	Shares     map[string]float64 `json:"shares,omitempty"`
	SharesFrom Duration           `json:"shares_from,omitempty"`
	SharesTo   Duration           `json:"shares_to,omitempty"`
	Tolerance  float64            `json:"tolerance,omitempty"`
	// MaxP99Wait bounds the 99th percentile of a queue's jobs' waits
	// (Ready to their last attempt's start).
	MaxP99Wait map[string]Duration `json:"max_p99_wait,omitempty"`
	// ReclaimWithin bounds, per queue, the time from its first batch's
	// arrival to the first order to stop a borrower's attempt for it;
	// VictimRegion is where those attempts must run.
	ReclaimWithin map[string]Duration `json:"reclaim_within,omitempty"`
	VictimRegion  map[string]string   `json:"victim_region,omitempty"`
	// MinGapBetweenPreemptions: no job is preempted twice within it.
	MinGapBetweenPreemptions Duration `json:"min_gap_between_preemptions,omitempty"`
	// MaxPreempted bounds, per queue, the attempts stopped for it (a
	// claim that frees room its work cannot use claims again and again).
	MaxPreempted map[string]int `json:"max_preempted,omitempty"`
	// NoStarvation: every queue with work runs some within StarveWithin
	// of its first arrival.
	StarveWithin Duration `json:"starve_within,omitempty"`
	// Priorities: no job of a user starts while a job of the same user
	// and a higher priority in its queue waits (between users, fair
	// share decides: a priority orders a user's own work).
	Priorities bool `json:"priorities,omitempty"`
	// UserShares are each user's share of the cores the users named hold
	// together, averaged over [SharesFrom, SharesTo), within Tolerance of
	// it: fair share between the users of a leaf whatever priorities they
	// ask.
	UserShares map[string]float64 `json:"user_shares,omitempty"`
	// PreemptedFirst: no job of a batch starts for the first time while
	// a job of the same batch that was preempted waits to run again (a
	// preempted job keeps its place in line).
	PreemptedFirst bool `json:"preempted_first,omitempty"`
	// EstimateMedianError bounds the median absolute error of job why's
	// estimated start (view.Place) against the start the run saw, over
	// Ready jobs sampled every estimateEvery (with at least
	// EstimateSamples of them).
	EstimateMedianError Duration `json:"estimate_median_error,omitempty"`
	EstimateSamples     int      `json:"estimate_samples,omitempty"`
	// OOMKills and Errors: exactly so many attempts ended by the
	// out-of-memory killer, and so many jobs that ended in error (set
	// either to check both).
	OOMKills *int `json:"oom_kills,omitempty"`
	Errors   *int `json:"errors,omitempty"`
	// Succeeded, Failed and Cancelled: exactly so many jobs ended so
	// (each absent: not checked); GroupsCancelled: the job groups (by
	// batch, in arrival order from 1, and path: "1:align") that ended
	// cancelled, all of them; MaxCoreHours bounds what the attempts held.
	Succeeded       *int     `json:"succeeded,omitempty"`
	Failed          *int     `json:"failed,omitempty"`
	Cancelled       *int     `json:"cancelled,omitempty"`
	GroupsCancelled []string `json:"groups_cancelled,omitempty"`
	MaxCoreHours    float64  `json:"max_core_hours,omitempty"`
	// GangsWhole: every start of a gang's members was at one instant, in
	// one cluster (GangStarts counts those starts).
	GangsWhole bool `json:"gangs_whole,omitempty"`
	GangStarts int  `json:"gang_starts,omitempty"`
	// SLOSuccess bounds a queue's SLO success ratio (runs that met their
	// SLO over runs, placement.TallySLO) over the runs that completed in
	// [From, To).
	SLOSuccess []SLOWindow `json:"slo_success,omitempty"`
	// MaxCostGrowth bounds the core-hours of the last CostDays days
	// against those of the first CostDays (0.05: at most 5% more).
	MaxCostGrowth *float64 `json:"max_cost_growth,omitempty"`
	CostDays      int      `json:"cost_days,omitempty"`
	// MinAutoApplied: at least so many regenerations applied.
	MinAutoApplied int `json:"min_auto_applied,omitempty"`
	// HomeClusters: each queue named is routed to these clusters at the
	// end (comma-separated; "" for any).
	HomeClusters map[string]string `json:"home_clusters,omitempty"`
}

// SLOWindow bounds a queue's SLO success ratio over a window.
type SLOWindow struct {
	Queue string   `json:"queue"`
	From  Duration `json:"from"`
	To    Duration `json:"to"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
}

// ReadQueueScenario reads a scenario file.
func ReadQueueScenario(path string) (*QueueScenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	var s QueueScenario
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(s.Fleet) == 0 || len(s.Batches) == 0 {
		return nil, fmt.Errorf("%s: a scenario needs a fleet and batches", path)
	}
	return &s, nil
}

// QueueResult is what a scenario run saw.
type QueueResult struct {
	Name string `json:"name"`
	Jobs int    `json:"jobs"`
	// Shares: each queue's mean share of the cores the expected queues
	// held, over the expectation's window.
	Shares map[string]float64 `json:"shares,omitempty"`
	// P50Wait, P99Wait and MaxWait per leaf queue, in seconds.
	P50Wait map[string]float64 `json:"p50_wait_s"`
	P99Wait map[string]float64 `json:"p99_wait_s"`
	MaxWait map[string]float64 `json:"max_wait_s"`
	// Preempted counts the attempts told to stop, by the queue they were
	// stopped for; ReclaimAfter is, per queue, the time from its first
	// arrival to its first reclaim; VictimRegions where those ran.
	Preempted     map[string]int      `json:"preempted"`
	ReclaimAfter  map[string]float64  `json:"reclaim_after_s,omitempty"`
	VictimRegions map[string][]string `json:"victim_regions,omitempty"`
	// MinPreemptionGap is the shortest time from a job's restart after a
	// preemption to its next preemption (-1: no job was preempted twice).
	MinPreemptionGap   float64 `json:"min_preemption_gap_s"`
	PriorityInversions int     `json:"priority_inversions"`
	// UserShares: each user's mean share of the cores the expected users
	// held, over the expectation's window.
	UserShares map[string]float64 `json:"user_shares,omitempty"`
	// FirstRun: per queue, from its first arrival to its first start.
	FirstRun map[string]float64 `json:"first_run_s"`
	// PlaceLost counts first starts of jobs while a preempted job of
	// their batch waited to run again.
	PlaceLost int `json:"place_lost"`
	// Estimates: Ready jobs sampled for job why's estimated start that
	// then started; the median absolute error of the estimate, and the
	// median wait from the sample to the start (what it estimated), in
	// seconds.
	Estimates              int     `json:"estimates,omitempty"`
	EstimateMedianErrorSec float64 `json:"estimate_median_error_s,omitempty"`
	EstimateMedianWaitSec  float64 `json:"estimate_median_wait_s,omitempty"`
	// OOMKills: attempts the out-of-memory killer ended; Errors: jobs
	// that ended in error.
	OOMKills int `json:"oom_kills"`
	Errors   int `json:"errors"`
	// Succeeded, Failed and Cancelled count jobs by how they ended;
	// GroupsCancelled are the job groups that ended cancelled
	// ("batch:path"); CoreHours is what the attempts held, cores times
	// hours; LastEnd when the last job ended, in seconds.
	Succeeded       int      `json:"succeeded"`
	Failed          int      `json:"failed"`
	Cancelled       int      `json:"cancelled"`
	GroupsCancelled []string `json:"groups_cancelled,omitempty"`
	CoreHours       float64  `json:"core_hours"`
	LastEndSec      float64  `json:"last_end_s"`
	// GangStarts counts the starts of gangs (their members together);
	// GangsSplit those whose members did not all start at one instant in
	// one cluster.
	GangStarts int `json:"gang_starts,omitempty"`
	GangsSplit int `json:"gangs_split,omitempty"`
	// SLOSuccess: each expected window's SLO success ratio and runs;
	// DailyCoreHours what the attempts ending each day held;
	// AutoApplied the regenerations of queue settings applied (auto_apply
	// on a tree), and Settings each queue's weight, guarantee (cores) and
	// max_running jobs at the end.
	SLOSuccess     []SLOWindowResult `json:"slo_success,omitempty"`
	DailyCoreHours []float64         `json:"daily_core_hours,omitempty"`
	AutoApplied    int               `json:"auto_applied,omitempty"`
	Settings       map[string]string `json:"settings,omitempty"`
	// HomeClusters: each queue's home clusters at the end.
	HomeClusters map[string]string `json:"home_clusters,omitempty"`
}

// SLOWindowResult is a queue's SLO success over an expected window.
type SLOWindowResult struct {
	Queue string  `json:"queue"`
	Runs  int64   `json:"runs"`
	Ratio float64 `json:"ratio"`
}

// estimateEvery is how often the run samples estimated starts, and
// estimatesPerSample how many Ready jobs, spread along the line, each time.
const (
	estimateEvery      = 10 * time.Minute
	estimatesPerSample = 20
)

// estimate is one job's estimated start, taken at a sample.
type estimate struct {
	key       jobKey
	at, start time.Time
}

// qjob is one job's life as the simulation saw it.
type qjob struct {
	queue     string
	user      string
	milli     int64
	priority  int32
	ready     time.Time // when it (last) became Ready
	waited    []time.Duration
	preempted []time.Time
	starts    []time.Time
	dur       time.Duration
	grace     time.Duration
	peak      int64    // memory it uses
	fail      bool     // its attempts fail
	gang      uint32   // the first job of its gang (0: none)
	clusters  []string // the cluster of each start
	done      bool
}

type qrun struct {
	raftLog
	// history holds what each queue held (a tree with auto_apply reads
	// it); lastSample is when the run last recorded it.
	history    history.Store
	lastSample time.Time
	scheduler  *leader.Scheduler
	sc         *QueueScenario
	opts       Options
	insts      []uint32
	region     map[uint32]string
	cluster    map[uint32]string // each instance's
	jobs       map[jobKey]*qjob
	running    map[attemptKey]*qattempt
	known      map[uint32][]state.AttemptID
	res        *QueueResult
	first      map[string]time.Time
	// samples of each queue's cores held, for shares, and each user's
	held     map[string]float64
	nSam     int
	userHeld map[string]float64
	nUserSam int
	batches  uint64
	// estimates sampled (sampleEstimates), and when last.
	estimates    []estimate
	lastEstimate time.Time
}

type qattempt struct {
	inst     uint32
	start    time.Time
	end      time.Time
	stopping bool
	stopAt   time.Time
	oom      bool // ends out of memory at end
	fail     bool // fails at end
	cancel   bool // its worker was told to kill it: cancelled at end
}

// RunQueues runs a scenario. Every PreemptEvery of virtual time the
// leader's preemption round runs (opts.AutoscaleEvery is not used).
func RunQueues(ctx context.Context, sc *QueueScenario, opts Options, preemptEvery time.Duration) (*QueueResult, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if preemptEvery <= 0 {
		return nil, errors.New("sim: the preemption interval must be positive")
	}
	r := &qrun{raftLog: raftLog{st: state.New(), clk: &clock{t: start}, check: opts.Check}, sc: sc, opts: opts, region: map[uint32]string{}, cluster: map[uint32]string{}, jobs: map[jobKey]*qjob{},
		running: map[attemptKey]*qattempt{}, known: map[uint32][]state.AttemptID{}, first: map[string]time.Time{}, held: map[string]float64{}, userHeld: map[string]float64{},
		res: &QueueResult{Name: sc.Name, P50Wait: map[string]float64{}, P99Wait: map[string]float64{}, MaxWait: map[string]float64{},
			Preempted: map[string]int{}, ReclaimAfter: map[string]float64{}, VictimRegions: map[string][]string{}, FirstRun: map[string]float64{}}}
	r.scheduler = &leader.Scheduler{Clock: r.clk, MaxJobs: opts.MaxPlacements}
	if sc.Step > 0 {
		r.opts.Step = time.Duration(sc.Step)
	}
	for _, q := range sc.Queues {
		if q.AutoApply != nil {
			dir, err := os.MkdirTemp("", "drover-sim-history-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			if r.history, err = history.OpenEmbedded(dir); err != nil {
				return nil, err
			}
			defer r.history.Close()
			break
		}
	}
	if err := r.setUp(); err != nil {
		return nil, err
	}
	return r.loop(ctx, preemptEvery)
}

// autoApplyEvery is how often the run samples what each queue holds into
// its history store and regenerates the trees whose auto_apply is due
// (the leader's QueueSampleInterval and AutoApplyTick).
const autoApplyEvery = time.Minute

// autoApply, in a run with a history store (a tree has auto_apply),
// records each queue's use every autoApplyEvery, and regenerates the
// trees that are due, as the leader does (apiview.QueueSamples,
// apiview.DueTrees, apiview.Regenerate).
func (r *qrun) autoApply(ctx context.Context, now time.Time) error {
	if r.history == nil || (!r.lastSample.IsZero() && now.Sub(r.lastSample) < autoApplyEvery) {
		return nil
	}
	r.lastSample = now
	queues := r.st.Queues()
	if samples := apiview.QueueSamples(queues, r.st.Clusters(), now, int64(autoApplyEvery/time.Second)); len(samples) > 0 {
		if err := r.history.PutQueueUsage(ctx, samples); err != nil {
			return err
		}
	}
	for _, tree := range apiview.DueTrees(r.st, queues, now) {
		cmd, err := apiview.Regenerate(ctx, queues, r.st.Clusters(), r.history, tree, now, "drover auto_apply")
		if err != nil {
			return err
		}
		res, err := r.apply(cmd)
		if err != nil {
			return err
		}
		if v := res.(*state.AutoApplyResult).Version; v.Applied {
			r.res.AutoApplied++
		}
	}
	return nil
}

func (r *qrun) setUp() error {
	now := r.clk.t.UnixNano()
	if _, err := r.apply(&state.Bootstrap{Now: now, Admin: "root", TokenHash: "h", DefaultProject: "default"}); err != nil {
		return err
	}
	users, projects := map[string]bool{}, map[string]bool{"default": true}
	for _, b := range r.sc.Batches {
		if !users[b.User] {
			users[b.User] = true
			if _, err := r.apply(&state.CreateUser{Now: now, Name: b.User, TokenHash: "h-" + b.User}); err != nil {
				return err
			}
		}
		if !projects[b.Project] {
			projects[b.Project] = true
			if _, err := r.apply(&state.CreateBillingProject{Now: now, Name: b.Project, Members: []string{"root"}}); err != nil {
				return err
			}
		}
	}
	for _, b := range r.sc.Batches {
		if _, err := r.apply(&state.SetMember{Project: b.Project, User: b.User, Member: true}); err != nil {
			return err
		}
	}
	cfg := &state.ApplyPlacement{Now: now}
	clusters := map[string]bool{}
	for _, f := range r.sc.Fleet {
		if !clusters[f.Cluster] {
			clusters[f.Cluster] = true
			cfg.Clusters = append(cfg.Clusters, state.Cluster{Name: f.Cluster, Region: f.Region})
		}
	}
	for _, q := range r.sc.Queues {
		sq, err := apiview.QueueFromAPI(q)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", r.sc.Name, err)
		}
		cfg.Queues = append(cfg.Queues, sq)
	}
	if _, err := r.apply(cfg); err != nil {
		return err
	}
	for _, f := range r.sc.Fleet {
		mem, err := units.ParseBytes(f.Memory)
		if err != nil {
			return fmt.Errorf("fleet %s: %w", f.Cluster, err)
		}
		for i := range f.Workers {
			name := fmt.Sprintf("%s-%03d", f.Cluster, i)
			res, err := r.apply(&state.Activate{Now: now, Name: name, NodeID: name, CPUMilli: int64(f.CPU * 1000), Memory: mem,
				TokenHash: token.Hash("instance " + name), Region: f.Region, Cluster: f.Cluster})
			if err != nil {
				return err
			}
			id := res.(*state.ActivateResult).Instance
			r.insts = append(r.insts, id)
			r.region[id] = f.Region
			r.cluster[id] = f.Cluster
		}
	}
	return nil
}

// arrivals expands the scenario's batches (floods included) in time
// order.
func (r *qrun) arrivals() []QueueBatch {
	return expandFloods(r.sc.Batches, func(b *QueueBatch) (*Duration, Duration, Duration) { return &b.At, b.Every, b.Until })
}

func (r *qrun) loop(ctx context.Context, preemptEvery time.Duration) (*QueueResult, error) {
	batches := r.arrivals()
	pre := leader.NewPreemptor()
	pre.Holds = r.scheduler.Holds
	next := 0
	var lastPreempt time.Time
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := r.clk.t
		for next < len(batches) && !start.Add(time.Duration(batches[next].At)).After(now) {
			if err := r.arrive(&batches[next], now); err != nil {
				return nil, err
			}
			next++
		}
		if err := r.complete(now); err != nil {
			return nil, err
		}
		if err := r.schedule(now); err != nil {
			return nil, err
		}
		if now.Sub(lastPreempt) >= preemptEvery {
			lastPreempt = now
			cmd, _, out := pre.Round(r.st, now)
			if cmd != nil {
				if _, err := r.apply(cmd); err != nil {
					return nil, err
				}
				r.recordVictims(out, len(cmd.Attempts), now)
			}
		}
		if err := r.sync(now); err != nil {
			return nil, err
		}
		r.sample(now)
		if err := r.autoApply(ctx, now); err != nil {
			return nil, err
		}
		if r.sc.Expect.EstimateMedianError > 0 && (r.lastEstimate.IsZero() || now.Sub(r.lastEstimate) >= estimateEvery) {
			r.lastEstimate = now
			r.sampleEstimates(now)
		}
		doneAll := next == len(batches) && len(r.running) == 0 && r.allDone()
		if doneAll || (r.sc.Until > 0 && now.Sub(start) >= time.Duration(r.sc.Until)) {
			break
		}
		if limit := max(72*time.Hour, time.Duration(r.sc.Until)+24*time.Hour); now.Sub(start) > limit {
			return nil, fmt.Errorf("sim: scenario %s did not finish within %s", r.sc.Name, limit)
		}
		r.clk.t = now.Add(r.opts.Step)
	}
	return r.result(), nil
}

// sampleEstimates asks job why's read (view.Place) for the estimated start
// of Ready jobs that never started, estimatesPerSample of them spread
// over them in job order.
func (r *qrun) sampleEstimates(now time.Time) {
	var waiting []jobKey
	for _, k := range slices.SortedFunc(maps.Keys(r.jobs), func(a, b jobKey) int {
		return cmp.Or(cmp.Compare(a.b, b.b), cmp.Compare(a.j, b.j))
	}) {
		if j := r.jobs[k]; len(j.starts) == 0 && !j.ready.IsZero() {
			waiting = append(waiting, k)
		}
	}
	if len(waiting) == 0 {
		return
	}
	stride := max(len(waiting)/estimatesPerSample, 1)
	r.st.Read(func(rd state.Reader) {
		for i := 0; i < len(waiting); i += stride {
			k := waiting[i]
			if jp, ok := view.Place(rd, k.b, k.j, now.UnixNano()); ok && jp.State == state.Ready && jp.Estimate.Known {
				r.estimates = append(r.estimates, estimate{key: k, at: now, start: now.Add(jp.Estimate.In)})
			}
		}
	})
}

func (r *qrun) allDone() bool {
	for k, j := range r.jobs {
		if !j.done {
			// Ended without running (cancelled with its group)?
			if jr, ok := r.st.Job(k.b, k.j); ok && jr.State.Final() {
				j.done = true
				continue
			}
			return false
		}
	}
	return true
}

// arrive submits a batch: its jobs and job groups as the API's handler
// turns them into entries (apiview.GroupDecls: each job's group, the
// gangs of groups declared gangs).
func (r *qrun) arrive(b *QueueBatch, now time.Time) error {
	var entries []state.JobEntry
	var specs []api.JobSpec
	type own struct {
		dur, grace time.Duration
		peak       int64
		fail       bool
	}
	var owns []own
	id := uint32(1)
	bid := r.nextBatch()
	queue := b.Queue
	if queue == "" {
		queue = r.defaultQueue(b.Project)
	}
	for _, j := range b.Jobs {
		mem, err := units.ParseBytes(j.Memory)
		if err != nil {
			return fmt.Errorf("a job of %s's batch at %s: %w", b.User, time.Duration(b.At), err)
		}
		n := max(j.Count, 1)
		peak := mem
		if j.PeakMemory != "" {
			if peak, err = units.ParseBytes(j.PeakMemory); err != nil {
				return fmt.Errorf("a job of %s's batch at %s: peak memory: %w", b.User, time.Duration(b.At), err)
			}
		}
		sp := &state.Spec{Name: "j", Array: n > 1, Command: []string{"true"}, CPUMilli: int64(j.CPU * 1000), Memory: mem}
		if j.PreemptionGrace > 0 {
			sp.Run = &state.Run{PreemptGraceMs: time.Duration(j.PreemptionGrace).Milliseconds()}
		}
		if o := j.OOMRetry; o != nil {
			if sp.Run == nil {
				sp.Run = &state.Run{}
			}
			sp.Run.Policy = &state.Policy{OOMFactorMilli: int32(math.Round(o.Factor * 1000)), OOMMaxMemory: o.MaxMemory}
		}
		if j.Gang {
			if sp.Run == nil {
				sp.Run = &state.Run{}
			}
			sp.Array = true
			sp.Run.Gang = &state.Gang{Size: uint32(n)}
		}
		entries = append(entries, state.JobEntry{First: id, Count: uint32(n), Spec: sp})
		specs = append(specs, api.JobSpec{JobID: int64(id), Count: int64(n), CPU: j.CPU, Memory: mem, JobGroup: j.Group, Gang: j.Gang, OOMRetry: j.OOMRetry})
		grace := time.Duration(j.PreemptionGrace)
		if grace == 0 {
			grace = state.DefaultPreemptGraceMs * time.Millisecond
		}
		owns = append(owns, own{dur: time.Duration(j.Duration), grace: grace, peak: peak, fail: j.Fail})
		id += uint32(n)
	}
	groups, err := apiview.GroupDecls(b.JobGroups, specs, entries, nil)
	if err != nil {
		return fmt.Errorf("%s's batch at %s: %w", b.User, time.Duration(b.At), err)
	}
	for i, e := range entries {
		var gangOf uint32 // the gang's first job
		if g := e.Spec.Gang(); g != nil {
			gangOf = e.First - g.Lead
		}
		o := owns[i]
		for k := range e.Count {
			r.jobs[jobKey{bid, e.First + k}] = &qjob{queue: queue, user: b.User, milli: e.Spec.CPUMilli, priority: b.Priority, ready: now, dur: o.dur, grace: o.grace, peak: o.peak, fail: o.fail, gang: gangOf}
		}
	}
	if _, ok := r.first[queue]; !ok {
		r.first[queue] = now
	}
	var attrs state.StringMap
	if b.Workflow != "" {
		attrs = state.StringMap{api.WorkflowAttribute: b.Workflow}
	}
	res, err := r.apply(&state.CreateBatch{Now: now.UnixNano(), User: b.User, BillingProject: b.Project, Name: "sim", Jobs: entries, Queue: b.Queue, Priority: b.Priority, Groups: groups,
		SLONs: int64(time.Duration(b.SLO)), Attributes: attrs})
	if err != nil {
		return err
	}
	if got := res.(*state.UpdateResult).Batch; got != bid {
		return fmt.Errorf("sim: the state numbered batch %d as %d", bid, got)
	}
	r.res.Jobs += int(id - 1)
	return nil
}

func (r *qrun) nextBatch() uint64 {
	r.batches++
	return r.batches
}

// defaultQueue is the leaf that lists the project.
func (r *qrun) defaultQueue(project string) string {
	for _, q := range r.sc.Queues {
		if slices.Contains(q.BillingProjects, project) {
			return q.Path
		}
	}
	return ""
}

// complete reports what ended: attempts whose time is up succeed; those
// told to stop whose grace has passed end preempted.
func (r *qrun) complete(now time.Time) error {
	var evs []state.Event
	for k, a := range r.running {
		switch {
		case !a.end.After(now) && a.cancel:
			evs = append(evs, state.Event{Instance: a.inst, Batch: k.b, Job: k.j, Attempt: k.att, Outcome: state.OutcomeCancelled, Start: a.start.UnixNano(), End: now.UnixNano(),
				Message: "killed: cancelled"})
		case !a.end.After(now) && a.fail:
			evs = append(evs, state.Event{Instance: a.inst, Batch: k.b, Job: k.j, Attempt: k.att, Outcome: state.OutcomeFailed, Exit: 1, Start: a.start.UnixNano(), End: a.end.UnixNano()})
		case !a.end.After(now) && a.oom:
			evs = append(evs, state.Event{Instance: a.inst, Batch: k.b, Job: k.j, Attempt: k.att, Outcome: state.OutcomeError, Exit: 137, Start: a.start.UnixNano(), End: a.end.UnixNano(),
				Message: "out of memory", OOM: true})
		case !a.end.After(now):
			evs = append(evs, state.Event{Instance: a.inst, Batch: k.b, Job: k.j, Attempt: k.att, Outcome: state.OutcomeSuccess, Start: a.start.UnixNano(), End: a.end.UnixNano()})
		case a.stopping && !a.stopAt.After(now):
			evs = append(evs, state.Event{Instance: a.inst, Batch: k.b, Job: k.j, Attempt: k.att, Outcome: state.OutcomePreempted, Start: a.start.UnixNano(), End: now.UnixNano(),
				Message: "preempted"})
		}
	}
	if len(evs) == 0 {
		return nil
	}
	slices.SortFunc(evs, func(x, y state.Event) int {
		if x.Batch != y.Batch {
			return int(x.Batch) - int(y.Batch)
		}
		return int(x.Job) - int(y.Job)
	})
	if _, err := r.apply(&state.Events{Now: now.UnixNano(), Events: evs}); err != nil {
		return err
	}
	for _, e := range evs {
		if a := r.running[attemptKey{e.Batch, e.Job, e.Attempt}]; a != nil {
			ch := float64(r.jobs[jobKey{e.Batch, e.Job}].milli) / 1000 * time.Duration(e.End-e.Start).Hours()
			r.res.CoreHours += ch
			day := int(now.Sub(start) / (24 * time.Hour))
			for len(r.res.DailyCoreHours) <= day {
				r.res.DailyCoreHours = append(r.res.DailyCoreHours, 0)
			}
			r.res.DailyCoreHours[day] += ch
			r.res.LastEndSec = max(r.res.LastEndSec, now.Sub(start).Seconds())
		}
		delete(r.running, attemptKey{e.Batch, e.Job, e.Attempt})
		r.known[e.Instance] = slices.DeleteFunc(r.known[e.Instance], func(x state.AttemptID) bool { return x.Batch == e.Batch && x.Job == e.Job })
		j := r.jobs[jobKey{e.Batch, e.Job}]
		switch {
		case e.Outcome == state.OutcomeSuccess || e.Outcome == state.OutcomeCancelled:
			j.done = true
		case e.Outcome == state.OutcomeFailed:
			// Retried, or failed for good.
			j.ready = now
			if jr, ok := r.st.Job(e.Batch, e.Job); ok && jr.State.Final() {
				j.done = true
			}
		case e.OOM:
			// Run again with more memory, or ended in error.
			r.res.OOMKills++
			j.ready = now
			if jr, ok := r.st.Job(e.Batch, e.Job); ok && jr.State == state.Error {
				j.done = true
				r.res.Errors++
			}
		default:
			j.preempted = append(j.preempted, now)
			j.ready = now
		}
	}
	return nil
}

// schedule runs the leader's scheduling round.
func (r *qrun) schedule(now time.Time) error {
	p := r.scheduler.Round(r.st).Plan
	if p == nil {
		return nil
	}
	_, err := r.apply(p)
	return err
}

// sync plays every worker's sync: it takes what it was handed (and says
// it started, as a worker does) and starts stopping what it is told to
// preempt.
func (r *qrun) sync(now time.Time) error {
	var started []state.Event
	for _, inst := range r.insts {
		wv := r.st.WorkerView(inst, r.known[inst])
		for _, as := range wv.Assign {
			r.known[inst] = append(r.known[inst], as.AttemptID)
			j := r.jobs[jobKey{as.Batch, as.Job}]
			a := &qattempt{inst: inst, start: now, end: now.Add(j.dur), fail: j.fail}
			if j.peak > as.Spec.Memory {
				a.end, a.oom = now.Add(j.dur/2), true
			}
			r.running[attemptKey{as.Batch, as.Job, as.Attempt}] = a
			j.waited = append(j.waited, now.Sub(j.ready))
			j.starts = append(j.starts, now)
			j.clusters = append(j.clusters, r.cluster[inst])
			started = append(started, state.Event{Instance: inst, Batch: as.Batch, Job: as.Job, Attempt: as.Attempt, Started: true, Start: now.UnixNano()})
		}
		for _, k := range wv.Kill {
			// Cancelled (its batch or its group): killed now.
			if a := r.running[attemptKey{k.Batch, k.Job, k.Attempt}]; a != nil && !a.cancel {
				a.cancel, a.end = true, now
			}
		}
		for _, p := range wv.Preempt {
			a := r.running[attemptKey{p.Batch, p.Job, p.Attempt}]
			if a != nil && !a.stopping {
				a.stopping, a.stopAt = true, now.Add(time.Duration(p.GraceMs)*time.Millisecond)
			}
		}
	}
	if len(started) == 0 {
		return nil
	}
	_, err := r.apply(&state.Events{Now: now.UnixNano(), Events: started})
	return err
}

// recordVictims notes who was stopped for whom, and where.
func (r *qrun) recordVictims(out *scheduler.PreemptOutput, n int, now time.Time) {
	for _, v := range out.Victims[:n] {
		r.res.Preempted[v.For]++
		if v.Kind != "reclaim" {
			continue
		}
		if _, ok := r.res.ReclaimAfter[v.For]; !ok {
			r.res.ReclaimAfter[v.For] = now.Sub(r.first[v.For]).Seconds()
		}
		if a := r.running[attemptKey{v.Batch, v.Job, v.Attempt.Attempt}]; a != nil {
			reg := r.region[a.inst]
			if !slices.Contains(r.res.VictimRegions[v.For], reg) {
				r.res.VictimRegions[v.For] = append(r.res.VictimRegions[v.For], reg)
			}
		}
	}
}

// sample adds each queue's cores held now to the shares' sums, and each
// user's to the users' shares, within the expectation's window.
func (r *qrun) sample(now time.Time) {
	e := &r.sc.Expect
	t := Duration(now.Sub(start))
	if t < e.SharesFrom || (e.SharesTo > 0 && t >= e.SharesTo) {
		return
	}
	if len(e.UserShares) > 0 {
		var total float64
		held := map[string]float64{}
		for k := range r.running {
			if j := r.jobs[jobKey{k.b, k.j}]; j != nil {
				if _, ok := e.UserShares[j.user]; ok {
					held[j.user] += float64(j.milli)
					total += float64(j.milli)
				}
			}
		}
		if total > 0 {
			for u, v := range held {
				r.userHeld[u] += v / total
			}
			r.nUserSam++
		}
	}
	if len(e.Shares) == 0 {
		return
	}
	var total float64
	held := map[string]float64{}
	for _, q := range r.st.Queues() {
		if _, ok := e.Shares[q.Path]; ok {
			held[q.Path] = float64(q.UsedMilli)
			total += float64(q.UsedMilli)
		}
	}
	if total == 0 {
		return
	}
	for p, v := range held {
		r.held[p] += v / total
	}
	r.nSam++
}

func (r *qrun) result() *QueueResult {
	res := r.res
	for k := range r.jobs {
		jr, _ := r.st.Job(k.b, k.j)
		switch jr.State {
		case state.Success:
			res.Succeeded++
		case state.Failed:
			res.Failed++
		case state.Cancelled:
			res.Cancelled++
		}
	}
	for b := uint64(1); b <= r.batches; b++ {
		gs, _ := r.st.JobGroups(b)
		for _, g := range gs {
			if g.Cancelled {
				res.GroupsCancelled = append(res.GroupsCancelled, fmt.Sprintf("%d:%s", b, g.Path))
			}
		}
	}
	res.CoreHours = round(res.CoreHours, 3)
	for i := range res.DailyCoreHours {
		res.DailyCoreHours[i] = round(res.DailyCoreHours[i], 1)
	}
	if len(r.sc.Expect.SLOSuccess) > 0 {
		recs := r.st.CompletedWithSLO(0, math.MaxInt)
		for _, w := range r.sc.Expect.SLOSuccess {
			var runs []placement.WorkflowRun
			for _, rec := range recs {
				b := apiview.Batch(&rec, r.clk.t)
				run, ok := history.SLORunOf(&b)
				at := time.Duration(rec.Completed - start.UnixNano())
				if ok && rec.Queue == w.Queue && at >= time.Duration(w.From) && at < time.Duration(w.To) {
					runs = append(runs, run.WorkflowRun)
				}
			}
			out := SLOWindowResult{Queue: w.Queue}
			for _, q := range placement.TallySLO(runs, 0).Queues {
				if q.Queue == w.Queue && q.Runs > 0 {
					out.Runs, out.Ratio = q.Runs, round(float64(q.Met)/float64(q.Runs), 3)
				}
			}
			res.SLOSuccess = append(res.SLOSuccess, out)
		}
	}
	if r.history != nil {
		res.Settings = map[string]string{}
		for _, q := range r.st.Queues() {
			res.Settings[q.Path] = fmt.Sprintf("weight %d, %g cores, max_running %d", q.EffectiveWeight(), float64(q.Guarantee.CPUMilli)/1000, q.Limits.MaxRunningJobs)
		}
	}
	res.HomeClusters = map[string]string{}
	for _, q := range r.st.Queues() {
		res.HomeClusters[q.Path] = strings.Join(q.HomeClusters, ",")
	}
	// Each gang's starts: its members' k-th starts at one instant, in one
	// cluster.
	type gangStart struct {
		b, first uint32
		k        int
	}
	type seen struct {
		at      time.Time
		cluster string
		split   bool
	}
	starts := map[gangStart]*seen{}
	for k, j := range r.jobs {
		if j.gang == 0 {
			continue
		}
		for i, at := range j.starts {
			key := gangStart{uint32(k.b), j.gang, i}
			s := starts[key]
			if s == nil {
				starts[key] = &seen{at: at, cluster: j.clusters[i]}
				continue
			}
			if !s.at.Equal(at) || s.cluster != j.clusters[i] {
				s.split = true
			}
		}
	}
	for _, s := range starts {
		res.GangStarts++
		if s.split {
			res.GangsSplit++
		}
	}
	if r.nSam > 0 {
		res.Shares = map[string]float64{}
		for p, v := range r.held {
			res.Shares[p] = round(v/float64(r.nSam), 4)
		}
	}
	if r.nUserSam > 0 {
		res.UserShares = map[string]float64{}
		for u, v := range r.userHeld {
			res.UserShares[u] = round(v/float64(r.nUserSam), 4)
		}
	}
	waits := map[string][]time.Duration{}
	firstRun := map[string]time.Time{}
	res.MinPreemptionGap = -1
	for _, j := range r.jobs {
		waits[j.queue] = append(waits[j.queue], j.waited...)
		for _, s := range j.starts {
			if f, ok := firstRun[j.queue]; !ok || s.Before(f) {
				firstRun[j.queue] = s
			}
		}
		for i := 1; i < len(j.preempted); i++ {
			if g := j.preempted[i].Sub(j.starts[i]).Seconds(); res.MinPreemptionGap < 0 || g < res.MinPreemptionGap {
				res.MinPreemptionGap = g
			}
		}
	}
	var errsAt, waitsAt []time.Duration
	for _, e := range r.estimates {
		if j := r.jobs[e.key]; len(j.starts) > 0 {
			d := j.starts[0].Sub(e.start)
			errsAt, waitsAt = append(errsAt, max(d, -d)), append(waitsAt, j.starts[0].Sub(e.at))
		}
	}
	if len(errsAt) > 0 {
		slices.Sort(errsAt)
		slices.Sort(waitsAt)
		res.Estimates = len(errsAt)
		res.EstimateMedianErrorSec, res.EstimateMedianWaitSec = errsAt[len(errsAt)/2].Seconds(), waitsAt[len(waitsAt)/2].Seconds()
	}
	for q, ws := range waits {
		slices.Sort(ws)
		if len(ws) == 0 {
			continue
		}
		pct := func(p float64) float64 {
			return ws[min(int(math.Ceil(p*float64(len(ws))))-1, len(ws)-1)].Seconds()
		}
		res.P50Wait[q], res.P99Wait[q], res.MaxWait[q] = pct(0.5), pct(0.99), ws[len(ws)-1].Seconds()
	}
	for q, t := range firstRun {
		res.FirstRun[q] = t.Sub(r.first[q]).Seconds()
	}
	res.PriorityInversions = r.inversions()
	res.PlaceLost = r.placeLost()
	return res
}

// placeLost counts first starts of jobs while a job of the same batch
// that had been preempted was Ready again and waited (strictly between
// its return and its restart: a start in the same round is no overtaking).
func (r *qrun) placeLost() int {
	type span struct{ from, to time.Time }
	back := map[uint64][]span{}
	for k, j := range r.jobs {
		for i := 1; i < len(j.starts); i++ {
			back[k.b] = append(back[k.b], span{j.starts[i].Add(-j.waited[i]), j.starts[i]})
		}
	}
	n := 0
	for k, j := range r.jobs {
		if len(j.starts) == 0 {
			continue
		}
		s := j.starts[0]
		for _, sp := range back[k.b] {
			if sp.from.Before(s) && s.Before(sp.to) {
				n++
				break
			}
		}
	}
	return n
}

// inversions counts starts of jobs while a job of the same user and a
// higher priority in the same queue was Ready and waited.
func (r *qrun) inversions() int {
	type span struct{ from, to time.Time }
	waiting := map[string]map[int32][]span{}
	for _, j := range r.jobs {
		key := j.queue + "\x00" + j.user
		if waiting[key] == nil {
			waiting[key] = map[int32][]span{}
		}
		for i, s := range j.starts {
			w := j.waited[i]
			waiting[key][j.priority] = append(waiting[key][j.priority], span{s.Add(-w), s})
		}
	}
	n := 0
	for _, j := range r.jobs {
		for _, s := range j.starts {
			for prio, spans := range waiting[j.queue+"\x00"+j.user] {
				if prio <= j.priority {
					continue
				}
				for _, sp := range spans {
					if sp.from.Before(s) && s.Before(sp.to) {
						n++
						break
					}
				}
			}
		}
	}
	return n
}

// Check compares a result with what its scenario expects.
func (sc *QueueScenario) Check(res *QueueResult) error {
	e := &sc.Expect
	var errs []error
	tol := e.Tolerance
	if tol == 0 {
		tol = 0.05
	}
	for q, want := range e.Shares {
		if got := res.Shares[q]; math.Abs(got-want) > tol*want {
			errs = append(errs, fmt.Errorf("queue %s held %.3f of the cores, want %.3f ± %.0f%%", q, got, want, tol*100))
		}
	}
	for q, limit := range e.MaxP99Wait {
		if got, ok := res.P99Wait[q]; !ok || got > time.Duration(limit).Seconds() {
			errs = append(errs, fmt.Errorf("queue %s: p99 wait %.0f s, want at most %s", q, got, time.Duration(limit)))
		}
	}
	for q, limit := range e.ReclaimWithin {
		if got, ok := res.ReclaimAfter[q]; !ok || got > time.Duration(limit).Seconds() {
			errs = append(errs, fmt.Errorf("queue %s: first reclaim %.0f s after its work arrived (reclaimed: %v), want at most %s", q, got, ok, time.Duration(limit)))
		}
	}
	for q, region := range e.VictimRegion {
		if got := res.VictimRegions[q]; len(got) != 1 || got[0] != region {
			errs = append(errs, fmt.Errorf("queue %s: reclaimed attempts ran in %v, want %s", q, got, region))
		}
	}
	for _, q := range slices.Sorted(maps.Keys(e.MaxPreempted)) {
		if got := res.Preempted[q]; got > e.MaxPreempted[q] {
			errs = append(errs, fmt.Errorf("queue %s: %d attempts stopped for it, want at most %d", q, got, e.MaxPreempted[q]))
		}
	}
	if g := time.Duration(e.MinGapBetweenPreemptions).Seconds(); g > 0 && res.MinPreemptionGap >= 0 && res.MinPreemptionGap < g {
		errs = append(errs, fmt.Errorf("a job was preempted again %.0f s into its attempt, want at least %s", res.MinPreemptionGap, time.Duration(e.MinGapBetweenPreemptions)))
	}
	if e.StarveWithin > 0 {
		for _, q := range sc.Queues {
			if !hasWork(sc, q.Path) {
				continue
			}
			if first, ok := res.FirstRun[q.Path]; !ok || first > time.Duration(e.StarveWithin).Seconds() {
				errs = append(errs, fmt.Errorf("queue %s starved: its first job ran %.0f s after its work arrived (ran: %v)", q.Path, first, ok))
			}
		}
	}
	if e.Priorities && res.PriorityInversions > 0 {
		errs = append(errs, fmt.Errorf("%d jobs started while a job of their user of a higher priority in their queue waited", res.PriorityInversions))
	}
	if e.EstimateMedianError > 0 {
		if res.Estimates < e.EstimateSamples || res.EstimateMedianErrorSec > time.Duration(e.EstimateMedianError).Seconds() {
			errs = append(errs, fmt.Errorf("estimated starts: median absolute error %.0f s over %d jobs (median wait %.0f s); want at most %s over %d or more",
				res.EstimateMedianErrorSec, res.Estimates, res.EstimateMedianWaitSec, time.Duration(e.EstimateMedianError), e.EstimateSamples))
		}
	}
	if (e.OOMKills != nil && res.OOMKills != *e.OOMKills) || (e.Errors != nil && res.Errors != *e.Errors) {
		errs = append(errs, fmt.Errorf("%d attempts ended out of memory and %d jobs in error; want %v and %v", res.OOMKills, res.Errors, fmtInt(e.OOMKills), fmtInt(e.Errors)))
	}
	for _, c := range []struct {
		what string
		got  int
		want *int
	}{{"succeeded", res.Succeeded, e.Succeeded}, {"failed", res.Failed, e.Failed}, {"were cancelled", res.Cancelled, e.Cancelled}} {
		if c.want != nil && c.got != *c.want {
			errs = append(errs, fmt.Errorf("%d jobs %s, want %d", c.got, c.what, *c.want))
		}
	}
	if e.GroupsCancelled != nil && !slices.Equal(res.GroupsCancelled, e.GroupsCancelled) {
		errs = append(errs, fmt.Errorf("job groups %v ended cancelled, want %v", res.GroupsCancelled, e.GroupsCancelled))
	}
	if e.GangsWhole && (res.GangsSplit > 0 || res.GangStarts < e.GangStarts) {
		errs = append(errs, fmt.Errorf("%d of %d gang starts were split (want none, of at least %d)", res.GangsSplit, res.GangStarts, e.GangStarts))
	}
	if e.MaxCoreHours > 0 && res.CoreHours > e.MaxCoreHours {
		errs = append(errs, fmt.Errorf("the attempts held %.2f core-hours, want at most %.2f", res.CoreHours, e.MaxCoreHours))
	}
	for i, w := range e.SLOSuccess {
		got := res.SLOSuccess[i]
		switch {
		case got.Runs == 0:
			errs = append(errs, fmt.Errorf("%s: no run completed in [%s, %s)", w.Queue, time.Duration(w.From), time.Duration(w.To)))
		case w.Min != nil && got.Ratio < *w.Min:
			errs = append(errs, fmt.Errorf("%s: SLO success %.3f of %d runs in [%s, %s), want at least %.3f", w.Queue, got.Ratio, got.Runs, time.Duration(w.From), time.Duration(w.To), *w.Min))
		case w.Max != nil && got.Ratio > *w.Max:
			errs = append(errs, fmt.Errorf("%s: SLO success %.3f of %d runs in [%s, %s), want at most %.3f", w.Queue, got.Ratio, got.Runs, time.Duration(w.From), time.Duration(w.To), *w.Max))
		}
	}
	if g := e.MaxCostGrowth; g != nil {
		d := res.DailyCoreHours
		n := max(e.CostDays, 1)
		if len(d) < 2*n {
			errs = append(errs, fmt.Errorf("the run covered %d days; comparing cost needs %d", len(d), 2*n))
		} else {
			var first, last float64
			for i := range n {
				first, last = first+d[i], last+d[len(d)-1-i]
			}
			if last > first*(1+*g) {
				errs = append(errs, fmt.Errorf("the last %d days' attempts held %.1f core-hours, the first %d days' %.1f: more than %.0f%% more", n, last, n, first, *g*100))
			}
		}
	}
	for q, want := range e.HomeClusters {
		if got := res.HomeClusters[q]; got != want {
			errs = append(errs, fmt.Errorf("%s is routed to %q at the end, want %q", q, got, want))
		}
	}
	if res.AutoApplied < e.MinAutoApplied {
		errs = append(errs, fmt.Errorf("%d regenerations of queue settings applied, want at least %d", res.AutoApplied, e.MinAutoApplied))
	}
	if e.PreemptedFirst && res.PlaceLost > 0 {
		errs = append(errs, fmt.Errorf("%d jobs started for the first time while a preempted job of their batch waited to run again", res.PlaceLost))
	}
	for u, want := range e.UserShares {
		if got := res.UserShares[u]; math.Abs(got-want) > tol*want {
			errs = append(errs, fmt.Errorf("user %s held %.3f of the cores, want %.3f ± %.0f%%", u, got, want, tol*100))
		}
	}
	return errors.Join(errs...)
}

// fmtInt writes an expected count ("any" when absent).
func fmtInt(n *int) string {
	if n == nil {
		return "any"
	}
	return fmt.Sprint(*n)
}

// hasWork reports whether the scenario submits to the queue.
func hasWork(sc *QueueScenario, path string) bool {
	for _, b := range sc.Batches {
		q := b.Queue
		if q == "" {
			for _, qq := range sc.Queues {
				if slices.Contains(qq.BillingProjects, b.Project) {
					q = qq.Path
				}
			}
		}
		if q == path {
			return true
		}
	}
	return false
}
