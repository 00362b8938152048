package placement

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-sched/drover/internal/units"
)

// Machine is a machine size the fleet offers: an active worker's, a
// launch config's or a declared pool's, with where it is offered, for the
// words of a refusal ("launch config n2-standard-16 of cluster
// us-east1/a").
type Machine struct {
	CPUMilli int64
	Memory   int64
	GPUType  string
	GPUs     int64
	Where    string
}

// holds reports whether the machine holds one job of the size whole.
func (m *Machine) holds(cpuMilli, memory int64, gpuType string, gpus int64) bool {
	return m.CPUMilli >= cpuMilli && m.Memory >= memory && (gpus <= 0 || (m.GPUType == gpuType && m.GPUs >= gpus))
}

// Sizes are the distinct machine sizes a fleet offers, none held by
// another (a size no larger in anything than one already listed adds
// nothing to what fits): what CheckSize compares a job with.
type Sizes []Machine

// NewSizes keeps the distinct sizes of machines that no other holds,
// each with the first place it was offered (machines of no cores or
// memory, a size not known, are left out).
func NewSizes(machines []Machine) Sizes {
	var out Sizes
	seen := map[[2]int64]map[string]int64{}
	for _, m := range machines {
		if m.CPUMilli <= 0 || m.Memory <= 0 {
			continue
		}
		if m.GPUs <= 0 {
			m.GPUType, m.GPUs = "", 0
		}
		k := [2]int64{m.CPUMilli, m.Memory}
		if g, ok := seen[k][m.GPUType]; ok && g >= m.GPUs {
			continue
		}
		if seen[k] == nil {
			seen[k] = map[string]int64{}
		}
		seen[k][m.GPUType] = m.GPUs
		out = append(out, m)
	}
	// Larger first, so a size held by another comes after it.
	slices.SortStableFunc(out, func(a, b Machine) int {
		return cmp.Or(cmp.Compare(b.CPUMilli, a.CPUMilli), cmp.Compare(b.Memory, a.Memory), cmp.Compare(b.GPUs, a.GPUs))
	})
	kept := out[:0]
	for _, m := range out {
		if !slices.ContainsFunc(kept, func(k Machine) bool { return k.holds(m.CPUMilli, m.Memory, m.GPUType, m.GPUs) }) {
			kept = append(kept, m)
		}
	}
	return kept
}

// CheckSize is the rule of a job's size at submit: some machine the fleet
// offers holds it whole (cores, memory, and GPUs of its type), or it
// would wait for ever. It names the largest machine the job is larger
// than: "memory 8 EiB is more than the largest machine offers (64 GiB:
// launch config n2-standard-16 of cluster us-east1/a)". With no sizes
// known (no worker, launch config or sized pool yet: a fleet of workers
// started by hand that have not joined) there is no bound but the API's.
// Where the job may run (its regions, pool, machine type) is not
// weighed: the bound is the fleet's largest, which a constraint may
// still keep the job from.
func (s Sizes) CheckSize(cpuMilli, memory int64, gpuType string, gpus int64) error {
	if len(s) == 0 || slices.ContainsFunc(s, func(m Machine) bool { return m.holds(cpuMilli, memory, gpuType, gpus) }) {
		return nil
	}
	largest := func(key func(*Machine) int64, ok func(*Machine) bool) *Machine {
		var best *Machine
		for i := range s {
			if m := &s[i]; ok(m) && (best == nil || key(m) > key(best)) {
				best = m
			}
		}
		return best
	}
	all := func(*Machine) bool { return true }
	cores := func(v int64) string { return fmt.Sprintf("%g cores", float64(v)/1000) }
	if m := largest(func(m *Machine) int64 { return m.CPUMilli }, all); cpuMilli > m.CPUMilli {
		return fmt.Errorf("cpu %s is more than the largest machine offers (%s: %s)", cores(cpuMilli), cores(m.CPUMilli), m.Where)
	}
	if m := largest(func(m *Machine) int64 { return m.Memory }, all); memory > m.Memory {
		return fmt.Errorf("memory %s is more than the largest machine offers (%s: %s)", units.FormatBytes(memory), units.FormatBytes(m.Memory), m.Where)
	}
	if gpus > 0 {
		m := largest(func(m *Machine) int64 { return m.GPUs }, func(m *Machine) bool { return m.GPUType == gpuType })
		if m == nil {
			var types []string
			for _, m := range s {
				if m.GPUs > 0 && !slices.Contains(types, m.GPUType) {
					types = append(types, m.GPUType)
				}
			}
			slices.Sort(types)
			offered := "none"
			if len(types) > 0 {
				offered = strings.Join(types, ", ")
			}
			return fmt.Errorf("gpu_type %s: no machine offers it (GPU types offered: %s)", gpuType, offered)
		}
		if gpus > m.GPUs {
			return fmt.Errorf("gpus %d of type %s is more than the largest machine offers (%d: %s)", gpus, gpuType, m.GPUs, m.Where)
		}
	}
	with := cores(cpuMilli)
	if gpus > 0 {
		with += fmt.Sprintf(" and %d %s GPUs", gpus, gpuType)
	}
	m := largest(func(m *Machine) int64 { return m.Memory }, func(m *Machine) bool {
		return m.CPUMilli >= cpuMilli && (gpus <= 0 || (m.GPUType == gpuType && m.GPUs >= gpus))
	})
	if m != nil {
		return fmt.Errorf("no machine holds %s with memory %s: the machines with %s offer at most %s (%s)",
			with, units.FormatBytes(memory), with, units.FormatBytes(m.Memory), m.Where)
	}
	return fmt.Errorf("no machine holds %s with memory %s", with, units.FormatBytes(memory))
}
