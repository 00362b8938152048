// Package eta estimates when a job waiting in line starts: the
// simulator's model of its user's line, in closed form. The line holds the
// slots its user's running attempts take (fair share keeps a user at its
// share while others wait, so the line neither gains nor loses slots);
// each slot frees when its attempt ends, by the observed run time of the
// attempt's job group, and is taken at once by the next job in line, which
// holds it for the run time of the waiting job's own group. The job starts
// when the slot it takes frees. It is pure: the caller reads the state.
package eta

import (
	"slices"
	"time"
)

// MaxSlots bounds the slots Start reads (a line with more is read as its
// first MaxSlots, to free first).
const MaxSlots = 100_000

// maxAhead bounds the jobs before one in line that Start reads (more: no
// estimate), so its counts stay far from overflowing.
const maxAhead = 1 << 40

// Horizon is the furthest Start estimates: a start further away is no
// estimate (and no sum in it can overflow).
const Horizon = 10 * 365 * 24 * time.Hour

// Start returns how long from now the job with ahead jobs before it in
// line starts, given when each slot of the line frees (remaining, from
// now; a slot free now is 0) and how long each job in line holds a slot
// (run). false: no estimate (no slot, no run time, or beyond Horizon).
func Start(remaining []time.Duration, ahead int64, run time.Duration) (time.Duration, bool) {
	if len(remaining) == 0 || run <= 0 || ahead < 0 || ahead > maxAhead {
		return 0, false
	}
	r := slices.Clone(remaining)
	slices.Sort(r)
	r = r[:min(len(r), MaxSlots)]
	for i := range r {
		r[i] = min(max(r[i], 0), Horizon)
	}
	// freed counts the slots freed by t (each frees at r[i], then every
	// run): the job is the (ahead+1)-th to take one, so it starts at the
	// least t with freed(t) > ahead. t is at most 2 × Horizon and each
	// term at most t / run + 1, and the count stops past ahead: no sum
	// overflows.
	freed := func(t time.Duration) int64 {
		var n int64
		for _, x := range r {
			if x > t {
				break
			}
			n += int64((t-x)/run) + 1
			if n > ahead {
				return n
			}
		}
		return n
	}
	lo, hi := time.Duration(0), r[len(r)-1]+Horizon
	if freed(hi) <= ahead {
		return 0, false
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if freed(mid) > ahead {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo > Horizon {
		return 0, false
	}
	return lo, true
}
