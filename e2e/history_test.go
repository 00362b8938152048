package e2e

import (
	"bufio"
	"context"
	"fmt"
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
// (-debug-transition-log: one line per job state change, "restore" when
// the state was replaced by a snapshot) and checks that:
//   - every change is allowed by the job state diagram;
//   - the changes of a job chain up (each starts where the previous ended);
//   - a history that starts from an empty state starts every job at staged;
//   - no job enters Success twice;
//   - servers that saw the whole history agree on every job's history.

type jobKey struct {
	batch uint64
	job   uint32
}

type segment struct {
	source    string
	fromEmpty bool
	seq       map[jobKey][]string // states, starting with the first "from"
}

func parseState(name string) (state.JobState, bool) {
	if name == "staged" {
		return state.Staged, true
	}
	return state.ParseJobState(name)
}

// readSegments splits one server lifetime's log at "restore" markers.
func readSegments(t *testing.T, path string, fromEmpty bool) []*segment {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cur := &segment{source: path, fromEmpty: fromEmpty, seq: map[jobKey][]string{}}
	segs := []*segment{cur}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if text == "restore" {
			cur = &segment{source: fmt.Sprintf("%s (after restore at line %d)", path, line), seq: map[jobKey][]string{}}
			segs = append(segs, cur)
			continue
		}
		parts := strings.Fields(text)
		if len(parts) != 4 {
			// The last line of a killed process may be cut short.
			continue
		}
		b, err1 := strconv.ParseUint(parts[0], 10, 64)
		j, err2 := strconv.ParseUint(parts[1], 10, 32)
		from, ok1 := parseState(parts[2])
		to, ok2 := parseState(parts[3])
		if err1 != nil || err2 != nil || !ok1 || !ok2 {
			t.Fatalf("%s:%d: malformed transition %q", path, line, text)
		}
		if !state.TransitionAllowed(from, to) {
			t.Fatalf("%s:%d: job %d/%d: forbidden transition %s -> %s", path, line, b, j, from, to)
		}
		k := jobKey{b, uint32(j)}
		s := cur.seq[k]
		if len(s) == 0 {
			if cur.fromEmpty && from != state.Staged {
				t.Fatalf("%s:%d: job %d/%d first seen in %s, not staged", path, line, b, j, from)
			}
			s = append(s, from.String())
		} else if s[len(s)-1] != from.String() {
			t.Fatalf("%s:%d: job %d/%d moves %s -> %s but was %s", path, line, b, j, from, to, s[len(s)-1])
		}
		cur.seq[k] = append(s, to.String())
	}
	for _, seg := range segs {
		for k, s := range seg.seq {
			n := 0
			for _, st := range s[1:] {
				if st == api.JobSuccess {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("%s: job %d/%d succeeded %d times: %v", seg.source, k.batch, k.job, n, s)
			}
		}
	}
	return segs
}

// checkHistories checks every log of the cluster and returns the number of
// complete histories that agreed. A server that ran from an empty state to
// the end saw the whole history; one killed on the way saw a prefix of it.
func checkHistories(t *testing.T, c *testCluster) int {
	t.Helper()
	var whole, prefixes []*segment
	for _, s := range c.Servers {
		for gen := 0; gen < s.Gen; gen++ {
			segs := readSegments(t, s.TransitionLog(gen), gen == 0)
			if gen != 0 || len(segs) != 1 {
				continue
			}
			if s.Gen == 1 && s.Running() {
				whole = append(whole, segs[0])
			} else {
				prefixes = append(prefixes, segs[0])
			}
		}
	}
	if len(whole) == 0 {
		t.Fatal("no server saw the whole history; nothing to compare")
	}
	ref := whole[0]
	for _, p := range prefixes {
		for k, s := range p.seq {
			full := ref.seq[k]
			if len(s) > len(full) || strings.Join(full[:len(s)], ",") != strings.Join(s, ",") {
				t.Fatalf("job %d/%d: %s saw %v, which does not begin %s's %v", k.batch, k.job, p.source, s, ref.source, full)
			}
		}
	}
	for _, other := range whole[1:] {
		if len(other.seq) != len(ref.seq) {
			t.Fatalf("%s has %d jobs, %s has %d", other.source, len(other.seq), ref.source, len(ref.seq))
		}
		for k, s := range ref.seq {
			if strings.Join(other.seq[k], ",") != strings.Join(s, ",") {
				t.Fatalf("job %d/%d: %s saw %v, %s saw %v", k.batch, k.job, ref.source, s, other.source, other.seq[k])
			}
		}
	}
	return len(whole)
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
