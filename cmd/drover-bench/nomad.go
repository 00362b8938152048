package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/drover-sched/drover/testkit/bench"
)

// runBenchNomad measures a Nomad user's path beside drover's own on the
// same machine: the same jobs (`true` processes, a core each) submitted
// as a Nomad job through Nomad's own Go client to drover's Nomad API, and
// as a drover batch through drover's, each on a fresh dev agent, rounds
// times in turn (each path first every other round); it prints each
// path's median jobs/s end to end.
func (m *Main) runBenchNomad(ctx context.Context, args []string) error {
	fs := m.newFlags("nomad", "[flags]")
	jobs := fs.Int("jobs", 1000, "allocations of the Nomad job's group (count), and jobs of the batch")
	workers := fs.Int("workers", 1, "worker processes")
	cores := fs.Int("worker-cores", 64, "cores per worker: the slots (each job takes one)")
	rounds := fs.Int("rounds", 3, "runs of each path, interleaved")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *rounds < 1 || *jobs < 1 {
		return usagef("-rounds and -jobs must be positive")
	}
	drover, err := droverBinary()
	if err != nil {
		return err
	}
	var viaNomad, native []float64
	for round := range *rounds {
		// Each path goes first every other round: neither gains from
		// its place.
		for _, nomad := range []bool{round%2 == 0, round%2 == 1} {
			r, err := bench.E2E(ctx, bench.E2EConfig{Binary: drover, Jobs: *jobs, Workers: *workers, WorkerCores: *cores, Memory: 16 << 20, Nomad: nomad})
			if err != nil {
				return err
			}
			rate := float64(*jobs) / r.Total.Seconds()
			if nomad {
				viaNomad = append(viaNomad, rate)
			} else {
				native = append(native, rate)
			}
		}
	}
	median := func(v []float64) float64 {
		s := slices.Sorted(slices.Values(v))
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	out := map[string]any{"bench": "nomad", "jobs": *jobs, "workers": *workers, "worker_cores": *cores, "rounds": *rounds,
		"nomad_api_jobs_per_s": median(viaNomad), "native_jobs_per_s": median(native),
		"nomad_api_runs": viaNomad, "native_runs": native}
	if *asJSON {
		return json.NewEncoder(m.Stdout).Encode(out)
	}
	fmt.Fprintf(m.Stdout, "%d `true` processes on %d×%d slots, median of %d runs each: %.0f jobs/s end to end as a Nomad job through nomad/api, %.0f jobs/s as a drover batch (%.0f%%)\n",
		*jobs, *workers, *cores, *rounds, median(viaNomad), median(native), 100*median(viaNomad)/median(native))
	return json.NewEncoder(m.Stdout).Encode(out)
}
