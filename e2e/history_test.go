package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// The history checker reads the transition logs every server process wrote
// (-debug-transition-log: one line "index batch job from to" per job state
// change, with the Raft index of the command that made it, and "restore N"
// when the state was replaced by a snapshot at index N) and checks that:
//   - every change is allowed by the job state diagram;
//   - the changes of a job chain up (each starts where the previous ended);
//   - a history that starts from an empty state starts every job at staged;
//   - no job enters Success twice;
//   - at least two servers saw the whole history, and they agree on every
//     job's history;
//   - every other history (a server killed on the way, or one that started
//     from a snapshot) agrees with the whole one from where it started: from
//     its snapshot's index on, each job's changes begin the whole
//     history's changes after that index.

type jobKey struct {
	batch uint64
	job   uint32
}

type change struct {
	index uint64
	to    string
}

// segment is one stretch of a server's history: from an empty state
// (from == 0) or from a snapshot at index from, to where the log ends or
// the next restore.
type segment struct {
	source string
	from   uint64
	first  map[jobKey]string   // each job's state when first seen
	seq    map[jobKey][]change // its changes in order
}

func newSegment(source string, from uint64) *segment {
	return &segment{source: source, from: from, first: map[jobKey]string{}, seq: map[jobKey][]change{}}
}

func parseState(name string) (state.JobState, bool) {
	if name == "staged" {
		return state.Staged, true
	}
	return state.ParseJobState(name)
}

// parseHistory splits one server lifetime's log at "restore" markers and
// checks each segment on its own. A lifetime that starts without a marker
// starts from an empty state.
func parseHistory(r io.Reader, source string) ([]*segment, error) {
	cur := newSegment(source, 0)
	segs := []*segment{cur}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		parts := strings.Fields(text)
		if len(parts) == 2 && parts[0] == "restore" {
			at, err := strconv.ParseUint(parts[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: malformed restore marker %q", source, line, text)
			}
			if len(cur.seq) == 0 && line == 1 {
				segs = segs[:0]
			}
			cur = newSegment(fmt.Sprintf("%s (from the snapshot at index %d, line %d)", source, at, line), at)
			segs = append(segs, cur)
			continue
		}
		if len(parts) != 5 {
			return nil, fmt.Errorf("%s:%d: malformed line %q", source, line, text)
		}
		idx, err0 := strconv.ParseUint(parts[0], 10, 64)
		b, err1 := strconv.ParseUint(parts[1], 10, 64)
		j, err2 := strconv.ParseUint(parts[2], 10, 32)
		from, ok1 := parseState(parts[3])
		to, ok2 := parseState(parts[4])
		if err0 != nil || err1 != nil || err2 != nil || !ok1 || !ok2 {
			return nil, fmt.Errorf("%s:%d: malformed transition %q", source, line, text)
		}
		if !state.TransitionAllowed(from, to) {
			return nil, fmt.Errorf("%s:%d: job %d/%d: forbidden transition %s -> %s", source, line, b, j, from, to)
		}
		k := jobKey{b, uint32(j)}
		s := cur.seq[k]
		if len(s) == 0 {
			if _, seen := cur.first[k]; !seen {
				if cur.from == 0 && from != state.Staged {
					return nil, fmt.Errorf("%s:%d: job %d/%d first seen in %s, not staged", source, line, b, j, from)
				}
				cur.first[k] = from.String()
			}
		} else if s[len(s)-1].to != from.String() {
			return nil, fmt.Errorf("%s:%d: job %d/%d moves %s -> %s but was %s", source, line, b, j, from, to, s[len(s)-1].to)
		}
		if to == state.Success && from.String() != api.JobSuccess {
			for _, c := range s {
				if c.to == api.JobSuccess {
					return nil, fmt.Errorf("%s:%d: job %d/%d succeeds a second time", source, line, b, j)
				}
			}
		}
		cur.seq[k] = append(s, change{idx, to.String()})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return segs, nil
}

func states(cs []change) string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.to
	}
	return strings.Join(out, ",")
}

// compareHistories checks that the whole histories (at least minWhole)
// agree and that every partial one agrees with them from where it
// started. It returns the number of whole histories.
func compareHistories(whole, partial []*segment, minWhole int) (int, error) {
	if len(whole) < minWhole {
		return len(whole), fmt.Errorf("%d servers saw the whole history, %d needed to compare", len(whole), minWhole)
	}
	if len(whole) == 0 {
		return 0, nil
	}
	ref := whole[0]
	for _, other := range whole[1:] {
		if len(other.seq) != len(ref.seq) {
			return 0, fmt.Errorf("%s has %d jobs, %s has %d", other.source, len(other.seq), ref.source, len(ref.seq))
		}
		for k, s := range ref.seq {
			if states(other.seq[k]) != states(s) {
				return 0, fmt.Errorf("job %d/%d: %s saw %s, %s saw %s", k.batch, k.job, ref.source, states(s), other.source, states(other.seq[k]))
			}
		}
	}
	for _, p := range partial {
		for k, s := range p.seq {
			var after []change
			for _, c := range ref.seq[k] {
				if c.index > p.from {
					after = append(after, c)
				}
			}
			if len(s) > len(after) || states(after[:len(s)]) != states(s) {
				return 0, fmt.Errorf("job %d/%d: %s saw %s, which does not begin %s's %s after index %d", k.batch, k.job, p.source, states(s), ref.source, states(after), p.from)
			}
		}
	}
	return len(whole), nil
}

