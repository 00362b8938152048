package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
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
		w.Settings.MaxPerHour = 0.5 + rng.Float64()*10
	}
	if rng.IntN(2) == 0 {
		w.Settings.MaxAddsPerMinute = int64(1 + rng.IntN(10))
	}
	w.Settings.Strategy = []string{"", "prefer-large", "prefer-reserved"}[rng.IntN(3)]
	for i := 0; i < 1+rng.IntN(6); i++ {
		cores := []float64{2, 4, 8, 16, 32}[rng.IntN(5)]
		c := Config{Name: fmt.Sprintf("c%d", i), MachineType: fmt.Sprintf("t%g", cores), Zone: fmt.Sprintf("z%d", rng.IntN(3)), Spot: rng.IntN(2) == 0,
			CPU: cores, Memory: fmt.Sprintf("%gGiB", cores*4), PricePerHour: cores * (0.005 + rng.Float64()*0.05)}
		if rng.IntN(3) == 0 {
			c.MaxNodes = int64(1 + rng.IntN(5))
		}
		if rng.IntN(2) == 0 {
			w.Capacity[c.Name] = rng.IntN(6)
		}
		w.Configs = append(w.Configs, c)
	}
	w.Configs[0].CPU, w.Configs[0].Memory, w.Configs[0].MaxNodes, w.Configs[0].PricePerHour = 32, "128GiB", 0, 0.16
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
// simulated cloud: the spend and node caps are never exceeded at any step
// (as the cloud bills), no decision launches a config still
// capacity-limited, every job finishes, and every job's record is in
// order. (The planner alone is checked over 5,000 random rounds in
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
		opts.Seed = uint64(i)
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
