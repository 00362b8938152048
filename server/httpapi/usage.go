package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/samples"
)

// handleAttemptUsage answers an attempt's usage over time (?attempt=,
// else the job's latest) from this server's memory of the worker
// events it applied (server/samples): a local read, the same on every
// server that has been up as long.
func (s *batchHandlers) handleAttemptUsage(w http.ResponseWriter, r *http.Request) (any, error) {
	id, jid, err := s.visibleJob(r)
	if err != nil {
		return nil, err
	}
	attempt := 0
	if v := r.URL.Query().Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<16-1 {
			return nil, codedf(http.StatusBadRequest, "attempt %q is not an attempt number (1 to %d)", v, 1<<16-1)
		}
		attempt = n
	}
	if attempt == 0 {
		j, found := s.reads.Job(id, jid)
		if !found {
			return nil, codedf(http.StatusNotFound, "batch %d has no job %d in memory (a finished batch's usage samples are not kept)", id, jid)
		}
		if n := len(j.Attempts); n > 0 {
			attempt = j.Attempts[n-1].Attempt
		}
	}
	out := api.AttemptUsage{Attempt: attempt, Samples: []api.UsageSample{}}
	if attempt == 0 || s.usage == nil {
		return out, nil
	}
	for _, p := range s.usage.Series(samples.Key{Batch: id, Job: jid, Attempt: uint16(attempt)}) {
		out.Samples = append(out.Samples, api.UsageSample{Time: time.Unix(0, p.Time).UTC(), CPUSeconds: float64(p.CPUMillis) / 1000,
			Memory: p.Memory, PeakMemory: p.PeakMemory})
	}
	return out, nil
}
