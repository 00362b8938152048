package server

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestLogCache: entries are read from the cache while fresh, from the
// store once they expire or are overwritten, and DeleteRange empties it.
func TestLogCache(t *testing.T) {
	store := raft.NewInmemStore()
	clock := time.Unix(1000, 0)
	c, err := newLogCache(4, 10*time.Second, store)
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return clock }
	var logs []*raft.Log
	for i := uint64(1); i <= 6; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: []byte{byte(i)}})
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	cached := func(idx uint64) bool {
		c.mu.RLock()
		defer c.mu.RUnlock()
		l := c.cache[idx%uint64(len(c.cache))]
		return l != nil && l.Index == idx
	}
	// 1 and 2 were overwritten by 5 and 6; all read back either way.
	for i := uint64(1); i <= 6; i++ {
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil || l.Index != i || l.Data[0] != byte(i) {
			t.Fatalf("log %d: %+v, %v", i, l, err)
		}
		if want := i > 2; cached(i) != want {
			t.Fatalf("log %d cached %v, want %v", i, cached(i), want)
		}
	}
	clock = clock.Add(5 * time.Second)
	if err := c.StoreLog(&raft.Log{Index: 7, Term: 1, Data: []byte{7}}); err != nil {
		t.Fatal(err)
	}
	if n := c.expire(); n != 0 {
		t.Fatalf("expired %d entries stored 5s ago", n)
	}
	clock = clock.Add(6 * time.Second) // 3..6 are 11s old, 7 is 6s old
	if n := c.expire(); n != 3 || cached(4) || !cached(7) {
		t.Fatalf("expired %d entries; 4 cached %v, 7 cached %v", n, cached(4), cached(7))
	}
	var l raft.Log
	if err := c.GetLog(4, &l); err != nil || l.Index != 4 {
		t.Fatalf("an expired entry from the store: %+v, %v", l, err)
	}
	if err := c.DeleteRange(1, 7); err != nil || cached(7) {
		t.Fatalf("after DeleteRange: cached %v, %v", cached(7), err)
	}
	if err := c.GetLog(7, &l); err == nil {
		t.Fatal("a deleted entry reads back")
	}
}
