package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/changes"
	"github.com/drover-sched/drover/server/state"
)

var errEnough = errors.New("enough")

// watchUntil follows the change stream from index until want holds of
// the changes seen, and returns them and the last frame's index.
func watchUntil(t *testing.T, c *api.Client, index uint64, topics []string, want func([]api.Change) bool) ([]api.Change, uint64, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seen []api.Change
	var last uint64
	reload := false
	err := c.WatchChanges(ctx, index, topics, func(f *api.ChangeFrame) error {
		seen = append(seen, f.Changes...)
		last, reload = f.Index, reload || f.Reload
		if want(seen) {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		t.Fatalf("watch from %d %v: %v (saw %+v)", index, topics, err, seen)
	}
	return seen, last, reload
}

func has(cs []api.Change, topic, key string) bool {
	for _, c := range cs {
		if c.Topic == topic && c.Key == key {
			return true
		}
	}
	return false
}

// TestChangeStream: the change stream tells a batch's changes at the
// index that made them, resumes from an index without a gap or a repeat,
// shows a tenant no change of a batch it may not read, and bounds what a
// caller may ask for.
func TestChangeStream(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	bob := tc.user("bob", "physics")

	// From now: the first frame names the index the stream starts at.
	_, start, _ := watchUntil(t, alice, 0, nil, func([]api.Change) bool { return true })
	if start == 0 {
		t.Fatal("the first frame names no index")
	}
	bb, err := bob.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "physics", Jobs: []api.JobSpec{job(1, "b")}})
	if err != nil {
		t.Fatal(err)
	}
	ab, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{job(1, "a"), job(2, "a2")}})
	if err != nil {
		t.Fatal(err)
	}
	aKey, bKey := strconv.FormatInt(ab.ID, 10), strconv.FormatInt(bb.ID, 10)
	seen, idx, reload := watchUntil(t, alice, start, nil, func(cs []api.Change) bool { return has(cs, api.ChangeJob, aKey+"/2") })
	if reload {
		t.Fatal("resuming from a recent index asked for a reload")
	}
	if !has(seen, api.ChangeBatch, aKey) || has(seen, api.ChangeBatch, bKey) || has(seen, api.ChangeJob, bKey+"/1") {
		t.Fatalf("alice's changes since %d: %+v (her batch %s, bob's %s)", start, seen, aKey, bKey)
	}
	for _, c := range seen {
		if c.Index <= start || c.Index > idx {
			t.Fatalf("change %+v outside (%d, %d]", c, start, idx)
		}
	}
	// Resuming from the last index: only what came after it.
	if err := alice.CancelBatch(ctx, ab.ID); err != nil {
		t.Fatal(err)
	}
	after, _, _ := watchUntil(t, alice, idx, []string{api.ChangeBatch + ":" + aKey}, func(cs []api.Change) bool { return len(cs) > 0 })
	for _, c := range after {
		if c.Index <= idx || c.Topic != api.ChangeBatch || c.Key != aKey {
			t.Fatalf("after %d, filtered to batch %s: %+v", idx, aKey, after)
		}
	}
	// Bob sees his own batch.
	bseen, _, _ := watchUntil(t, bob, start, nil, func(cs []api.Change) bool { return has(cs, api.ChangeBatch, bKey) })
	if has(bseen, api.ChangeBatch, aKey) {
		t.Fatalf("bob sees alice's batch: %+v", bseen)
	}
	// An index the server never had: reload.
	if _, _, reload := watchUntil(t, alice, 1<<40, nil, func([]api.Change) bool { return true }); !reload {
		t.Fatal("an index ahead of the server's did not ask for a reload")
	}
	tok := userToken(t, alice)
	for path, msg := range map[string]string{
		"/api/v1/changes?topic=Nope":                                    "no topic",
		"/api/v1/changes?index=x":                                       "not a number",
		"/api/v1/changes?topic=Job:" + strings.Repeat("1", 70):          "at most 64",
		"/api/v1/changes?" + strings.Repeat("topic=Batch&", 17) + "x=1": "at most 16",
	} {
		code, got := tc.raw(http.MethodGet, path, tok, "")
		if code != http.StatusBadRequest || !strings.Contains(got, msg) {
			t.Errorf("%s: HTTP %d %q, want 400 naming %q", path, code, got, msg)
		}
	}
}

