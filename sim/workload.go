package sim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/money"
)

// Workload is what a simulation runs: batches arriving over time, the
// clusters and the cloud's launch configs, and the autoscaler's settings.
// It is read from JSON (ReadWorkload; testdata/*.json are examples) or
// made by SyntheticDay.
type Workload struct {
	Batches []Batch `json:"batches"`
	// Clusters the machines go to (none: one, "sim" in us-central1).
	Clusters []Cluster `json:"clusters,omitempty"`
	Configs  []Config  `json:"configs,omitempty"`
	Settings *Settings `json:"settings,omitempty"`
	// Capacity bounds each config's machines at once (absent: none).
	Capacity map[string]int `json:"capacity,omitempty"`
	Boot     Duration       `json:"boot_delay,omitempty"`
	Reclaims float64        `json:"spot_reclaims_per_hour,omitempty"`
	// MaxSpotAttempts is every job's max_spot_attempts (0: none, as
	// before it).
	MaxSpotAttempts int `json:"max_spot_attempts,omitempty"`
	// ErrorRate and RequestsPerMinute: the cloud's injected API errors
	// and request rate limit.
	ErrorRate         float64 `json:"api_error_rate,omitempty"`
	RequestsPerMinute int     `json:"requests_per_minute,omitempty"`
	// Synthetic, when set, makes the batches those of SyntheticDay for
	// the run's seed (a scenario file names it instead of listing them).
	Synthetic *Synthetic `json:"synthetic,omitempty"`
	// Expect is what a scenario file promises of every run (testdata/
	// scenarios; TestScenarios checks it).
	Expect *Expect `json:"expect,omitempty"`
	// Events change the world at a time: the cloud's price of a config,
	// a zone's capacity, a cluster disabled or enabled by an operator.
	Events []Event `json:"events,omitempty"`
	// Queues, when given, are the placement's queue tree (tiers,
	// preemption): the leader's preemption round runs every step.
	Queues []api.Queue `json:"queues,omitempty"`
}

// arrivals expands the floods (Every) into their batches, in time order.
func (w *Workload) arrivals() []Batch {
	return expandFloods(w.Batches, func(b *Batch) (*Duration, Duration, Duration) { return &b.At, b.Every, b.Until })
}

