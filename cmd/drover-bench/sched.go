package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/drover-sched/drover/testkit/bench"
	"github.com/drover-sched/drover/testkit/simworker"
)

// runBenchSched measures the control plane alone: real servers (separate
// processes, real Raft over TCP) and simulated workers that speak the real
// sync protocol, report each job started at once and finished after
// -job-duration. The workers are up before the first submission; the
// headline, jobs_per_s, is every job divided by the time from the first
// submit request to the last batch complete.
func (m *Main) runBenchSched(ctx context.Context, args []string) error {
	fs := m.newFlags("sched", "[flags]")
	servers := fs.Int("servers", 3, "servers (1, 3 or 5)")
	jobs := fs.Int("jobs", 1_000_000, "jobs per batch")
	workers := fs.Int("workers", 500, "simulated workers")
	cores := fs.Int("worker-cores", 64, "cores per simulated worker (1 GiB of memory per core)")
	array := fs.Bool("array", false, "submit each batch as one job array (else as distinct jobs in bunches)")
	bunch := fs.Int("bunch", 10_000, "distinct jobs per request")
	durFlag := fs.String("job-duration", "0", "how long each simulated job runs: a duration (2s) or exp:MEAN for an exponential distribution")
	users := fs.Int("users", 0, "tenants submitting at once, each its own user with jobs of mixed sizes (0: the admin submits one batch of 1-core jobs)")
	batches := fs.Int("batches", 1, "batches per tenant (with -users)")
	seed := fs.Uint64("seed", 1, "seed of job sizes and durations")
	cancelAt := fs.Float64("cancel-at", 0, "cancel the batch once this fraction of it has completed, and measure the cancellation")
	pprofDir := fs.String("pprof", "", "write CPU profiles of every server and of the bench process (its simulated workers and submitters) to this directory (with -retention, also every server's heap profiles when idle and after)")
	pprofFrom := fs.Duration("pprof-from", 2*time.Second, "start the profiles this long after the first submit request")
	pprofFor := fs.Duration("pprof-for", 20*time.Second, "length of the profiles")
	keep := fs.Bool("keep", false, "keep the cluster's directory afterwards")
	wanFlag := fs.Bool("wan", false, "each server in a region of its own, 30 to 80 ms apart one way (network namespaces and a fault proxy: needs root); the simulated workers reach every server without delay")
	useTLS := fs.Bool("tls", false, "TLS on every hop: servers serve HTTPS and talk Raft over mutual TLS, workers and clients verify them (a CA and certificates are made for the run)")
	fairTrace := fs.Bool("trace-fairness", false, "with -users: print every fair-share sample (the tenants holding least and most)")
	serverFlags := fs.String("server-flags", "", "extra flags for every server, space-separated (e.g. \"-gc-percent 100\")")
	asJSON := fs.Bool("json", false, "print only the JSON result")
	historyKind := fs.String("history", "", `history store of the servers: "mysql" starts a MariaDB (mariadbd from Debian's mariadb-server) for the run; "" leaves the servers' default (the embedded store, which exports only with one server)`)
	retention := fs.Duration("retention", 0, "the servers' -retention; with it, wait after the run until every batch has left memory, then report each server's heap and snapshot against the idle cluster's and read every batch back")
	nRegions := fs.Int("regions", 0, "spread the workers over this many regions (with -clusters; 0: one default cluster)")
	nClusters := fs.Int("clusters", 1, "clusters per region (with -regions)")
	nTeams := fs.Int("teams", 0, "with -users: put the users in this many teams, each with its own billing project and a cpu quota of an even split of the fleet (binding: every team wants more)")
	gangs := fs.Float64("gangs", 0, "put this fraction of each batch's distinct jobs in gangs of 8 to 64 members (all of a gang start together in one cluster, or none does); not with -users or -array")
	queues := fs.Bool("queues", false, "with -users: put the users in the 1,000 leaves of a three-level queue tree (10 x 10 x 10, tiers weighted 10 to 1), each guaranteed 80% of an even split of the fleet, borrowing the rest")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg := bench.SchedConfig{Queues: *queues, Servers: *servers, Jobs: *jobs, Workers: *workers, WorkerCores: *cores, Array: *array, Bunch: *bunch,
		Users: *users, Batches: *batches, Seed: *seed, CancelAt: *cancelAt, PprofDir: *pprofDir, PprofFrom: *pprofFrom, PprofFor: *pprofFor,
		Keep: *keep, TLS: *useTLS, WAN: *wanFlag, ServerFlags: strings.Fields(*serverFlags), History: *historyKind, Retention: *retention,
		Regions: *nRegions, Clusters: *nClusters, Teams: *nTeams, Gangs: *gangs,
		Progress: m.linesTo(false, *asJSON), Notices: m.linesTo(false, false)}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	var err error
	if cfg.Duration, err = simworker.ParseDist(*durFlag); err != nil {
		return usagef("-job-duration: %v", err)
	}
	if *fairTrace {
		cfg.Fairness = func(s bench.FairSample) {
			fmt.Fprintf(m.Stderr, "fair share at %5.1fs: off by %5.1f%% over the second (%5.1f%% at the instant); least %s %.0f cores, most %s %.0f cores\n",
				s.At.Seconds(), s.Window*100, s.Instant*100, s.Least, s.LeastCores, s.Most, s.MostCores)
		}
	}
	if cfg.Binary, err = droverBinary(); err != nil {
		return err
	}
	r, err := bench.Sched(ctx, cfg)
	if err != nil {
		return err
	}
	sum := r.Summary
	res := map[string]any{
		"bench": "sched", "servers": *servers, "tls": *useTLS, "jobs": r.Jobs, "users": r.Users, "batches": r.Batches, "workers": *workers, "worker_cores": *cores,
		"array": *array, "job_duration": cfg.Duration.String(),
		"jobs_per_s":               float64(r.Jobs) / r.Elapsed.Seconds(),
		"total_s":                  r.Elapsed.Seconds(),
		"submit_s":                 r.Submit.Seconds(),
		"schedule_jobs_per_s":      sum.ScheduleJobsPerS,
		"complete_jobs_per_s":      sum.CompleteJobsPerS,
		"p50_ready_to_assigned_ms": sum.P50ReadyToAssign,
		"p99_ready_to_assigned_ms": sum.P99ReadyToAssign,
		"p50_queue_wait_ms":        sum.P50QueueWait,
		"p99_queue_wait_ms":        sum.P99QueueWait,
		"heap_bytes_per_job":       r.HeapPerJob,
		"peak_rss_mb":              r.PeakRSSMB,
		"regions":                  *nRegions,
		"clusters_per_region":      *nClusters,
		"teams":                    *nTeams,
		"gangs":                    *gangs,
	}
	if rd := r.Rounds; rd != nil {
		res["sched_round_p99_ms"] = rd.RoundP99Ms
		res["sched_rounds"] = rd.N
		if rd.DecideP99Ms != nil {
			res["sched_decide_p99_ms"] = *rd.DecideP99Ms
		}
		if rd.CPUP99Ms != nil {
			res["sched_round_cpu_p99_ms"] = *rd.CPUP99Ms
		}
		if lw := rd.LockWait; lw != nil {
			// A time above the histograms' last bucket is +Inf, which
			// JSON cannot carry: it prints as null.
			fin := func(v float64) any {
				if math.IsInf(v, 0) {
					return nil
				}
				return v
			}
			fins := func(m map[string]float64) map[string]any {
				out := map[string]any{}
				for k, v := range m {
					out[k] = fin(v)
				}
				return out
			}
			res["sched_round_lock_wait_p99_ms"] = fin(lw.RoundP99Ms)
			res["sched_round_lock_wait_max_ms"] = fin(lw.RoundMaxMs)
			res["state_read_wait_p99_ms"] = fin(lw.OtherP99Ms)
			res["state_read_wait_max_ms"] = fin(lw.OtherMaxMs)
			res["apply_hold_p99_ms"] = fin(lw.HoldP99Ms)
			res["apply_hold_max_ms"] = fin(lw.HoldMaxMs)
			res["apply_hold_cpu_p99_ms"] = fin(lw.HoldCPUP99Ms)
			res["apply_hold_cpu_max_ms"] = fin(lw.HoldCPUMaxMs)
			res["apply_wait_p99_ms"] = fin(lw.ApplyWaitP99Ms)
			res["apply_wait_max_ms"] = fin(lw.ApplyWaitMaxMs)
			res["apply_entry_p99_ms"] = fins(lw.EntryP99Ms)
			res["apply_entry_max_ms"] = fins(lw.EntryMaxMs)
		}
	}
	for cmd, q := range r.Commit {
		if !math.IsInf(q[0], 0) && !math.IsInf(q[1], 0) {
			res["commit_"+cmd+"_p50_ms"], res["commit_"+cmd+"_p99_ms"] = q[0], q[1]
		}
	}
	if r.Retained != nil {
		res["retained"] = r.Retained
	}
	if r.Users > 1 {
		res["fair_share_samples"] = r.FairSamples
		res["fair_share_max_deviation"] = r.Fair.Max
		res["fair_share_p50_deviation"] = r.Fair.P50
		res["fair_share_samples_within_5pct"] = r.Fair.Within
		res["fair_share_all_within_5pct_from_s"] = r.Fair.SettledAt
		res["fair_share_instant_p50_deviation"] = r.Instant.P50
		res["fair_share_instant_max_deviation"] = r.Instant.Max
	}
	if c := r.Cancel; c != nil {
		res["cancel_assignments_after"] = c.AssignmentsAfter
		res["cancel_effect_s"] = c.EffectS
		res["cancel_complete_s"] = c.CompleteS
		res["n_cancelled"] = c.NCancelled
	}
	if !*asJSON {
		fmt.Fprintf(m.Stdout, "%.0f jobs/s end to end (%d jobs, first submit to last batch complete in %.2fs; submit %.2fs), ready-to-assigned p50 %.1f ms p99 %.1f ms",
			float64(r.Jobs)/r.Elapsed.Seconds(), r.Jobs, r.Elapsed.Seconds(), r.Submit.Seconds(), sum.P50ReadyToAssign, sum.P99ReadyToAssign)
		if q, ok := r.Commit["plan"]; ok {
			fmt.Fprintf(m.Stdout, ", commit of a plan p50 %.0f ms p99 %.0f ms", q[0], q[1])
		}
		if r.Users > 1 {
			fmt.Fprintf(m.Stdout, ", fair share (cores held over each second): worst tenant off by %.1f%% at the median sample, %.1f%% at the worst; %.0f%% of %d samples within 5%%, every one from %.0fs on",
				r.Fair.P50*100, r.Fair.Max*100, r.Fair.Within*100, r.FairSamples, r.Fair.SettledAt)
		}
		fmt.Fprintln(m.Stdout)
	}
	return json.NewEncoder(m.Stdout).Encode(res)
}
