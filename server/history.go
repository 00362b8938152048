package server

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hashicorp/raft"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/efficiency"
	"github.com/drover-sched/drover/history"
	"github.com/drover-sched/drover/server/apiview"
	"github.com/drover-sched/drover/server/state"
)

// historyBook holds the history store and how it is doing. The MySQL
// store is opened in the background and again after it fails, so a
// server starts, schedules and serves live batches while MySQL is down.
type historyBook struct {
	kind string // "mysql" or "embedded"

	mu        sync.Mutex
	store     history.Store
	err       error     // the last failure (nil: working)
	since     time.Time // when it started failing
	exported  int64     // batches this server exported
	jobs      int64     // jobs this server exported
	forgotten int64     // batches this server's leadership removed
	waiting   int       // complete batches waiting for export (leader)
	lastOK    time.Time
	note      string // why the exporter does not run ("" when it does)

	// lineage (set by the server) says which batch IDs a restore
	// discarded: reads through Store do not show what the store holds
	// under them.
	lineage func() state.Lineage
}

// Store returns the store as the API reads it, or why there is none.
func (h *historyBook) Store() (history.Store, error) {
	st, err := h.raw()
	if err != nil || h.lineage == nil {
		return st, err
	}
	return visibleHistory{Store: st, lineage: h.lineage}, nil
}

// raw returns the store itself (the exporter's), or why there is none.
func (h *historyBook) raw() (history.Store, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.store == nil {
		if h.err != nil {
			return nil, fmt.Errorf("the history store (%s) is unavailable: %w", h.kind, h.err)
		}
		return nil, fmt.Errorf("the history store (%s) is not connected yet", h.kind)
	}
	return h.store, nil
}

// failed records a failure of the store.
func (h *historyBook) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.since = time.Now()
	}
	h.err = err
}

// ok records that the store answered.
func (h *historyBook) ok() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err, h.since, h.lastOK = nil, time.Time{}, time.Now()
}

// Status is the history store's state as `drover status` shows it.
func (h *historyBook) Status() api.HistoryStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := api.HistoryStatus{Store: h.kind, Up: h.store != nil && h.err == nil, ExportedBatches: h.exported,
		ExportedJobs: h.jobs, ForgottenBatches: h.forgotten, WaitingBatches: h.waiting, Note: h.note}
	if h.err != nil {
		st.Error = h.err.Error()
		since := h.since
		st.DownSince = &since
	}
	return st
}

// openHistory opens the configured store: the embedded one at once, MySQL
// in the background until it answers (and its schema is up to date).
func (s *Server) openHistory(ctx context.Context) error {
	if s.cfg.HistoryDSN == "" {
		st, err := history.OpenEmbedded(s.cfg.DataDir)
		if err != nil {
			return err
		}
		s.history = &historyBook{kind: "embedded", store: st, lineage: s.state.Lineage}
		return nil
	}
	s.history = &historyBook{kind: "mysql", lineage: s.state.Lineage}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		wait := time.Second
		for {
			octx, cancel := context.WithTimeout(ctx, 30*time.Second)
			st, err := history.OpenMySQL(octx, s.cfg.HistoryDSN, s.log)
			cancel()
			if err == nil && ctx.Err() != nil {
				st.Close()
				return
			}
			if err == nil {
				s.history.mu.Lock()
				s.history.store = st
				s.history.mu.Unlock()
				s.history.ok()
				s.log.Info("history store connected", "store", "mysql", "schema", history.SchemaVersion)
				return
			}
			if ctx.Err() != nil {
				return
			}
			s.history.failed(err)
			s.log.Warn("history store unavailable; batches stay in memory until it answers", "err", err, "retry", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Minute)
		}
	}()
	return nil
}

func (s *Server) closeHistory() {
	if s.history == nil {
		return
	}
	s.history.mu.Lock()
	st := s.history.store
	s.history.store = nil
	s.history.mu.Unlock()
	if st != nil {
		if err := st.Close(); err != nil {
			s.log.Warn("close the history store", "err", err)
		}
	}
}

// exportChunk is how many jobs one read of the state (under its read
// lock) and one write to the store carry.
const exportChunk = 4000

// exportWriters is how many pieces of a batch are written at once.
const exportWriters = 3

// runExporter exports complete batches to the history store and, once the
// retention window has passed, removes them from the state. It backs off
// while the store fails and catches up when it answers again; nothing
// leaves the state before the store holds it.
func (s *Server) runExporter(ctx context.Context) {
	wait := s.cfg.ExportInterval
	pace := newExportPacer(s.newActivity().busy)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		s.exportHook(ctx, ExportEvent{Stage: ExportRoundStart})
		err := s.exportOnce(ctx, pace)
		switch {
		case ctx.Err() != nil:
			s.exportHook(ctx, ExportEvent{Stage: ExportRoundDone, Err: ctx.Err()})
			return
		case err != nil:
			s.history.failed(err)
			s.metrics.historyUp.Set(0)
			s.log.Warn("history export failed; retrying", "err", err, "retry", wait)
			wait = min(2*wait, max(time.Minute, s.cfg.ExportInterval))
		default:
			wait = s.cfg.ExportInterval
		}
		s.exportHook(ctx, ExportEvent{Stage: ExportRoundDone, Err: err})
	}
}

