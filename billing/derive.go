package billing

import (
	"math"
	"math/big"

	"github.com/drover-sched/drover/money"
)

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
	// memoryWeightMilli is MemoryWeight in thousandths, for exact sums.
	memoryWeightMilli = 134
)

// Machine is the shape and price of a machine a launch config makes.
type Machine struct {
	Config   string // the launch config's name
	Pool     string
	CPUMilli int64
	Memory   int64 // bytes
	GPUType  string
	GPUs     int64
	PerHour  money.Rate // the whole machine
}

// MachineRate is one rate a machine's price gives.
type MachineRate struct {
	Resource string
	PerHour  money.Rate
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
	gpus := m.GPUs
	if m.GPUType == "" {
		gpus = 0
	}
	// A core's rate is PerHour / (cores + MemoryWeight × GiB + GPUWeight
	// × GPUs); over 1000 × 2^30 the weights are whole numbers, so each
	// rate is one exact division, rounded (halves up) to the nano-dollar.
	weight := big.NewInt(m.CPUMilli)
	weight.Lsh(weight, 30)
	weight.Add(weight, new(big.Int).Mul(big.NewInt(memoryWeightMilli), big.NewInt(m.Memory)))
	weight.Add(weight, new(big.Int).Lsh(big.NewInt(GPUWeight*1000*gpus), 30))
	if weight.Sign() <= 0 {
		return nil
	}
	rate := func(perMilliCore int64) money.Rate {
		n := new(big.Int).Mul(big.NewInt(int64(m.PerHour)), big.NewInt(perMilliCore))
		n.Lsh(n, 30)
		q := roundDiv(n, weight)
		if !q.IsInt64() {
			return math.MaxInt64 // past MaxPricePerUnitHr: CheckRate refuses it
		}
		return money.Rate(q.Int64())
	}
	out := []MachineRate{
		{"compute/" + pool + "/" + m.Config, rate(1000)},
		{"memory/" + pool + "/" + m.Config, rate(memoryWeightMilli)},
	}
	if gpus > 0 {
		out = append(out, MachineRate{"gpu/" + m.GPUType + "/" + m.Config, rate(GPUWeight * 1000)})
	}
	return out
}
