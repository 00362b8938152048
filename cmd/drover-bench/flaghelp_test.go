package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestBenchFlagsShowTypes: every flag of each benchmark shows its type
// (or nothing, for a bool) where Go's flag package prints an argument's
// name, and a benchmark refuses stray arguments.
func TestBenchFlagsShowTypes(t *testing.T) {
	line := regexp.MustCompile(`^  -([a-z0-9-]+)(?: (.*))?$`)
	types := map[string]bool{"": true, "string": true, "int": true, "uint": true, "uint64": true, "float": true, "duration": true}
	for _, name := range []string{"sched", "e2e", "failover", "catchup", "autoscale"} {
		var out bytes.Buffer
		_ = (&Main{Stdout: &out, Stderr: &out}).Run(context.Background(), []string{name, "-h"})
		flags := 0
		for _, l := range strings.Split(out.String(), "\n") {
			if g := line.FindStringSubmatch(l); g != nil {
				flags++
				if !types[g[2]] {
					t.Errorf("drover-bench %s: -%s shows %q where its type goes", name, g[1], g[2])
				}
			}
		}
		if flags < 3 {
			t.Errorf("drover-bench %s -h printed %d flags:\n%s", name, flags, out.String())
		}
	}
	err := (&Main{Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer)}).Run(context.Background(), []string{"e2e", "-jobs", "1", "extra"})
	if err == nil || !strings.Contains(err.Error(), "takes no arguments: extra") {
		t.Fatalf("a stray argument: %v", err)
	}
}
