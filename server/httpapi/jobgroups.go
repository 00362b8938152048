package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// jobGroupOf reads the {group} of a job group's path, an ID or a path
// (URL-escaped: "align%2Fchr1"; a path of digits alone is read as an ID),
// in a batch the caller may reach at level.
func (s *batchHandlers) jobGroupOf(r *http.Request, level state.BatchAccess) (uint64, uint32, error) {
	id, err := s.batchAccess(r, level)
	if err != nil {
		return 0, 0, err
	}
	raw := r.PathValue("group")
	if n, err := strconv.ParseUint(raw, 10, 32); err == nil && n > 0 {
		if _, ok := s.state.JobGroup(id, uint32(n)); ok {
			return id, uint32(n), nil
		}
	} else if g, ok := s.state.JobGroupID(id, raw); ok {
		return id, g, nil
	}
	if !s.state.HasBatch(id) {
		return 0, 0, codedf(http.StatusNotFound, "batch %d is finished and kept in the history store, which keeps its jobs but not its job groups", id)
	}
	return 0, 0, codedf(http.StatusNotFound, "batch %d has no job group %.200q (GET /api/v1/batches/%d/job-groups lists them)", id, raw, id)
}

func (s *batchHandlers) handleListJobGroups(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := s.visibleBatch(r)
	if err != nil {
		return nil, err
	}
	recs, ok := s.state.JobGroups(id)
	if !ok {
		return nil, codedf(http.StatusNotFound, "batch %d is finished and kept in the history store, which keeps its jobs but not its job groups", id)
	}
	out := api.JobGroupList{JobGroups: make([]api.JobGroup, len(recs))}
	for i := range recs {
		out.JobGroups[i] = apiview.JobGroup(&recs[i], time.Now())
	}
	return out, nil
}

func (s *batchHandlers) handleGetJobGroup(w http.ResponseWriter, r *http.Request) (any, error) {
	id, g, err := s.jobGroupOf(r, state.Visible)
	if err != nil {
		return nil, err
	}
	rec, _ := s.state.JobGroup(id, g)
	return apiview.JobGroup(&rec, time.Now()), nil
}

// handleCancelJobGroup cancels a job group and the groups below it: who
// may cancel the batch may cancel its groups.
func (s *batchHandlers) handleCancelJobGroup(w http.ResponseWriter, r *http.Request) (any, error) {
	id, g, err := s.jobGroupOf(r, state.Cancellable)
	if err != nil {
		return nil, err
	}
	res, err := s.apply(&state.CancelJobGroup{Now: time.Now().UnixNano(), Batch: id, Group: g, Reason: "cancelled by " + userOf(r).Name})
	if err != nil {
		return nil, err
	}
	cr := res.(*state.JobGroupCancelResult)
	return api.JobGroupCancelResponse{AlreadyCancelled: cr.AlreadyCancelled, Groups: int64(cr.Groups), Cancelled: cr.Cancelled, Running: cr.Running}, nil
}