// checkHistories checks every log of the cluster and returns the number of
// whole histories, which must be at least minWhole. A server that ran from
// an empty state to the end, never restarted, saw the whole history; every
// other log is compared from where it started.
//
// A server's Raft applied index moves when an entry is handed to its FSM,
// before the FSM applied it and wrote its transitions, so equal applied
// indexes do not mean equal logs yet: the check is repeated until the logs
// agree, for up to a minute. What diverged stays diverged (the logs only
// grow), so a real disagreement still fails, with the last error seen.
func checkHistories(t *testing.T, c *testCluster, minWhole int) int {
	t.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); ; {
		var n, partial int
		if n, partial, err = readHistories(c, minWhole); err == nil {
			t.Logf("%d whole histories agree; %d partial ones agree with them from where they started", n, partial)
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// readHistories reads every transition log of the cluster once and
// compares them.
func readHistories(c *testCluster, minWhole int) (whole, partial int, err error) {
	var wholeSegs, partialSegs []*segment
	for _, s := range c.Servers {
		for gen := 0; gen < s.Gen; gen++ {
			path := s.TransitionLog(gen)
			data, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return 0, 0, err
			}
			// A line without its newline is being written, or was cut
			// short when its process was killed.
			data = data[:bytes.LastIndexByte(data, '\n')+1]
			segs, err := parseHistory(bytes.NewReader(data), path)
			if err != nil {
				return 0, 0, err
			}
			for i, seg := range segs {
				if gen == 0 && i == 0 && seg.from == 0 && len(segs) == 1 && s.Gen == 1 && s.Running() {
					wholeSegs = append(wholeSegs, seg)
				} else {
					partialSegs = append(partialSegs, seg)
				}
			}
		}
	}
	n, err := compareHistories(wholeSegs, partialSegs, minWhole)
	return n, len(partialSegs), err
}

// prober submits small batches, each with its own idempotency key, while
// faults happen, and remembers which ones the cluster acknowledged.
type prober struct {
	c     *api.Client
	mu    sync.Mutex
	acked map[int]int64
	tried int
	stop  chan struct{}
	done  chan struct{}
}

func startProber(c *api.Client) *prober {
	p := &prober{c: c, acked: map[int]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for n := 0; ; n++ {
			select {
			case <-p.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			res, err := p.c.CreateBatch(ctx, &api.CreateBatchRequest{
				// No explicit key: the client adds one to every create,
				// and that alone must keep each probe to one batch.
				Name: "probe", Attributes: map[string]string{"probe": strconv.Itoa(n)},
				Jobs: []api.JobSpec{{JobID: 1, Command: []string{"true"}, CPU: 0.1, Memory: 16 << 20}},
			})
			cancel()
			p.mu.Lock()
			p.tried++
			if err == nil {
				p.acked[n] = res.ID
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// finish stops the prober and checks that every acknowledged submission is
// in the cluster exactly once, and that no submission is there twice.
func (p *prober) finish(t *testing.T) {
	t.Helper()
	close(p.stop)
	<-p.done
	seen := map[string][]int64{}
	var last int64
	for {
		page, err := p.c.ListBatches(context.Background(), "name=probe", last)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Batches {
			seen[b.Attributes["probe"]] = append(seen[b.Attributes["probe"]], b.ID)
		}
		if page.LastID == 0 {
			break
		}
		last = page.LastID
	}
	for n, ids := range seen {
		if len(ids) > 1 {
			t.Fatalf("submission %s is in the cluster %d times: batches %v", n, len(ids), ids)
		}
	}
	for n, id := range p.acked {
		ids := seen[strconv.Itoa(n)]
		if len(ids) != 1 || ids[0] != id {
			t.Fatalf("acknowledged submission %d (batch %d) is not in the cluster: found %v", n, id, ids)
		}
	}
	if len(p.acked) < p.tried/2 {
		t.Fatalf("only %d of %d submissions were acknowledged", len(p.acked), p.tried)
	}
	t.Logf("prober: %d submissions, %d acknowledged, all present exactly once", p.tried, len(p.acked))
}
