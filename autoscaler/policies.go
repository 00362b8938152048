package autoscaler

import "fmt"

// Other policies, for comparison with Plan in the simulator (drover bench
// autoscale): each deletes machines as Plan does (boot timeout, lame,
// idle timeout) and keeps every cap, and decides launches its own way.

// PlanHail is Hail Batch's autoscaler as its design document describes
// it: the same windowed, fair-share-ordered demand, counted in cores, less
// the cores the workers have free and those coming up, divided by the
// cores of one worker type (the best-ranked config that is available and
// fits the largest job): that many machines of it. No packing by shape,
// no draining to consolidate.
func PlanHail(in *Input) *Output {
	p := newPlanner(in)
	p.retire()
	if in.ShrinkOnly {
		return p.out
	}
	var want, largest int64
	for _, sh := range in.Demand {
		want += sh.CPUMilli * sh.Count
		largest = max(largest, sh.CPUMilli)
	}
	for _, r := range in.Free {
		want -= r.CPUMilli
	}
	for i := range in.Machines {
		if m := &in.Machines[i]; m.State == Requested || m.State == Launching {
			want -= m.CPUMilli
		}
	}
	if want <= 0 {
		return p.out
	}
	for _, c := range p.ranked {
		if c.CPUMilli < largest || c.GPUs > 0 || p.unavailable(c) != "" {
			continue
		}
		n := int((want + c.CPUMilli - 1) / c.CPUMilli)
		launched := 0
		for launched < n && p.capped(c) == "" {
			p.addMachine(c)
			launched++
		}
		if launched > 0 {
			p.out.Launches = append(p.out.Launches, Launch{Config: c.Name, Count: launched,
				Reason: fmt.Sprintf("%d × %s for %d waiting cores (Hail's policy)", launched, c.MachineType, want/1000)})
		}
		break
	}
	return p.out
}

// PlanStatic keeps a fleet of machines of the best-ranked available
// config that holds the workload's largest job (largest: its cores and
// memory) holding at least cores (millicores) from the first round on,
// idle or not, and deletes them all once done says the work is over: a
// fleet sized by hand.
func PlanStatic(in *Input, cores int64, largest Shape, done bool) *Output {
	p := newPlanner(in)
	if done {
		for i := range in.Machines {
			if m := &in.Machines[i]; m.State.Live() {
				p.remove(m, "the work is done")
			}
		}
		return p.out
	}
	var live int64
	for i := range in.Machines {
		if m := &in.Machines[i]; m.State.Live() {
			live += m.CPUMilli
		}
	}
	for _, c := range p.ranked {
		if c.GPUs > 0 || p.unavailable(c) != "" || c.CPUMilli < largest.CPUMilli || c.Memory < largest.Memory {
			continue
		}
		launched := 0
		for live < cores && p.capped(c) == "" {
			p.addMachine(c)
			launched++
			live += c.CPUMilli
		}
		if launched > 0 {
			p.out.Launches = append(p.out.Launches, Launch{Config: c.Name, Count: launched, Reason: fmt.Sprintf("a static fleet of %g cores", float64(cores)/1000)})
		}
		break
	}
	return p.out
}
