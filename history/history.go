// Package history keeps finished batches once they leave the replicated
// state: their jobs, attempts, usage and cost, and the billing ledger
// (cost by billing project, day, user and batch). The leader exports a
// batch when it completes and, once it is stored and its retention window
// has passed, a Raft command removes it from every server's memory; the
// API then reads it from here.
//
// Two stores implement Store and pass one conformance suite
// (historytest): MySQL (go-sql-driver/mysql, for production and several
// servers) and an embedded bbolt file in the data dir (the dev agent and
// a single server).
//
// Exports are idempotent: a batch is stored with the Raft index of the
// state it was read from (its version), every row is keyed, and a batch
// already stored at that version or later is not written again, so a
// retry or a new leader writes nothing twice.
//
// Versions compare only within one timeline. Restoring a snapshot starts
// a new timeline (see state.Fork): what the old one exported after the
// snapshot was taken is not the restored cluster's history, so a batch
// stored from another timeline is discarded and written again, and the
// batch IDs the old timeline used after the snapshot are never handed
// out again (the API hides the rows it left under them).
package history

import (
	"context"
	"strconv"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/efficiency"
	"github.com/drover-sched/drover/money"
)

// PageSize is the number of batches or jobs in one page of a listing.
const PageSize = 50

// maxScan bounds the rows one listing reads to fill a page when a filter
// the store cannot select by (names, attributes) skips most of them: the
// page then comes back short with LastID set, and the caller reads on.
const maxScan = 20000

// Batch is a finished batch as stored: what the API shows, and the Raft
// index of the state it was read from.
type Batch struct {
	api.Batch
	Version uint64
	// Timeline is the history the batch was exported from (0: the
	// first, or written before timelines).
	Timeline uint64 `json:",omitempty"`
}

// Stored is what a store holds of a batch (zero Version: nothing).
type Stored struct {
	Version  uint64
	Timeline uint64
}

// Group is the template of one job or job array of a batch: the spec part
// of api.Job, which all its jobs share.
type Group struct {
	First uint32
	Count uint32
	Array bool
	// Base is the first ID of the array the group is part of, when the
	// group is a part of it (a job retried with more memory has a group
	// of its own; 0: First).
	Base uint32 `json:",omitempty"`
	// Job holds the shared fields (command, resources, placement,
	// files, attributes, parents); Name is the spec's name (an array's
	// without the index).
	Job api.Job
}

// Job is what is a job's own: its state, exit code, message and attempts.
type Job struct {
	ID       uint32
	State    string
	ExitCode *int
	Message  string
	Attempts []api.Attempt
}

// LedgerRow is what one batch cost on one UTC day (days since 1970-01-01);
// an attempt counts on the day it ended.
type LedgerRow struct {
	BillingProject string
	Day            int32
	User           string
	Batch          uint64
	Cost           money.Amount
}

// EfficiencyRow is what one group of jobs of a batch asked for and used
// in its attempts that ended on one UTC day (days since 1970-01-01), as
// the ledger counts them: the sums a report over a period adds.
type EfficiencyRow struct {
	BillingProject string
	Day            int32
	User           string
	Batch          uint64
	Summary        efficiency.Summary
}

// EfficiencyQuery selects efficiency rows: of a billing project, of a
// user, or of a user in a billing project, on days From..To (inclusive).
type EfficiencyQuery struct {
	BillingProject string
	User           string
	From, To       int32
	// Hide, when set, leaves out the rows of the batches it names (a
	// discarded timeline's), as if they were not stored: they count
	// against no limit.
	Hide func(batch uint64) bool `json:"-"`
}

// QueueSample is what a queue's running attempts (its subtree's) held
// over a stretch of time: the leader samples every queue in use each
// minute, for the percentile algorithm (drover queue recommend).
//
// A sample with a Cluster is of one cluster: what a leaf queue's attempts
// held there, or, with no Queue, the cluster's capacity (its active
// workers' cores and memory, and in Jobs how many they are), for the
// reports of usage against capacity by cluster.
type QueueSample struct {
	Queue    string
	At       int64 // unix seconds: the stretch's start
	Seconds  int64
	CPUMilli int64
	Memory   int64
	Jobs     int64
	Cluster  string `json:",omitempty"`
}

// Whole reports whether the sample is of a queue in all clusters (the
// percentile algorithm's time units), not of one cluster.
func (s *QueueSample) Whole() bool { return s.Cluster == "" }

// PruneChunk bounds the queue samples one transaction of
// PruneQueueUsage deletes, so that pruning a year of samples (the first
// prune of a store that was never pruned) holds no long lock and no
// large transaction.
const PruneChunk = 5000

