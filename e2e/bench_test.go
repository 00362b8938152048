package e2e

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// TestBenchSchedSmoke runs a small `drover bench sched` (3 real servers,
// simulated workers on the real sync protocol) and checks that it completes
// and reports every figure, the headline end to end: jobs_per_s is every
// job over the time from the first submit request to the last batch
// complete. It asserts completion, not speed.
func TestBenchSchedSmoke(t *testing.T) {
	for _, c := range []struct {
		args []string
		jobs float64
	}{
		{[]string{"bench", "sched", "-servers", "3", "-jobs", "20000", "-workers", "20", "-worker-cores", "64", "-json"}, 20000},
		{[]string{"bench", "sched", "-servers", "1", "-jobs", "20000", "-workers", "10", "-worker-cores", "64", "-array", "-json"}, 20000},
		{[]string{"bench", "sched", "-servers", "1", "-users", "4", "-batches", "2", "-jobs", "300", "-workers", "8", "-worker-cores", "16",
			"-job-duration", "exp:20ms", "-json"}, 2400},
	} {
		args := c.args
		r := runCLI(t, nil, args...).must(t, 0)
		var res map[string]any
		if err := json.Unmarshal([]byte(lastLine(r.stdout)), &res); err != nil {
			t.Fatalf("last line is not JSON: %v\n%s", err, r.stdout)
		}
		for _, k := range []string{"jobs_per_s", "submit_s", "schedule_jobs_per_s", "complete_jobs_per_s", "total_s",
			"p50_ready_to_assigned_ms", "p99_ready_to_assigned_ms", "peak_rss_mb", "heap_bytes_per_job"} {
			if _, ok := res[k]; !ok {
				t.Errorf("%v: no %q in %v", args, k, res)
			}
		}
		if res["jobs"].(float64) != c.jobs {
			t.Errorf("%v: %v", args, res)
		}
		perS, total := res["jobs_per_s"].(float64), res["total_s"].(float64)
		if perS <= 0 || total <= res["submit_s"].(float64) || math.Abs(perS*total-c.jobs) > 1 {
			t.Errorf("%v: jobs_per_s %.0f is not jobs / total_s (%.0f / %.3f) end to end", args, perS, c.jobs, total)
		}
		if _, ok := res["fair_share_max_deviation"]; ok != (res["users"].(float64) > 1) {
			t.Errorf("%v: fair share reported for %v users: %v", args, res["users"], res)
		}
		t.Logf("%v: %.0f jobs/s end to end", args[2:], perS)
	}
}

// TestBenchE2ESmoke runs `drover bench e2e` with real worker processes
// running `true`.
func TestBenchE2ESmoke(t *testing.T) {
	r := runCLIFor(t, 8*time.Minute, nil, "bench", "e2e", "-jobs", "2000", "-workers", "2", "-worker-cores", "16", "-json").must(t, 0)
	var res map[string]any
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &res); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, r.stdout)
	}
	if res["complete_jobs_per_s"].(float64) <= 0 || res["jobs"].(float64) != 2000 {
		t.Fatalf("%v", res)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// TestBenchE2EContainersSmoke runs `drover bench e2e -image test`: the
// bench serves its own image, every job runs in a container, and each
// worker pulls the image once.
func TestBenchE2EContainersSmoke(t *testing.T) {
	jobtoolImage(t) // root and runc, or skip/fail as the container tests do
	// 40 s here when the machine is idle; a loaded machine may take many
	// times that, which is not what this test is about.
	r := runCLIFor(t, 8*time.Minute, nil, "bench", "e2e", "-image", "test", "-jobs", "200", "-workers", "2", "-worker-cores", "4", "-json").must(t, 0)
	var res map[string]any
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &res); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, r.stdout)
	}
	if res["complete_jobs_per_s"].(float64) <= 0 || res["jobs"].(float64) != 200 || res["image_pulls"].(float64) != 2 || res["attempt_p50_ms"].(float64) <= 0 {
		t.Fatalf("%v", res)
	}
}

// TestRetainedBatchesLeaveMemory: 100 batches of 10,000 jobs run on three
// real servers that export to a real MariaDB with a retention window of a
// second. Once every batch has left memory, the state holds no batch and
// no job, each server's snapshot (the audit log aside: bounded at 20,000
// entries, not batch state) is within 10% of what it was with the workers
// up and no batch, and every batch still reads back complete through the
// API, and each server's heap (after a GC, once idle MySQL connections
// have closed and the Raft log file was rewritten; the least of 5
// readings) is within 10% of the idle cluster's too.
func TestRetainedBatchesLeaveMemory(t *testing.T) {
	// The run (about a minute; six on a loaded machine, where a run of
	// 358 s passed the 7 minutes this had), the export once the scheduler
	// is quiet (half a minute), the wait for idle connections to close
	// (35 s) and for a Raft log rewrite that a late snapshot made due (up
	// to 90 s). What it tests is memory, not pace.
	r := runCLIFor(t, 15*time.Minute, nil, "bench", "sched", "-servers", "3", "-history", "mysql", "-retention", "1s", "-users", "1", "-batches", "100",
		"-jobs", "10000", "-workers", "20", "-worker-cores", "64", "-json").must(t, 0)
	var res struct {
		Jobs     int `json:"jobs"`
		Retained struct {
			HeapRatio     float64 `json:"heap_ratio_max"`
			SnapshotRatio float64 `json:"snapshot_ratio_max"`
			Held          int64   `json:"held_batches_and_jobs_max"`
			Readable      int     `json:"batches_readable"`
			LeftMemoryS   float64 `json:"left_memory_s"`
		} `json:"retained"`
	}
	if err := json.Unmarshal([]byte(lastLine(r.stdout)), &res); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, r.stdout)
	}
	got := res.Retained
	t.Logf("%d jobs; every batch left memory %.1fs after the last completed; heap %.3fx, snapshot %.3fx the idle cluster's",
		res.Jobs, got.LeftMemoryS, got.HeapRatio, got.SnapshotRatio)
	if res.Jobs != 1_000_000 || got.Readable != 100 || got.Held != 0 {
		t.Fatalf("%d jobs run, %d of 100 batches read back, %d batches and jobs still held", res.Jobs, got.Readable, got.Held)
	}
	if got.SnapshotRatio <= 0 || got.SnapshotRatio > 1.10 {
		t.Fatalf("snapshot %.3fx the idle cluster's; it must be within 10%%", got.SnapshotRatio)
	}
	if got.HeapRatio <= 0 || got.HeapRatio > 1.10 {
		t.Fatalf("heap %.3fx the idle cluster's after every batch left memory; it must be within 10%%", got.HeapRatio)
	}
}
