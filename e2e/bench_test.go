package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchSchedSmoke runs a small `drover bench sched` (3 real servers,
// simulated workers on the real sync protocol) and checks that it completes
// and reports every figure. It asserts completion, not speed.
func TestBenchSchedSmoke(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "sched", "-servers", "3", "-jobs", "20000", "-workers", "20", "-worker-cores", "64", "-json"},
		{"bench", "sched", "-servers", "1", "-jobs", "20000", "-workers", "10", "-worker-cores", "64", "-array", "-json"},
	} {
		r := runCLI(t, nil, args...).must(t, 0)
		var res map[string]any
		if err := json.Unmarshal([]byte(lastLine(r.stdout)), &res); err != nil {
			t.Fatalf("last line is not JSON: %v\n%s", err, r.stdout)
		}
		for _, k := range []string{"submit_s", "schedule_jobs_per_s", "complete_jobs_per_s", "total_s",
			"p50_ready_to_assigned_ms", "p99_ready_to_assigned_ms", "peak_rss_mb", "heap_bytes_per_job"} {
			if _, ok := res[k]; !ok {
				t.Errorf("%v: no %q in %v", args, k, res)
			}
		}
		if res["complete_jobs_per_s"].(float64) <= 0 || res["jobs"].(float64) != 20000 {
			t.Errorf("%v: %v", args, res)
		}
		t.Logf("%v: %.0f jobs/s", args[2:], res["complete_jobs_per_s"])
	}
}

// TestBenchE2ESmoke runs `drover bench e2e` with real worker processes
// running `true`.
func TestBenchE2ESmoke(t *testing.T) {
	r := runCLI(t, nil, "bench", "e2e", "-jobs", "2000", "-workers", "2", "-worker-cores", "16", "-json").must(t, 0)
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
