package cgroups

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// cpuMetrics reports the CPU time per op of this process (all its threads,
// slot threads included) and of its reaped children, measured around fn.
func cpuMetrics(b *testing.B, fn func()) {
	var before, after, cbefore, cafter syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &cbefore)
	fn()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &cafter)
	cpu := func(r syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	n := float64(b.N)
	b.ReportMetric(float64(cpu(after)-cpu(before))/n/1e3, "self-cpu-µs/op")
	b.ReportMetric(float64(cpu(cafter)-cpu(cbefore))/n/1e3, "child-cpu-µs/op")
}

// BenchmarkPlainExec is the baseline: /bin/true started as the worker does
// today.
func BenchmarkPlainExec(b *testing.B) {
	cpuMetrics(b, func() {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSlotCycle is one tiny job's whole life in a reused slot.
func BenchmarkSlotCycle(b *testing.B) {
	m := openTestV1(b)
	benchCycle(b, m)
}

// BenchmarkSlotStart is Start and Wait of /bin/true in one slot: against
// BenchmarkPlainExec, the cost of being born in the slot (on v1, the
// hand-off to the slot's thread).
func BenchmarkSlotStart(b *testing.B) {
	m := openTestV1(b)
	h, err := m.Acquire(Limits{CPUMilli: 1000, Memory: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Release()
	cpuMetrics(b, func() {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if err := h.Start(cmd); err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSlotCycleNoReuse creates and destroys a slot per job, which is
// what the pool saves.
func BenchmarkSlotCycleNoReuse(b *testing.B) {
	m := openTestV1(b, func(c *Config) { c.MaxIdle = -1 })
	benchCycle(b, m)
}

func benchCycle(b *testing.B, m *Manager) {
	l := Limits{CPUMilli: 1000, Memory: 256 << 20, Pids: 100}
	cpuMetrics(b, func() {
		for b.Loop() {
			h, err := m.Acquire(l)
			if err != nil {
				b.Fatal(err)
			}
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if err := h.Start(cmd); err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
			if _, err := h.Usage(); err != nil {
				b.Fatal(err)
			}
			if _, err := h.OOMKilled(); err != nil {
				b.Fatal(err)
			}
			h.Release()
		}
	})
}

// BenchmarkSlotOverhead is the package's own work per job, without the
// fork: Acquire, Usage, OOMKilled, Release.
func BenchmarkSlotOverhead(b *testing.B) {
	benchOverhead(b, openTestV1(b), Limits{CPUMilli: 1000, Memory: 256 << 20})
}

// BenchmarkSlotOverheadNewLimits is BenchmarkSlotOverhead with limits
// that change from job to job (the worst case: only what changed is
// written, and here everything does).
func BenchmarkSlotOverheadNewLimits(b *testing.B) {
	benchOverhead(b, openTestV1(b, func(c *Config) { c.MaxIdle = 1 }), benchLimits[:]...)
}

// benchOverhead runs jobs without a process through m, the limits of
// each the next of ls.
func benchOverhead(b *testing.B, m *Manager, ls ...Limits) {
	i := 0
	cpuMetrics(b, func() {
		for b.Loop() {
			h, err := m.Acquire(ls[i%len(ls)])
			i++
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.Usage(); err != nil {
				b.Fatal(err)
			}
			if _, err := h.OOMKilled(); err != nil {
				b.Fatal(err)
			}
			h.Release()
		}
	})
}