// TestLargeEntriesCoalesce: an entry that changes more jobs of a batch
// than maxJobChanges records them one by one up to the bound, then one
// change of every job of the batch ("b/*"), and each batch and queue
// change once.
func TestLargeEntriesCoalesce(t *testing.T) {
	r := newFeedRecorder(0)
	for j := uint32(1); j <= 10_000; j++ {
		r.transition(5, 7, j, state.Staged, state.Pending)
	}
	r.transition(6, 7, 1, state.Pending, state.Ready)
	r.applied([]uint64{5, 6}, []state.Command{&state.CommitUpdate{Batch: 7}, &state.Plan{}}, []any{nil, nil})
	p := r.feed.Since(0, nil, 0)
	jobs, wild, batches := 0, 0, 0
	for _, c := range p.Changes {
		switch {
		case c.Index == 5 && c.Topic == changes.Job && c.Key() == "7/*":
			wild++
		case c.Index == 5 && c.Topic == changes.Job:
			jobs++
		case c.Index == 5 && c.Topic == changes.Batch:
			batches++
		}
	}
	if jobs != maxJobChanges || wild != 1 || batches != 1 || len(p.Changes) > maxJobChanges+10 {
		t.Fatalf("index 5: %d job changes, %d of every job, %d of the batch, %d in all; want %d, 1, 1", jobs, wild, batches, len(p.Changes), maxJobChanges)
	}
	if !has(apiChanges(p.Changes), "Job", "7/1") || !slices.ContainsFunc(p.Changes, func(c changes.Change) bool { return c.Index == 6 && c.Key() == "7/1" }) {
		t.Fatal("the next index's job change was lost")
	}
}

func apiChanges(cs []changes.Change) []api.Change {
	var out []api.Change
	for _, c := range cs {
		out = append(out, api.Change{Index: c.Index, Topic: string(c.Topic), Key: c.Key()})
	}
	return out
}

// TestChangeStreamEndsWithItsToken: a change stream opened with a token
// ends once the token is revoked (at the next frame or heartbeat), and
// holds nothing of what came after.
func TestChangeStreamEndsWithItsToken(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	alice := tc.user("alice", "genomics")
	tok, err := alice.CreateToken(ctx, &api.CreateTokenRequest{Name: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(tc.url, tok.Token)
	wctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	frames := make(chan *api.ChangeFrame, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.WatchChanges(wctx, 0, []string{api.ChangeBatch}, func(f *api.ChangeFrame) error {
			frames <- f
			return nil
		})
	}()
	<-frames // open
	if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{job(1, "a")}}); err != nil {
		t.Fatal(err)
	}
	if f := <-frames; len(f.Changes) == 0 {
		t.Fatalf("no change of the new batch: %+v", f)
	}
	if err := alice.RevokeToken(ctx, tok.Accessor); err != nil {
		t.Fatal(err)
	}
	// The next change would be a frame: the stream ends instead.
	second, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{job(1, "b")}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil && wctx.Err() != nil {
			t.Fatalf("the stream went on until the test's deadline: %v", err)
		}
	case <-wctx.Done():
		t.Fatal("the stream of a revoked token goes on")
	}
	for len(frames) > 0 {
		if f := <-frames; has(f.Changes, api.ChangeBatch, strconv.FormatInt(second.ID, 10)) {
			t.Fatalf("the revoked token's stream told of the batch made after: %+v", f)
		}
	}
}

// TestSharedTopicsArePaced: a user (not an admin) following the queues
// is told of their changes at most every 2 s, not at each job of another
// tenant: a burst of another project's batches is a few frames.
func TestSharedTopicsArePaced(t *testing.T) {
	tc := startServer(t, "", nil)
	ctx := context.Background()
	bob := tc.user("bob", "physics")
	alice := tc.user("alice", "genomics")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var frames []time.Time
	opened := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = bob.WatchChanges(wctx, 0, []string{api.ChangeQueue}, func(f *api.ChangeFrame) error {
			if len(f.Changes) == 0 {
				select {
				case <-opened:
				default:
					close(opened)
				}
				return nil
			}
			frames = append(frames, time.Now())
			return nil
		})
	}()
	<-opened
	start := time.Now()
	for i := range 20 {
		if _, err := alice.CreateBatch(ctx, &api.CreateBatchRequest{BillingProject: "genomics", Jobs: []api.JobSpec{job(1, fmt.Sprint(i))}}); err != nil {
			t.Fatal(err)
		}
		if err := alice.CancelBatch(ctx, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2500 * time.Millisecond) // the last held frame goes out
	cancel()
	<-done
	elapsed := time.Since(start)
	if most := int(elapsed/(2*time.Second)) + 2; len(frames) == 0 || len(frames) > most {
		t.Fatalf("%d frames of queue changes over %s of another tenant's 40 entries; want 1 to %d (one every 2 s)", len(frames), elapsed.Round(time.Millisecond), most)
	}
}
