package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/drover-sched/drover/autoscaler"
	"github.com/drover-sched/drover/autoscaler/provider"
	"github.com/drover-sched/drover/autoscaler/provider/sim"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/scheduler"
	"github.com/drover-sched/drover/server"
	"github.com/drover-sched/drover/server/state"
)

// drover bench autoscale runs the real autoscaler: -decision times one
// decision over a large backlog; the default runs a workload (synthetic,
// or from a file) through the real state machine, scheduler and
// autoscaler against the simulated cloud in virtual time, and reports
// what it cost against a lower bound.
func (m *Main) runBenchAutoscale(ctx context.Context, args []string) error {
	fs := m.newFlags("bench autoscale", "[-synthetic | -workload FILE | -decision] [flags]")
	decision := fs.Bool("decision", false, "time one decision over -jobs ready jobs and -configs launch configs in -zones zones")
	jobs := fs.Int("jobs", 1_000_000, "with -decision: ready jobs")
	configs := fs.Int("configs", 200, "with -decision: launch configs")
	zones := fs.Int("zones", 20, "with -decision: zones (one cluster each)")
	rounds := fs.Int("rounds", 20, "with -decision: decisions timed")
	workload := fs.String("workload", "", "a workload file (JSON: batches with their arrival, user and jobs) instead of the synthetic day")
	synthetic := fs.Bool("synthetic", false, "run the synthetic day (the default without -workload)")
	hours := fs.Float64("hours", 24, "length of the synthetic workload")
	seed := fs.Uint64("seed", 1, "seed of the synthetic workload and the cloud")
	step := fs.Duration("step", 5*time.Second, "simulation step (virtual time)")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	trace := fs.Duration("trace", 0, "print the fleet (machines, cores busy, free and waiting) every this much virtual time")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *synthetic && (*workload != "" || *decision) {
		return usagef("-synthetic runs the synthetic day: it goes without -workload and -decision")
	}
	var res map[string]any
	var err error
	if *decision {
		res, err = benchDecision(*jobs, *configs, *zones, *rounds)
	} else {
		var w *simWorkload
		if *workload != "" {
			w, err = readWorkload(*workload)
		} else {
			w = syntheticDay(*seed, time.Duration(*hours*float64(time.Hour)))
		}
		if err == nil {
			var tr io.Writer
			if *trace > 0 {
				tr = m.Stderr
			}
			res, err = simulate(ctx, w, *seed, *step, *trace, tr)
		}
	}
	if err != nil {
		return err
	}
	if !*asJSON {
		keys := make([]string, 0, len(res))
		for k := range res {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			safef(m.Stderr, "%-28s %v\n", k, res[k])
		}
	}
	return json.NewEncoder(m.Stdout).Encode(res)
}

// applier applies commands to an in-process state, numbering them as Raft
// would.
type applier struct {
	s   *state.State
	idx uint64
}

func (a *applier) apply(c state.Command) (any, error) {
	a.idx++
	res := a.s.Apply(a.idx, c)
	if err, ok := res.(*state.ApplyError); ok {
		return nil, fmt.Errorf("%T: %w", c, err)
	}
	return res, nil
}

