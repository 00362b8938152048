package worker

// MemoryPerCore is the memory a worker offers per core when it is not
// told how much (drover worker -memory, drover agent -worker-memory): the
// ratio of the general-purpose machine types of the clouds drover runs on
// rounded down, so that a job sized by cores fits.
const MemoryPerCore = 2 << 30

// DefaultMemory is the memory, in bytes, a worker of cores offers by
// default: MemoryPerCore per core.
func DefaultMemory(cores float64) int64 {
	return int64(cores * MemoryPerCore)
}
