package changes

import (
	"strconv"
	"strings"
	"testing"
)

// ch is a change with the key given ("12", "12/3", "12/*", a name).
func ch(index uint64, topic Topic, key string) Change {
	c := Change{Index: index, Topic: topic}
	switch topic {
	case Batch:
		c.Batch, _ = strconv.ParseUint(key, 10, 64)
	case Job:
		b, j, _ := strings.Cut(key, "/")
		c.Batch, _ = strconv.ParseUint(b, 10, 64)
		if j == "*" {
			c.All = true
		} else {
			n, _ := strconv.ParseUint(j, 10, 32)
			c.Job = uint32(n)
		}
	default:
		if key != "*" {
			c.Name = key
		}
	}
	return c
}

// TestSinceResumesAfterAnIndex: a reader gets exactly the changes after
// the index it read up to, repeats at one index kept once.
func TestSinceResumesAfterAnIndex(t *testing.T) {
	f := New(100, 10)
	f.Publish(11, []Change{ch(11, Batch, "1"), ch(11, Batch, "1"), ch(11, Job, "1/1")})
	f.Publish(13, []Change{ch(12, Queue, "*"), ch(13, Batch, "2")})
	p := f.Since(10, nil, 0)
	if p.Reload || p.Index != 13 || len(p.Changes) != 4 {
		t.Fatalf("from 10: %+v", p)
	}
	p = f.Since(11, nil, 0)
	if p.Reload || len(p.Changes) != 2 || p.Changes[0] != ch(12, Queue, "*") {
		t.Fatalf("from 11: %+v", p)
	}
	if p = f.Since(13, nil, 0); p.Reload || len(p.Changes) != 0 || p.Index != 13 {
		t.Fatalf("from 13: %+v", p)
	}
	// From before the feed began, or ahead of it: reload.
	if p = f.Since(9, nil, 0); !p.Reload || p.Index != 13 {
		t.Fatalf("from 9: %+v", p)
	}
	if p = f.Since(14, nil, 0); !p.Reload {
		t.Fatalf("from 14: %+v", p)
	}
}

// TestEvictedChangesMeanReload: once the ring drops a reader's changes,
// the reader is told to reload, never handed a partial list.
func TestEvictedChangesMeanReload(t *testing.T) {
	f := New(3, 0)
	for i := uint64(1); i <= 5; i++ {
		f.Publish(i, []Change{ch(i, Batch, "1")})
	}
	if p := f.Since(1, nil, 0); !p.Reload {
		t.Fatalf("from 1 after 2 were dropped: %+v", p)
	}
	if p := f.Since(2, nil, 0); p.Reload || len(p.Changes) != 3 {
		t.Fatalf("from 2: %+v", p)
	}
	f.Reset(9)
	if p := f.Since(5, nil, 0); !p.Reload || p.Index != 9 {
		t.Fatalf("from 5 after a snapshot at 9: %+v", p)
	}
	if p := f.Since(9, nil, 0); p.Reload || len(p.Changes) != 0 {
		t.Fatalf("from 9 after the snapshot: %+v", p)
	}
}

// TestLimitEndsOnAWholeIndex: a page cut by its limit ends at the last
// index it holds whole, so the next read resumes without a gap.
func TestLimitEndsOnAWholeIndex(t *testing.T) {
	f := New(100, 0)
	f.Publish(1, []Change{ch(1, Job, "1/1"), ch(1, Job, "1/2"), ch(1, Job, "1/3")})
	f.Publish(2, []Change{ch(2, Job, "1/4")})
	p := f.Since(0, nil, 2)
	if len(p.Changes) != 3 || p.Index != 1 {
		t.Fatalf("limit 2 over an index of 3: %+v", p)
	}
	p = f.Since(p.Index, nil, 2)
	if len(p.Changes) != 1 || p.Changes[0].Key() != "1/4" || p.Index != 2 {
		t.Fatalf("the rest: %+v", p)
	}
}

func TestFilter(t *testing.T) {
	f, err := ParseFilter([]string{"Batch:12", "Job:12/*", "Queue"})
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[Change]bool{
		ch(1, Batch, "12"): true, ch(1, Batch, "121"): false, ch(1, Job, "12/7"): true, ch(1, Job, "121/7"): false,
		ch(1, Queue, "*"): true, ch(1, Machine, "*"): false, ch(1, Job, "12/*"): true, ch(1, Job, "1/*"): false,
	} {
		if f.Wants(c) != want {
			t.Errorf("%+v: wants %v", c, !want)
		}
	}
	// A change of every job of a batch is one of each job.
	one, _ := ParseFilter([]string{"Job:12/7"})
	if !one.Wants(ch(1, Job, "12/*")) || one.Wants(ch(1, Job, "1/*")) {
		t.Error("a watcher of job 12/7 and the change of every job of batch 12 (or 1)")
	}
	if _, err := ParseFilter([]string{"Nope"}); err == nil {
		t.Fatal("an unknown topic is taken")
	}
}

// TestWaitWakesOnPublish: a reader waiting is woken by the next publish.
func TestWaitWakesOnPublish(t *testing.T) {
	f := New(10, 0)
	w := f.Wait()
	select {
	case <-w:
		t.Fatal("woken before anything was published")
	default:
	}
	f.Publish(1, []Change{ch(1, Batch, "1")})
	<-w
}
