package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/money"
)

// randomWorkload is an hour of random batches on a random cloud: prices,
// sizes, capacities, caps, spot reclaims, API errors and a rate limit.
// One config always has room under every cap, so every workload can
// finish. The property tests run thousands of them.
func randomWorkload(rng *rand.Rand) *Workload {
	w := &Workload{Boot: Duration(time.Duration(30+rng.IntN(120)) * time.Second), Reclaims: rng.Float64() * 0.5,
		ErrorRate: rng.Float64() * 0.1, Capacity: map[string]int{}, Settings: &Settings{IdleTimeout: Duration(time.Duration(30+rng.IntN(180)) * time.Second)}}
	if rng.IntN(2) == 0 {
		w.RequestsPerMinute = 20 + rng.IntN(60)
	}
	if rng.IntN(2) == 0 {
		w.Settings.MaxNodes = int64(2 + rng.IntN(30))
	}
	if rng.IntN(2) == 0 {
		w.Settings.MaxPerHour = money.RateFromDollars(0.5 + rng.Float64()*10)
	}
	if rng.IntN(2) == 0 {
		w.Settings.MaxAddsPerMinute = int64(1 + rng.IntN(10))
	}
	w.Settings.Strategy = []string{"", "prefer-large", "prefer-reserved"}[rng.IntN(3)]
	for i := 0; i < 1+rng.IntN(6); i++ {
		cores := []float64{2, 4, 8, 16, 32}[rng.IntN(5)]
		c := Config{Name: fmt.Sprintf("c%d", i), MachineType: fmt.Sprintf("t%g", cores), Zone: fmt.Sprintf("z%d", rng.IntN(3)), Spot: rng.IntN(2) == 0,
			CPU: cores, Memory: fmt.Sprintf("%gGiB", cores*4), PricePerHour: money.RateFromDollars(cores * (0.005 + rng.Float64()*0.05))}
		if rng.IntN(3) == 0 {
			c.MaxNodes = int64(1 + rng.IntN(5))
		}
		if rng.IntN(2) == 0 {
			w.Capacity[c.Name] = rng.IntN(6)
		}
		w.Configs = append(w.Configs, c)
	}
	w.Configs[0].CPU, w.Configs[0].Memory, w.Configs[0].MaxNodes, w.Configs[0].PricePerHour = 32, "128GiB", 0, 160_000_000
	delete(w.Capacity, w.Configs[0].Name)
	for t := time.Duration(0); t < time.Hour; t += time.Duration(rng.ExpFloat64() * float64(5*time.Minute)) {
		b := Batch{At: Duration(t), User: fmt.Sprintf("u%d", rng.IntN(4))}
		cores := []float64{0.5, 1, 2, 4, 8}[rng.IntN(5)]
		for i := 0; i < 1+rng.IntN(40); i++ {
			b.Jobs = append(b.Jobs, Job{CPU: cores, Memory: "1GiB", Duration: Duration(time.Duration(1+rng.IntN(20)) * time.Minute)})
		}
		w.Batches = append(w.Batches, b)
	}
	return w
}

// TestSimulatedCloudProperties runs random workloads through the real
// state machine, scheduler and the leader's autoscale round against the
// simulated cloud, every command encoded and decoded as the Raft log
// carries it and the state's invariants checked after each: the spend
// and node caps are never exceeded at any step (as the cloud bills), no
// decision launches a config still capacity-limited, every job finishes,
// and every job's record is in order. (The planner alone is checked over 5,000 random rounds in
// autoscaler.TestPlanProperties, cheapest choice included.)
func TestSimulatedCloudProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	runs := 1000
	if testing.Short() {
		runs = 50
	}
	for i := 0; i < runs; i++ {
		w := randomWorkload(rng)
		opts := DefaultOptions()
		opts.Seed, opts.Check = uint64(i), true
		res, err := Run(context.Background(), w, opts)
		if err != nil {
			t.Fatalf("workload %d: %v", i, err)
		}
		if res.CapViolations != 0 || res.CapacityLimitedLaunches != 0 {
			t.Fatalf("workload %d (%+v): %+v", i, w.Settings, res)
		}
		if err := checkRecords(res); err != nil {
			t.Fatalf("workload %d: %v", i, err)
		}
	}
}

