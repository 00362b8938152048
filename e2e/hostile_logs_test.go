package e2e

import (
	"strings"
	"testing"
)

// TestHostileLogFlood: a job that writes megabytes of output into a
// billing project with a 200 KiB log quota leaves at most the quota on the
// server; the log says where and why it was cut, and `drover job logs`
// warns of it. Before, only an attempt's log had a cap (64 MiB), and a log
// the server cut said nothing.
func TestHostileLogFlood(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "1", "-worker-cores", "2")
	a.drover(a.token, "billing-project", "set-log-quota", "default", "200KiB").must(t, 0)
	if show := a.drover(a.token, "billing-project", "show", "default").must(t, 0); !strings.Contains(show.stdout, "200KiB per server") {
		t.Fatalf("billing-project show: %s", show.stdout)
	}
	spec := writeSpec(t, `
batch "flood" {
  job "spew" {
    count   = 2
    command = ["sh", "-c", "i=0; while [ $i -lt 40 ]; do head -c 100000 /dev/zero | tr '\\0' x; i=$((i+1)); done; echo; echo done"]
    cpu     = 0.5
    memory  = "64MiB"
  }
}
`)
	r := a.drover(a.token, "run", "-wait", spec).must(t, 0)
	id := batchID(t, r.stdout)
	total := 0
	for _, job := range []string{"1", "2"} {
		logs := a.drover(a.token, "job", "logs", id, job).must(t, 0)
		total += len(logs.stdout)
		if !strings.Contains(logs.stderr, "warning: this log was cut") || !strings.Contains(logs.stderr, "log quota") {
			t.Errorf("job %s: no warning that the log was cut: %q", job, logs.stderr)
		}
		if !strings.HasSuffix(logs.stdout, "]\n") || !strings.Contains(logs.stdout, "[drover: log truncated: ") {
			end := logs.stdout[max(0, len(logs.stdout)-200):]
			t.Errorf("job %s: the log does not end with the truncation line: ...%q", job, end)
		}
	}
	// Both jobs' logs together stay within the quota, a marker line each
	// aside.
	if total > 200<<10+2*400 {
		t.Fatalf("the project's logs hold %d bytes; its quota is %d", total, 200<<10)
	}
	t.Logf("two jobs wrote 4 MB each; their logs hold %d bytes", total)
}
