package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestFlagHelpNamesTypes: Go's flag package takes the first `quoted`
// word of a usage as the flag's argument name, so a usage that quotes a
// command ("`drover tls ca create`") printed "-ca-file drover tls ca
// create". Every flag of the long-running commands shows a type, or
// nothing for a bool.
func TestFlagHelpNamesTypes(t *testing.T) {
	line := regexp.MustCompile(`^  -([a-z0-9-]+)(?: (.*))?$`)
	types := map[string]bool{"": true, "string": true, "int": true, "int64": true, "uint": true, "uint64": true, "float": true, "duration": true, "value": true}
	for _, cmd := range [][]string{{"server", "-h"}, {"worker", "-h"}, {"agent", "-h"}} {
		var out bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &out}
		_ = m.Run(context.Background(), cmd)
		flags := 0
		for _, l := range strings.Split(out.String(), "\n") {
			g := line.FindStringSubmatch(l)
			if g == nil {
				continue
			}
			flags++
			if !types[g[2]] {
				t.Errorf("drover %s: -%s shows %q where its type goes", strings.Join(cmd[:len(cmd)-1], " "), g[1], g[2])
			}
		}
		if flags < 3 {
			t.Errorf("drover %s printed %d flags:\n%s", strings.Join(cmd, " "), flags, out.String())
		}
	}
}

// TestRaftMultiplierIsBounded: a multiplier out of range is refused with
// the range and the WAN value.
func TestRaftMultiplierIsBounded(t *testing.T) {
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	err := m.Run(context.Background(), []string{"server", "-data-dir", t.TempDir(), "-raft-multiplier", "11"})
	if err == nil || !strings.Contains(err.Error(), "give 1 (one LAN) to 10; 5 suits regions") {
		t.Fatalf("-raft-multiplier 11: %v", err)
	}
}
