package scheduler

// PoolSize is a machine the autoscaler can launch now in one pool of one
// cluster: a launch config not capacity-limited, priced, in an enabled
// cluster and under the node and $/hour caps (autoscaler.Output.Sizes).
type PoolSize struct {
	Cluster, Pool    string
	CPUMilli, Memory int64
	// Spot: a spot config's machine, never launched for a job kept off
	// spot (placement.Constraint.NoSpot).
	Spot bool
}

// LeftForLarger is the right-sizing rule: a job of cpu and mem leaves a
// wholly idle machine of machineCPU cores (free: the cores it has free) to
// larger jobs when the machine its pool's autoscaler would launch for it
// is at most half as large (sizes: the machines the pool can launch now,
// in the order the autoscaler's strategy ranks them; the first that holds
// the job is the one it would launch; for a job kept off spot, noSpot,
// the first that is not spot). The scheduler skips such a
// machine, the autoscaler does not count it as room for the job and
// launches the smaller one, and job why says so.
//
// A machine is paid for until its last job ends, and jobs that share one
// end at different times: a small job on a large machine leaves the rest
// of it idle for as long as the job outlives its neighbours, and keeps it
// from going when its idle timeout would have deleted it. On a machine
// already running work the job only fills room already paid for, so the
// rule holds for wholly idle machines alone. Where nothing smaller would
// be launched (a fixed fleet; a strategy that prefers large machines; a
// pool whose small configs are capacity-limited or capped) the job takes
// the large machine rather than wait.
func LeftForLarger(cpu, mem, machineCPU, free int64, sizes []PoolSize, noSpot bool) bool {
	if cpu <= 0 || free < machineCPU {
		return false
	}
	s := SizeFor(cpu, mem, sizes, noSpot)
	return s != nil && 2*s.CPUMilli <= machineCPU
}

// SizeFor is the machine the autoscaler would launch for a job of cpu and
// mem: the first of sizes (in its strategy's order) that holds it, and
// is not spot for a job kept off spot (noSpot), or nil.
func SizeFor(cpu, mem int64, sizes []PoolSize, noSpot bool) *PoolSize {
	for i := range sizes {
		if s := &sizes[i]; s.CPUMilli >= cpu && s.Memory >= mem && !(noSpot && s.Spot) {
			return s
		}
	}
	return nil
}
