package samples

import "testing"

// TestSeriesThinsEvenlyAndKeepsItsEnds: a series longer than MaxPoints
// keeps its first and latest points and spans the whole run at a coarser
// step; a point older than the last is dropped.
func TestSeriesThinsEvenlyAndKeepsItsEnds(t *testing.T) {
	s := New()
	k := Key{Batch: 1, Job: 2, Attempt: 1}
	const n = 1000
	for i := int64(0); i < n; i++ {
		s.Add(k, Point{Time: i, CPUMillis: i})
	}
	got := s.Series(k)
	if len(got) > MaxPoints || len(got) < MaxPoints/2 {
		t.Fatalf("%d points kept of %d; want between %d and %d", len(got), n, MaxPoints/2, MaxPoints)
	}
	if got[0].Time != 0 || got[len(got)-1].Time != n-1 {
		t.Fatalf("the series runs %d to %d; want 0 to %d", got[0].Time, got[len(got)-1].Time, n-1)
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].Time - got[i-1].Time; gap <= 0 || gap > 2*n/int64(MaxPoints)+1 {
			t.Fatalf("gap %d between points %d and %d: not even", gap, i-1, i)
		}
	}
	s.Add(k, Point{Time: 5})
	if last := s.Series(k); last[len(last)-1].Time != n-1 {
		t.Fatal("a point older than the last was kept")
	}
}

// TestStoreBoundsItsAttempts: past MaxAttempts, the attempt sampled first
// leaves.
func TestStoreBoundsItsAttempts(t *testing.T) {
	s := New()
	for i := 0; i <= MaxAttempts; i++ {
		s.Add(Key{Batch: uint64(i) + 1}, Point{Time: 1})
	}
	if s.Series(Key{Batch: 1}) != nil {
		t.Fatal("the first attempt is still kept past the bound")
	}
	if s.Series(Key{Batch: MaxAttempts + 1}) == nil || s.Series(Key{Batch: 2}) == nil {
		t.Fatal("a recent attempt was dropped")
	}
	s.Reset()
	if s.Series(Key{Batch: 2}) != nil {
		t.Fatal("Reset kept a series")
	}
}

// TestForgetBatches: the series of batches that left the state go, and
// with them their place in the eviction order.
func TestForgetBatches(t *testing.T) {
	s := New()
	for b := uint64(1); b <= 10; b++ {
		for j := uint32(1); j <= 5; j++ {
			s.Add(Key{Batch: b, Job: j, Attempt: 1}, Point{Time: 1})
		}
	}
	s.ForgetBatches([]uint64{2, 3, 4})
	if s.Len() != 35 || s.Series(Key{Batch: 3, Job: 1, Attempt: 1}) != nil || s.Series(Key{Batch: 5, Job: 5, Attempt: 1}) == nil {
		t.Fatalf("after forgetting 3 of 10 batches: %d series", s.Len())
	}
	if len(s.order)-s.head != 35 {
		t.Fatalf("the eviction order holds %d keys for 35 series", len(s.order)-s.head)
	}
}
