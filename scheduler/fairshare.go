// Package scheduler decides which Ready jobs run where. It is pure: it reads
// an Input (a copy of the scheduling state) and returns placements; the
// server submits them through Raft, where each one is re-checked.
package scheduler

import (
	"cmp"
	"slices"
	"sort"
)

// Demand is one user's standing in the fair-share computation.
type Demand struct {
	Running int64 // millicores running now
	Ready   int64 // millicores of Ready jobs
}

// FairShare splits free millicores between users as Hail Batch does: start
// with the user who has the fewest cores running and give them cores until
// they reach the next user's running cores, then split equally between the
// two until the third, and so on, never giving a user more than it has
// Ready. It returns each user's allocation; the allocations sum to
// min(free, total Ready) exactly.
//
// Seen as water filling, allocation(u) = clamp(L - running(u), 0, ready(u))
// for the level L at which the allocations add up to what can be given.
func FairShare(users []Demand, free int64) []int64 {
	alloc := make([]int64, len(users))
	if free <= 0 || len(users) == 0 {
		return alloc
	}
	var total int64
	for _, u := range users {
		total += max(u.Ready, 0)
	}
	target := min(free, total)
	if target == 0 {
		return alloc
	}
	// Breakpoints: a user starts receiving at level Running and stops at
	// Running+Ready. Sweep levels upward tracking how many users receive.
	type point struct {
		level int64
		delta int // +1 start, -1 stop
	}
	points := make([]point, 0, 2*len(users))
	for _, u := range users {
		if u.Ready <= 0 {
			continue
		}
		points = append(points, point{u.Running, +1}, point{u.Running + u.Ready, -1})
	}
	slices.SortFunc(points, func(a, b point) int { return cmp.Compare(a.level, b.level) })
	var given int64
	slope := 0
	level := points[0].level
	i := 0
	for {
		for i < len(points) && points[i].level == level {
			slope += points[i].delta
			i++
		}
		next := points[len(points)-1].level
		if i < len(points) {
			next = points[i].level
		}
		if slope > 0 && given+int64(slope)*(next-level) >= target {
			// The level lies inside this segment.
			level += (target - given) / int64(slope)
			break
		}
		given += int64(slope) * (next - level)
		level = next
		if i >= len(points) {
			break
		}
	}
	// Allocate at the (integer) level, then hand out the remainder one
	// millicore at a time to users still below their cap, fewest running
	// first, so the total is exact.
	var sum int64
	for k, u := range users {
		if u.Ready <= 0 {
			continue
		}
		alloc[k] = min(max(level-u.Running, 0), u.Ready)
		sum += alloc[k]
	}
	if rem := target - sum; rem > 0 {
		order := make([]int, 0, len(users))
		for k, u := range users {
			if u.Ready > 0 && alloc[k] < u.Ready && u.Running <= level {
				order = append(order, k)
			}
		}
		sort.SliceStable(order, func(a, b int) bool { return users[order[a]].Running < users[order[b]].Running })
		for _, k := range order {
			if rem == 0 {
				break
			}
			alloc[k]++
			rem--
		}
	}
	return alloc
}
