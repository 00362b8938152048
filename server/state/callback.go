package state

// Completion callbacks (Hail's batch `callback`): a batch may name a URL
// the leader POSTs the batch to once it completes. The state keeps the
// URL and which completion of the batch (its version, the Raft index at
// which it became complete) was last reported, so a new leader reports
// what the last one had not (a report made just before a leader stopped,
// and not yet recorded, is made again: at least once). The leader checks
// the URL against its servers' allowed destinations before every POST;
// the state only carries it.

// MaxCallbackResult bounds the words a CallbackDone records.
const MaxCallbackResult = 256

// CallbackDone records that the leader reported a batch's completion at
// Version to its callback URL (or gave up), and how it went.
type CallbackDone struct {
	Now     int64
	Batch   uint64
	Version uint64
	Result  string
}

// Type implements Command.
func (*CallbackDone) Type() CommandType { return CmdCallbackDone }

func (s *batchBook) applyCallbackDone(c *CallbackDone) any {
	b := s.batches[c.Batch]
	if b == nil {
		return errorf(ErrNotFound, "batch %d does not exist", c.Batch)
	}
	if c.Version != b.version || b.Completed == 0 {
		return nil // the batch changed since: its new completion is due
	}
	b.callbackVersion = c.Version
	r := c.Result
	if len(r) > MaxCallbackResult {
		r = r[:MaxCallbackResult]
	}
	b.callbackResult = r
	return nil
}

// CallbackDue is a batch whose completion its callback has not been told.
type CallbackDue struct {
	Batch          uint64
	Version        uint64
	URL            string
	BillingProject string
}

// CallbacksDue lists complete batches whose callback has not been told of
// their completion, oldest first: of each billing project, its oldest at
// most perProject that skip does not pass over (so that one project's
// backlog does not hide another's first). skip (nil: none) sees every due
// batch, each scan, while the state's read lock is held: it must not call
// the state.
func (s *batchBook) CallbacksDue(perProject int, skip func(CallbackDue) bool) []CallbackDue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []CallbackDue
	listed := map[string]int{}
	for _, id := range s.batchIDs {
		b := s.batches[id]
		if !b.callbackDue() {
			continue
		}
		d := CallbackDue{Batch: id, Version: b.version, URL: b.Callback, BillingProject: b.BillingProject}
		if skip != nil && skip(d) {
			continue
		}
		if listed[d.BillingProject] < perProject {
			listed[d.BillingProject]++
			out = append(out, d)
		}
	}
	return out
}

// callbackDue reports whether b's callback has not been told of its
// completion.
func (b *Batch) callbackDue() bool {
	return b.Callback != "" && b.Completed != 0 && b.version != 0 && b.callbackVersion != b.version
}
