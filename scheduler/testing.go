package scheduler

// Builders for tests, here and in the packages that feed the scheduler:
//
//	in := scheduler.NewInput().
//		Instance(1, scheduler.Cores(8), 64*scheduler.GiB).
//		Instance(2, scheduler.Cores(4), 16*scheduler.GiB).Free(scheduler.Cores(1), 2*scheduler.GiB).
//		User("alice", 0, scheduler.NewRun(1, 1, 100, scheduler.Cores(1), scheduler.GiB)).
//		Build()

// GiB is a gibibyte, for sizes in tests.
const GiB int64 = 1 << 30

// Cores converts cores to millicores.
func Cores(c float64) int64 { return int64(c * 1000) }

// InputBuilder assembles an Input.
type InputBuilder struct {
	in Input
}

// NewInput starts an empty Input.
func NewInput() *InputBuilder { return &InputBuilder{} }

// Instance adds an idle instance of the given size.
func (b *InputBuilder) Instance(id uint32, cpuMilli, mem int64) *InputBuilder {
	b.in.Instances = append(b.in.Instances, Instance{ID: id, CPUMilli: cpuMilli, Memory: mem, FreeMilli: cpuMilli, FreeMem: mem})
	return b
}

// Free sets what is still free on the instance added last.
func (b *InputBuilder) Free(cpuMilli, mem int64) *InputBuilder {
	inst := &b.in.Instances[len(b.in.Instances)-1]
	inst.FreeMilli, inst.FreeMem = cpuMilli, mem
	return b
}

// User adds a user with runningMilli cores running and the given runs at
// the head of its Ready queue; its Ready cores are what the runs add up to.
func (b *InputBuilder) User(name string, runningMilli int64, runs ...Run) *InputBuilder {
	u := User{Name: name, RunningMilli: runningMilli, Runs: runs}
	for _, r := range runs {
		u.ReadyMilli += int64(r.Count) * r.CPUMilli
	}
	b.in.Users = append(b.in.Users, u)
	return b
}

// Limit bounds the jobs placed in the round.
func (b *InputBuilder) Limit(n int) *InputBuilder {
	b.in.MaxPlacements = n
	return b
}

// Build returns the Input. The builder must not be used afterwards.
func (b *InputBuilder) Build() *Input { return &b.in }

// NewRun is a run of count jobs of one size, first attempt.
func NewRun(batch uint64, first, count uint32, cpuMilli, mem int64) Run {
	return Run{Batch: batch, First: first, Count: count, Attempt: 1, CPUMilli: cpuMilli, Memory: mem}
}
