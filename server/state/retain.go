package state

import (
	"bytes"

	"slices"
	"sort"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/drover-sched/drover/money"
)

// History: the leader exports each complete batch to the history store
// (ExportQueue, ExportHeader, ExportJobs), records that the store holds
// it at its version (MarkExported), and once the retention window has
// passed removes it from the state (ForgetBatches). A batch that changes
// after it was exported (reopened by an update, or cancelled once
// complete) gets a new version and is exported again before it can go.

// MaxExportMarks and MaxForget bound one MarkExported or ForgetBatches
// command.
const (
	MaxExportMarks = 1000
	MaxForget      = 1000
)

// ExportMark says the history store holds Batch at Version.
type ExportMark struct {
	Batch   uint64
	Version uint64
}

// MarkExported records batches the history store holds. Timeline and
// Store are those the exporter read before it exported: marks made
// against another store, or before a restore, are dropped ("" Store:
// from a server before timelines, not checked).
type MarkExported struct {
	Marks    []ExportMark
	Timeline uint64
	Store    string
}

// ForgetBatches removes batches from the state: those complete, exported
// at their current version (the others are left). The leader sends the
// batches whose retention window has passed.
type ForgetBatches struct {
	Now     int64
	Batches []uint64
}

// Type implements Command.
func (*MarkExported) Type() CommandType { return CmdMarkExported }

// Type implements Command.
func (*ForgetBatches) Type() CommandType { return CmdForgetBatches }

// MarkResult counts the marks applied (the others named a batch gone or
// changed since).
type MarkResult struct{ Marked int }

func (s *batchBook) applyMarkExported(c *MarkExported) any {
	if len(c.Marks) > MaxExportMarks {
		return errorf(ErrInvalid, "%d export marks in one command; at most %d", len(c.Marks), MaxExportMarks)
	}
	res := &MarkResult{}
	if c.Store != "" && (c.Store != s.historyStore || c.Timeline != s.timeline) {
		return res
	}
	for _, m := range c.Marks {
		b := s.batches[m.Batch]
		if b == nil || b.Completed == 0 || b.version != m.Version || m.Version == 0 {
			continue
		}
		b.exported = m.Version
		res.Marked++
	}
	return res
}

// ForgetResult lists the batches removed.
type ForgetResult struct{ Forgotten []uint64 }

func (s *batchBook) applyForgetBatches(c *ForgetBatches) any {
	if len(c.Batches) > MaxForget {
		return errorf(ErrInvalid, "%d batches to forget in one command; at most %d", len(c.Batches), MaxForget)
	}
	res := &ForgetResult{}
	gone := map[uint64]bool{}
	for _, id := range c.Batches {
		b := s.batches[id]
		if b == nil || !b.forgettable() {
			continue
		}
		s.held.Jobs -= int64(b.nextJob) - 1
		s.held.Groups -= int64(len(b.groups))
		n, bytes := b.jobGroupsHeld()
		s.held.JobGroups -= n
		s.held.JobGroupBytes -= bytes
		s.held.Batches--
		for st, n := range b.counts {
			s.jobTotals.jobs[st] -= n
		}
		if b.Key != "" && s.keys[b.User+"\x00"+b.Key] == id {
			delete(s.keys, b.User+"\x00"+b.Key)
		}
		delete(s.batches, id)
		gone[id] = true
		res.Forgotten = append(res.Forgotten, id)
	}
	if len(gone) > 0 {
		s.batchIDs = slices.DeleteFunc(s.batchIDs, func(id uint64) bool { return gone[id] })
	}
	return res
}

// forgettable: the batch is complete, nothing of it runs or waits, and
// the history store holds it as it is.
func (b *Batch) forgettable() bool {
	return b.Completed != 0 && b.version != 0 && b.exported == b.version && !b.live && b.open == 0 && len(b.bill.Running) == 0 &&
		!b.callbackDue() && !b.groupCallbackDue() // its completions are reported first (the leader gives up in bounded time)
}

// groupCallbackDue reports whether a job group's callback has not been
// told of its completion.
func (b *Batch) groupCallbackDue() bool {
	for _, jg := range b.jobGroups {
		if jg.callbackDue() {
			return true
		}
	}
	return false
}

// ExportItem is a batch waiting to be exported.
type ExportItem struct {
	Batch   uint64
	Version uint64
	Jobs    uint32 // job IDs reserved (staged ones are skipped)
}