// expandFloods turns each batch that arrives every Every until Until
// (timing says where its At is, and its Every and Until) into one batch
// per arrival, and sorts all by arrival, stably.
func expandFloods[B any](batches []B, timing func(*B) (at *Duration, every, until Duration)) []B {
	var out []B
	for _, b := range batches {
		at, every, until := timing(&b)
		if every <= 0 {
			out = append(out, b)
			continue
		}
		for t := *at; t < until; t += every {
			c := b
			at, _, _ := timing(&c)
			*at = t
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(x, y B) int {
		ax, _, _ := timing(&x)
		ay, _, _ := timing(&y)
		return cmp.Compare(*ax, *ay)
	})
	return out
}

// Event is one change at At after the start. Exactly one of:
//   - Config with PricePerHour: the cloud charges that for the config's
//     machines from then (the live ones too);
//   - Zone with Capacity: the cloud makes at most that many machines of
//     each config in the zone (0: out of capacity; -1: back to the
//     workload's capacity);
//   - Cluster with Disabled: an operator disables the cluster (no new
//     work, no new machines; running jobs finish) or enables it again.
type Event struct {
	At           Duration    `json:"at"`
	Config       string      `json:"config,omitempty"`
	PricePerHour *money.Rate `json:"price_per_hour,omitempty"`
	Zone         string      `json:"zone,omitempty"`
	Capacity     *int        `json:"capacity,omitempty"`
	Cluster      string      `json:"cluster,omitempty"`
	Disabled     *bool       `json:"disabled,omitempty"`
}

// check says what is wrong with the event, or nil.
func (e *Event) check(w *Workload) error {
	kinds := 0
	if e.PricePerHour != nil {
		kinds++
		if e.Config == "" || !slices.ContainsFunc(w.Configs, func(c Config) bool { return c.Name == e.Config }) || *e.PricePerHour <= 0 {
			return fmt.Errorf("event at %s: a price needs a config of the workload and a price above 0", time.Duration(e.At))
		}
	}
	if e.Capacity != nil {
		kinds++
		if e.Zone == "" || *e.Capacity < -1 {
			return fmt.Errorf("event at %s: a capacity needs a zone and 0 or more machines (-1: as before)", time.Duration(e.At))
		}
	}
	if e.Disabled != nil {
		kinds++
		if e.Cluster == "" {
			return fmt.Errorf("event at %s: disabled needs a cluster", time.Duration(e.At))
		}
	}
	if kinds != 1 {
		return fmt.Errorf("event at %s: give one of a config's price_per_hour, a zone's capacity, a cluster's disabled", time.Duration(e.At))
	}
	return nil
}

// Expect bounds a scenario's runs. Every run has no cap violation and
// never bills above max_per_hour; these add bounds of its own (0: none).
type Expect struct {
	Seeds         []uint64 `json:"seeds"`
	CostRatioMax  float64  `json:"cost_ratio_max,omitempty"`
	WaitP95MinMax float64  `json:"wait_p95_min_max,omitempty"`
	// AtCapHoursMin: the cap must bind (the scenario is about the wait it
	// causes).
	AtCapHoursMin float64 `json:"at_cap_h_min,omitempty"`
	// CapacityRefusalsMin: the cloud must have refused launches (a zone
	// out of capacity bit).
	CapacityRefusalsMin int `json:"capacity_refusals_min,omitempty"`
	// QueueWaitP95MinMax bounds a queue's jobs' p95 wait; PreemptedMin:
	// the preemption round must have stopped that many attempts.
	QueueWaitP95MinMax map[string]float64 `json:"queue_wait_p95_min_max,omitempty"`
	PreemptedMin       int                `json:"preempted_min,omitempty"`
	// SpotCapShortensTail: the workload is run again without its
	// max_spot_attempts (today's policy), and this run's p99 of job
	// latency must be shorter than that run's, by this factor or more
	// (e.g. 0.8: at most 80% of it).
	SpotCapShortensTail float64 `json:"spot_cap_shortens_tail,omitempty"`
}

// Synthetic asks for the synthetic day's batches.
type Synthetic struct {
	Hours float64 `json:"hours"`
}

// Batch is one user's batch arriving at a time after the start; with
// Every, one arrives every Every until Until (a flood). Project is its
// billing project (absent: default), Queue the queue it names (absent:
// the one that lists its project), Priority its priority in the queue.
type Batch struct {
	At       Duration `json:"at"`
	User     string   `json:"user"`
	Jobs     []Job    `json:"jobs"`
	Project  string   `json:"project,omitempty"`
	Queue    string   `json:"queue,omitempty"`
	Priority int32    `json:"priority,omitempty"`
	Every    Duration `json:"every,omitempty"`
	Until    Duration `json:"until,omitempty"`
}

// Job is a job (or Count alike) of a batch: its size and how long it
// runs once placed.
type Job struct {
	CPU      float64  `json:"cpu"`
	Memory   string   `json:"memory"`
	Duration Duration `json:"duration"`
	Count    int      `json:"count,omitempty"`
	// PreemptionGrace: told to stop, the job ends this long after.
	PreemptionGrace Duration `json:"preemption_grace,omitempty"`
}

// Cluster is a cluster the autoscaler launches machines into.
type Cluster struct {
	Name   string `json:"name"`
	Region string `json:"region"`
}

// Config is a launch config of the simulated cloud.
type Config struct {
	Name string `json:"name"`
	// Cluster it launches into (empty: the first).
	Cluster      string     `json:"cluster,omitempty"`
	MachineType  string     `json:"machine_type"`
	Zone         string     `json:"zone"`
	Spot         bool       `json:"spot,omitempty"`
	CPU          float64    `json:"cpu"`
	Memory       string     `json:"memory"`
	PricePerHour money.Rate `json:"price_per_hour"` // dollars an hour, exact
	MaxNodes     int64      `json:"max_nodes,omitempty"`
	// PriceFromCloud: drover reads the config's price from the cloud
	// (hourly, as a server does) instead of keeping PricePerHour when
	// an event changes what the cloud charges.
	PriceFromCloud bool `json:"price_from_cloud,omitempty"`
}

// Settings are the autoscaler's caps and timings.
type Settings struct {
	MaxNodes         int64      `json:"max_nodes,omitempty"`
	MaxPerHour       money.Rate `json:"max_per_hour,omitempty"`
	MaxAddsPerMinute int64      `json:"max_adds_per_minute,omitempty"`
	IdleTimeout      Duration   `json:"idle_timeout,omitempty"`
	Strategy         string     `json:"strategy,omitempty"`
	NoConsolidate    bool       `json:"no_consolidate,omitempty"`
}

// Duration reads "90s" or a number of seconds.
type Duration time.Duration

// UnmarshalJSON reads "90s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("a duration is a string such as \"90s\" or a number of seconds")
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as Go prints it ("1m30s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// ReadWorkload reads a workload file; what it leaves out (configs,
// settings, boot delay) is the synthetic day's.
func ReadWorkload(path string) (*Workload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workload: %w", err)
	}
	var w Workload
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(w.Batches) == 0 && w.Synthetic == nil {
		return nil, fmt.Errorf("%s: no batches (and no \"synthetic\")", path)
	}
	if w.Synthetic != nil && (w.Synthetic.Hours <= 0 || w.Synthetic.Hours > 24*7) {
		return nil, fmt.Errorf("%s: synthetic hours %g: 0 to 168", path, w.Synthetic.Hours)
	}
	if w.MaxSpotAttempts < 0 || w.MaxSpotAttempts > api.MaxSpotAttempts {
		return nil, fmt.Errorf("%s: max_spot_attempts %d: 0 (none) to %d", path, w.MaxSpotAttempts, api.MaxSpotAttempts)
	}
	def := SyntheticDay(1, time.Hour)
	if len(w.Configs) == 0 {
		w.Configs, w.Capacity = def.Configs, def.Capacity
		if w.Reclaims == 0 {
			w.Reclaims = def.Reclaims
		}
	}
	if w.Settings == nil {
		w.Settings = def.Settings
	}
	if w.Boot == 0 {
		w.Boot = def.Boot
	}
	for _, b := range w.Batches {
		if b.Every > 0 && (b.Every < Duration(time.Second) || b.Until <= b.At || (b.Until-b.At)/b.Every > 100_000) {
			return nil, fmt.Errorf("%s: a flood at %s arrives every 1s or more, until after it starts, at most 100,000 times", path, time.Duration(b.At))
		}
	}
	for i := range w.Events {
		if err := w.Events[i].check(&w); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return &w, nil
}

// SyntheticDay is a day of 20 users' scatter batches arriving in a daily
// wave (4 an hour at midnight, 12 at midday): each batch 10 to 100 jobs
// of one size (1, 2, 4 or 8 cores, 2 GiB a core) whose durations spread
// around the batch's own mean (10 to 90 minutes, log-normal, σ 0.25), as
// the shards of one genomics step do. About 800 cores are busy on average
// (seed 1: 19,500 core-hours); with no cap in the way, demand (running and
// waiting) peaks near 3,200 cores at midday (seed 1, sampled every 10
// minutes), far above the 150 machines of its caps, which bind: jobs
// queue for hours (the scenarios in testdata/scenarios lift them). The
// cloud's cheapest machines are spot
// 32-core ones, 50 a zone in two zones, reclaimed about once in 20 hours
// each; on-demand ones cost three times as much.
func SyntheticDay(seed uint64, length time.Duration) *Workload {
	rng := rand.New(rand.NewPCG(seed, 99))
	w := &Workload{Boot: Duration(90 * time.Second), Reclaims: 0.05,
		Settings: &Settings{MaxNodes: 150, MaxPerHour: 120 * money.DollarPerHour, MaxAddsPerMinute: 40, IdleTimeout: Duration(2 * time.Minute)},
		// Prices are per core, alike in every size (as GCE's are).
		Configs: []Config{
			{Name: "n2-8-spot-a", MachineType: "n2-standard-8", Zone: "us-central1-a", Spot: true, CPU: 8, Memory: "32GiB", PricePerHour: 117_500_000},
			{Name: "n2-16-spot-a", MachineType: "n2-standard-16", Zone: "us-central1-a", Spot: true, CPU: 16, Memory: "64GiB", PricePerHour: 235_000_000},
			{Name: "n2-32-spot-a", MachineType: "n2-standard-32", Zone: "us-central1-a", Spot: true, CPU: 32, Memory: "128GiB", PricePerHour: 470_000_000},
			{Name: "n2-8-spot-b", MachineType: "n2-standard-8", Zone: "us-central1-b", Spot: true, CPU: 8, Memory: "32GiB", PricePerHour: 122_500_000},
			{Name: "n2-32-spot-b", MachineType: "n2-standard-32", Zone: "us-central1-b", Spot: true, CPU: 32, Memory: "128GiB", PricePerHour: 490_000_000},
			{Name: "n2-8-a", MachineType: "n2-standard-8", Zone: "us-central1-a", CPU: 8, Memory: "32GiB", PricePerHour: 387_500_000},
			{Name: "n2-32-a", MachineType: "n2-standard-32", Zone: "us-central1-a", CPU: 32, Memory: "128GiB", PricePerHour: 1_550_000_000},
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
		b := Batch{At: Duration(t), User: fmt.Sprintf("user%02d", rng.IntN(20))}
		for i := 0; i < n; i++ {
			d := time.Duration(mean * math.Exp(0.25*rng.NormFloat64()) * float64(time.Minute))
			b.Jobs = append(b.Jobs, Job{CPU: cores, Memory: fmt.Sprintf("%dGiB", int(cores)*2), Duration: Duration(d.Round(time.Second))})
		}
		w.Batches = append(w.Batches, b)
	}
	return w
}