// benchDecision builds a state with jobs ready jobs of mixed sizes
// (distinct, 500 users) and a fleet of launch configs, and times whole
// decisions: reading the state, the windowed demand, planning.
func benchDecision(jobs, configs, zones, rounds int) (map[string]any, error) {
	if jobs < 1 || configs < 1 || zones < 1 || rounds < 1 {
		return nil, usagef("-jobs, -configs, -zones and -rounds must be positive")
	}
	a := &applier{s: state.New()}
	if _, err := a.apply(&state.Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"}); err != nil {
		return nil, err
	}
	cfg := &state.ApplyPlacement{Now: 1, Autoscaler: &state.Autoscaler{Enabled: true, MaxNodes: 2000, MaxPerHour: 5000, MaxAddsPerMinute: 500, Window: int64(150 * time.Second)}}
	types := []struct {
		name  string
		cores int64
		price float64
	}{{"n2-standard-8", 8, 0.39}, {"n2-standard-16", 16, 0.78}, {"n2-standard-32", 32, 1.55}, {"n2-standard-64", 64, 3.1}, {"n2-highmem-32", 32, 2.1}}
	for z := 0; z < zones; z++ {
		cfg.Clusters = append(cfg.Clusters, state.Cluster{Name: fmt.Sprintf("c%d", z), Region: fmt.Sprintf("r%d", z/4)})
	}
	for i := 0; i < configs; i++ {
		t := types[i%len(types)]
		z := (i / len(types)) % zones
		spot := (i/(len(types)*zones))%2 == 1
		price := t.price * (1 + 0.03*float64(z))
		if spot {
			price *= 0.3
		}
		cfg.LaunchConfigs = append(cfg.LaunchConfigs, state.LaunchConfig{Name: fmt.Sprintf("cfg%d", i), Cluster: fmt.Sprintf("c%d", z), MachineType: t.name,
			Zone: fmt.Sprintf("zone-%d", z), Spot: spot, CPUMilli: t.cores * 1000, Memory: t.cores * 4 << 30, PricePerHour: price})
	}
	if _, err := a.apply(cfg); err != nil {
		return nil, err
	}
	users := 500
	sizes := []int64{250, 500, 1000, 2000, 4000, 8000, 16000}
	rng := rand.New(rand.NewPCG(1, 7))
	for u := 0; u < users; u++ {
		name := fmt.Sprintf("u%03d", u)
		if _, err := a.apply(&state.CreateUser{Now: 1, Name: name, TokenHash: "h" + name}); err != nil {
			return nil, err
		}
		if _, err := a.apply(&state.SetMember{Project: "default", User: name, Member: true}); err != nil {
			return nil, err
		}
		n := jobs / users
		if u < jobs%users {
			n++
		}
		entries := make([]state.JobEntry, n)
		for j := range entries {
			cpu := sizes[rng.IntN(len(sizes))]
			mem := int64(float64(cpu)*float64(1<<30)/1000*(0.25+0.75*rng.Float64())) &^ (1<<20 - 1)
			sp := &state.Spec{Name: fmt.Sprint("j", j+1), Command: []string{"true"}, CPUMilli: cpu, Memory: max(mem, 1<<20)}
			if j%10 == 0 {
				sp.Where = &state.Where{Regions: []string{fmt.Sprintf("r%d", j%5)}}
			}
			entries[j] = state.JobEntry{First: uint32(j + 1), Count: 1, Spec: sp}
		}
		if n > 0 {
			if _, err := a.apply(&state.CreateBatch{Now: 1, User: name, BillingProject: "default", Name: "b", Jobs: entries}); err != nil {
				return nil, err
			}
		}
	}
	now := time.Now()
	var total, read, plan []float64
	var last *autoscaler.Output
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		st := a.s.AutoscaleState()
		in := server.PlannerInput(st, func(budget int64) *state.AutoscaleDemand {
			return a.s.AutoscaleDemand(budget, server.FairShares, 256<<20)
		}, now, func(uint32) (time.Time, bool) { return now, true }, map[string]time.Time{}, nil)
		t1 := time.Now()
		last = autoscaler.Plan(in)
		t2 := time.Now()
		read = append(read, ms(t1.Sub(t0)))
		plan = append(plan, ms(t2.Sub(t1)))
		total = append(total, ms(t2.Sub(t0)))
	}
	launched := 0
	for _, l := range last.Launches {
		launched += l.Count
	}
	return map[string]any{"bench": "autoscale-decision", "ready_jobs": jobs, "configs": configs, "zones": zones, "users": users, "rounds": rounds,
		"decision_ms_p50": pct(total, 50), "decision_ms_max": pct(total, 100), "read_ms_p50": pct(read, 50), "plan_ms_p50": pct(plan, 50),
		"machines_planned": launched}, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func pct(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// simWorkload is what a simulation runs: batches arriving over time, the
// cloud's launch configs and the autoscaler's settings.
type simWorkload struct {
	Batches  []simBatch     `json:"batches"`
	Configs  []simConfig    `json:"configs,omitempty"`
	Settings *simSettings   `json:"settings,omitempty"`
	Capacity map[string]int `json:"capacity,omitempty"`
	Boot     jsonDuration   `json:"boot_delay,omitempty"`
	Reclaims float64        `json:"spot_reclaims_per_hour,omitempty"`
	// ErrorRate and RequestsPerMinute: the cloud's injected API errors
	// and request rate limit.
	ErrorRate         float64 `json:"api_error_rate,omitempty"`
	RequestsPerMinute int     `json:"requests_per_minute,omitempty"`
}

type simBatch struct {
	At   jsonDuration `json:"at"`
	User string       `json:"user"`
	Jobs []simJob     `json:"jobs"`
}

type simJob struct {
	CPU      float64      `json:"cpu"`
	Memory   string       `json:"memory"`
	Duration jsonDuration `json:"duration"`
	Count    int          `json:"count,omitempty"`
}

type simConfig struct {
	Name         string  `json:"name"`
	MachineType  string  `json:"machine_type"`
	Zone         string  `json:"zone"`
	Spot         bool    `json:"spot,omitempty"`
	CPU          float64 `json:"cpu"`
	Memory       string  `json:"memory"`
	PricePerHour float64 `json:"price_per_hour"`
	MaxNodes     int64   `json:"max_nodes,omitempty"`
}

type simSettings struct {
	MaxNodes         int64        `json:"max_nodes,omitempty"`
	MaxPerHour       float64      `json:"max_per_hour,omitempty"`
	MaxAddsPerMinute int64        `json:"max_adds_per_minute,omitempty"`
	IdleTimeout      jsonDuration `json:"idle_timeout,omitempty"`
	Strategy         string       `json:"strategy,omitempty"`
	NoConsolidate    bool         `json:"no_consolidate,omitempty"`
}

// jsonDuration reads "90s" or a number of seconds.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = jsonDuration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("a duration is a string such as \"90s\" or a number of seconds")
	}
	*d = jsonDuration(f * float64(time.Second))
	return nil
}

