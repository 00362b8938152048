package server

import "context"

// ExportStage names a point of the leader's history export at which
// Config.ExportHook is called. A test that takes the store away needs to
// know where the export is when it does; polling the store for it races
// the exporter, and on a loaded machine the poll misses the moment.
type ExportStage int

const (
	// ExportRoundStart: a round is about to read what waits for export.
	// A hook that blocks here holds the exporter between rounds.
	ExportRoundStart ExportStage = iota + 1
	// ExportJobsStored: every job and group of one batch is in the store
	// and its batch row is not yet: the batch is half written, and stays
	// so while the hook blocks.
	ExportJobsStored
	// ExportRoundDone: a round ended and its outcome is in the status
	// and the metrics already (Err is why it failed, nil when it did not;
	// the context's error when leadership ended, and the exporter stops).
	ExportRoundDone
)

// String names the stage in a test's messages.
func (s ExportStage) String() string {
	switch s {
	case ExportRoundStart:
		return "round-start"
	case ExportJobsStored:
		return "jobs-stored"
	case ExportRoundDone:
		return "round-done"
	}
	return "unknown"
}

// ExportEvent is what Config.ExportHook is told at each stage.
type ExportEvent struct {
	Stage ExportStage
	// Batch is the half-written batch (ExportJobsStored).
	Batch uint64
	// Err is why the round failed (ExportRoundDone; nil: it did not).
	Err error
}

// exportHook calls the configured hook, if any; the exporter waits for it.
func (s *Server) exportHook(ctx context.Context, ev ExportEvent) {
	if s.cfg.ExportHook != nil {
		s.cfg.ExportHook(ctx, ev)
	}
}
