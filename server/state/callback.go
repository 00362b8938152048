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

func (s *State) applyCallbackDone(c *CallbackDone) any {
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
	Batch   uint64
	Version uint64
	URL     string
}

// CallbacksDue lists complete batches whose callback has not been told of
// their completion, oldest first, at most max.
func (s *State) CallbacksDue(max int) []CallbackDue {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []CallbackDue
	for _, id := range s.batchIDs {
		if b := s.batches[id]; b.callbackDue() {
			out = append(out, CallbackDue{Batch: id, Version: b.version, URL: b.Callback})
			if len(out) == max {
				break
			}
		}
	}
	return out
}

// callbackDue reports whether b's callback has not been told of its
// completion.
func (b *Batch) callbackDue() bool {
	return b.Callback != "" && b.Completed != 0 && b.version != 0 && b.callbackVersion != b.version
}