func readWorkload(path string) (*simWorkload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var w simWorkload
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(w.Batches) == 0 {
		return nil, fmt.Errorf("%s: no batches", path)
	}
	def := syntheticDay(1, time.Hour)
	if len(w.Configs) == 0 {
		w.Configs, w.Capacity, w.Reclaims = def.Configs, def.Capacity, def.Reclaims
	}
	if w.Settings == nil {
		w.Settings = def.Settings
	}
	if w.Boot == 0 {
		w.Boot = def.Boot
	}
	return &w, nil
}

// syntheticDay is a day of 20 users' scatter batches arriving in a daily
// wave (4 an hour at midnight, 12 at midday): each batch 10 to 100 jobs
// of one size (1, 2, 4 or 8 cores, 2 GiB a core) whose durations spread
// around the batch's own mean (10 to 90 minutes, log-normal, σ 0.25), as
// the shards of one genomics step do. About 1,400 cores are busy on
// average and 2,100 at the peak. The cloud's cheapest machines are spot
// 32-core ones, 50 a zone in two zones, reclaimed about once in 20 hours
// each; on-demand ones cost three times as much.
func syntheticDay(seed uint64, length time.Duration) *simWorkload {
	rng := rand.New(rand.NewPCG(seed, 99))
	w := &simWorkload{Boot: jsonDuration(90 * time.Second), Reclaims: 0.05,
		Settings: &simSettings{MaxNodes: 150, MaxPerHour: 120, MaxAddsPerMinute: 40, IdleTimeout: jsonDuration(2 * time.Minute)},
		// Prices are per core, alike in every size (as GCE's are).
		Configs: []simConfig{
			{Name: "n2-8-spot-a", MachineType: "n2-standard-8", Zone: "us-central1-a", Spot: true, CPU: 8, Memory: "32GiB", PricePerHour: 0.1175},
			{Name: "n2-16-spot-a", MachineType: "n2-standard-16", Zone: "us-central1-a", Spot: true, CPU: 16, Memory: "64GiB", PricePerHour: 0.235},
			{Name: "n2-32-spot-a", MachineType: "n2-standard-32", Zone: "us-central1-a", Spot: true, CPU: 32, Memory: "128GiB", PricePerHour: 0.47},
			{Name: "n2-8-spot-b", MachineType: "n2-standard-8", Zone: "us-central1-b", Spot: true, CPU: 8, Memory: "32GiB", PricePerHour: 0.1225},
			{Name: "n2-32-spot-b", MachineType: "n2-standard-32", Zone: "us-central1-b", Spot: true, CPU: 32, Memory: "128GiB", PricePerHour: 0.49},
			{Name: "n2-8-a", MachineType: "n2-standard-8", Zone: "us-central1-a", CPU: 8, Memory: "32GiB", PricePerHour: 0.3875},
			{Name: "n2-32-a", MachineType: "n2-standard-32", Zone: "us-central1-a", CPU: 32, Memory: "128GiB", PricePerHour: 1.55},
		},
		// Spot capacity: 3,200 cores in each zone, in machines of any size.
		Capacity: map[string]int{"n2-8-spot-a": 400, "n2-16-spot-a": 200, "n2-32-spot-a": 100, "n2-8-spot-b": 400, "n2-32-spot-b": 100}}
	var t time.Duration
	for {
		day := math.Mod(t.Hours(), 24)
		rate := 4 - 2*math.Cos(2*math.Pi*day/24)
		t += time.Duration(rng.ExpFloat64() / rate * float64(time.Hour))
		if t >= length {
			break
		}
		cores := []float64{1, 2, 4, 8}[rng.IntN(4)]
		n := 10 + rng.IntN(91)
		mean := 10 + rng.Float64()*80
		b := simBatch{At: jsonDuration(t), User: fmt.Sprintf("user%02d", rng.IntN(20))}
		for i := 0; i < n; i++ {
			d := time.Duration(mean * math.Exp(0.25*rng.NormFloat64()) * float64(time.Minute))
			b.Jobs = append(b.Jobs, simJob{CPU: cores, Memory: fmt.Sprintf("%dGiB", int(cores)*2), Duration: jsonDuration(d.Round(time.Second))})
		}
		w.Batches = append(w.Batches, b)
	}
	return w
}

