package cgroups

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	ccg1 "github.com/containerd/cgroups/v3/cgroup1"
	ocg "github.com/opencontainers/cgroups"
	ocgfs "github.com/opencontainers/cgroups/fs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The benchmarks below do the per-job work of BenchmarkSlotOverhead (a
// reused slot: new limits, counters reset, usage read, OOM read, nothing
// left to kill) with the two maintained cgroup libraries instead of this
// package's held-open files, on this machine's cgroup v1 hierarchies.
// They are the measurement behind keeping the per-job path by hand (see
// docs/performance.md, "Cgroup slots by hand or by library").

// benchLimits alternates between two limits, so that every job has
// limits different from the previous one's (the worst case for the
// hand-written path, which writes only what changed; see
// BenchmarkSlotOverheadNewLimits).
var benchLimits = [2]Limits{
	{CPUMilli: 1000, Memory: 256 << 20, Pids: 100},
	{CPUMilli: 500, Memory: 128 << 20, Pids: 50},
}

// libSlotPaths creates one slot's cgroup in the cpu, cpuacct, memory and
// pids hierarchies under a parent of the benchmark's own, removed at the
// end, and returns subsystem -> directory.
func libSlotPaths(b *testing.B) map[string]string {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("creating cgroups needs root")
	}
	parent := testParent(b)
	paths := map[string]string{}
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
		mnt := filepath.Join("/sys/fs/cgroup", c)
		if !exists(filepath.Join(mnt, "tasks")) {
			b.Skipf("no cgroup v1 %s hierarchy", c)
		}
		if err := os.MkdirAll(filepath.Join(mnt, parent, "slot-1"), 0o755); err != nil {
			b.Fatal(err)
		}
		paths[c] = filepath.Join(mnt, parent, "slot-1")
		b.Cleanup(func() {
			_ = syscall.Rmdir(filepath.Join(mnt, parent, "slot-1"))
			_ = syscall.Rmdir(filepath.Join(mnt, parent))
		})
	}
	return paths
}

// ocgResources converts l as runc's spec conversion would.
func ocgResources(l Limits) *ocg.Resources {
	return &ocg.Resources{
		CpuQuota:   cpuQuota(l),
		CpuPeriod:  cfsPeriod,
		CpuShares:  uint64(cpuShares(l)),
		Memory:     l.Memory,
		MemorySwap: l.Memory,
		PidsLimit:  &l.Pids,
	}
}

// benchRunc is the per-job cycle with runc's library
// (github.com/opencontainers/cgroups/fs): Set, a hand reset of the
// watermark (the library has none), Stats, OOMKillCount, GetAllPids.
func benchRunc(b *testing.B, opts *ocg.StatsOptions) {
	benchRuncParts(b, opts, true, true)
}

// benchRuncParts is benchRunc with the limits (Set) or the usage (Stats)
// left out, to tell where the time goes.
func benchRuncParts(b *testing.B, opts *ocg.StatsOptions, set, stats bool) {
	paths := libSlotPaths(b)
	res := [2]*ocg.Resources{ocgResources(benchLimits[0]), ocgResources(benchLimits[1])}
	mgr, err := ocgfs.NewManager(&ocg.Cgroup{Resources: res[0]}, paths)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	cpuMetrics(b, func() {
		for b.Loop() {
			if set {
				if err := mgr.Set(res[i%2]); err != nil {
					b.Fatal(err)
				}
			}
			i++
			if err := ocg.WriteFile(paths["memory"], "memory.max_usage_in_bytes", "0"); err != nil {
				b.Fatal(err)
			}
			if stats {
				if _, err := mgr.Stats(opts); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := mgr.OOMKillCount(); err != nil {
				b.Fatal(err)
			}
			// (The manager's GetAllPids walks the devices hierarchy,
			// which a slot does not use.)
			if pids, err := ocg.GetAllPids(paths["memory"]); err != nil || len(pids) > 0 {
				b.Fatal(pids, err)
			}
		}
	})
}

// BenchmarkLibRuncCycle reads the usage with Stats of the cpu, cpuacct
// and memory controllers only.
func BenchmarkLibRuncCycle(b *testing.B) {
	benchRunc(b, &ocg.StatsOptions{Controllers: ocg.CPU | ocg.Memory})
}

// BenchmarkLibRuncSetOnly is BenchmarkLibRuncCycle without Stats.
func BenchmarkLibRuncSetOnly(b *testing.B) {
	benchRuncParts(b, nil, true, false)
}

// BenchmarkLibRuncStatsOnly is BenchmarkLibRuncCycle without Set.
func BenchmarkLibRuncStatsOnly(b *testing.B) {
	benchRuncParts(b, &ocg.StatsOptions{Controllers: ocg.CPU | ocg.Memory}, false, true)
}

// BenchmarkLibRuncCycleAllStats reads the usage with GetStats, as runc's
// own "events --stats" does.
func BenchmarkLibRuncCycleAllStats(b *testing.B) {
	benchRunc(b, nil)
}

// BenchmarkLibContainerdCycle is the per-job cycle with containerd's
// library (github.com/containerd/cgroups/v3/cgroup1): Update, a hand
// reset of the watermark, Stat, Processes.
func BenchmarkLibContainerdCycle(b *testing.B) {
	paths := libSlotPaths(b)
	rel := "/" + filepath.Join(filepath.Base(filepath.Dir(paths["memory"])), "slot-1")
	hier := func() ([]ccg1.Subsystem, error) {
		all, err := ccg1.Default()
		if err != nil {
			return nil, err
		}
		var out []ccg1.Subsystem
		for _, s := range all {
			switch s.Name() {
			case ccg1.Cpu, ccg1.Cpuacct, ccg1.Memory, ccg1.Pids:
				out = append(out, s)
			}
		}
		return out, nil
	}
	cg, err := ccg1.Load(ccg1.StaticPath(rel), ccg1.WithHierarchy(hier))
	if err != nil {
		b.Fatal(err)
	}
	spec := func(l Limits) *specs.LinuxResources {
		q, p, sh := cpuQuota(l), uint64(cfsPeriod), uint64(cpuShares(l))
		return &specs.LinuxResources{
			CPU: &specs.LinuxCPU{Quota: &q, Period: &p, Shares: &sh},
			// No Swap: cgroup1's Update, raising a limit, swaps the
			// order of limit_in_bytes and soft_limit_in_bytes instead
			// of memsw.limit_in_bytes, and the kernel refuses the new
			// limit (EINVAL) while memsw is still lower.
			Memory: &specs.LinuxMemory{Limit: &l.Memory},
			Pids:   &specs.LinuxPids{Limit: &l.Pids},
		}
	}
	res := [2]*specs.LinuxResources{spec(benchLimits[0]), spec(benchLimits[1])}
	i := 0
	cpuMetrics(b, func() {
		for b.Loop() {
			if err := cg.Update(res[i%2]); err != nil {
				b.Fatal(err)
			}
			i++
			if err := writeFile(filepath.Join(paths["memory"], "memory.max_usage_in_bytes"), "0"); err != nil {
				b.Fatal(err)
			}
			if _, err := cg.Stat(ccg1.IgnoreNotExist); err != nil {
				b.Fatal(err)
			}
			if procs, err := cg.Processes(ccg1.Memory, true); err != nil || len(procs) > 0 {
				b.Fatal(procs, err)
			}
		}
	})
}
