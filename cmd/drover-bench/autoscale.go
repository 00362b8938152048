package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/drover-sched/drover/sim"
)

// drover bench autoscale runs the real autoscaler: -decision times one
// decision over a large backlog; the default runs a workload (synthetic,
// or from a file) through the simulator (package sim: the real state
// machine, scheduler and the leader's own autoscale round against the
// simulated cloud in virtual time), and reports what it cost against a
// lower bound.
func (m *Main) runBenchAutoscale(ctx context.Context, args []string) error {
	fs := m.newFlags("autoscale", "[-synthetic | -workload FILE | -decision] [flags]")
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
	compare := fs.Bool("compare", false, "run the workload three times: drover's policy, Hail's (windowed fair-share demand, one worker type, no consolidation) and a static fleet sized to the p95 of the demand drover's run saw; print each and drover's cost and wait as ratios to the others")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *synthetic && (*workload != "" || *decision) {
		return usagef("-synthetic runs the synthetic day: it goes without -workload and -decision")
	}
	var res any
	if *decision {
		if *jobs < 1 || *configs < 1 || *zones < 1 || *rounds < 1 {
			return usagef("-jobs, -configs, -zones and -rounds must be positive")
		}
		r, err := sim.TimeDecisions(*jobs, *configs, *zones, *rounds)
		if err != nil {
			return err
		}
		res = r
	} else {
		var w *sim.Workload
		if *workload != "" {
			var err error
			if w, err = sim.ReadWorkload(*workload); err != nil {
				return err
			}
		} else {
			w = sim.SyntheticDay(*seed, time.Duration(*hours*float64(time.Hour)))
		}
		opts := sim.DefaultOptions()
		opts.Seed, opts.Step = *seed, *step
		if *trace > 0 {
			opts.Trace, opts.TraceEvery = m.Stderr, *trace
		}
		r, err := sim.Run(ctx, w, opts)
		if err != nil {
			return err
		}
		res = r
		if *compare {
			c, err := sim.Compare(ctx, w, opts, r)
			if err != nil {
				return err
			}
			res = c
		}
	}
	if !*asJSON {
		printFigures(m.Stderr, res)
	}
	return json.NewEncoder(m.Stdout).Encode(res)
}

// printFigures prints a result's JSON fields one a line, by name.
func printFigures(w io.Writer, res any) {
	b, err := json.Marshal(res)
	if err != nil {
		return
	}
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		fmt.Fprintf(w, "%-28s %v\n", k, fields[k])
	}
}