// vclock is the simulation's virtual clock.
type vclock struct{ t time.Time }

func (c *vclock) Now() time.Time { return c.t }

type attemptKey struct {
	b   uint64
	j   uint32
	att uint16
}

type runningJob struct {
	inst uint32
	cpu  int64
	end  time.Time
}

// simulate runs the workload: every step it submits what arrived,
// completes the jobs whose time is up, activates workers on machines the
// cloud has booted, records reclaimed machines, schedules, and every 15
// s decides as the leader's autoscaler does. It checks the caps at every
// step against what the cloud bills.
func simulate(ctx context.Context, w *simWorkload, seed uint64, step, every time.Duration, trace io.Writer) (map[string]any, error) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &vclock{t: start}
	a := &applier{s: state.New()}
	apply := func(c state.Command) (any, error) { return a.apply(c) }
	if _, err := apply(&state.Bootstrap{Now: clk.t.UnixNano(), Admin: "root", TokenHash: "h", DefaultProject: "default"}); err != nil {
		return nil, err
	}
	cfg := &state.ApplyPlacement{Now: clk.t.UnixNano(), Clusters: []state.Cluster{{Name: "sim", Region: "us-central1"}}}
	set := w.Settings
	cfg.Autoscaler = &state.Autoscaler{Enabled: true, Strategy: set.Strategy, MaxNodes: set.MaxNodes, MaxPerHour: set.MaxPerHour, MaxAddsPerMinute: set.MaxAddsPerMinute,
		IdleTimeout: int64(set.IdleTimeout), BootTimeout: int64(10 * time.Minute), Window: int64(150 * time.Second), Consolidate: !set.NoConsolidate}
	cheapest := math.Inf(1)
	for _, c := range w.Configs {
		mem, err := units.ParseBytes(c.Memory)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", c.Name, err)
		}
		cfg.LaunchConfigs = append(cfg.LaunchConfigs, state.LaunchConfig{Name: c.Name, Cluster: "sim", MachineType: c.MachineType, Zone: c.Zone, Spot: c.Spot,
			CPUMilli: int64(c.CPU * 1000), Memory: mem, PricePerHour: c.PricePerHour, MaxNodes: c.MaxNodes})
		cheapest = min(cheapest, c.PricePerHour/c.CPU)
	}
	if _, err := apply(cfg); err != nil {
		return nil, err
	}
	users := map[string]bool{}
	for _, b := range w.Batches {
		if !users[b.User] {
			users[b.User] = true
			if _, err := apply(&state.CreateUser{Now: clk.t.UnixNano(), Name: b.User, TokenHash: "h-" + b.User}); err != nil {
				return nil, err
			}
			if _, err := apply(&state.SetMember{Project: "default", User: b.User, Member: true}); err != nil {
				return nil, err
			}
		}
	}
	batches := slices.Clone(w.Batches)
	slices.SortStableFunc(batches, func(x, y simBatch) int { return int(x.At - y.At) })
	cloud := sim.New(sim.Options{Clock: clk, Seed: seed, BootDelay: time.Duration(w.Boot), Capacity: w.Capacity, SpotReclaimsPerHour: w.Reclaims,
		ErrorRate: w.ErrorRate, RequestsPerMinute: w.RequestsPerMinute})
	durations := map[uint64][]time.Duration{}
	cpus := map[uint64][]int64{}
	running := map[attemptKey]runningJob{}
	known := map[uint32][]state.AttemptID{}
	activated := map[string]bool{}
	idle := map[string]time.Time{}
	var busyCoreSec, totalJobs float64
	violations, next, done, markedLaunches := 0, 0, 0, 0
	var first, last time.Time
	lastScale := time.Time{}
	var peakSpend float64
	peakNodes := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := clk.t
		// Arrivals.
		for next < len(batches) && !start.Add(time.Duration(batches[next].At)).After(now) {
			b := batches[next]
			next++
			var entries []state.JobEntry
			var durs []time.Duration
			var cs []int64
			id := uint32(1)
			for _, j := range b.Jobs {
				mem, err := units.ParseBytes(j.Memory)
				if err != nil {
					return nil, err
				}
				n := max(j.Count, 1)
				sp := &state.Spec{Name: "j", Array: n > 1, Command: []string{"true"}, CPUMilli: int64(j.CPU * 1000), Memory: mem}
				entries = append(entries, state.JobEntry{First: id, Count: uint32(n), Spec: sp})
				for k := 0; k < n; k++ {
					durs = append(durs, time.Duration(j.Duration))
					cs = append(cs, sp.CPUMilli)
					busyCoreSec += j.CPU * time.Duration(j.Duration).Seconds()
					totalJobs++
				}
				id += uint32(n)
			}
			res, err := apply(&state.CreateBatch{Now: now.UnixNano(), User: b.User, BillingProject: "default", Name: "sim", Jobs: entries})
			if err != nil {
				return nil, err
			}
			bid := res.(*state.UpdateResult).Batch
			durations[bid], cpus[bid] = durs, cs
			if first.IsZero() {
				first = now
			}
		}
		// Completions.
		var evs []state.Event
		for k, r := range running {
			if !r.end.After(now) {
				evs = append(evs, state.Event{Instance: r.inst, Batch: k.b, Job: k.j, Attempt: k.att, Outcome: state.OutcomeSuccess, Start: r.end.UnixNano(), End: r.end.UnixNano()})
			}
		}
		if len(evs) > 0 {
			slices.SortFunc(evs, func(x, y state.Event) int {
				if x.Batch != y.Batch {
					return int(x.Batch) - int(y.Batch)
				}
				return int(x.Job) - int(y.Job)
			})
			if _, err := apply(&state.Events{Now: now.UnixNano(), Events: evs}); err != nil {
				return nil, err
			}
			for _, e := range evs {
				delete(running, attemptKey{e.Batch, e.Job, e.Attempt})
				known[e.Instance] = slices.DeleteFunc(known[e.Instance], func(x state.AttemptID) bool { return x.Batch == e.Batch && x.Job == e.Job })
				done++
			}
			last = now
		}
		// The cloud: workers on booted machines, reclaimed machines gone.
		// A list the cloud refuses (an injected error, the rate limit)
		// leaves the machines as they were until the next step.
		insts, _ := cloud.List(ctx)
		st := a.s.AutoscaleState()
		live := map[string]state.Machine{}
		for _, mc := range st.Machines {
			if mc.State >= state.MachineRequested && mc.State <= state.MachineDraining {
				live[mc.ID] = mc
			}
		}
		for _, in := range insts {
			mc, ok := live[in.Name]
			switch {
			case in.Preempted && ok:
				if err := cloud.Delete(ctx, []string{in.Name}); err != nil {
					continue
				}
				if _, err := apply(&state.MachineGone{Now: now.UnixNano(), Machine: in.Name, Reason: "reclaimed", Preempted: true}); err != nil {
					return nil, err
				}
				// Its attempts ran for nothing: they run again.
				for k, r := range running {
					if r.inst == mc.Instance {
						delete(running, k)
					}
				}
				delete(known, mc.Instance)
			case in.Running && ok && !activated[in.Name] && mc.State != state.MachineDraining:
				activated[in.Name] = true
				if _, err := apply(&state.Activate{Now: now.UnixNano(), Name: in.Name, NodeID: in.Name, CPUMilli: mc.CPUMilli, Memory: mc.Memory,
					TokenHash: "t-" + in.Name, Region: "us-central1", Cluster: "sim", Machine: in.Name}); err != nil {
					return nil, err
				}
			}
		}
		// The autoscaler, every 15 s as the leader's.
		if now.Sub(lastScale) >= 15*time.Second {
			lastScale = now
			marked, err := simAutoscale(ctx, a, cloud, now, idle)
			if err != nil {
				return nil, err
			}
			markedLaunches += marked
		}
		// A scheduling round.
		v := a.s.SchedulingViewShared(now.UnixNano(), 20000, server.FairShares)
		if len(v.Users) > 0 && len(v.Instances) > 0 {
			out := scheduler.Schedule(server.SchedulerInput(v))
			if out.Jobs > 0 {
				p := &state.Plan{Now: now.UnixNano()}
				touched := map[uint32]bool{}
				for _, pl := range out.Placements {
					p.Placements = append(p.Placements, state.Placement{Batch: pl.Batch, First: pl.First, Count: pl.Count, Attempt: pl.Attempt, Instance: pl.Instance})
					touched[pl.Instance] = true
				}
				if _, err := apply(p); err != nil {
					return nil, err
				}
				for inst := range touched {
					wv := a.s.WorkerView(inst, known[inst])
					for _, as := range wv.Assign {
						known[inst] = append(known[inst], as.AttemptID)
						running[attemptKey{as.Batch, as.Job, as.Attempt}] = runningJob{inst: inst, cpu: cpus[as.Batch][as.Job-1], end: now.Add(durations[as.Batch][as.Job-1])}
					}
				}
			}
		}
		if trace != nil && now.Sub(start)%every < step {
			var busy int64
			for _, r := range running {
				busy += r.cpu
			}
			var free int64
			for _, r := range a.s.AutoscaleState().Free {
				free += r.CPUMilli
			}
			var ready int64
			for _, u := range a.s.AutoscaleDemand(1<<50, server.FairShares, 0).Users {
				for _, sh := range u.Shapes {
					ready += sh.CPUMilli * sh.Count
				}
			}
			cs := cloud.Stats()
			safef(trace, "%6.2fh  machines %3d  $%6.2f/h  busy %5.0f  free %5.0f  waiting %6.0f cores\n",
				now.Sub(start).Hours(), cs.Live, cs.SpendRate, float64(busy)/1000, float64(free)/1000, float64(ready)/1000)
		}
		// The caps, as the cloud bills.
		cs := cloud.Stats()
		peakSpend, peakNodes = max(peakSpend, cs.SpendRate), max(peakNodes, cs.Live)
		if (set.MaxPerHour > 0 && cs.SpendRate > set.MaxPerHour+1e-9) || (set.MaxNodes > 0 && int64(cs.Live) > set.MaxNodes) {
			violations++
		}
		if next == len(batches) && float64(done) == totalJobs && cs.Live == 0 {
			break
		}
		if now.Sub(start) > time.Duration(batches[len(batches)-1].At)+72*time.Hour {
			return nil, fmt.Errorf("the simulation did not finish within 72 hours of the last arrival (%d of %.0f jobs done)", done, totalJobs)
		}
		clk.t = now.Add(step)
	}
	cs := cloud.Stats()
	lower := busyCoreSec / 3600 * cheapest
	paidCoreSec := cs.CoreHours * 3600
	return map[string]any{
		"bench": "autoscale-sim", "batches": len(batches), "jobs": int(totalJobs), "seed": seed,
		"cost_usd": round2(cs.Cost), "lower_bound_usd": round2(lower), "cost_ratio": round3(cs.Cost / lower),
		"makespan_h": round3(last.Sub(first).Hours()), "utilization": round3(busyCoreSec / max(paidCoreSec, 1)),
		"cap_violations": violations, "capacity_limited_launches": markedLaunches, "machines_launched": cs.Launched, "capacity_refusals": cs.Refusals, "spot_reclaimed": cs.Reclaimed,
		"peak_spend_per_hour": round2(peakSpend), "peak_nodes": peakNodes, "cost_by_config": costBy(cs.CostByConfig),
	}, nil
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func costBy(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = round2(v)
	}
	return out
}
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// simAutoscale is one decision of the leader's autoscaler against the
// simulated cloud: plan, record, launch, delete what drained.
// It returns how many of the decision's launches were of configs still
// capacity-limited (which must be none).
func simAutoscale(ctx context.Context, a *applier, cloud *sim.Cloud, now time.Time, idle map[string]time.Time) (int, error) {
	st := a.s.AutoscaleState()
	in := server.PlannerInput(st, func(budget int64) *state.AutoscaleDemand {
		return a.s.AutoscaleDemand(budget, server.FairShares, 256<<20)
	}, now, func(uint32) (time.Time, bool) { return now, true }, idle, nil)
	out := autoscaler.Plan(in)
	marked := 0
	for _, l := range out.Launches {
		for _, mk := range st.Marks {
			if mk.Config == l.Config && now.UnixNano() < mk.Until {
				marked += l.Count
			}
		}
	}
	if len(out.Launches) > 0 || len(out.Deletes) > 0 || len(out.Revives) > 0 || len(out.Private) > 0 {
		if _, err := a.apply(server.ScaleCommand(out, now)); err != nil {
			return marked, err
		}
	}
	st = a.s.AutoscaleState()
	cfgs := map[string]state.LaunchConfig{}
	for _, c := range st.Configs {
		cfgs[c.Name] = c
	}
	byReq := map[string][]string{}
	var keys []string
	for _, mc := range st.Machines {
		if mc.State != state.MachineRequested {
			continue
		}
		if _, ok := byReq[mc.Request]; !ok {
			keys = append(keys, mc.Request)
		}
		byReq[mc.Request] = append(byReq[mc.Request], mc.ID)
	}
	for _, key := range keys {
		var cfg state.LaunchConfig
		for _, mc := range st.Machines {
			if mc.Request == key {
				cfg = cfgs[mc.Config]
				break
			}
		}
		res, err := cloud.Launch(ctx, &provider.LaunchRequest{RequestID: key, Names: byReq[key],
			Config: autoscaler.LaunchConfig{Name: cfg.Name, Spot: cfg.Spot, PricePerHour: cfg.PricePerHour, CPUMilli: cfg.CPUMilli, Memory: cfg.Memory}})
		done := server.LaunchDone(key, res, err, now)
		if done == nil {
			continue // asked again at the next decision
		}
		if _, err := a.apply(done); err != nil {
			return marked, err
		}
	}
	for _, mc := range a.s.AutoscaleState().Machines {
		if mc.State == state.MachineDraining && st.Running[mc.Instance] == 0 {
			if err := cloud.Delete(ctx, []string{mc.ID}); err != nil {
				continue // asked again at the next decision
			}
			if _, err := a.apply(&state.MachineGone{Now: now.UnixNano(), Machine: mc.ID, Reason: "deleted: " + mc.Reason}); err != nil {
				return marked, err
			}
		}
	}
	return marked, nil
}