// Store keeps finished batches. Implementations are safe for concurrent
// use.
type Store interface {
	// Kind names the store ("mysql", "embedded").
	Kind() string
	// Stored says at which version and from which timeline a batch is
	// stored (zero: not stored).
	Stored(ctx context.Context, batch uint64) (Stored, error)
	// PutGroups and PutJobs store part of a batch being exported; a row
	// written again replaces the earlier one.
	PutGroups(ctx context.Context, batch uint64, groups []Group) error
	PutJobs(ctx context.Context, batch uint64, jobs []Job) error
	// PutBatch completes an export: the batch, its ledger rows and its
	// efficiency rows (which replace the batch's earlier ones) are
	// written together, unless the batch is stored at b.Version or later
	// from b.Timeline already; written says which.
	PutBatch(ctx context.Context, b Batch, ledger []LedgerRow, eff []EfficiencyRow) (written bool, err error)
	// Discard removes a batch: its jobs and groups, then its row, its
	// ledger rows and its efficiency rows (so a discard cut short leaves
	// the batch stored, and it is discarded again).
	Discard(ctx context.Context, batch uint64) error
	// MaxBatch is the highest batch ID stored (0: none).
	MaxBatch(ctx context.Context) (uint64, error)
	// Identity names this store: made once when it is created, it tells
	// a server whether the store it reaches is the one it exported to.
	Identity(ctx context.Context) (string, error)

	// Batch reads one batch.
	Batch(ctx context.Context, id uint64) (Batch, bool, error)
	// ListBatches returns up to PageSize batches matching q with IDs
	// below lastID (0: from the newest), newest first, of the billing
	// projects named (nil: every project). A page may hold fewer when
	// the filter skipped many; LastID says where to go on.
	ListBatches(ctx context.Context, q api.BatchQuery, projects []string, lastID uint64) (api.BatchList, error)
	// ListJobs returns up to PageSize jobs of a batch matching q with IDs
	// above lastID, in ID order, as ListBatches pages.
	ListJobs(ctx context.Context, batch uint64, q api.JobQuery, lastID uint32) (api.JobList, error)
	// Job reads one job.
	Job(ctx context.Context, batch uint64, id uint32) (api.Job, bool, error)
	// Ledger lists a billing project's ledger rows for days from..to
	// (inclusive), by day, then batch, then user.
	Ledger(ctx context.Context, project string, from, to int32) ([]LedgerRow, error)

	// Efficiency lists up to limit efficiency rows matching q, by day,
	// then batch, then the order they were put in; more says rows past
	// limit were left out.
	Efficiency(ctx context.Context, q EfficiencyQuery, limit int) (rows []EfficiencyRow, more bool, err error)

	// SLORuns lists up to limit SLO runs matching q, by completion time,
	// then batch; more says runs past limit were left out.
	SLORuns(ctx context.Context, q SLOQuery, limit int) (runs []SLORun, more bool, err error)

	// PutQueueUsage stores queue samples; a sample of a queue at an At
	// stored before is replaced.
	PutQueueUsage(ctx context.Context, samples []QueueSample) error
	// QueueUsage lists the samples with At in [from, to) (unix seconds),
	// by queue, then time.
	QueueUsage(ctx context.Context, from, to int64) ([]QueueSample, error)
	// PruneQueueUsage deletes the samples with At before before (unix
	// seconds), PruneChunk at a time, each chunk in a transaction of its
	// own, and says how many it deleted (those of the chunks committed
	// before an error too).
	PruneQueueUsage(ctx context.Context, before int64) (deleted int64, err error)

	// Ping checks that the store answers.
	Ping(ctx context.Context) error
	Close() error
}

// JobOf puts a job together from its group and its own part.
func JobOf(batch uint64, g *Group, j *Job) api.Job {
	out := g.Job
	out.BatchID, out.JobID = int64(batch), int64(j.ID)
	base := g.First
	if g.Base != 0 && g.Base < g.First {
		base = g.Base
	}
	out.ArrayIndex = int64(j.ID - base)
	if g.Array {
		out.Name = g.Job.Name + "[" + strconv.FormatUint(uint64(j.ID-base), 10) + "]"
	}
	out.State, out.ExitCode, out.Message = j.State, j.ExitCode, j.Message
	out.Attempts = j.Attempts
	if out.Attempts == nil {
		out.Attempts = []api.Attempt{}
	}
	return out
}

// SplitJob is JobOf's inverse: the job's own part (the group's part is
// what the caller keeps once per group).
func SplitJob(j *api.Job) Job {
	return Job{ID: uint32(j.JobID), State: j.State, ExitCode: j.ExitCode, Message: j.Message, Attempts: j.Attempts}
}

// GroupOf makes a group from one of its jobs: the job's shared fields.
func GroupOf(first, count uint32, array bool, base string, j *api.Job) Group {
	t := *j
	t.BatchID, t.JobID, t.ArrayIndex = 0, 0, 0
	t.Name = base
	t.State, t.ExitCode, t.Message, t.Attempts = "", nil, "", nil
	t.Waiting = nil
	return Group{First: first, Count: count, Array: array, Job: t}
}