// exportOnce exports what waits (a bounded number of batches) and
// forgets what is due. A nil error with work left means the next round
// goes on.
func (s *Server) exportOnce(ctx context.Context, pace *exportPacer) error {
	items, waiting := s.state.ExportQueue(256)
	s.history.mu.Lock()
	s.history.waiting = waiting
	s.history.mu.Unlock()
	s.metrics.historyWaiting.Set(float64(waiting))
	note := s.exportBlocked()
	s.history.mu.Lock()
	s.history.note = note
	s.history.mu.Unlock()
	if note != "" {
		return nil
	}
	st, err := s.history.raw()
	if err != nil {
		return err
	}
	if err := st.Ping(ctx); err != nil {
		return fmt.Errorf("history store: %w", err)
	}
	s.history.ok()
	s.metrics.historyUp.Set(1)
	lin, err := s.adoptStore(ctx, st)
	if err != nil {
		return err
	}
	var marks []state.ExportMark
	flush := func() error {
		if len(marks) == 0 {
			return nil
		}
		if _, err := s.raft.Apply(&state.MarkExported{Marks: marks, Timeline: lin.Timeline, Store: lin.Store}); err != nil {
			return fmt.Errorf("record exports: %w", err)
		}
		marks = marks[:0]
		return nil
	}
	for _, it := range items {
		if err := pace.before(ctx); err != nil {
			return err
		}
		ok, err := s.exportBatch(ctx, st, it, pace, &lin)
		if err != nil {
			if ferr := flush(); ferr != nil {
				s.log.Warn("record exports", "err", ferr)
			}
			return err
		}
		if ok {
			marks = append(marks, state.ExportMark{Batch: it.Batch, Version: it.Version})
		}
		if len(marks) == state.MaxExportMarks {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return s.forgetDue(ctx)
}

// exportBlocked says why this leader may not export ("" when it may): an
// embedded store is each server's own, so with several servers a batch
// stored by one leader could not be read after another took over.
func (s *Server) exportBlocked() string {
	if s.history.kind != "embedded" {
		return ""
	}
	f := s.raft.raft.GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	voters := 0
	for _, sv := range f.Configuration().Servers {
		if sv.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters > 1 {
		return fmt.Sprintf("the embedded history store serves a single server and this cluster has %d: finished batches stay in memory until the servers are given a MySQL database (-history-dsn)", voters)
	}
	return ""
}

// adoptStore makes sure the export marks were made against the store the
// exporter reaches (see state.AdoptStore), and returns the lineage the
// round exports in.
func (s *Server) adoptStore(ctx context.Context, st history.Store) (state.Lineage, error) {
	id, err := st.Identity(ctx)
	if err != nil {
		return state.Lineage{}, err
	}
	lin := s.state.Lineage()
	if lin.Store == id {
		return lin, nil
	}
	top, err := st.MaxBatch(ctx)
	if err != nil {
		return state.Lineage{}, err
	}
	res, err := s.raft.Apply(&state.AdoptStore{Now: time.Now().UnixNano(), Store: id, Floor: top})
	if err != nil {
		return state.Lineage{}, fmt.Errorf("adopt the history store: %w", err)
	}
	ar, _ := res.(*state.AdoptResult)
	if ar != nil && lin.Store != "" {
		s.log.Warn("the history store is not the one finished batches were exported to: each batch in memory is checked against it again",
			"store", id, "was", lin.Store, "batches", ar.Unmarked)
	}
	return s.state.Lineage(), nil
}

// exportBatch writes one batch to the store; ok is false when the batch
// changed (or went) while it was read, and it is left for the next round.
func (s *Server) exportBatch(ctx context.Context, st history.Store, it state.ExportItem, pace *exportPacer, lin *state.Lineage) (ok bool, err error) {
	have, err := st.Stored(ctx, it.Batch)
	if err != nil {
		return false, err
	}
	switch {
	case have.Version == 0:
	case have.Timeline == lin.Timeline && have.Version >= it.Version:
		return true, nil // stored by an earlier leader, or an earlier try
	case have.Timeline != lin.Timeline && have.Version == it.Version && lin.Ancestor(have.Timeline):
		return true, nil // stored before the snapshot this state was restored from was taken
	case have.Timeline != lin.Timeline:
		// Another timeline's: one a restore discarded, or another
		// cluster's. Its rows go, every one, before this batch's.
		s.log.Info("history: a batch stored from another timeline is replaced", "batch", it.Batch,
			"stored_timeline", have.Timeline, "stored_version", have.Version, "timeline", lin.Timeline)
		if err := st.Discard(ctx, it.Batch); err != nil {
			return false, err
		}
	}
	hdr, ok := s.state.ExportHeader(it.Batch, it.Version)
	if !ok {
		return false, nil
	}
	// One goroutine reads the batch from the state in pieces while
	// exportWriters write earlier pieces: the state's read lock is held
	// a piece at a time, and the store works on several at once.
	type piece struct {
		groups []history.Group
		jobs   []history.Job
	}
	g, gctx := errgroup.WithContext(ctx)
	pieces := make(chan piece, exportWriters)
	changed := false
	// What each group of jobs used, by day, for reports over a period
	// (the reader's alone until g.Wait).
	var sums efficiency.Summarizer
	g.Go(func() error {
		defer close(pieces)
		from := uint32(1)
		for {
			start := time.Now()
			recs, groups, next, ok := s.state.ExportJobs(it.Batch, it.Version, from, exportChunk)
			if !ok {
				changed = true
				return nil
			}
			jobs := make([]api.Job, len(recs))
			for i := range recs {
				jobs[i] = apiview.Job(&recs[i], start) // complete: nothing runs, so no cost grows
				for _, a := range efficiency.JobAttempts(&jobs[i]) {
					sums.Add(a)
				}
			}
			var p piece
			for _, gr := range groups {
				k := sort.Search(len(jobs), func(k int) bool { return jobs[k].JobID >= int64(gr.First) })
				if k == len(jobs) || jobs[k].JobID != int64(gr.First) {
					return fmt.Errorf("batch %d: group at job %d has no job in the export", it.Batch, gr.First)
				}
				hg := history.GroupOf(gr.First, gr.Count, gr.Array, gr.Name, &jobs[k])
				if gr.Base != gr.First {
					hg.Base = gr.Base
				}
				p.groups = append(p.groups, hg)
			}
			p.jobs = make([]history.Job, len(jobs))
			for i := range jobs {
				p.jobs[i] = history.SplitJob(&jobs[i])
			}
			select {
			case pieces <- p:
			case <-gctx.Done():
				return nil
			}
			if next == 0 {
				return nil
			}
			// The time a piece took, waiting for a writer included, is
			// the pipeline's: rest in proportion while the scheduler
			// is busy.
			if err := pace.after(gctx, time.Since(start)); err != nil {
				return err
			}
			from = next
		}
	})
	var n atomic.Int64
	for range exportWriters {
		g.Go(func() error {
			for p := range pieces {
				if len(p.groups) > 0 {
					if err := st.PutGroups(gctx, it.Batch, p.groups); err != nil {
						return err
					}
				}
				if err := st.PutJobs(gctx, it.Batch, p.jobs); err != nil {
					return err
				}
				n.Add(int64(len(p.jobs)))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return false, err
	}
	if changed {
		return false, nil
	}
	// The reader stops without an error when ctx ends (leadership lost):
	// the jobs may be partly stored, and the batch row must not follow.
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.exportHook(ctx, ExportEvent{Stage: ExportJobsStored, Batch: it.Batch})
	var ledger []history.LedgerRow
	for day, cost := range hdr.Daily {
		ledger = append(ledger, history.LedgerRow{BillingProject: hdr.Batch.BillingProject, Day: day, User: hdr.Batch.User, Batch: it.Batch, Cost: cost})
	}
	var eff []history.EfficiencyRow
	for _, d := range sums.Summaries() {
		eff = append(eff, history.EfficiencyRow{BillingProject: hdr.Batch.BillingProject, Day: d.Day, User: hdr.Batch.User, Batch: it.Batch, Summary: d.Summary})
	}
	written, err := st.PutBatch(ctx, history.Batch{Batch: apiview.Batch(&hdr.Batch, time.Now()), Version: it.Version, Timeline: lin.Timeline}, ledger, eff)
	if err != nil {
		return false, err
	}
	if written {
		s.history.mu.Lock()
		s.history.exported++
		s.history.jobs += n.Load()
		s.history.mu.Unlock()
		s.metrics.historyExported.Inc()
		s.metrics.historyExportedJobs.Add(float64(n.Load()))
		if met, ok := hdr.Batch.SLOMet(); ok && hdr.Batch.Queue != "" {
			s.metrics.sloRuns.WithLabelValues(hdr.Batch.Queue, strconv.FormatBool(met)).Inc()
		}
	}
	return true, nil
}

// activity tells whether the cluster is placing or finishing jobs: the
// counts of jobs ready, being created and running changed within
// schedBusyFor. A job that waits for room it never gets changes nothing,
// so it does not hold the exporter back.
type activity struct {
	counts  func() [3]int64
	now     func() time.Time
	mu      sync.Mutex
	last    [3]int64
	changed time.Time
}

func (s *Server) newActivity() *activity {
	return &activity{now: time.Now, counts: func() [3]int64 {
		c, _, _ := s.state.Counts()
		return [3]int64{c[state.Ready], c[state.Creating], c[state.Running]}
	}}
}

func (a *activity) busy() bool {
	c := a.counts()
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if c != a.last {
		a.last, a.changed = c, now
	}
	return !a.changed.IsZero() && now.Sub(a.changed) < schedBusyFor
}

// forgetDue removes the batches whose retention window has passed.
func (s *Server) forgetDue(ctx context.Context) error {
	for ctx.Err() == nil {
		now := time.Now()
		due := s.state.RetentionDue(now.Add(-time.Duration(s.retention.Load())).UnixNano(), state.MaxForget)
		if len(due) == 0 {
			return nil
		}
		res, err := s.raft.Apply(&state.ForgetBatches{Now: now.UnixNano(), Batches: due})
		if err != nil {
			return fmt.Errorf("forget batches: %w", err)
		}
		fr, _ := res.(*state.ForgetResult)
		if fr == nil || len(fr.Forgotten) == 0 {
			return nil
		}
		s.history.mu.Lock()
		s.history.forgotten += int64(len(fr.Forgotten))
		s.history.mu.Unlock()
		s.metrics.historyForgotten.Add(float64(len(fr.Forgotten)))
		s.log.Info("finished batches left memory for the history store", "batches", len(fr.Forgotten), "first", fr.Forgotten[0])
		if len(due) < state.MaxForget {
			return nil
		}
	}
	return nil
}

// visibleHistory is the history store as the API reads it: what it holds
// under batch IDs a restore discarded is not this cluster's history.
type visibleHistory struct {
	history.Store
	lineage func() state.Lineage
}

func (v visibleHistory) discarded(id uint64) bool {
	lin := v.lineage()
	return lin.Discarded(id)
}

func (v visibleHistory) Batch(ctx context.Context, id uint64) (history.Batch, bool, error) {
	if v.discarded(id) {
		return history.Batch{}, false, nil
	}
	return v.Store.Batch(ctx, id)
}

func (v visibleHistory) ListBatches(ctx context.Context, q api.BatchQuery, projects []string, lastID uint64) (api.BatchList, error) {
	out, err := v.Store.ListBatches(ctx, q, projects, lastID)
	if err != nil {
		return out, err
	}
	lin := v.lineage()
	out.Batches = slices.DeleteFunc(out.Batches, func(b api.Batch) bool { return lin.Discarded(uint64(b.ID)) })
	return out, nil
}

func (v visibleHistory) ListJobs(ctx context.Context, batch uint64, q api.JobQuery, lastID uint32) (api.JobList, error) {
	if v.discarded(batch) {
		return api.JobList{Jobs: []api.Job{}}, nil
	}
	return v.Store.ListJobs(ctx, batch, q, lastID)
}

func (v visibleHistory) Job(ctx context.Context, batch uint64, id uint32) (api.Job, bool, error) {
	if v.discarded(batch) {
		return api.Job{}, false, nil
	}
	return v.Store.Job(ctx, batch, id)
}

// Efficiency leaves the rows of discarded batches out as the store reads
// them, so they count against no limit.
func (v visibleHistory) Efficiency(ctx context.Context, q history.EfficiencyQuery, limit int) ([]history.EfficiencyRow, bool, error) {
	lin := v.lineage()
	hide := q.Hide
	q.Hide = func(batch uint64) bool { return lin.Discarded(batch) || (hide != nil && hide(batch)) }
	return v.Store.Efficiency(ctx, q, limit)
}

// SLORuns leaves the runs of discarded batches out as Efficiency does.
func (v visibleHistory) SLORuns(ctx context.Context, q history.SLOQuery, limit int) ([]history.SLORun, bool, error) {
	lin := v.lineage()
	hide := q.Hide
	q.Hide = func(batch uint64) bool { return lin.Discarded(batch) || (hide != nil && hide(batch)) }
	return v.Store.SLORuns(ctx, q, limit)
}

func (v visibleHistory) Ledger(ctx context.Context, project string, from, to int32) ([]history.LedgerRow, error) {
	rows, err := v.Store.Ledger(ctx, project, from, to)
	if err != nil {
		return rows, err
	}
	lin := v.lineage()
	return slices.DeleteFunc(rows, func(r history.LedgerRow) bool { return lin.Discarded(r.Batch) }), nil
}
