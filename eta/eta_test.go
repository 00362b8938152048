package eta

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

func TestStartByHand(t *testing.T) {
	min := time.Minute
	for _, c := range []struct {
		name      string
		remaining []time.Duration
		ahead     int64
		run       time.Duration
		want      time.Duration
		ok        bool
	}{
		{"first in line takes the first slot to free", []time.Duration{5 * min, 2 * min}, 0, 10 * min, 2 * min, true},
		{"second takes the other", []time.Duration{5 * min, 2 * min}, 1, 10 * min, 5 * min, true},
		{"third waits for the first again", []time.Duration{5 * min, 2 * min}, 2, 10 * min, 12 * min, true},
		{"a free slot: now", []time.Duration{0}, 0, 10 * min, 0, true},
		{"no slot: no estimate", nil, 3, 10 * min, 0, false},
		{"no run time: no estimate", []time.Duration{time.Minute}, 3, 0, 0, false},
		{"a long line", []time.Duration{0, 0, 0, 0}, 1_000_000, min, 250_000 * min, true},
	} {
		got, ok := Start(c.remaining, c.ahead, c.run)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

type frees []time.Duration

func (h frees) Len() int           { return len(h) }
func (h frees) Less(i, j int) bool { return h[i] < h[j] }
func (h frees) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *frees) Push(x any)        { *h = append(*h, x.(time.Duration)) }
func (h *frees) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// TestStartMatchesPlayingTheLineOut: the closed form agrees with playing the
// line out, a freed slot at a time.
func TestStartMatchesPlayingTheLineOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + rng.IntN(20)
		rem := make([]time.Duration, n)
		for i := range rem {
			rem[i] = time.Duration(rng.IntN(3600)) * time.Second
		}
		run := time.Duration(1+rng.IntN(3600)) * time.Second
		ahead := int64(rng.IntN(200))
		h := frees(append([]time.Duration(nil), rem...))
		heap.Init(&h)
		var at time.Duration
		for k := int64(0); k <= ahead; k++ {
			at = heap.Pop(&h).(time.Duration)
			heap.Push(&h, at+run)
		}
		got, ok := Start(rem, ahead, run)
		if !ok || got != at {
			t.Fatalf("slots %v, %d ahead, run %v: %v, playing it out says %v", rem, ahead, run, got, at)
		}
	}
}