// checkRecords checks every job has a record in order: submitted, ready,
// started, ended, at least one attempt.
func checkRecords(res *Result) error {
	if len(res.JobRecords) != res.Jobs {
		return fmt.Errorf("%d job records for %d jobs", len(res.JobRecords), res.Jobs)
	}
	for _, r := range res.JobRecords {
		if r.Ready.Before(r.Submitted) || r.Started.Before(r.Ready) || r.Ended.Before(r.Started) || r.Attempts < 1 || r.Ended.IsZero() {
			return fmt.Errorf("job %d/%d out of order: %+v", r.Batch, r.Job, r)
		}
	}
	return nil
}

// TestWorkloadFiles runs every workload in testdata/ with every command
// encoded and decoded as the Raft log carries it and the state's
// invariants checked after each: each finishes within the caps, every
// job's record is in order, and a second run gives the same result.
func TestWorkloadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no workloads in testdata/ (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			w, err := ReadWorkload(f)
			if err != nil {
				t.Fatal(err)
			}
			opts := DefaultOptions()
			opts.Check = true
			res, err := Run(context.Background(), w, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.CapViolations != 0 || res.CapacityLimitedLaunches != 0 || res.Jobs == 0 {
				t.Fatalf("%+v", res)
			}
			if err := checkRecords(res); err != nil {
				t.Fatal(err)
			}
			again, err := Run(context.Background(), w, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res, again) {
				t.Fatalf("the same workload and seed ran two ways:\n%+v\n%+v", res, again)
			}
		})
	}
}

// TestReclaimedMachinesJobsRunAgain: spot machines reclaimed under their
// jobs. The simulator only kills the machines' workers; the leader's
// autoscale round finds the machines gone (MachineGone), the state puts
// their jobs back to Ready, and they run again elsewhere. A copy of the
// loop that forgot reclaimed machines would leave those jobs running on
// dead instances and the run would never finish.
func TestReclaimedMachinesJobsRunAgain(t *testing.T) {
	w, err := ReadWorkload("testdata/reclaims.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), w, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	again := 0
	for _, r := range res.JobRecords {
		if r.Attempts > 1 {
			again++
		}
	}
	if res.SpotReclaimed == 0 || again == 0 {
		t.Fatalf("%d machines reclaimed, %d jobs ran again: the workload should reclaim machines under their jobs", res.SpotReclaimed, again)
	}
	t.Logf("%d machines reclaimed, %d of %d jobs ran again", res.SpotReclaimed, again, res.Jobs)
}

// TestTwoClusters: a workload's clusters and configs are data; machines go
// to both clusters, and spot capacity refused in both sends the rest to
// on-demand.
func TestTwoClusters(t *testing.T) {
	w, err := ReadWorkload("testdata/two-clusters.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), w, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []string{"central-8-spot", "east-8-spot", "east-8"} {
		if res.CostByConfig[cfg] == 0 {
			t.Errorf("no machine of %s ran: %v", cfg, res.CostByConfig)
		}
	}
	if res.CapacityRefusals == 0 {
		t.Errorf("the cloud refused no launch for capacity: %+v", res)
	}
}

// TestTimeDecisions: the decision bench plans machines for its backlog.
func TestTimeDecisions(t *testing.T) {
	res, err := TimeDecisions(5000, 20, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.MachinesPlanned == 0 || res.DecisionP50 <= 0 {
		t.Fatalf("%+v", res)
	}
	if _, err := TimeDecisions(0, 1, 1, 1); err == nil {
		t.Fatal("no jobs: want an error")
	}
}

// TestOptionsValidate names what is wrong.
func TestOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.Step = 0
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "step") {
		t.Fatalf("step 0: %v", err)
	}
}
