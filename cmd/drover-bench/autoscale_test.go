package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchAutoscaleWorkload runs drover-bench autoscale on a workload
// file: the simulator's figures come out as JSON on stdout and one a line
// on stderr; -synthetic with -workload is a usage error.
func TestBenchAutoscaleWorkload(t *testing.T) {
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut}
	if err := m.Run(context.Background(), []string{"autoscale", "-workload", "../../sim/testdata/small.json", "-seed", "3"}); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if res["bench"] != "autoscale-sim" || res["cap_violations"] != 0.0 || res["jobs"] != 84.0 || res["seed"] != 3.0 {
		t.Fatalf("%v", res)
	}
	if !strings.Contains(errOut.String(), "cost_ratio ") {
		t.Fatalf("no figures on stderr: %s", errOut.String())
	}
	err := (&Main{Stdout: &out, Stderr: &errOut}).Run(context.Background(), []string{"autoscale", "-synthetic", "-workload", "x.json"})
	if err == nil || !strings.Contains(err.Error(), "-synthetic") {
		t.Fatalf("-synthetic with -workload: %v", err)
	}
}
