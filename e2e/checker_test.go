package e2e

import (
	"strings"
	"testing"
)

// The history checker is tested on made-up logs: each kind of fault it
// exists to find must make it fail, and healthy histories must pass.

// healthy is one whole history: two jobs of batch 1 from staged to the end,
// job 2 retried once.
const healthy = `1 1 1 staged ready
1 1 2 staged ready
2 1 1 ready running
2 1 2 ready running
3 1 1 running success
4 1 2 running ready
5 1 2 ready running
6 1 2 running success
`

func parse(t *testing.T, source, log string) []*segment {
	t.Helper()
	segs, err := parseHistory(strings.NewReader(log), source)
	if err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	return segs
}

func TestCheckerPassesHealthyHistories(t *testing.T) {
	a, b := parse(t, "s0", healthy), parse(t, "s1", healthy)
	// s2 was killed after index 3, restarted from a snapshot at index 4
	// and saw the rest.
	killed := parse(t, "s2.0", strings.Join(strings.Split(healthy, "\n")[:5], "\n"))
	restarted := parse(t, "s2.1", "restore 4\n5 1 2 ready running\n6 1 2 running success\n")
	if len(restarted) != 1 || restarted[0].from != 4 {
		t.Fatalf("restored segment: %+v", restarted)
	}
	n, err := compareHistories(append(a, b...), append(killed, restarted...), 2)
	if err != nil || n != 2 {
		t.Fatalf("healthy histories: %d, %v", n, err)
	}
}

func TestCheckerFindsFaults(t *testing.T) {
	for _, c := range []struct {
		name, log string
		want      string
	}{
		{"double success", healthy + "7 1 1 running success\n", "moves running -> success but was success"},
		{"illegal transition", "1 1 1 staged ready\n2 1 1 ready success\n", "forbidden transition ready -> success"},
		{"broken chain", "1 1 1 staged ready\n2 1 1 running success\n", "moves running -> success but was ready"},
		{"first seen late", "1 1 1 ready running\n", "first seen in ready, not staged"},
		{"malformed", "1 1 x staged ready\n", "malformed transition"},
		{"short line", "1 1 1 staged\n", "malformed line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseHistory(strings.NewReader(c.log), c.name)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestCheckerFindsDivergence(t *testing.T) {
	diverged := strings.Replace(healthy, "6 1 2 running success", "6 1 2 running failed", 1)
	a, b := parse(t, "s0", healthy), parse(t, "s1", diverged)
	if _, err := compareHistories(append(a, b...), nil, 2); err == nil || !strings.Contains(err.Error(), "job 1/2") {
		t.Fatalf("whole histories that diverge: %v", err)
	}
	// A restarted server that diverges after its snapshot.
	restarted := parse(t, "s2.1", "restore 4\n5 1 2 ready running\n6 1 2 running failed\n")
	if _, err := compareHistories(append(parse(t, "s0", healthy), parse(t, "s1", healthy)...), restarted, 2); err == nil ||
		!strings.Contains(err.Error(), "after index 4") {
		t.Fatalf("a restarted server that diverges: %v", err)
	}
	// A killed server whose prefix diverges.
	killed := parse(t, "s2.0", "1 1 1 staged ready\n2 1 1 ready cancelled\n")
	if _, err := compareHistories(append(parse(t, "s0", healthy), parse(t, "s1", healthy)...), killed, 2); err == nil {
		t.Fatal("a killed server whose prefix diverges passed")
	}
}

func TestCheckerNeedsTwoWholeHistories(t *testing.T) {
	if _, err := compareHistories(parse(t, "s0", healthy), nil, 2); err == nil || !strings.Contains(err.Error(), "1 servers saw the whole history, 2 needed") {
		t.Fatalf("one whole history: %v", err)
	}
}
