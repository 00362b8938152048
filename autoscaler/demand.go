package autoscaler

import (
	"slices"

	"github.com/drover-sched/drover/scheduler"
)

// UserQueue is one user's ready work, head of the queue first.
type UserQueue struct {
	Name         string
	RunningMilli int64
	Ready        []Shape
	// PastMilli is the user's decayed past use as cores, which fair
	// share weighs with RunningMilli (scheduler.User.PastMilli).
	PastMilli int64
}

// WindowedDemand is Hail Batch's windowed fair share: each user's fair
// share of budget (the cores that can start within the autoscaler's
// window: free now, plus what the add rate can bring up in it), and the
// head of each user's queue up to that share, not the whole backlog. A
// user's last shape may pass its share by one job, so a share smaller than
// a job still asks for one. The result is in fair-share order (fewest
// cores running first) with equal shapes merged.
func WindowedDemand(users []UserQueue, budget int64) []Shape {
	d := make([]scheduler.Demand, len(users))
	for i, u := range users {
		var ready int64
		for _, sh := range u.Ready {
			ready += sh.CPUMilli * sh.Count
		}
		d[i] = scheduler.Demand{Running: u.RunningMilli + u.PastMilli, Ready: ready}
	}
	shares := scheduler.FairShare(d, budget)
	order := make([]int, len(users))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ua, ub := &users[a], &users[b]
		switch {
		case scheduler.ServedBefore(ua.RunningMilli+ua.PastMilli, ua.Name, ub.RunningMilli+ub.PastMilli, ub.Name):
			return -1
		case scheduler.ServedBefore(ub.RunningMilli+ub.PastMilli, ub.Name, ua.RunningMilli+ua.PastMilli, ua.Name):
			return 1
		}
		return 0
	})
	var out []Shape
	index := map[shapeKey]int{}
	for _, ui := range order {
		left := shares[ui]
		for _, sh := range users[ui].Ready {
			if left <= 0 {
				break
			}
			n := sh.Count
			if sh.CPUMilli > 0 && sh.Gang == 0 {
				// (A gang is whole or nothing: it may pass the share
				// by all but one member, as a run by one job.)
				n = min(n, (left+sh.CPUMilli-1)/sh.CPUMilli)
			}
			left -= sh.cores(n)
			k := keyOf(&sh)
			if i, ok := index[k]; ok {
				out[i].Count += n
				continue
			}
			index[k] = len(out)
			sh.Count = n
			out = append(out, sh)
		}
	}
	return out
}

// cores is the millicores of n jobs of the shape (of a gang of several
// sizes: all its members).
func (sh *Shape) cores(n int64) int64 {
	if len(sh.Parts) == 0 {
		return n * sh.CPUMilli
	}
	var c int64
	for _, pt := range sh.Parts {
		c += pt.Count * pt.CPUMilli
	}
	return c
}

// shapeKey identifies shapes that may be merged.
type shapeKey struct {
	cpu, mem, gpus int64
	pool, gpuType  string
	regions        string
	noSpot         bool
	gang           uint64 // each gang its own shape
}

func keyOf(sh *Shape) shapeKey {
	k := shapeKey{cpu: sh.CPUMilli, mem: sh.Memory, gpus: sh.GPUs, pool: sh.Constraint.Pool, gpuType: sh.Constraint.GPUType, noSpot: sh.Constraint.NoSpot, gang: sh.Gang}
	for _, r := range sh.Constraint.Regions {
		k.regions += r + "\x00"
	}
	return k
}

// RoundMemory rounds a job's memory up to a multiple of step, so distinct
// jobs of nearly the same size make one shape (a million distinct jobs
// with random memory would otherwise be a million shapes). The autoscaler
// then provisions a little more memory than asked, never less.
func RoundMemory(mem, step int64) int64 {
	if step <= 0 || mem <= 0 {
		return mem
	}
	return (mem + step - 1) / step * step
}
