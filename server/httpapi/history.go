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

// historyStore returns the history store, or answers 503 and returns nil.
func (s *Server) historyStore(w http.ResponseWriter, what string) history.Store {
	if s.history == nil {
		writeError(w, http.StatusNotFound, what+" does not exist")
		return nil
	}
	st, err := s.history.Store()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("%s is not in memory and %v; retry when it is back", what, err))
		return nil
	}
	return st
}

// archivedBatch reads a batch the state no longer holds; it answers 404
// or 503 itself when it returns false.
func (s *Server) archivedBatch(w http.ResponseWriter, r *http.Request, id uint64) (history.Batch, bool) {
	what := fmt.Sprintf("batch %d", id)
	st := s.historyStore(w, what)
	if st == nil {
		return history.Batch{}, false
	}
	b, found, err := st.Batch(r.Context(), id)
	switch {
	case err != nil:
		historyFailed(w, id, err)
		return history.Batch{}, false
	case !found:
		writeError(w, http.StatusNotFound, what+" does not exist")
		return history.Batch{}, false
	}
	return b, true
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

// archivedJob reads a job of a batch the state no longer holds; it
// answers 404 or 503 itself when it returns false.
func (s *Server) archivedJob(w http.ResponseWriter, r *http.Request, batch uint64, job uint32) (api.Job, bool) {
	st := s.historyStore(w, fmt.Sprintf("batch %d", batch))
	if st == nil {
		return api.Job{}, false
	}
	j, found, err := st.Job(r.Context(), batch, job)
	switch {
	case err != nil:
		historyFailed(w, batch, err)
		return api.Job{}, false
	case !found:
		writeError(w, http.StatusNotFound, fmt.Sprintf("batch %d has no job %d", batch, job))
		return api.Job{}, false
	}
	return j, true
}

// historyFailed answers 503 for a read of a batch the history store
// failed.
func historyFailed(w http.ResponseWriter, batch uint64, err error) {
	writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("batch %d is not in memory and the history store failed: %v; retry later", batch, err))
}

// ledgerSpends reads what a billing project's batches that left the state
// cost on the days from..to from the history ledger; held lists
// (ascending) the project's batches the state held when it was read,
// which count from there.
func (s *Server) ledgerSpends(ctx context.Context, project string, from, to int32, held []uint64) ([]billing.Spend, error) {
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
