package httpapi

import (
	"fmt"
	"net/http"

	"github.com/drover-sched/drover/server/state"
)

// Limits bound what one request may add to the replicated state. They are
// checked before a command reaches Raft: applying a committed entry must
// never fail or run out of memory, because every replica, and every replay
// after a restart, would do the same.
type Limits struct {
	// MaxJobsPerBatch bounds the job IDs one batch may reserve.
	MaxJobsPerBatch int64
	// StateMemoryBudget bounds the estimated memory of the jobs the state
	// holds (all batches, finished ones included, until history moves
	// out of memory).
	StateMemoryBudget int64
	// MaxLogBytesPerAttempt bounds one attempt's log as this server holds
	// it.
	MaxLogBytesPerAttempt int64
}

// The state's cost of a job, measured by `drover bench sched`
// (heap_bytes_per_job): about 33 bytes a job of an array, about 250 a
// distinct job, most of it the job's group and spec.
const (
	bytesPerJob   = 40
	bytesPerGroup = 220
)

// entriesCost estimates what entries add to the state.
func entriesCost(entries []state.JobEntry) (jobs, bytes int64) {
	for _, e := range entries {
		jobs += int64(e.Count)
		bytes += int64(e.Count)*bytesPerJob + bytesPerGroup
		if sp := e.Spec; sp != nil {
			for _, c := range sp.Command {
				bytes += int64(len(c))
			}
			for k, v := range sp.Env {
				bytes += int64(len(k) + len(v))
			}
			for k, v := range sp.Attributes {
				bytes += int64(len(k) + len(v))
			}
		}
	}
	return jobs, bytes
}

// admit checks that reserving reserve more job IDs and adding entries to a
// batch (0: a new one) stays within the limits, and answers 413 naming the
// limit when it does not. Entries posted into an update reserve nothing:
// the update's IDs were admitted when it was opened.
func (s *Server) admit(w http.ResponseWriter, batch uint64, reserve int64, entries []state.JobEntry, intoUpdate bool) bool {
	jobs, bytes := entriesCost(entries)
	if intoUpdate {
		bytes -= jobs * bytesPerJob // counted at reservation
		jobs = 0
	}
	newJobs := reserve + jobs
	bytes += reserve * bytesPerJob
	f, batchJobs := s.state.Footprint(batch)
	lim := s.cfg.Limits
	if lim.MaxJobsPerBatch > 0 && batchJobs+newJobs > lim.MaxJobsPerBatch {
		what := "the batch would hold"
		if batch == 0 {
			what = "the new batch would hold"
		}
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"%s %d jobs; the limit is %d jobs per batch (server setting max_jobs_per_batch): split the work into several batches",
			what, batchJobs+newJobs, lim.MaxJobsPerBatch))
		return false
	}
	if lim.StateMemoryBudget > 0 {
		held := f.Jobs*bytesPerJob + f.Groups*bytesPerGroup
		if held+bytes > lim.StateMemoryBudget {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
				"this would bring the jobs the servers hold in memory to about %d MiB; the limit is %d MiB (server setting state_memory_budget): submit less at once, or ask an operator to raise the budget",
				(held+bytes)>>20, lim.StateMemoryBudget>>20))
			return false
		}
	}
	return true
}
