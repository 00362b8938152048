package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestParseDevClustersCapacity: -clusters reads an optional /capacity=N
// after a cluster's size (how many of its workers the local cloud runs
// at once); without it there is no limit, and a capacity out of 1 to
// 100000 or written otherwise is refused with the syntax.
func TestParseDevClustersCapacity(t *testing.T) {
	got, err := parseDevClusters("us-east1/a:3x4/capacity=1, us-west1/b:2x8")
	if err != nil {
		t.Fatal(err)
	}
	want := []devCluster{{region: "us-east1", cluster: "a", workers: 3, cores: 4, capacity: 1}, {region: "us-west1", cluster: "b", workers: 2, cores: 8}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parsed %+v, want %+v", got, want)
	}
	for _, bad := range []string{"us-east1/a:3x4/capacity=0", "us-east1/a:3x4/capacity=100001", "us-east1/a:3x4/capacity=-1",
		"us-east1/a:3x4/cap1", "us-east1/a:3x4/capacity=", "us-east1/a:3x4/capacity=1/capacity=2"} {
		if _, err := parseDevClusters(bad); err == nil || !strings.Contains(err.Error(), "/capacity=N") {
			t.Errorf("%s: %v; want it refused with the syntax", bad, err)
		}
	}
}

// TestDevCapacityNeedsAutoscale: a capacity is what the local cloud gives
// the autoscaler; without -autoscale the agent starts every worker
// itself, and the flag is refused before anything starts.
func TestDevCapacityNeedsAutoscale(t *testing.T) {
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	err := m.Run(context.Background(), []string{"agent", "-dev", "-data-dir", t.TempDir(), "-clusters", "us-east1/a:2x4/capacity=1"})
	if err == nil || !strings.Contains(err.Error(), "needs -autoscale") {
		t.Fatalf("a capacity without -autoscale: %v", err)
	}
}
