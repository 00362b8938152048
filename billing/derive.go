package billing

import "math"

// A launch config prices a whole machine; the attempts that share it pay
// for what each reserves. Its price is split over the machine's cores,
// memory and GPUs by weight: a core weighs 1, a GiB of memory MemoryWeight
// and a GPU GPUWeight, so a job that reserves the whole machine pays the
// machine's price, and one that reserves a quarter of it a quarter.
const (
	// MemoryWeight is a GiB-hour's price next to a core-hour's: GCE's
	// list prices for its general-purpose machines (N1, N2, E2) charge
	// a GiB-hour about 0.134 of a vCPU-hour.
	MemoryWeight = 0.134
	// GPUWeight is a GPU-hour's price next to a core-hour's: about what
	// an NVIDIA T4 costs next to a vCPU on GCE.
	GPUWeight = 10
)

// Machine is the shape and price of a machine a launch config makes.
type Machine struct {
	Config   string // the launch config's name
	Pool     string
	CPUMilli int64
	Memory   int64 // bytes
	GPUType  string
	GPUs     int64
	PerHour  float64 // dollars for the whole machine
}

// MachineRate is one rate a machine's price gives.
type MachineRate struct {
	Resource string
	PerHour  float64
}

// MachineRates splits a machine's price into rates for its cores, its
// memory and its GPUs, named for the config (compute/POOL/CONFIG,
// memory/POOL/CONFIG, gpu/TYPE/CONFIG): the resources an attempt on one
// of its machines holds (Held with the config), which take these before
// the pool's or the kind's. A machine without a price gives none.
func MachineRates(m Machine) []MachineRate {
	if m.PerHour <= 0 {
		return nil
	}
	pool := m.Pool
	if pool == "" {
		pool = "default"
	}
	cores := float64(m.CPUMilli) / 1000
	gib := float64(m.Memory) / (1 << 30)
	gpus := float64(m.GPUs)
	if m.GPUType == "" {
		gpus = 0
	}
	unit := m.PerHour / (cores + MemoryWeight*gib + GPUWeight*gpus)
	out := []MachineRate{
		{"compute/" + pool + "/" + m.Config, round(unit)},
		{"memory/" + pool + "/" + m.Config, round(unit * MemoryWeight)},
	}
	if gpus > 0 {
		out = append(out, MachineRate{"gpu/" + m.GPUType + "/" + m.Config, round(unit * GPUWeight)})
	}
	return out
}

// round keeps a derived rate to a billionth of a dollar, so the same
// machine always gives the same rates.
func round(v float64) float64 { return math.Round(v*1e9) / 1e9 }
