package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/server/state"
)

// Batches that completed and outlived the retention window leave the
// state for the history store; these read them there, through the same
// routes, in the same form.

// HistoryUnavailableHeader marks a listing that holds only the batches in
// memory because the history store did not answer; its value says why.
const HistoryUnavailableHeader = "X-Drover-History-Unavailable"

// historyStore returns the history store, or a 404 (there is none) or 503
// error naming what was looked for.
func (s *Server) historyStore(what string) (history.Store, error) {
	if s.history == nil {
		return nil, coded(http.StatusNotFound, what+" does not exist")
	}
	st, err := s.history.Store()
	if err != nil {
		return nil, codedf(http.StatusServiceUnavailable, "%s is not in memory and %w; retry when it is back", what, err)
	}
	return st, nil
}

// archivedBatch reads a batch the state no longer holds, or returns a 404
// or 503 error.
func (s *batchHandlers) archivedBatch(r *http.Request, id uint64) (history.Batch, error) {
	what := fmt.Sprintf("batch %d", id)
	st, err := s.historyStore(what)
	if err != nil {
		return history.Batch{}, err
	}
	b, found, err := st.Batch(r.Context(), id)
	switch {
	case err != nil:
		return history.Batch{}, historyFailed(id, err)
	case !found:
		return history.Batch{}, coded(http.StatusNotFound, what+" does not exist")
	}
	return b, nil
}

// mergeBatches puts a page of the state's batches and a page of the
// history store's together, newest first: what the state holds wins (a
// batch exported but still retained is in both), and only the IDs both
// pages cover are kept, so the next page (below LastID) misses nothing.
func mergeBatches(live, old api.BatchList, inState func(id int64) bool) api.BatchList {
	cover := max(live.LastID, old.LastID)
	all := append([]api.Batch(nil), live.Batches...)
	for _, b := range old.Batches {
		if !inState(b.ID) {
			all = append(all, b)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID > all[j].ID })
	out := api.BatchList{Batches: []api.Batch{}}
	for i, b := range all {
		if b.ID < cover || (i > 0 && all[i-1].ID == b.ID) {
			continue
		}
		out.Batches = append(out.Batches, b)
	}
	if len(out.Batches) > state.PageSize {
		out.Batches = out.Batches[:state.PageSize]
		out.LastID = out.Batches[state.PageSize-1].ID
	} else if cover > 0 {
		out.LastID = cover
	}
	return out
}

// latestAttempt picks the attempt whose log to read from a job's
// attempts: the one asked for (0: the latest); -1 when there is no such
// attempt, 0 when the job never ran.
func latestAttempt(j *api.Job, want int) int {
	latest := 0
	for _, a := range j.Attempts {
		latest = max(latest, a.Attempt)
	}
	switch {
	case want > latest:
		return -1
	case want > 0:
		return want
	}
	return latest
}

// archivedJob reads a job of a batch the state no longer holds, or
// returns a 404 or 503 error.
func (s *batchHandlers) archivedJob(r *http.Request, batch uint64, job uint32) (api.Job, error) {
	st, err := s.historyStore(fmt.Sprintf("batch %d", batch))
	if err != nil {
		return api.Job{}, err
	}
	j, found, err := st.Job(r.Context(), batch, job)
	switch {
	case err != nil:
		return api.Job{}, historyFailed(batch, err)
	case !found:
		return api.Job{}, codedf(http.StatusNotFound, "batch %d has no job %d", batch, job)
	}
	return j, nil
}

// historyFailed is the 503 error of a read of a batch the history store
// failed.
func historyFailed(batch uint64, err error) error {
	return codedf(http.StatusServiceUnavailable, "batch %d is not in memory and the history store failed: %w; retry later", batch, err)
}

// ledgerSpends reads what a billing project's batches that left the state
// cost on the days from..to from the history ledger; held lists
// (ascending) the project's batches the state held when it was read,
// which count from there.
func (s *projectHandlers) ledgerSpends(ctx context.Context, project string, from, to int32, held []uint64) ([]billing.Spend, error) {
	if s.history == nil {
		return nil, nil
	}
	st, err := s.history.Store()
	if err != nil {
		return nil, err
	}
	rows, err := st.Ledger(ctx, project, from, to)
	if err != nil {
		return nil, err
	}
	var out []billing.Spend
	for _, r := range rows {
		if _, inState := slices.BinarySearch(held, r.Batch); !inState {
			out = append(out, billing.Spend{Batch: r.Batch, User: r.User, Cost: r.Cost})
		}
	}
	return out, nil
}
