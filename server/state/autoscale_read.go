package state

import (
	"maps"
	"slices"
)

// MachineInfo is a machine with what the API shows of its worker.
type MachineInfo struct {
	Machine
	Running int // attempts on its worker
	// LastJobEnded is when an attempt last ended on its worker (0: none).
	LastJobEnded int64
}

// BootSeconds is how long a machine took from its launch to its worker
// joining (0: not joined yet).
func (m *Machine) BootSeconds() float64 {
	if m.JoinUsed <= m.Created {
		return 0
	}
	return float64(m.JoinUsed-m.Created) / 1e9
}

// Machines lists the autoscaler's machines, live first, by ID.
func (s *machineBook) Machines() (out []MachineInfo) {
	s.Read(func(r Reader) { out = r.MachineRecords() })
	return
}

// MachineRecords is Machines within a consistent read.
func (r Reader) MachineRecords() []MachineInfo {
	s := r.s
	out := make([]MachineInfo, 0, len(s.machines))
	for _, id := range s.sortedMachineIDs() {
		m := s.machines[id]
		mi := MachineInfo{Machine: *m}
		if inst := s.instances[m.Instance]; inst != nil && inst.Active {
			mi.Running = len(inst.running)
		}
		if inst := s.instances[m.Instance]; inst != nil {
			mi.LastJobEnded = inst.LastEnded
		}
		out = append(out, mi)
	}
	slices.SortStableFunc(out, func(a, b MachineInfo) int {
		la, lb := machineLive(a.State), machineLive(b.State)
		switch {
		case la && !lb:
			return -1
		case lb && !la:
			return 1
		}
		return 0
	})
	return out
}

// AutoscalerSettings returns the settings and launch configs.
func (s *machineBook) AutoscalerSettings() (a Autoscaler, cfgs []LaunchConfig, marks map[string]CapacityMark) {
	s.Read(func(r Reader) { a, cfgs, marks = r.AutoscalerRecord() })
	return
}

// AutoscalerRecord is AutoscalerSettings within a consistent read.
func (r Reader) AutoscalerRecord() (Autoscaler, []LaunchConfig, map[string]CapacityMark) {
	s := r.s
	var cfgs []LaunchConfig
	for _, name := range sortedKeys(s.launchConfigs) {
		cfgs = append(cfgs, *s.launchConfigs[name])
	}
	marks := map[string]CapacityMark{}
	for k, v := range s.marks {
		marks[k] = *v
	}
	return s.autoscaler, cfgs, maps.Clone(marks)
}
