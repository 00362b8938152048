package server

import (
	"fmt"
	"sync"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/jobspec"
	"github.com/drover-sched/drover/scheduler"
)

// maxWaitingPerBatch bounds the stretches of unplaced jobs kept per batch.
const maxWaitingPerBatch = 64

// waitingBook keeps, per batch, why the leader's last scheduling round left
// Ready jobs unplaced, as the scheduler's filter chain recorded it. It is
// the leader's memory, not Raft state: it is replaced by every round and
// read by consistent batch and job reads, which the leader answers.
type waitingBook struct {
	mu      sync.Mutex
	byBatch map[uint64][]api.Waiting
}

// set replaces the book with a round's result.
func (w *waitingBook) set(m map[uint64][]api.Waiting) {
	w.mu.Lock()
	w.byBatch = m
	w.mu.Unlock()
}

// Batch returns why the batch's unplaced Ready jobs wait (nil: none seen).
func (w *waitingBook) Batch(id uint64) []api.Waiting {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]api.Waiting(nil), w.byBatch[id]...)
}

// Job returns why one job waits, or nil.
func (w *waitingBook) Job(batch uint64, job uint32) *api.Waiting {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wt := range w.byBatch[batch] {
		if int64(job) >= wt.FirstJob && int64(job) < wt.FirstJob+wt.Count {
			return &wt
		}
	}
	return nil
}

// waitingOf turns a round's unplaced runs into the reasons per batch that
// batch and job status show.
func waitingOf(out *scheduler.Output, instances []scheduler.Instance) map[uint64][]api.Waiting {
	if len(out.Unplaced) == 0 {
		return nil
	}
	var bigCPU, bigMem int64
	for _, in := range instances {
		bigCPU = max(bigCPU, in.CPUMilli)
		bigMem = max(bigMem, in.Memory)
	}
	m := map[uint64][]api.Waiting{}
	for _, u := range out.Unplaced {
		if len(m[u.Batch]) >= maxWaitingPerBatch {
			continue
		}
		reason, msg := waitReason(u, bigCPU, bigMem)
		m[u.Batch] = append(m[u.Batch], api.Waiting{FirstJob: int64(u.First), Count: int64(u.Count), Reason: reason, Message: msg})
	}
	return m
}

// waitReason says why a run fits nowhere, from the instances each filter
// rejected, for a person: the sizes involved when no worker is large
// enough, how many large-enough workers are busy otherwise.
func waitReason(u scheduler.Unplaced, bigCPU, bigMem int64) (string, string) {
	e := u.Why
	cpuCap, memCap := e.Count(scheduler.ReasonCPUCapacity), e.Count(scheduler.ReasonMemoryCapacity)
	cores := func(milli int64) string { return fmt.Sprintf("%g cores", float64(milli)/1000) }
	switch {
	case e.Instances == 0:
		return "no_workers", "no worker is active"
	case cpuCap == e.Instances:
		return scheduler.ReasonCPUCapacity.String(), fmt.Sprintf("needs %s; the largest worker has %s", cores(u.CPUMilli), cores(bigCPU))
	case memCap == e.Instances:
		return scheduler.ReasonMemoryCapacity.String(), fmt.Sprintf("needs %s memory; the largest worker offers %s", jobspec.FormatBytes(u.Memory), jobspec.FormatBytes(bigMem))
	case cpuCap+memCap == e.Instances:
		return scheduler.ReasonMemoryCapacity.String(), fmt.Sprintf("needs %s and %s memory; no worker has both (the largest have %s and %s)",
			cores(u.CPUMilli), jobspec.FormatBytes(u.Memory), cores(bigCPU), jobspec.FormatBytes(bigMem))
	}
	fit := e.Instances - cpuCap - memCap
	if busy := e.Count(scheduler.ReasonMemoryFree); busy > e.Count(scheduler.ReasonCPUFree) {
		return scheduler.ReasonMemoryFree.String(), fmt.Sprintf("waiting for memory: none of the %d workers large enough has %s free", fit, jobspec.FormatBytes(u.Memory))
	}
	return scheduler.ReasonCPUFree.String(), fmt.Sprintf("waiting for cores: none of the %d workers large enough has %s free", fit, cores(u.CPUMilli))
}
