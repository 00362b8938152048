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
	// Group is the job group whose completion was reported (0: the
	// batch's; absent before job groups).
	Group uint32
}

// Type implements Command.
func (*CallbackDone) Type() CommandType { return CmdCallbackDone }

func (s *batchBook) applyCallbackDone(c *CallbackDone) any {
	b := s.batches[c.Batch]
	if b == nil {
		return errorf(ErrNotFound, "batch %d does not exist", c.Batch)
	}
	if c.Group != 0 {
		if int(c.Group) > len(b.jobGroups) {
			return errorf(ErrNotFound, "batch %d has no job group %d", c.Batch, c.Group)
		}
		jg := b.jobGroups[c.Group-1]
		if c.Version != jg.version || jg.Completed == 0 {
			return nil
		}
		jg.callbackVersion = c.Version
		jg.callbackResult = truncate(c.Result, MaxCallbackResult)
		return nil
	}
	if c.Version != b.version || b.Completed == 0 {
		return nil // the batch changed since: its new completion is due
	}
	b.callbackVersion = c.Version
	b.callbackResult = truncate(c.Result, MaxCallbackResult)
	return nil
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// CallbackDue is a batch whose completion its callback has not been told.
type CallbackDue struct {
	Batch uint64
	// Group is the job group that completed (0: the batch).
	Group          uint32
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
		if b.callbackDue() {
			d := CallbackDue{Batch: id, Version: b.version, URL: b.Callback, BillingProject: b.BillingProject}
			if (skip == nil || !skip(d)) && listed[d.BillingProject] < perProject {
				listed[d.BillingProject]++
				out = append(out, d)
			}
		}
		for _, jg := range b.jobGroups {
			if !jg.callbackDue() {
				continue
			}
			d := CallbackDue{Batch: id, Group: jg.ID, Version: jg.version, URL: jg.Callback, BillingProject: b.BillingProject}
			if (skip == nil || !skip(d)) && listed[d.BillingProject] < perProject {
				listed[d.BillingProject]++
				out = append(out, d)
			}
		}
	}
	return out
}

// callbackDue reports whether a job group's callback has not been told
// of its completion.
func (jg *JobGroup) callbackDue() bool {
	return jg.Callback != "" && jg.Completed != 0 && jg.version != 0 && jg.callbackVersion != jg.version
}

// callbackDue reports whether b's callback has not been told of its
// completion.
func (b *Batch) callbackDue() bool {
	return b.Callback != "" && b.Completed != 0 && b.version != 0 && b.callbackVersion != b.version
}