// ExportQueue lists complete batches the history store does not hold at
// their version, oldest first, at most max; and how many there are in
// all.
func (s *batchBook) ExportQueue(max int) (items []ExportItem, waiting int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, id := range s.batchIDs {
		b := s.batches[id]
		if b.Completed == 0 || b.exported == b.version {
			continue
		}
		waiting++
		if len(items) < max {
			items = append(items, ExportItem{Batch: id, Version: b.version, Jobs: b.nextJob - 1})
		}
	}
	return items, waiting
}

// RetentionDue lists batches complete since before cutoff (unix ns) that
// the history store holds as they are, oldest first, at most max.
func (s *batchBook) RetentionDue(cutoff int64, max int) []uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []uint64
	for _, id := range s.batchIDs {
		b := s.batches[id]
		if b.forgettable() && b.Completed <= cutoff {
			out = append(out, id)
			if len(out) == max {
				break
			}
		}
	}
	return out
}

// BatchExport is what the history store keeps of a batch besides its
// jobs.
type BatchExport struct {
	Batch BatchRecord
	// Daily is the batch's cost by UTC day (days since 1970-01-01).
	Daily map[int32]money.Amount
}

// ExportHeader reads a batch for export, if it is still complete at
// version.
func (s *batchBook) ExportHeader(id, version uint64) (BatchExport, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.batches[id]
	if b == nil || b.Completed == 0 || b.version != version {
		return BatchExport{}, false
	}
	out := BatchExport{Batch: s.record(b), Daily: map[int32]money.Amount{}}
	for d, c := range b.bill.Daily {
		out.Daily[d] = c
	}
	return out, true
}

// ExportGroup is where one job or job array starts and ends, and its
// spec's name.
type ExportGroup struct {
	First, Count uint32
	Array        bool
	Name         string
	// Base is the first ID of the array the group is part of (see
	// group.base).
	Base uint32
}

// ExportJobs reads up to n jobs of a batch from job from on, as records
// (the server turns them into the API's jobs for the store), with the
// groups that start among them, if the batch is still complete at
// version. next is the job to read from next (0: none left).
func (s *batchBook) ExportJobs(id, version uint64, from uint32, n int) (jobs []JobRecord, groups []ExportGroup, next uint32, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := s.batches[id]
	if b == nil || b.Completed == 0 || b.version != version {
		return nil, nil, 0, false
	}
	if from < 1 {
		from = 1
	}
	i := sort.Search(len(b.groups), func(i int) bool { return b.groups[i].first >= from })
	last := uint32(len(b.jobs))
	id32 := from
	for ; id32 <= last && len(jobs) < n; id32++ {
		j := &b.jobs[id32-1]
		if j.state == Staged {
			continue
		}
		g := b.groupOf(id32)
		if i < len(b.groups) && b.groups[i] == g {
			groups = append(groups, ExportGroup{First: g.first, Count: g.count, Array: g.spec.Array, Name: g.spec.Name, Base: g.base})
			i++
		}
		jobs = append(jobs, s.jobRecord(b, id32, j, g))
	}
	if id32 <= last {
		next = id32
	}
	return jobs, groups, next, true
}

// HasBatch reports whether the state holds a batch.
func (s *batchBook) HasBatch(id uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.batches[id]
	return ok
}

// Held is what the state holds: job IDs, groups and batches.
func (s *batchBook) Held() Footprint {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.held
}

// AuditSize is the size of the audit log in this snapshot: a reader that
// tells the state's own size from the log's (bounded by design) takes
// both from one snapshot, at one index. (A State's AuditSize read beside
// a snapshot may count entries the snapshot did not have yet.)
func (sn *Snapshot) AuditSize() int64 {
	return auditSize(sn.data.Audit, sn.data.AnonAudit)
}

// auditSize is what the two parts of the audit log take in a snapshot,
// encoded as the snapshot encodes them.
func auditSize(audit, anon []AuditEntry) int64 {
	var n int64
	for _, entries := range [][]AuditEntry{audit, anon} {
		var buf bytes.Buffer
		if err := codec.NewEncoder(&buf, msgpackHandle).Encode(entries); err != nil {
			return 0
		}
		n += int64(buf.Len())
	}
	return n
}
