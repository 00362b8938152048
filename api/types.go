// Package api holds drover's wire types and the Go client library. The CLI,
// the worker and the tests all talk to servers through this package, so the
// JSON shapes defined here are the public HTTP API.
package api

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-sched/drover/money"
)

// Job states as they appear on the wire. The allowed transitions are
// Pending→Ready; Ready→{Creating, Running, Cancelled}; Creating→{Running,
// Cancelled}; Running→{Success, Failed, Error, Cancelled}; a lost, preempted
// or retried attempt returns a Running job to Ready with a new attempt.
const (
	JobPending   = "pending"
	JobReady     = "ready"
	JobCreating  = "creating"
	JobRunning   = "running"
	JobSuccess   = "success"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
	JobError     = "error"
)

// Batch states: a batch is complete when every committed job is in a final
// state, running otherwise.
const (
	BatchRunning  = "running"
	BatchComplete = "complete"
)

// IDRange is an inclusive range of job IDs inside one batch, written as a
// two-element JSON array [first, last]. Depending on a job array means
// depending on the range of IDs it occupies.
type IDRange [2]int64

// JobSpec describes one job, or a job array of Count jobs that share the spec
// and occupy Count consecutive IDs.
//
// IDs inside a submission are relative to its update: the update's first job
// is 1 (for the first update of a batch that is also the job's ID). Parents
// in the same update are named with ParentIDs/ParentRanges in that relative
// numbering; jobs committed by earlier updates are named by their batch job
// IDs with BatchParentIDs/BatchParentRanges. This lets a client write a whole
// DAG before the server has assigned its IDs.
type JobSpec struct {
	// JobID is the (first) ID of this entry, counted from 1 within the update.
	JobID int64 `json:"job_id"`
	// Name labels the job; array members are shown as name[i].
	Name string `json:"name,omitempty"`
	// Count makes this entry a job array of Count jobs.
	Count int64 `json:"count,omitempty"`
	// ParentIDs and ParentRanges name jobs of the same update that must end
	// before this one becomes Ready.
	ParentIDs    []int64   `json:"parent_ids,omitempty"`
	ParentRanges []IDRange `json:"parent_ranges,omitempty"`
	// BatchParentIDs and BatchParentRanges name jobs committed earlier in
	// the batch, by batch job ID.
	BatchParentIDs    []int64   `json:"batch_parent_ids,omitempty"`
	BatchParentRanges []IDRange `json:"batch_parent_ranges,omitempty"`
	// Command is the argv to execute; Command[0] is looked up in PATH. A
	// container job without one runs its image's entrypoint and cmd.
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	// CPU is in cores (fractions allowed); 0 means 1.
	CPU float64 `json:"cpu,omitempty"`
	// Memory is in bytes; 0 means 1 GiB per requested core.
	Memory int64 `json:"memory,omitempty"`
	// TimeoutSeconds kills a job that runs longer; 0 means no limit.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Retries is how many more attempts a job gets after it fails or errors.
	Retries int `json:"retries,omitempty"`
	// AlwaysRun runs the job even when a parent did not succeed.
	AlwaysRun  bool              `json:"always_run,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Regions restricts the job to workers in these regions (none: any);
	// Pool to workers of this pool (empty: any).
	Regions []string `json:"regions,omitempty"`
	Pool    string   `json:"pool,omitempty"`
	// GPUs each job needs, all of GPUType (a worker offers one type).
	GPUs    int    `json:"gpus,omitempty"`
	GPUType string `json:"gpu_type,omitempty"`
	// MachineType gives each job a machine of its own, of this type (a
	// launch config's machine type), made by the autoscaler for it and
	// deleted when it ends; the job is "creating" meanwhile.
	MachineType string `json:"machine_type,omitempty"`
	// Image runs the job in an OCI container of this image
	// ("registry/name:tag" or "registry/name@sha256:..."), with its
	// directory mounted at /io; empty: as a process of the worker's
	// machine, in its directory.
	Image string `json:"image,omitempty"`
	// Network is the job's network, a process's as a container's:
	// "bridge" (empty means it: a network namespace of its own, with
	// egress to the world through the worker's NAT but not to the
	// worker's machine, the servers or the cloud's metadata address),
	// "none" (a network namespace with only loopback) or "host" (the
	// machine's own network, from which a job reaches whatever listens on
	// its worker's machine: servers allow it to admins, and to the
	// members of billing projects an admin allows it).
	Network string `json:"network,omitempty"`
	// Inputs are copied into the job's directory before its command
	// runs; Outputs are copied out of it after the command succeeds.
	Inputs  []InputFile  `json:"inputs,omitempty"`
	Outputs []OutputFile `json:"outputs,omitempty"`
	// MaxProcesses bounds the processes and threads the job may have at
	// once (MinJobProcesses to MaxJobProcesses; 0: the worker's -max-processes,
	// 4096 by default), so a fork bomb stays inside the job.
	MaxProcesses int64 `json:"max_processes,omitempty"`
	// PreemptionGraceSeconds is how long a preempted attempt has between
	// SIGTERM and SIGKILL to checkpoint (0: DefaultPreemptionGrace, 30 s;
	// at most MaxPreemptionGraceSeconds).
	PreemptionGraceSeconds float64 `json:"preemption_grace_seconds,omitempty"`
	// Nomad marks a job translated from a Nomad job: its worker gives it
	// the runtime environment a Nomad client gives a task
	// (NOMAD_ALLOC_INDEX, NOMAD_TASK_DIR, ...: NomadVars) and expands
	// ${name} in its command and env as a Nomad client does
	// (InterpolateNomad).
	Nomad bool `json:"nomad,omitempty"`
	// Clusters restricts the job to workers in these clusters (none:
	// any), within its regions and its queue's home clusters.
	Clusters []string `json:"clusters,omitempty"`
	// WorkerLabels restricts the job to workers that carry every one of
	// these labels (drover worker -label KEY=VALUE) with its value (none:
	// any worker). The autoscaler's machines carry none.
	WorkerLabels map[string]string `json:"worker_labels,omitempty"`
	// MaxLostAttempts ends the job in error once this many of its
	// attempts were lost with their worker (1 to MaxLostAttempts; 0: the
	// server's -max-lost-attempts, 3 by default; -1: never, as Hail
	// Batch). Lost attempts do not count against Retries; preempted
	// ones count against nothing.
	MaxLostAttempts int `json:"max_lost_attempts,omitempty"`
	// OOMRetry runs an attempt that the out-of-memory killer ended again
	// with more memory (nil: such an attempt is the job's error).
	OOMRetry *OOMRetry `json:"oom_retry,omitempty"`
	// MaxSpotAttempts caps the attempts a job loses to spot reclaims
	// (1 to MaxSpotAttempts; 0: no cap): once the cloud reclaimed spot
	// machines (a spot launch config's, or a preemptible pool's workers)
	// under that many of its attempts, it runs on on-demand machines
	// only, and the autoscaler launches one for it if need be. Those
	// reclaims count against this cap, not MaxLostAttempts (a spot worker
	// that goes silent is a lost attempt as any other).
	MaxSpotAttempts int `json:"max_spot_attempts,omitempty"`
	// JobGroup is the path of the job group the job is in ("align",
	// "align/chr1"; empty: none but the batch). The group is declared in
	// the request's job_groups or was by an earlier one.
	JobGroup string `json:"job_group,omitempty"`
	// Gang makes the Count jobs of an array (2 to MaxGangSize) a gang:
	// all of them start in one scheduling round, on workers of one
	// cluster, or none does; a member that fails or is lost stops the
	// others, and the gang (its members that have not succeeded) starts
	// again as a whole; once a member ends without success for good, the
	// others are cancelled. GangUniformity narrows "one cluster" to one
	// pool ("pool") or one value of a worker label ("label:KEY"). A gang
	// takes no oom_retry, max_spot_attempts or machine_type, and one that
	// no cluster could ever hold is refused at submit.
	Gang           bool   `json:"gang,omitempty"`
	GangUniformity string `json:"gang_uniformity,omitempty"`
}

// MaxGangSize bounds a gang's members.
const MaxGangSize = 4096

// JobGroupSpec declares a job group of a batch, as Hail's job groups: a
// named set of the batch's jobs, nested under the batch by its path (its
// parents' names, then its own, joined by "/": each name 1 to
// MaxJobGroupSegment letters, digits, '-', '_' or '.'; at most
// MaxJobGroupDepth deep). A group counts its subgroups' jobs as its own,
// and has its own status, cost, cancel (POST
// /api/v1/batches/{id}/job-groups/{group}/cancel), completion callback
// and cancel_after_n_failures. A path the batch has already is that
// group, whose settings, if given again, must be the same; a parent is
// declared before its children, in this request or an earlier one.
type JobGroupSpec struct {
	Path       string            `json:"path"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Callback is a URL the leader POSTs the group (as GET
	// /api/v1/batches/{id}/job-groups/{group} answers it) to each time
	// it completes: as the batch's callback, under -callback-allow.
	Callback string `json:"callback,omitempty"`
	// CancelAfterNFailures cancels the group (and the groups below it)
	// once this many of its jobs have failed (Failed or Error, after
	// their retries); 0: never.
	CancelAfterNFailures int64 `json:"cancel_after_n_failures,omitempty"`
	// Gang makes the group's jobs (and those of the groups below it) a
	// gang, as JobSpec.Gang makes an array's: they start together, on
	// workers of one cluster (GangUniformity: and one pool or label
	// value), or none does. They come in the request that declares the
	// group, with consecutive job IDs, 2 to MaxGangSize of them, of one
	// size and placement (ValidateGangGroups).
	Gang           bool   `json:"gang,omitempty"`
	GangUniformity string `json:"gang_uniformity,omitempty"`
}

// JobGroup is a job group's status (GET /api/v1/batches/{id}/job-groups).
// Its counts include the jobs of the groups below it.
type JobGroup struct {
	BatchID int64 `json:"batch_id"`
	// ID numbers the batch's groups from 1 in the order they were made;
	// ParentID is the group it is in (0: the batch).
	ID         int64             `json:"id"`
	ParentID   int64             `json:"parent_id,omitempty"`
	Path       string            `json:"path"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// State is BatchRunning or BatchComplete, as a batch's.
	State     string `json:"state"`
	Cancelled bool   `json:"cancelled"`
	// CancelReason says who or what cancelled it (or the group above it,
	// or its batch).
	CancelReason         string       `json:"cancel_reason,omitempty"`
	CancelAfterNFailures int64        `json:"cancel_after_n_failures,omitempty"`
	Callback             string       `json:"callback,omitempty"`
	CallbackResult       string       `json:"callback_result,omitempty"`
	NJobs                int64        `json:"n_jobs"`
	NPending             int64        `json:"n_pending"`
	NReady               int64        `json:"n_ready"`
	NRunning             int64        `json:"n_running"`
	NCompleted           int64        `json:"n_completed"`
	NSucceeded           int64        `json:"n_succeeded"`
	NFailed              int64        `json:"n_failed"`
	NCancelled           int64        `json:"n_cancelled"`
	NError               int64        `json:"n_error"`
	TimeCompleted        *time.Time   `json:"time_completed,omitempty"`
	Cost                 money.Amount `json:"cost"`
	// Gang: its jobs start together (JobGroupSpec.Gang).
	Gang           bool   `json:"gang,omitempty"`
	GangUniformity string `json:"gang_uniformity,omitempty"`
}

// JobGroupList is a batch's job groups, parents before their children.
type JobGroupList struct {
	JobGroups []JobGroup `json:"job_groups"`
}

// JobGroupCancelResponse says what cancelling a job group did.
type JobGroupCancelResponse struct {
	// AlreadyCancelled: it was, and nothing changed.
	AlreadyCancelled bool `json:"already_cancelled,omitempty"`
	// Groups cancelled now (it and those below it), jobs cancelled at
	// once, and running jobs whose workers are told to kill them.
	Groups    int64 `json:"groups"`
	Cancelled int64 `json:"cancelled"`
	Running   int64 `json:"running"`
}

// OOMRetry retries a job killed for running out of memory with its memory
// times Factor (MinOOMFactor to MaxOOMFactor), up to MaxMemory bytes, as
// long as that is more than the attempt had. Such retries count against
// neither Retries nor MaxLostAttempts: what bounds them is MaxMemory.
type OOMRetry struct {
	Factor    float64 `json:"factor"`
	MaxMemory int64   `json:"max_memory"`
}

// Network modes of a job. NetworkBridge is the default: the wire and the
// state write it as the empty string.
const (
	NetworkBridge = "bridge"
	NetworkNone   = "none"
	NetworkHost   = "host"
)

// InputFile is an object copied into a job's directory before its command
// runs. Source is a URL: gs://bucket/key, s3://bucket/key or
// file:///dir/name (file URLs only under directories the worker's
// operator allows). Path is where the job finds it: relative to the job's
// directory, or under /io, which is where a container sees that directory.
// $DROVER_INDEX and the job's other variables are expanded in both, so
// each member of an array can read a file of its own.
type InputFile struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Path   string `json:"path"`
}

// OutputFile is a file of the job's directory copied to Destination (a
// URL, as InputFile's Source) after the command succeeds.
type OutputFile struct {
	Name        string `json:"name"`
	Path        string `json:"path"`
	Destination string `json:"destination"`
}

// Usage is what an attempt used, as its worker measured it: CPU time,
// the peak of its memory, the bytes of its input and output files, and
// the time spent getting its image and copying files.
type Usage struct {
	CPUSeconds    float64 `json:"cpu_seconds"`
	PeakMemory    int64   `json:"peak_memory"`
	BytesIn       int64   `json:"bytes_in"`
	BytesOut      int64   `json:"bytes_out"`
	ImageSeconds  float64 `json:"image_seconds,omitempty"`
	InputSeconds  float64 `json:"input_seconds,omitempty"`
	OutputSeconds float64 `json:"output_seconds,omitempty"`
	// Memory is the memory charged at the sample (a usage event's), page
	// cache included.
	Memory int64 `json:"memory,omitempty"`
}

// AttemptUsage is an attempt's usage over time
// (GET /api/v1/batches/{id}/jobs/{job}/usage): the samples its worker
// reported (about one a minute while it runs, and its last at its end),
// as kept in the memory of the server that answers (since it started;
// the latest 64 an attempt, thinned evenly over a longer run).
type AttemptUsage struct {
	Attempt int           `json:"attempt"`
	Samples []UsageSample `json:"samples"`
}

// UsageSample is one usage sample: the CPU time used so far, the memory
// charged then and the peak so far.
type UsageSample struct {
	Time       time.Time `json:"time"`
	CPUSeconds float64   `json:"cpu_seconds"`
	Memory     int64     `json:"memory"`
	PeakMemory int64     `json:"peak_memory"`
}

// NumJobs is the number of job IDs the entry occupies.
func (s *JobSpec) NumJobs() int64 {
	if s.Count <= 0 {
		return 1
	}
	return s.Count
}

// CreateBatchRequest creates a batch. With Jobs set, the batch and all its
// jobs are created and committed in one call (the fast path). With NJobs set,
// an update reserving NJobs IDs is opened; the client then posts bunches of
// jobs and commits the update.
type CreateBatchRequest struct {
	Name           string            `json:"name,omitempty"`
	BillingProject string            `json:"billing_project"`
	Attributes     map[string]string `json:"attributes,omitempty"`
	// IdempotencyKey makes retries safe: a second create with the same key by
	// the same user returns the first batch instead of making another.
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Jobs           []JobSpec `json:"jobs,omitempty"`
	NJobs          int64     `json:"n_jobs,omitempty"`
	// CancelAfterNFailures cancels the batch once this many of its jobs
	// have failed (ended Failed or Error, after their retries), as Hail's
	// option of the name; 0: never.
	CancelAfterNFailures int64 `json:"cancel_after_n_failures,omitempty"`
	// Callback is a URL the leader POSTs the batch (as GET
	// /api/v1/batches/ID answers it) to once it completes, retried with
	// backoff until the receiver answers 2xx; it must lie under one of
	// the destinations the servers' admins allow (-callback-allow).
	Callback string `json:"callback,omitempty"`
	// Queue is the leaf queue the batch runs in (absent: its billing
	// project's default); its project must be allowed to use it.
	// Priority orders its jobs within the queue: higher first (between
	// -1,000,000 and 1,000,000).
	Queue    string `json:"queue,omitempty"`
	Priority int64  `json:"priority,omitempty"`
	// SLOSeconds is the batch's runtime target (complete within it of
	// its creation) and Deadline the time it must complete by (absent:
	// none); drover queue slo reports how often batches meet them.
	SLOSeconds float64    `json:"slo_seconds,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	// JobGroups declares the job groups its jobs name (JobSpec.JobGroup),
	// parents first; at most MaxJobGroupsPerRequest.
	JobGroups []JobGroupSpec `json:"job_groups,omitempty"`
}

// CreateUpdateRequest adds jobs to an existing batch: either inline (Jobs,
// committed at once) or by reserving NJobs IDs for bunches.
type CreateUpdateRequest struct {
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	Jobs           []JobSpec `json:"jobs,omitempty"`
	NJobs          int64     `json:"n_jobs,omitempty"`
	// JobGroups: see CreateBatchRequest (with NJobs, groups the bunches'
	// jobs may name).
	JobGroups []JobGroupSpec `json:"job_groups,omitempty"`
}

// UpdateResponse names the update and the block of job IDs it reserved.
type UpdateResponse struct {
	BatchID    int64 `json:"batch_id"`
	UpdateID   int64 `json:"update_id"`
	StartJobID int64 `json:"start_job_id"`
	NJobs      int64 `json:"n_jobs"`
	Committed  bool  `json:"committed"`
}

// CreateBatchResponse is the new batch plus the update opened or committed
// with it (UpdateID is 0 when the batch was created empty).
type CreateBatchResponse struct {
	Batch
	UpdateID   int64 `json:"update_id,omitempty"`
	StartJobID int64 `json:"start_job_id,omitempty"`
}

// AddJobsRequest is one bunch of jobs for an open update.
type AddJobsRequest struct {
	Jobs []JobSpec `json:"jobs"`
	// JobGroups: see CreateBatchRequest.
	JobGroups []JobGroupSpec `json:"job_groups,omitempty"`
}

// Batch is a batch's status.
type Batch struct {
	ID             int64             `json:"id"`
	Name           string            `json:"name,omitempty"`
	User           string            `json:"user"`
	BillingProject string            `json:"billing_project"`
	Attributes     map[string]string `json:"attributes,omitempty"`
	State          string            `json:"state"`
	Cancelled      bool              `json:"cancelled"`
	// CancelReason says why a cancelled batch was (who cancelled it, or
	// which limit did).
	CancelReason string `json:"cancel_reason,omitempty"`
	// CancelAfterNFailures and Callback: see CreateBatchRequest.
	CancelAfterNFailures int64  `json:"cancel_after_n_failures,omitempty"`
	Callback             string `json:"callback,omitempty"`
	// Queue is the leaf queue its jobs run in now (empty: none), Priority
	// its priority there.
	Queue    string `json:"queue,omitempty"`
	Priority int64  `json:"priority,omitempty"`
	// SLOSeconds and Deadline: see CreateBatchRequest; SLOMet, once it is
	// complete, whether it met both.
	SLOSeconds float64    `json:"slo_seconds,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	SLOMet     *bool      `json:"slo_met,omitempty"`
	// CallbackResult says how the last report of the batch's completion
	// to its callback went ("HTTP 204", or why it was given up).
	CallbackResult string     `json:"callback_result,omitempty"`
	NJobs          int64      `json:"n_jobs"`
	NPending       int64      `json:"n_pending"`
	NReady         int64      `json:"n_ready"`
	NRunning       int64      `json:"n_running"`
	NCompleted     int64      `json:"n_completed"`
	NSucceeded     int64      `json:"n_succeeded"`
	NFailed        int64      `json:"n_failed"`
	NCancelled     int64      `json:"n_cancelled"`
	NError         int64      `json:"n_error"`
	NUpdates       int64      `json:"n_updates"`
	TimeCreated    time.Time  `json:"time_created"`
	TimeCompleted  *time.Time `json:"time_completed,omitempty"`
	// Cost in dollars: its ended attempts, and its running ones up to now.
	Cost money.Amount `json:"cost"`
	// Waiting says why Ready jobs of the batch were not placed in the
	// leader's last scheduling round, one entry per stretch of jobs. Only
	// consistent reads (answered by the leader) carry it.
	Waiting []Waiting `json:"waiting,omitempty"`
	// WaitingSummary adds Waiting up by reason, the reason holding the
	// most jobs first, each with the message of its first stretch.
	WaitingSummary []WaitingCount `json:"waiting_summary,omitempty"`
	// Actions are what the caller may do with the batch now, by the same
	// rules the endpoints apply (a read of one batch says them), while it
	// runs: "cancel" (a manager of its project, its owner or an admin),
	// "update" (its owner or an admin: add jobs).
	Actions []string `json:"actions,omitempty"`
}

// WorkflowAttribute is the batch attribute that names its workflow: the
// batches of one billing project with one workflow name are the runs
// whose SLO success drover queue slo reports (Monarch's workflow).
const WorkflowAttribute = "workflow"

// Workflow is the workflow a batch is a run of: its workflow attribute,
// or else its name.
func Workflow(attributes map[string]string, name string) string {
	if w := attributes[WorkflowAttribute]; w != "" {
		return w
	}
	return name
}

// Batch actions (Batch.Actions).
const (
	ActionCancel = "cancel"
	ActionUpdate = "update"
	// ActionRetry: the caller may run its failed jobs again (while the
	// servers hold the batch in memory).
	ActionRetry = "retry"
)

// Can reports whether Actions holds the action.
func (b *Batch) Can(action string) bool { return slices.Contains(b.Actions, action) }

// WaitingCount is how many of a batch's jobs wait for one reason.
type WaitingCount struct {
	Reason  string `json:"reason"`
	Jobs    int64  `json:"jobs"`
	Message string `json:"message"`
}

// SummarizeWaiting adds stretches up by reason, most jobs first (ties by
// reason), keeping each reason's first message.
func SummarizeWaiting(ws []Waiting) []WaitingCount {
	var out []WaitingCount
	at := map[string]int{}
	for _, w := range ws {
		i, ok := at[w.Reason]
		if !ok {
			i = len(out)
			at[w.Reason] = i
			out = append(out, WaitingCount{Reason: w.Reason, Message: w.Message})
		}
		out[i].Jobs += w.Count
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Jobs != out[b].Jobs {
			return out[a].Jobs > out[b].Jobs
		}
		return out[a].Reason < out[b].Reason
	})
	return out
}

// Waiting is a stretch of a batch's Ready jobs that the last scheduling
// round could place nowhere, and why: Reason is the code of the check that
// rejected the most workers (cpu_capacity, memory_capacity, cpu_exhausted,
// memory_exhausted, no_workers; left_for_larger: the idle workers large
// enough are at least twice the size of the machine the autoscaler would
// launch for it, and are left to larger jobs; gang_room: a gang member, no
// cluster has room for the whole gang; held_for_gang: the workers with
// room for it have it only in what is held for a gang first in line),
// Message says it for a person.
type Waiting struct {
	FirstJob int64  `json:"first_job"`
	Count    int64  `json:"count"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
}

// Complete reports whether every job of the batch is in a final state.
func (b *Batch) Complete() bool { return b.State == BatchComplete }

// BatchList is one page of batches, newest first. LastID, when non-zero, is
// passed back as last_id to fetch the next page.
type BatchList struct {
	Batches []Batch `json:"batches"`
	LastID  int64   `json:"last_id,omitempty"`
}

// Attempt is one execution of a job on an instance.
type Attempt struct {
	Attempt   int        `json:"attempt"`
	Instance  string     `json:"instance,omitempty"`
	Cluster   string     `json:"cluster,omitempty"`
	Region    string     `json:"region,omitempty"`
	State     string     `json:"state"`
	ExitCode  *int       `json:"exit_code,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
	EndTime   *time.Time `json:"end_time,omitempty"`
	Message   string     `json:"message,omitempty"`
	// Usage is the last the worker reported: while the attempt runs, a
	// sample at most a minute old; once it ended, the total.
	Usage *Usage `json:"usage,omitempty"`
	// Cost in dollars: what the attempt reserves (cores, memory, GPUs, a
	// service fee per core), priced per hour at the rates in force when it
	// started (PricePerHour, itemized in CostLines), from its start to its
	// end, or to now while it runs. Absent before it started.
	Cost         *money.Amount `json:"cost,omitempty"`
	PricePerHour money.Rate    `json:"price_per_hour,omitempty"`
	CostLines    []CostLine    `json:"cost_lines,omitempty"`
	// Memory is the memory the attempt was given, in bytes (an attempt
	// retried after running out of memory is given more: see
	// JobSpec.OOMRetry).
	Memory int64 `json:"memory,omitempty"`
}

// Job is a job's status.
type Job struct {
	BatchID int64  `json:"batch_id"`
	JobID   int64  `json:"job_id"`
	Name    string `json:"name"`
	// ArrayIndex is the job's position in its array (DROVER_INDEX).
	ArrayIndex int64             `json:"array_index"`
	State      string            `json:"state"`
	ExitCode   *int              `json:"exit_code"`
	Message    string            `json:"message,omitempty"`
	Attempts   []Attempt         `json:"attempts"`
	Command    []string          `json:"command"`
	CPU        float64           `json:"cpu"`
	Memory     int64             `json:"memory"`
	Timeout    float64           `json:"timeout_seconds,omitempty"`
	Retries    int               `json:"retries,omitempty"`
	AlwaysRun  bool              `json:"always_run,omitempty"`
	Parents    []IDRange         `json:"parents,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Regions    []string          `json:"regions,omitempty"`
	Pool       string            `json:"pool,omitempty"`
	Clusters   []string          `json:"clusters,omitempty"`
	// WorkerLabels the job's workers must carry.
	WorkerLabels map[string]string `json:"worker_labels,omitempty"`
	GPUs         int               `json:"gpus,omitempty"`
	GPUType      string            `json:"gpu_type,omitempty"`
	// MachineType: the job runs on a machine of its own (see JobSpec).
	MachineType string `json:"machine_type,omitempty"`
	// Image, Network, Inputs and Outputs: see JobSpec.
	Image   string       `json:"image,omitempty"`
	Network string       `json:"network,omitempty"`
	Inputs  []InputFile  `json:"inputs,omitempty"`
	Outputs []OutputFile `json:"outputs,omitempty"`
	// MaxProcesses: see JobSpec (0: the worker's default).
	MaxProcesses           int64   `json:"max_processes,omitempty"`
	PreemptionGraceSeconds float64 `json:"preemption_grace_seconds,omitempty"`
	// Nomad: see JobSpec.
	Nomad bool `json:"nomad,omitempty"`
	// Waiting says why a Ready job was not placed in the leader's last
	// scheduling round (consistent reads only).
	Waiting *Waiting `json:"waiting,omitempty"`
	// MaxLostAttempts: see JobSpec (0: the server's default).
	MaxLostAttempts int `json:"max_lost_attempts,omitempty"`
	// OOMRetry: see JobSpec. Memory is what the next attempt is given;
	// each attempt says what it had.
	OOMRetry *OOMRetry `json:"oom_retry,omitempty"`
	// MaxSpotAttempts: see JobSpec; OnDemandOnly: spot took that many
	// of its attempts, and it runs on on-demand machines only.
	MaxSpotAttempts int  `json:"max_spot_attempts,omitempty"`
	OnDemandOnly    bool `json:"on_demand_only,omitempty"`
	// JobGroup is the path of the job group it is in (empty: none).
	JobGroup string `json:"job_group,omitempty"`
	// Gang is the members of the gang the job is in (0: none; see
	// JobSpec.Gang), GangUniformity what they share.
	Gang           int64  `json:"gang,omitempty"`
	GangUniformity string `json:"gang_uniformity,omitempty"`
}

// RetryRequest asks a batch to run final jobs again: those in States
// (JobFailed, JobError, JobCancelled; none: failed and error) among
// JobIDs and JobRanges (none: any), with every job cancelled because one
// of them did not succeed. They run as new attempts of the same jobs,
// their earlier attempts kept; a cancelled batch is cancelled no more.
type RetryRequest struct {
	States    []string  `json:"states,omitempty"`
	JobIDs    []int64   `json:"job_ids,omitempty"`
	JobRanges []IDRange `json:"job_ranges,omitempty"`
}

// MaxRetryRanges bounds a retry's job IDs and ranges together.
const MaxRetryRanges = 10_000

// StatesOrDefault is States, or failed and error when it names none.
func (r *RetryRequest) StatesOrDefault() []string {
	if len(r.States) == 0 {
		return []string{JobFailed, JobError}
	}
	return r.States
}

// Validate checks the states and the bounds.
func (r *RetryRequest) Validate() error {
	if n := len(r.JobIDs) + len(r.JobRanges); n > MaxRetryRanges {
		return fmt.Errorf("a retry names %d job IDs and ranges; at most %d: name consecutive jobs as ranges", n, MaxRetryRanges)
	}
	for _, s := range r.States {
		if s != JobFailed && s != JobError && s != JobCancelled {
			return fmt.Errorf("state %q cannot be retried: name failed, error or cancelled", s)
		}
	}
	return validRanges(r.JobIDs, r.JobRanges)
}

// RetryResponse counts the jobs that run again.
type RetryResponse struct {
	BatchID int64 `json:"batch_id"`
	Retried int64 `json:"retried"`
}

// Efficiency is what a batch's jobs asked for against what they used,
// per group of jobs (a job block or array: jobs of one name), from their
// ended attempts that reported usage, with a suggested size.
type Efficiency struct {
	BatchID int64             `json:"batch_id"`
	Groups  []EfficiencyGroup `json:"groups"`
	Total   EfficiencyGroup   `json:"total"`
	// JobGroups sum the groups of each job group and of the job groups
	// below it (Name is its path), parents first (none: the batch has
	// no job groups).
	JobGroups []EfficiencyGroup `json:"job_groups,omitempty"`
	// Jobs counts the jobs read; Partial says the batch has more than a
	// report reads (MaxEfficiencyJobs, its first), which it leaves out.
	Jobs    int64 `json:"jobs"`
	Partial bool  `json:"partial,omitempty"`
}

// MaxEfficiencyJobs bounds the jobs one efficiency report reads.
const MaxEfficiencyJobs = 200_000

// EfficiencyGroup measures one group's attempts. CPU and Memory are the
// most an attempt asked for; the efficiencies are used over reserved
// (CPU time over cores × wall time; peak memory over memory, weighted by
// wall time). SuggestedCPU covers CoresP95 (the 95th percentile of an
// attempt's mean cores used) and SuggestedMemory PeakMemoryP95, each with
// 20% to spare, rounded up to quarters of a core (whole powers of two
// above one) and powers of two MiB (256 MiB at least), and never more
// than the group asked for (a job cannot use more than its limits, so
// using them all says nothing of needing more); SuggestedCost is
// what the same attempts would have cost asking for them, Savings what
// that saves.
type EfficiencyGroup struct {
	Name              string       `json:"name"`
	Attempts          int64        `json:"attempts"`
	CPU               float64      `json:"cpu"`
	Memory            int64        `json:"memory"`
	CoreHoursReserved float64      `json:"core_hours_reserved"`
	CoreHoursUsed     float64      `json:"core_hours_used"`
	WastedCoreHours   float64      `json:"wasted_core_hours"`
	CPUEfficiency     float64      `json:"cpu_efficiency"`
	GiBHoursReserved  float64      `json:"gib_hours_reserved"`
	GiBHoursPeak      float64      `json:"gib_hours_peak"`
	MemoryEfficiency  float64      `json:"memory_efficiency"`
	CoresP95          float64      `json:"cores_p95"`
	PeakMemoryP95     int64        `json:"peak_memory_p95"`
	SuggestedCPU      float64      `json:"suggested_cpu"`
	SuggestedMemory   int64        `json:"suggested_memory"`
	Cost              money.Amount `json:"cost"`
	SuggestedCost     money.Amount `json:"suggested_cost"`
	Savings           money.Amount `json:"savings"`
	// JobGroup is the job group its jobs are in (empty: none).
	JobGroup string `json:"job_group,omitempty"`
	// BillingProject and User own the batches of a group over a period
	// (EfficiencyPeriod.Groups).
	BillingProject string `json:"billing_project,omitempty"`
	User           string `json:"user,omitempty"`
}

// EfficiencyPeriod is what the jobs of a billing project's batches, or of
// a user's, asked for against what they used over days From..To (UTC,
// inclusive): their attempts that ended on those days, in batches that
// finished and were stored in the history store (within about a minute
// of finishing; a batch still running counts once it finishes). Groups
// are a user's jobs of one name (and job group) across batches, most
// Savings first; Users and Projects sum them by user and by billing
// project. Percentiles come from histograms, at most 4.4% above the
// exact ones.
type EfficiencyPeriod struct {
	BillingProject string            `json:"billing_project,omitempty"`
	User           string            `json:"user,omitempty"`
	From           string            `json:"from"`
	To             string            `json:"to"`
	Batches        int64             `json:"batches"`
	Groups         []EfficiencyGroup `json:"groups"`
	Users          []EfficiencyGroup `json:"users,omitempty"`
	Projects       []EfficiencyGroup `json:"projects,omitempty"`
	Total          EfficiencyGroup   `json:"total"`
	// Partial says the period holds more than a report reads
	// (MaxEfficiencySummaries, the oldest first), and up to which day it
	// counted (a history store that fails answers 503 instead).
	Partial string `json:"partial,omitempty"`
}

// MaxEfficiencySummaries bounds the summaries (one per group of jobs of a
// batch and day) one report over a period reads.
const MaxEfficiencySummaries = 200_000

// JobRestart answers a job restart: the attempt told to stop (it ends
// preempted, and the job runs again).
type JobRestart struct {
	BatchID  int64 `json:"batch_id"`
	JobID    int64 `json:"job_id"`
	Attempt  int   `json:"attempt"`
	Stopping bool  `json:"stopping"`
}

// Stage is one stage of a batch's DAG: consecutive jobs of one name (a
// job block of a jobspec, an array), the jobs they wait on and the
// stages those are in.
type Stage struct {
	Name     string    `json:"name"`
	FirstJob int64     `json:"first_job"`
	NJobs    int64     `json:"n_jobs"`
	Parents  []IDRange `json:"parents,omitempty"`
	// DependsOn names the stages (by index in the list) holding the
	// jobs it waits on.
	DependsOn []int `json:"depends_on,omitempty"`
}

// BatchStages are a batch's first stages; More says the batch has more
// than one read returns (a read looks at a bounded number of its job
// entries).
type BatchStages struct {
	Stages []Stage `json:"stages"`
	More   bool    `json:"more,omitempty"`
}

// JobList is one page of a batch's jobs in ID order.
type JobList struct {
	Jobs   []Job `json:"jobs"`
	LastID int64 `json:"last_id,omitempty"`
	// Batch is the batch's status read with the page, under the same
	// read of the state, so its counts and the jobs' states agree
	// (absent for a batch read from the history store, which no longer
	// changes).
	Batch *Batch `json:"batch,omitempty"`
	// JobGroups are the batch's job groups read with the page (the first
	// 200, parents first: GET /api/v1/batches/{id}/job-groups lists them
	// all; absent when it has none, or is read from the history store).
	JobGroups []JobGroup `json:"job_groups,omitempty"`
}

// Change topics (GET /api/v1/changes): what changed.
const (
	ChangeBatch   = "Batch"   // key: the batch ID
	ChangeJob     = "Job"     // key: "batch/job"; the filter "Job:12/*" takes every job of batch 12
	ChangeQueue   = "Queue"   // key "*"
	ChangeMachine = "Machine" // key "*"
	ChangeCluster = "Cluster" // key: the cluster
	ChangeWorker  = "Worker"  // key "*"
)

// Change is one change of the change stream: the Raft index of the entry
// that made it, the topic and the key of what changed.
type Change struct {
	Index uint64 `json:"index"`
	Topic string `json:"topic"`
	Key   string `json:"key"`
}

// ChangeFrame is one line of GET /api/v1/changes: the changes after the
// index the stream resumed from (or the last frame's), up to Index. A
// frame without changes is a heartbeat, or the stream's first frame.
// Reload: the server no longer holds every change after the index asked
// for (it keeps the latest 65,536, and none from before it started or
// installed a snapshot): read afresh what you show, and resume from
// Index.
type ChangeFrame struct {
	Index   uint64   `json:"index"`
	Reload  bool     `json:"reload,omitempty"`
	Changes []Change `json:"changes,omitempty"`
}

// MaxChangeTopics bounds the topic terms of one change stream, and
// MaxChangeKey the length of a term.
const (
	MaxChangeTopics = 16
	MaxChangeKey    = 64
)

// User is a drover account. The token is only ever returned on creation.
type User struct {
	Name        string    `json:"name"`
	Admin       bool      `json:"admin"`
	Token       string    `json:"token,omitempty"`
	TimeCreated time.Time `json:"time_created"`
}

// CreateUserRequest creates a user (admin only).
type CreateUserRequest struct {
	Name  string `json:"name"`
	Admin bool   `json:"admin,omitempty"`
	// Token is the user's token, made by the client (64 hex digits) so a
	// retried request is recognised and answered with the same user;
	// empty: the server makes one. Client.CreateUser fills it in.
	Token string `json:"token,omitempty"`
}

// RotateTokenRequest gives a user a new token; the old one stops working.
// Token is made by the client, as in CreateUserRequest.
type RotateTokenRequest struct {
	Token string `json:"token,omitempty"`
}

// BillingProject groups users who may see each other's batches and share a
// bill.
type BillingProject struct {
	Name string `json:"name"`
	// Members lists everyone with a role in the project; Managers and
	// Viewers those whose role is not "member".
	Members    []string     `json:"members"`
	Managers   []string     `json:"managers,omitempty"`
	Viewers    []string     `json:"viewers,omitempty"`
	SpendLimit money.Amount `json:"spend_limit,omitempty"` // dollars; 0: none
	// Cost in dollars: every attempt of its batches, running ones up to now.
	Cost        money.Amount `json:"cost"`
	TimeCreated time.Time    `json:"time_created"`
	// LogQuota bounds, in bytes, the job logs each server keeps of the
	// project's batches (0: none; an admin sets it).
	LogQuota int64 `json:"log_quota,omitempty"`
	// Storage are the prefixes its jobs' files may name (never their
	// credentials).
	Storage []StoragePrefix `json:"storage,omitempty"`
	// AllowHostNetwork lets its members run jobs on network "host"
	// (admins always may).
	AllowHostNetwork bool `json:"allow_host_network,omitempty"`
	// MaxPriority is the highest priority its batches may ask (0, the
	// default, to 1,000,000; its managers set it); the queue's own
	// max_priority holds too, and admins' batches are held to neither.
	MaxPriority int64 `json:"max_priority,omitempty"`
}

// MaxPriorityRequest sets a billing project's max_priority.
type MaxPriorityRequest struct {
	MaxPriority int64 `json:"max_priority"`
}

// LogQuotaRequest sets a billing project's log quota in bytes (0: none).
type LogQuotaRequest struct {
	Bytes int64 `json:"bytes"`
}

// BillingProjectSettings changes an admin's settings of a billing
// project; a field left out stays as it is.
type BillingProjectSettings struct {
	// AllowHostNetwork: may its members submit jobs on network "host"
	// (the machine's own, from which a job reaches what listens there)?
	AllowHostNetwork *bool `json:"allow_host_network,omitempty"`
}

// Token describes a user's token (never the token itself, except in the
// answer to the request that made it).
type Token struct {
	Accessor    string     `json:"accessor"` // its public ID: revoke and rotate by it
	User        string     `json:"user"`
	Name        string     `json:"name"`
	Token       string     `json:"token,omitempty"`
	TimeCreated time.Time  `json:"time_created"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"` // absent: never
	Expired     bool       `json:"expired,omitempty"`
}

// CreateTokenRequest makes a token for User (yourself when empty; another
// user: admins only), named Name, valid for TTL (a Go duration, default
// 720h; "0" never expires, admins only).
type CreateTokenRequest struct {
	User string `json:"user,omitempty"`
	Name string `json:"name"`
	TTL  string `json:"ttl,omitempty"`
	// Token is made by the client (64 hex digits) so a retry is
	// recognised; empty: the server makes one.
	Token string `json:"token,omitempty"`
}

// Rate is the price of one unit-hour of a resource from ValidFrom on.
type Rate struct {
	Resource     string     `json:"resource"`
	Version      int        `json:"version"`
	PricePerHour money.Rate `json:"price_per_hour"` // dollars per unit-hour
	ValidFrom    time.Time  `json:"valid_from"`
	InForce      bool       `json:"in_force"`
}

// SetRatesRequest adds rate versions (admins): each from valid_from (now
// when absent; never in the past).
type SetRatesRequest struct {
	Rates []NewRate `json:"rates"`
}

// NewRate is one rate of a SetRatesRequest.
type NewRate struct {
	Resource     string     `json:"resource"`
	PricePerHour money.Rate `json:"price_per_hour"`
	ValidFrom    *time.Time `json:"valid_from,omitempty"`
}

// CostRow is one line of a billing project's cost report: one UTC day,
// one user or one batch.
type CostRow struct {
	Day   string `json:"day,omitempty"`   // by day: 2026-11-24
	User  string `json:"user,omitempty"`  // by user, and a batch's owner by batch
	Batch int64  `json:"batch,omitempty"` // by batch
	// Cost is what the attempts that ended on the report's days cost (an
	// attempt counts on the UTC day it ended).
	Cost money.Amount `json:"cost"`
	// Running is what the attempts still running have cost up to now,
	// when the report's days include today (by day: on today's row).
	Running money.Amount `json:"running,omitempty"`
}

// Cost report groupings.
const (
	CostByDay   = "day"
	CostByUser  = "user"
	CostByBatch = "batch"
)

// ProjectCost is a billing project's cost report for the UTC days
// From..To, grouped By day, user or batch. Days come oldest first; users
// and batches most costly first (Cost + Running), at most the limit asked
// for, the rest summed in Omitted and OmittedCost.
type ProjectCost struct {
	Project string    `json:"project"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	By      string    `json:"by"`
	Rows    []CostRow `json:"rows"`
	// Total is what the attempts that ended on the report's days cost,
	// omitted rows included.
	Total       money.Amount `json:"total"`
	Omitted     int          `json:"omitted,omitempty"`
	OmittedCost money.Amount `json:"omitted_cost,omitempty"`
	// Running is what the project's running attempts have cost up to
	// now; Cost is all it has cost, running attempts up to now included.
	Running money.Amount `json:"running"`
	Cost    money.Amount `json:"cost"`
	// Partial says why batches that left memory are missing (by user
	// and by batch, while the history store does not answer).
	Partial string `json:"partial,omitempty"`
}

// CostLine is one resource's part of an attempt's price.
type CostLine struct {
	Resource     string     `json:"resource"`
	Rate         string     `json:"rate,omitempty"` // the rate that applied ("": none)
	Version      int        `json:"version,omitempty"`
	Units        float64    `json:"units"`
	PricePerHour money.Rate `json:"price_per_hour"`
}

// SpendLimitRequest sets a billing project's spend limit in dollars (0:
// none).
type SpendLimitRequest struct {
	Limit money.Amount `json:"limit"`
}

// AuditEntry is one mutating request in the audit log.
type AuditEntry struct {
	Time   time.Time `json:"time"`
	User   string    `json:"user"`            // "" when the token was not valid
	Token  string    `json:"token,omitempty"` // the token's accessor
	Method string    `json:"method"`
	Route  string    `json:"route"`
	Path   string    `json:"path"`
	Remote string    `json:"remote"`
	Status int       `json:"status"`
	// Message is the error a refused or failed request got.
	Message string `json:"message,omitempty"`
	// Count is how many requests the entry stands for: the requests of a
	// caller without a valid token are counted per address, route,
	// status and minute, in one entry.
	Count int `json:"count"`
}

// CreateBillingProjectRequest creates a billing project (admin only).
type CreateBillingProjectRequest struct {
	Name    string   `json:"name"`
	Members []string `json:"members,omitempty"`
}

// MemberRequest adds a user to a billing project.
type MemberRequest struct {
	User string `json:"user"`
	// Role is member (the default), manager or viewer.
	Role string `json:"role,omitempty"`
}

// LeaderStatus says which server leads the cluster.
type LeaderStatus struct {
	Leader     string `json:"leader"`
	LeaderID   string `json:"leader_id"`
	ServerID   string `json:"server_id"`
	IsLeader   bool   `json:"is_leader"`
	Term       uint64 `json:"term"`
	LastIndex  uint64 `json:"last_index"`
	AppliedIdx uint64 `json:"applied_index"`
	// Version is the server's drover version.
	Version string `json:"version,omitempty"`
	// History is how this server's history store is doing.
	History *HistoryStatus `json:"history,omitempty"`
}

// HistoryStatus is how a server's history store is doing: where finished
// batches go once they leave memory.
type HistoryStatus struct {
	Store string `json:"store"` // "mysql" or "embedded"
	Up    bool   `json:"up"`
	// Error and DownSince: the last failure, while the store fails.
	Error     string     `json:"error,omitempty"`
	DownSince *time.Time `json:"down_since,omitempty"`
	// WaitingBatches: complete batches not exported yet (the leader's
	// count; followers show 0).
	WaitingBatches int `json:"waiting_batches"`
	// What this server exported and removed from memory while it led.
	ExportedBatches  int64 `json:"exported_batches"`
	ExportedJobs     int64 `json:"exported_jobs"`
	ForgottenBatches int64 `json:"forgotten_batches"`
	// Note says why the exporter does not run, when it does not.
	Note string `json:"note,omitempty"`
}

// Instance is a worker machine as the control plane sees it.
type Instance struct {
	ID            int64      `json:"id"`
	Name          string     `json:"name"`
	NodeID        string     `json:"node_id,omitempty"`
	Active        bool       `json:"active"`
	CPU           float64    `json:"cpu"`
	Memory        int64      `json:"memory"`
	FreeCPU       float64    `json:"free_cpu"`
	FreeMemory    int64      `json:"free_memory"`
	Running       int        `json:"running"`
	TimeActivated time.Time  `json:"time_activated"`
	TimeRetired   *time.Time `json:"time_retired,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	Region        string     `json:"region,omitempty"`
	Cluster       string     `json:"cluster,omitempty"`
	Pool          string     `json:"pool,omitempty"`
	// Labels the worker carries (-label KEY=VALUE).
	Labels   map[string]string `json:"labels,omitempty"`
	GPUType  string            `json:"gpu_type,omitempty"`
	GPUs     int               `json:"gpus,omitempty"`
	FreeGPUs int               `json:"free_gpus,omitempty"`
	// Version is the drover version the worker said it runs ("": one
	// from before workers said).
	Version string `json:"version,omitempty"`
	// LastHeard is when the leader last heard from the worker (a sync
	// held open counts as now); absent when it has not since it became
	// leader, or the worker is retired.
	LastHeard *time.Time `json:"last_heard,omitempty"`
}

// ErrorResponse is the body of every non-2xx API response.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Worker protocol.

// ActivateRequest registers a worker with the control plane.
type ActivateRequest struct {
	// Name labels the machine; several workers may share it.
	Name string `json:"name"`
	// NodeID identifies the worker across restarts; the worker keeps it in
	// its data dir. Activating again with it retires the earlier
	// incarnation, which must be silent or proven to be this worker's by
	// PreviousToken: a second live worker with the same node ID is refused
	// with 409.
	NodeID string `json:"node_id,omitempty"`
	// PreviousToken is the instance token of this worker's last
	// activation, if it kept one.
	PreviousToken string  `json:"previous_token,omitempty"`
	CPU           float64 `json:"cpu"`
	Memory        int64   `json:"memory"`
	// Secret is the cluster's worker join secret: the credential of a
	// worker an operator starts. A worker on a machine the autoscaler
	// launched sends JoinToken instead.
	Secret string `json:"secret"`
	// Region, Cluster and Pool place the worker (empty: "default");
	// Labels are free-form.
	Region  string            `json:"region,omitempty"`
	Cluster string            `json:"cluster,omitempty"`
	Pool    string            `json:"pool,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// GPUs of one type the worker offers.
	GPUs    int    `json:"gpus,omitempty"`
	GPUType string `json:"gpu_type,omitempty"`
	// Token is the instance token the worker made for this activation (64
	// hex digits), so a retried activation finds the instance it made;
	// empty: the server makes one.
	Token string `json:"token,omitempty"`
	// Machine is the autoscaler's name for the machine the worker runs on
	// (given to it at launch); empty for a worker started by hand.
	Machine string `json:"machine,omitempty"`
	// JoinToken is the one-time token the autoscaler gave Machine at its
	// launch (64 hex digits): it joins that machine, once, within its
	// boot timeout. A restarted worker of the machine rejoins with
	// PreviousToken instead.
	JoinToken string `json:"join_token,omitempty"`
	// Version is the drover version the worker runs (drover version), so
	// a mixed fleet shows during an upgrade.
	Version string `json:"version,omitempty"`
}

// DeactivateRequest is a worker's goodbye. Preempted: its machine is
// going away (a spot notice, a shutdown), so the attempts it still holds
// run again elsewhere without counting as failures or lost attempts.
type DeactivateRequest struct {
	Preempted bool `json:"preempted,omitempty"`
}

// ActivateResponse carries the instance's identity and the token it uses for
// every later call.
type ActivateResponse struct {
	InstanceID int64  `json:"instance_id"`
	Token      string `json:"token"`
	// FenceAfterMillis is the worker's lease: a worker that has not
	// completed a sync for this long stops its attempts (they are
	// reported preempted if it reconnects), before the servers give
	// them up as lost and run them elsewhere (-lost-timeout).
	// FenceGraceMillis bounds how long a fenced job gets between SIGTERM
	// and SIGKILL. 0: the server sets no lease (an older server).
	FenceAfterMillis int64 `json:"fence_after_ms,omitempty"`
	FenceGraceMillis int64 `json:"fence_grace_ms,omitempty"`
}

// AttemptRef names one attempt of one job.
type AttemptRef struct {
	BatchID int64 `json:"batch_id"`
	JobID   int64 `json:"job_id"`
	Attempt int   `json:"attempt"`
}

func (r AttemptRef) String() string {
	return fmt.Sprintf("%d/%d#%d", r.BatchID, r.JobID, r.Attempt)
}

// Event kinds sent by workers. A usage event carries a running attempt's
// usage so far; a worker sends one at most once a minute per attempt.
const (
	EventStarted   = "started"
	EventCompleted = "completed"
	EventUsage     = "usage"
)

// Attempt outcomes reported by workers in completed events.
const (
	OutcomeSuccess   = "success"
	OutcomeFailed    = "failed"
	OutcomeError     = "error"
	OutcomeCancelled = "cancelled"
	// OutcomePreempted: the attempt was taken back (its cluster was
	// evacuated, its worker went away); the job runs again and the
	// preemption counts neither as a failure nor as a retry.
	OutcomePreempted = "preempted"
)

// AttemptEvent reports that an attempt started or completed. Events are keyed
// by attempt, so a worker may send the same event again after a failover.
type AttemptEvent struct {
	AttemptRef
	Kind      string    `json:"kind"`
	Outcome   string    `json:"outcome,omitempty"`
	ExitCode  int       `json:"exit_code,omitempty"`
	StartTime time.Time `json:"start_time"`
	EndTime   time.Time `json:"end_time,omitzero"`
	Message   string    `json:"message,omitempty"`
	// Usage so far (usage events) or in all (completed events); the
	// server checks it against the instance and the attempt's time.
	Usage *Usage `json:"usage,omitempty"`
	// OOM: the kernel's out-of-memory killer ended the attempt (completed
	// events that failed or errored only).
	OOM bool `json:"oom,omitempty"`
	// WorkerLeaving: the attempt was preempted because its worker is
	// going away with its machine (preempted events only): on a spot
	// machine, a reclaim, counted against the job's max_spot_attempts.
	WorkerLeaving bool `json:"worker_leaving,omitempty"`
}

// SyncRequest is a worker's periodic report: events to record and the
// attempts it currently holds (running, or finished with unacknowledged
// events). The server answers with work the worker does not hold yet and
// attempts it must kill.
type SyncRequest struct {
	Events []AttemptEvent `json:"events,omitempty"`
	Known  []AttemptRef   `json:"known,omitempty"`
	// Stopping are the known attempts the worker is stopping already
	// (told to, in their grace): the server does not tell it again.
	Stopping []AttemptRef `json:"stopping,omitempty"`
	// WaitMillis lets the server hold the request until there is something
	// to say, up to this long.
	WaitMillis int64 `json:"wait_millis,omitempty"`
}

// SyncResponse acknowledges the request's events (they are committed) and
// carries assignments and kills.
type SyncResponse struct {
	Acked   int          `json:"acked"`
	Assign  []Assignment `json:"assign,omitempty"`
	Kill    []AttemptRef `json:"kill,omitempty"`
	Retired bool         `json:"retired,omitempty"`
	// Preempt asks the worker to stop attempts for other queues' work:
	// SIGTERM, the attempt's preemption grace, then SIGKILL; the attempt
	// is reported preempted (or as it ended, if it ended first).
	Preempt []Preemption `json:"preempt,omitempty"`
}

// Preemption is one attempt a worker is asked to stop, and why.
type Preemption struct {
	AttemptRef
	Reason       string  `json:"reason"`
	GraceSeconds float64 `json:"grace_seconds"`
}

// Assignment tells a worker to run one attempt.
type Assignment struct {
	AttemptRef
	Name           string            `json:"name"`
	ArrayIndex     int64             `json:"array_index"`
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env,omitempty"`
	CPU            float64           `json:"cpu"`
	Memory         int64             `json:"memory"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
	// Image, Network, Inputs and Outputs: see JobSpec.
	Image   string       `json:"image,omitempty"`
	Network string       `json:"network,omitempty"`
	Inputs  []InputFile  `json:"inputs,omitempty"`
	Outputs []OutputFile `json:"outputs,omitempty"`
	// Storage are the billing project's storage prefixes under which the
	// inputs and outputs lie, with what reaches them: the worker touches
	// no URL that is under none of them.
	Storage []StorageGrant `json:"storage,omitempty"`
	// MaxProcesses: see JobSpec (0: the worker's default).
	MaxProcesses int64 `json:"max_processes,omitempty"`
	// PreemptionGraceSeconds: see JobSpec (the default filled in).
	PreemptionGraceSeconds float64 `json:"preemption_grace_seconds,omitempty"`
	// Nomad: see JobSpec.
	Nomad bool `json:"nomad,omitempty"`
}

// Peer is one server of the Raft configuration.
type Peer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	HTTP     string `json:"http,omitempty"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	Alive    bool   `json:"alive"`
	Reported string `json:"reported_by"`
	// Version is the server's drover version, and AppliedIndex the last
	// Raft entry it applied: the reporting server's own now, the others'
	// as their gossip last said (within a few seconds).
	Version      string `json:"version,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
}

// Peers is the Raft configuration as one server sees it.
type Peers struct {
	Servers      []Peer `json:"servers"`
	LeaderID     string `json:"leader_id"`
	Term         uint64 `json:"term"`
	LastIndex    uint64 `json:"last_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastContact  string `json:"last_contact"`
	// Decommissioned servers are kept out of the configuration.
	Decommissioned []DecommissionedServer `json:"decommissioned,omitempty"`
}

// RemovePeerRequest removes a server from the Raft configuration.
type RemovePeerRequest struct {
	ID string `json:"id"`
	// Permanent decommissions the server: it is not made a voter again
	// when it restarts with its data dir and gossips (until readmitted).
	// A server no longer in the configuration may be decommissioned too.
	Permanent bool `json:"permanent,omitempty"`
}

// RestoreResult says what a snapshot restore brought back, and what it
// kept of the state it replaced: the gossip keyring in use (KeyringKept:
// the snapshot's differed) and the audit entries made since the snapshot.
type RestoreResult struct {
	RestoredIndex uint64    `json:"restored_index"`
	Taken         time.Time `json:"taken"`
	FromServer    string    `json:"from_server,omitempty"`
	Batches       int       `json:"batches"`
	Users         int       `json:"users"`
	KeyringKept   bool      `json:"keyring_kept"`
	AuditKept     int       `json:"audit_kept"`
	// Timeline is the restored cluster's history (exports name it);
	// batch IDs resume at ResumeBatchID, and those from
	// DiscardedFromBatchID up to it belonged to the timeline the restore
	// discarded (the history store's rows under them are hidden).
	Timeline             uint64 `json:"timeline"`
	ResumeBatchID        uint64 `json:"resume_batch_id"`
	DiscardedFromBatchID uint64 `json:"discarded_from_batch_id"`
	// Reexport counts the finished batches in memory whose export is
	// checked against the history store again before they may leave
	// memory (the snapshot's marks may name rows it does not hold).
	Reexport int `json:"reexport"`
	// HistoryNote says what could not be checked ("" when all was).
	HistoryNote string `json:"history_note,omitempty"`
}

// HistoryRecheckResult counts the finished batches in memory checked
// against the history store again.
type HistoryRecheckResult struct {
	Batches int    `json:"batches"`
	Store   string `json:"store"`
}

// DecommissionedServer is a server removed for good.
type DecommissionedServer struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
}

// GossipKeyringRequest changes the servers' gossip keyring: Op is
// "install" (accept Key too), "use" (encrypt with Key, installed
// everywhere first) or "remove" (stop accepting Key, used nowhere).
type GossipKeyringRequest struct {
	Op  string `json:"op"`
	Key string `json:"key"`
}

// GossipKeyring is the servers' gossip keyring as the leader sees it.
type GossipKeyring struct {
	Keys    []GossipKey         `json:"keys"`
	Servers []GossipServerState `json:"servers"`
	// Pending lists the live servers that do not hold the leader's
	// keyring yet (after a change, those that did not in time).
	Pending []string `json:"pending,omitempty"`
	// Unreachable lists the servers the leader's Raft heartbeats fail to
	// reach (gossip may still count them alive): a change neither waits
	// for them nor is refused for them; they take the keyring through
	// Raft when they are back.
	Unreachable []string `json:"unreachable,omitempty"`
}

// GossipKey is one key of the leader's keyring.
type GossipKey struct {
	Key         string `json:"key"`         // base64
	Fingerprint string `json:"fingerprint"` // the first 8 hex digits of its SHA-256
	Primary     bool   `json:"primary"`     // the key the leader encrypts with
	// Installed: how many of the live servers hold it, of Servers.
	Installed int `json:"installed"`
	Servers   int `json:"servers"`
}

// GossipServerState is the keyring one live server tells over gossip.
type GossipServerState struct {
	ID string `json:"id"`
	// Keys are fingerprints, the one it encrypts with first.
	Keys []string `json:"keys"`
}

// TransferLeaderRequest hands leadership to a server (any, when ID is empty).
type TransferLeaderRequest struct {
	ID string `json:"id,omitempty"`
	// From is the leader the caller saw when it decided (Client fills it
	// in). When another server leads by the time the request arrives,
	// the transfer has happened (a retry after leadership moved under a
	// forwarded request) and is not made again; likewise when ID leads.
	From string `json:"from,omitempty"`
}

// MemoryStats is one server's heap after a garbage collection.
type MemoryStats struct {
	ServerID    string `json:"server_id"`
	PID         int    `json:"pid"`
	HeapAlloc   uint64 `json:"heap_alloc"`
	HeapInuse   uint64 `json:"heap_inuse"`
	HeapObjects uint64 `json:"heap_objects"`
	Sys         uint64 `json:"sys"`
	NumGC       uint32 `json:"num_gc"`
	// What the state holds: batches and job IDs (finished batches leave
	// for the history store after the retention window), and the size
	// of the audit log in a snapshot (at most 20,000 entries, kept by
	// design).
	StateBatches int64 `json:"state_batches"`
	StateJobs    int64 `json:"state_jobs"`
	AuditBytes   int64 `json:"audit_bytes"`
	// Instances the state holds: active, and retired (kept while a held
	// batch's attempt or a machine refers to them or their retention
	// window has not passed).
	StateInstancesActive  int64 `json:"state_instances_active"`
	StateInstancesRetired int64 `json:"state_instances_retired"`
	// The Raft log file is rewritten once the server is quiet after a
	// busy spell, and BoltDB's bookkeeping for the spell leaves the heap
	// then: whether a rewrite is due, and how many there were.
	RaftLogRewriteDue bool  `json:"raft_log_rewrite_due"`
	RaftLogRewrites   int64 `json:"raft_log_rewrites"`
}

// Pool is a machine class of a cluster, as declared in a placement config.
type Pool struct {
	Name         string     `json:"name"`
	CPU          float64    `json:"cpu,omitempty"`
	Memory       int64      `json:"memory,omitempty"`
	Preemptible  bool       `json:"preemptible,omitempty"`
	PricePerHour money.Rate `json:"price_per_hour,omitempty"` // dollars an hour, exact
	GPUs         int        `json:"gpus,omitempty"`
	GPUType      string     `json:"gpu_type,omitempty"`
}

// Cluster is a cluster's state: enabled or disabled (why, by whom, since
// when), its declared pools, and its active workers' totals.
type Cluster struct {
	Name    string `json:"name"`
	Region  string `json:"region"`
	Enabled bool   `json:"enabled"`
	Reason  string `json:"reason,omitempty"`
	By      string `json:"by,omitempty"`
	// Since is when it was last enabled or disabled (or created).
	Since    *time.Time `json:"since,omitempty"`
	Declared bool       `json:"declared,omitempty"`
	// Group is the cluster group it is declared in.
	Group string `json:"group,omitempty"`
	Pools []Pool `json:"pools,omitempty"`
	// Provider and ProviderSettings are as declared (no credentials:
	// those are the servers').
	Provider         string            `json:"provider,omitempty"`
	ProviderSettings map[string]string `json:"provider_settings,omitempty"`
	Workers          int               `json:"workers"`
	// Heard counts the active workers the leader heard from in the last
	// 10 seconds; a cluster with workers and none heard is down and gets
	// no new work.
	Heard      int     `json:"heard"`
	Down       bool    `json:"down,omitempty"`
	CPU        float64 `json:"cpu"`
	FreeCPU    float64 `json:"free_cpu"`
	Memory     int64   `json:"memory"`
	FreeMemory int64   `json:"free_memory"`
	Running    int     `json:"running"`
}

// Region sums its clusters.
type Region struct {
	Name     string   `json:"name"`
	Clusters []string `json:"clusters"`
	Enabled  int      `json:"enabled_clusters"`
	Workers  int      `json:"workers"`
	CPU      float64  `json:"cpu"`
	FreeCPU  float64  `json:"free_cpu"`
}

// ClusterStateRequest disables or enables a cluster. Evacuate (with
// disable) preempts the attempts running there: they run again elsewhere
// and count as neither failures nor retries.
type ClusterStateRequest struct {
	Reason   string `json:"reason,omitempty"`
	Evacuate bool   `json:"evacuate,omitempty"`
}

// ClusterStateResponse is the cluster after the change.
type ClusterStateResponse struct {
	Cluster   Cluster `json:"cluster"`
	Preempted int     `json:"preempted"`
}

// Quota is an amount of each resource: cores, bytes of memory and GPUs
// by type (a queue's guarantee, what it uses).
type Quota struct {
	CPU    float64 `json:"cpu,omitempty"`
	Memory int64   `json:"memory,omitempty"`
	// GPUs per type.
	GPUs map[string]int `json:"gpus,omitempty"`
}

// Limit bounds each resource it names; a resource it leaves out (a nil
// cpu or memory, a GPU type not named) is not bounded.
type Limit struct {
	CPU    *float64       `json:"cpu,omitempty"`
	Memory *int64         `json:"memory,omitempty"`
	GPUs   map[string]int `json:"gpus,omitempty"`
}

// MaxRunning caps what a queue and its children run at once (0: no cap).
type MaxRunning struct {
	Jobs int64   `json:"jobs,omitempty"`
	CPU  float64 `json:"cpu,omitempty"`
}

// Queue is one queue of the tree that shares the fleet: organization /
// project / tier is the usual shape. Durations are Go durations ("90s",
// "10m"). A team of old is a queue at the top whose guarantee is its
// quota and whose borrow_limit is 0.
type Queue struct {
	// Path names the queue from the top: "genomics/gwas/tier1".
	Path string `json:"path"`
	// Weight is its part among its siblings (default 1).
	Weight int64 `json:"weight,omitempty"`
	// Guarantee is its nominal quota across all clusters.
	Guarantee Quota `json:"guarantee"`
	// BorrowLimit bounds what it may hold beyond its guarantee (absent:
	// no bound; 0 holds it at its guarantee, a hard quota); LendLimit
	// how much of its idle guarantee its siblings may borrow (absent:
	// all of it).
	BorrowLimit *Limit     `json:"borrow_limit,omitempty"`
	LendLimit   *Limit     `json:"lend_limit,omitempty"`
	MaxRunning  MaxRunning `json:"max_running"`
	// ReclaimGrace, MinRuntime and the preemption settings (Monarch's,
	// YARN's fair scheduler's).
	ReclaimGrace        string   `json:"reclaim_grace,omitempty"`
	MinRuntime          string   `json:"min_runtime,omitempty"`
	Preemptible         bool     `json:"preemptible"`
	PreemptAfter        string   `json:"preempt_after,omitempty"`
	PreemptThreshold    float64  `json:"preempt_threshold,omitempty"`
	AllowPreemptionFrom []string `json:"allow_preemption_from,omitempty"`
	// Strategy orders the clusters its jobs go to: spread (default),
	// least-loaded, pack or cheapest; a queue without one takes its
	// parent's.
	Strategy     string   `json:"strategy,omitempty"`
	HomeClusters []string `json:"home_clusters,omitempty"`
	// MaxPriority is the highest priority a batch may ask in this queue,
	// as its leaf (0, the default, to 1,000,000); admins' batches are not
	// held to it, and a billing project's own max_priority holds below
	// it.
	MaxPriority int64 `json:"max_priority,omitempty"`
	// UsageHalfLife gives the fair share between the users of the tree
	// below a top queue a memory of their past use (Slurm's
	// PriorityDecayHalfLife): what a user ran counts against it, as
	// cores, halving every half-life ("7d"; 1h to 365d; empty: none,
	// users share by what they run now). A top queue's only.
	// BillingProjects run their batches in this queue unless a batch
	// names another (a leaf's; a project is in one queue's list at
	// most); AllowProjects may name it.
	BillingProjects []string `json:"billing_projects"`
	AllowProjects   []string `json:"allow_projects,omitempty"`
	// Reads only: whether it is a leaf, what its running jobs (and its
	// children's) hold, and the cores per cluster.
	Leaf          bool               `json:"leaf"`
	Used          Quota              `json:"used"`
	UsedJobs      int64              `json:"used_jobs"`
	UsedByCluster map[string]float64 `json:"used_by_cluster,omitempty"`
	// Cap is the most it may hold (guarantee and borrow_limit) for each
	// resource its borrow_limit bounds (reads only).
	Cap *Quota `json:"cap,omitempty"`
	// Waiting is what its Ready jobs (its subtree's) ask for, and
	// WaitingJobs how many they are (reads only; absent: none): the
	// demand a preemption round weighs against Used. Memory and GPUs
	// are read from each batch's first ranges of Ready jobs and scaled
	// to its cores, as the preemption round reads them.
	Waiting     Quota `json:"waiting,omitzero"`
	WaitingJobs int64 `json:"waiting_jobs,omitempty"`
	// UsageHalfLife: see above (after the reads, as the wire appends).
	UsageHalfLife string `json:"usage_half_life,omitempty"`
	// PastUseCoreHours is a leaf's decayed past use, in core-hours, in a
	// tree with a usage_half_life (reads only): fair share between
	// sibling queues weighs it with what the queue holds.
	PastUseCoreHours float64 `json:"past_use_core_hours,omitempty"`
	// Recommend holds the queue's settings for drover queue recommend,
	// for it and the queues below it that set none (absent: its
	// parent's).
	Recommend *QueueRecommendSettings `json:"recommend,omitempty"`
	// AutoApply regenerates a top queue's tree's settings from history
	// on a schedule (absent: never).
	AutoApply *QueueAutoApply `json:"auto_apply,omitempty"`
}

// QueueRecommendSettings are a queue's settings for the recommendation:
// Percentile, the share of the time it is in use its guarantee covers
// (more than 0, at most 1; Monarch's thresholds by tier, e.g. tier1 0.95,
// tier2 0.90, tier3 0.80).
type QueueRecommendSettings struct {
	Percentile float64 `json:"percentile"`
}

// QueueAutoApply is a top queue's schedule: every Every, the leader runs
// the recommendation over the tree from the last Days of recorded use
// (default 30), moves each weight, guarantee and max_running at most
// MaxChange (a fraction, default 0.25) of its value toward it, and
// applies that as one audited change (DryRun: only records it); the
// last Keep versions (default 10) are kept for drover queue history and
// rollback.
type QueueAutoApply struct {
	Every     string  `json:"every"`
	MaxChange float64 `json:"max_change,omitempty"`
	DryRun    bool    `json:"dry_run,omitempty"`
	Days      int64   `json:"days,omitempty"`
	Keep      int64   `json:"keep,omitempty"`
	// Rebalance moves the tree's leaves between clusters in the same
	// step (their home_clusters: Monarch's cross-cluster routing), off
	// clusters above High usage/capacity (default 0.8) onto clusters that
	// stay within Low (default 0.6), at most max_change of its leaves a
	// step (at least one).
	Rebalance bool    `json:"rebalance,omitempty"`
	High      float64 `json:"high,omitempty"`
	Low       float64 `json:"low,omitempty"`
}

// ParseDuration is time.ParseDuration that also takes whole days ("7d").
func ParseDuration(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 || n > 100*365 {
			return 0, fmt.Errorf("%.40q is not a duration such as 7d or 36h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// QueueRecommendation is Monarch's percentile algorithm's suggestion for
// one queue, from the usage the history store recorded, with the data
// behind it and the queue's settings now.
type QueueRecommendation struct {
	Path string `json:"path"`
	// HoursInUse: the time the queue held anything in the window;
	// HoursCovered: the time the suggested guarantee covers (at least the
	// percentile of HoursInUse).
	HoursInUse   float64 `json:"hours_in_use"`
	HoursCovered float64 `json:"hours_covered"`
	PeakCPU      float64 `json:"peak_cpu"`
	PeakJobs     int64   `json:"peak_jobs"`
	// Guarantee (cores), Weight and MaxRunningJobs: suggested, and now.
	Guarantee             float64 `json:"guarantee_cpu"`
	CurrentGuarantee      float64 `json:"current_guarantee_cpu"`
	Weight                int64   `json:"weight"`
	CurrentWeight         int64   `json:"current_weight"`
	MaxRunningJobs        int64   `json:"max_running_jobs"`
	CurrentMaxRunningJobs int64   `json:"current_max_running_jobs"`
	// Percentile is the one it was given (its recommend setting, its
	// parent's, or the request's); NoSamples says neither it nor a queue
	// below it has recorded use in the window, so it keeps its settings.
	Percentile float64 `json:"percentile"`
	NoSamples  bool    `json:"no_samples,omitempty"`
}

// TierCheck is one of Monarch's checks of a recommendation across tiers:
// percentiles decreasing from tier 1 to tier 3, usage/capacity
// increasing.
type TierCheck struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// QueueSettingChange is one queue's change in a version of its tree's
// settings: weight, cpu guarantee (cores) and max_running jobs, before and
// after.
type QueueSettingChange struct {
	Path                 string  `json:"path"`
	WeightBefore         int64   `json:"weight_before"`
	Weight               int64   `json:"weight"`
	GuaranteeBefore      float64 `json:"guarantee_cpu_before"`
	Guarantee            float64 `json:"guarantee_cpu"`
	MaxRunningJobsBefore int64   `json:"max_running_jobs_before"`
	MaxRunningJobs       int64   `json:"max_running_jobs"`
	// HomeClusters before and after (a rebalancing step's move).
	HomeClustersBefore []string `json:"home_clusters_before,omitempty"`
	HomeClusters       []string `json:"home_clusters,omitempty"`
}

// QueueVersion is one regeneration of a tree's settings: auto_apply and
// rollback applied it (Applied), dry_run only proposed it, refused could
// not apply it (Note says why).
type QueueVersion struct {
	Version uint64               `json:"version"`
	Tree    string               `json:"tree"`
	Time    time.Time            `json:"time"`
	By      string               `json:"by"`
	Kind    string               `json:"kind"`
	Applied bool                 `json:"applied"`
	Note    string               `json:"note,omitempty"`
	Changes []QueueSettingChange `json:"changes"`
}

// QueueHistory is the versions kept of a tree's settings, oldest first,
// and when the leader last regenerated it (absent: never).
type QueueHistory struct {
	Tree     string         `json:"tree,omitempty"`
	LastRun  *time.Time     `json:"last_run,omitempty"`
	Versions []QueueVersion `json:"versions"`
}

// UsageHours is an amount of each resource over time.
type UsageHours struct {
	InstanceHours  float64 `json:"instance_hours"`
	VcoreHours     float64 `json:"vcore_hours"`
	MemoryGiBHours float64 `json:"memory_gib_hours"`
}

// ClusterUse is what a tier or a queue (or all queues: Name absent) used
// of a cluster over the window, and its usage/capacity by the dominant
// resource ("vcore" or "memory"); instance-hours are the dominant share
// of the cluster's.
type ClusterUse struct {
	Name          string     `json:"name,omitempty"`
	Used          UsageHours `json:"used"`
	UsageCapacity float64    `json:"usage_capacity_ratio"`
	Dominant      string     `json:"dominant"`
}

// ClusterUsage is one cluster's capacity and use over the window.
type ClusterUsage struct {
	Cluster  string       `json:"cluster"`
	Capacity UsageHours   `json:"capacity"`
	All      ClusterUse   `json:"all"`
	Tiers    []ClusterUse `json:"tiers"`
	Queues   []ClusterUse `json:"queues"`
}

// QueueReport is the usage/capacity report by cluster (Monarch's) over
// the last Days, from the queue samples the leader records.
type QueueReport struct {
	Days     int            `json:"days"`
	By       string         `json:"by"`
	Clusters []ClusterUsage `json:"clusters"`
}

// QueueMove is a proposed (or applied) move of a leaf queue's work to
// another cluster: its home_clusters become HomeClusters.
type QueueMove struct {
	Queue        string   `json:"queue"`
	From         string   `json:"from"`
	To           string   `json:"to"`
	HomeClusters []string `json:"home_clusters"`
	// Share is its usage/capacity in From; the clusters' ratios before
	// and after the move.
	Share     float64 `json:"share"`
	FromRatio float64 `json:"from_ratio"`
	FromAfter float64 `json:"from_after"`
	ToRatio   float64 `json:"to_ratio"`
	ToAfter   float64 `json:"to_after"`
	Reason    string  `json:"reason"`
}

// QueueRebalance is the moves that bring clusters above High
// usage/capacity down, into clusters that stay at or below Low, from the
// last Days; Applied says they were made (one placement change).
type QueueRebalance struct {
	Days    int         `json:"days"`
	High    float64     `json:"high"`
	Low     float64     `json:"low"`
	Moves   []QueueMove `json:"moves"`
	Applied bool        `json:"applied"`
}

// QueueRebalanceRequest applies the moves a rebalance proposes now
// (zero fields: the defaults, 7 days, 0.8, 0.6, 10 moves).
type QueueRebalanceRequest struct {
	Days     int     `json:"days,omitempty"`
	High     float64 `json:"high,omitempty"`
	Low      float64 `json:"low,omitempty"`
	MaxMoves int     `json:"max_moves,omitempty"`
}

// QueueRollbackRequest puts back a tree's settings from before Version.
type QueueRollbackRequest struct {
	Tree    string `json:"tree"`
	Version uint64 `json:"version"`
}

// QueueAutoApplyRequest regenerates a tree's settings now, as its
// schedule would (DryRun: only records the proposal, whatever the tree's
// auto_apply says).
type QueueAutoApplyRequest struct {
	Tree   string `json:"tree"`
	DryRun bool   `json:"dry_run,omitempty"`
}

// QueueRecommendations are the suggestions for every queue, and the
// window and percentile they were made with.
type QueueRecommendations struct {
	Days       int                   `json:"days"`
	Percentile float64               `json:"percentile"`
	Queues     []QueueRecommendation `json:"queues"`
	// Tree is the queues as they are with the suggestions in: what
	// drover placement apply takes (drover queue recommend -hcl).
	Tree []Queue `json:"tree"`
	// Checks are Monarch's checks across tiers (none with one tier).
	Checks []TierCheck `json:"checks,omitempty"`
}

// QueueSLO is how a queue's batches met their SLOs over a window (Monarch's
// SLO success ratio: runs meeting their SLO over runs), and what the queue
// used of its guarantee (usage/capacity: core-hours used over its
// guarantee's core-hours in the window; 0 without a guarantee). A run is
// a batch that completed, succeeded or failed; Cancelled counts those
// cancelled (by a person or a spend limit), which are no runs. In a
// tier's row, Workflows and SuccessfulWorkflows count the workflows of
// the tier with a run, and WorkflowSuccessRatio is Monarch's measure of
// a tier: the share of its workflows that are SLO-successful.
type QueueSLO struct {
	Queue                string  `json:"queue"`
	Runs                 int64   `json:"runs"`
	Met                  int64   `json:"met"`
	Cancelled            int64   `json:"cancelled"`
	SuccessRatio         float64 `json:"success_ratio"`
	Workflows            int64   `json:"workflows,omitempty"`
	SuccessfulWorkflows  int64   `json:"slo_successful_workflows,omitempty"`
	WorkflowSuccessRatio float64 `json:"workflow_success_ratio,omitempty"`
	CoreHours            float64 `json:"core_hours"`
	UsageCapacity        float64 `json:"usage_capacity_ratio"`
}

// WorkflowSLO is one workflow's SLO success over a window: the batches of
// a billing project with one workflow name (their workflow attribute, or
// their name). It is SLO-successful when its success ratio is at least the
// report's threshold. Queue and Tier are its latest run's.
type WorkflowSLO struct {
	BillingProject string  `json:"billing_project"`
	Workflow       string  `json:"workflow"`
	Queue          string  `json:"queue,omitempty"`
	Tier           string  `json:"tier,omitempty"`
	Runs           int64   `json:"runs"`
	Met            int64   `json:"met"`
	Cancelled      int64   `json:"cancelled"`
	SuccessRatio   float64 `json:"success_ratio"`
	SLOSuccessful  bool    `json:"slo_successful"`
}

// QueueSLOReport is the SLO report of every queue, per tier (queues
// grouped by their own name, the last of their path: tier1, tier2, ...)
// and per workflow, of the runs that completed in the last Days: those
// the servers hold in memory and those the history store holds. Workflows
// lists those of the billing projects the caller is a member of (every
// project's, for an admin); the queue and tier rows count every run.
// Truncated says the report stopped at MaxSLORuns runs.
type QueueSLOReport struct {
	Days      int           `json:"days"`
	Threshold float64       `json:"threshold"`
	Queues    []QueueSLO    `json:"queues"`
	Tiers     []QueueSLO    `json:"tiers"`
	Workflows []WorkflowSLO `json:"workflows"`
	Truncated bool          `json:"truncated,omitempty"`
}

// MaxSLORuns bounds the runs one SLO report reads.
const MaxSLORuns = 500_000

// PlacementConfig declares clusters with their pools, and queues.
// Applying it creates or updates what it names; Prune removes queues it
// does not name. Clusters keep their enabled state and are removed only
// one at a time (DELETE /api/v1/clusters/{name}).
type PlacementConfig struct {
	Clusters []ClusterDecl `json:"clusters,omitempty"`
	Queues   []Queue       `json:"queues,omitempty"`
	// Groups declares cluster groups; Prune removes those not named too.
	Groups []ClusterGroup `json:"cluster_groups,omitempty"`
	// Autoscaler replaces the autoscaler's settings (absent: kept);
	// LaunchConfigs are created or replaced (Prune removes those not
	// named).
	Autoscaler    *AutoscalerSettings `json:"autoscaler,omitempty"`
	LaunchConfigs []LaunchConfig      `json:"launch_configs,omitempty"`
	Prune         bool                `json:"prune,omitempty"`
}

// AutoscalerSettings are the autoscaler's caps over every launch config
// together, its timeouts (Go durations, "90s") and its strategy. Zero
// caps are no cap.
type AutoscalerSettings struct {
	Enabled             bool       `json:"enabled"`
	Strategy            string     `json:"strategy,omitempty"` // cheapest (default), prefer-large, prefer-reserved
	MaxNodes            int64      `json:"max_nodes,omitempty"`
	MaxPerHour          money.Rate `json:"max_per_hour,omitempty"` // dollars an hour, exact
	MaxAddsPerMinute    int64      `json:"max_adds_per_minute,omitempty"`
	MaxRemovesPerMinute int64      `json:"max_removes_per_minute,omitempty"`
	BootTimeout         string     `json:"boot_timeout,omitempty"`
	IdleTimeout         string     `json:"idle_timeout,omitempty"`
	LameTimeout         string     `json:"lame_timeout,omitempty"`
	Backoff             string     `json:"backoff,omitempty"`
	MaxBackoff          string     `json:"max_backoff,omitempty"`
	Window              string     `json:"window,omitempty"`
	SpotPreemptions     int64      `json:"spot_preemptions,omitempty"`
	NamePrefix          string     `json:"name_prefix,omitempty"`
	// Consolidate drains the least busy machine (at most half busy) when
	// nothing waits for a new one and the fleet has a machine's worth of
	// room to spare (absent: true).
	Consolidate *bool `json:"consolidate,omitempty"`
}

// LaunchConfig is a machine type in a zone, spot or on-demand, that
// serves one pool of one cluster, with its price and caps of its own.
type LaunchConfig struct {
	Name                string     `json:"name"`
	Cluster             string     `json:"cluster"`
	Pool                string     `json:"pool,omitempty"`
	MachineType         string     `json:"machine_type,omitempty"`
	Zone                string     `json:"zone,omitempty"`
	Spot                bool       `json:"spot,omitempty"`
	Reserved            bool       `json:"reserved,omitempty"`
	CPU                 float64    `json:"cpu"`
	Memory              int64      `json:"memory"`
	GPUType             string     `json:"gpu_type,omitempty"`
	GPUs                int        `json:"gpus,omitempty"`
	PricePerHour        money.Rate `json:"price_per_hour"` // dollars an hour, exact
	MaxNodes            int64      `json:"max_nodes,omitempty"`
	MaxPerHour          money.Rate `json:"max_per_hour,omitempty"`
	MaxAddsPerMinute    int64      `json:"max_adds_per_minute,omitempty"`
	MaxRemovesPerMinute int64      `json:"max_removes_per_minute,omitempty"`
	// PriceFromCloud: the price is what the cluster's provider reads
	// from the cloud (GCE: the Cloud Billing Catalog), refreshed hourly;
	// PricePerHour is then only used until the first is read (0: the
	// config is not launched until then).
	PriceFromCloud bool `json:"price_from_cloud,omitempty"`
	// Capacity is how many machines of this config the dev agent's
	// local provider runs at once; past it, it refuses a launch for want
	// of capacity as a cloud does, and the config is marked
	// capacity-limited (0: no limit; at most 100,000). A real cloud's
	// capacity is its own: placement apply refuses a capacity on a
	// cluster whose provider is known not to hold configs to one.
	Capacity int64 `json:"capacity,omitempty"`
}

// ClusterDecl is a cluster in a placement config.
type ClusterDecl struct {
	Name   string `json:"name"`
	Region string `json:"region"`
	// Group names a cluster group of the config (or one that exists);
	// empty takes the cluster out of any group.
	Group string `json:"group,omitempty"`
	Pools []Pool `json:"pools,omitempty"`
	// Provider makes the autoscaler's machines here (local, gce, nomad;
	// empty: the servers' default) with its settings: for nomad address,
	// region, namespace, datacenters (comma-separated), driver, binary;
	// for gce project, image, network, instance_template, binary.
	Provider         string            `json:"provider,omitempty"`
	ProviderSettings map[string]string `json:"provider_settings,omitempty"`
}

// ClusterGroup is a set of clusters with a placement strategy of its
// own. A team's strategy chooses between groups (and clusters in none)
// as if each group were one cluster; the group's strategy chooses
// between its clusters (none: the team's). Clusters name their group.
type ClusterGroup struct {
	Name     string `json:"name"`
	Strategy string `json:"strategy,omitempty"`
	// Clusters in the group (reads only).
	Clusters []string `json:"clusters,omitempty"`
}

// JobWhy says why a job is where it is, first reason first.
type JobWhy struct {
	BatchID int64       `json:"batch_id"`
	JobID   int64       `json:"job_id"`
	State   string      `json:"state"`
	Reasons []WhyReason `json:"reasons"`
	// Position is a Ready job's place in its user's line in its leaf
	// queue, from 1: after its user's Ready jobs of a higher priority,
	// those of its older batches of its priority and those of its own
	// batch queued before it (between users, fair share decides who is
	// served, not a line). Absent for a job not Ready.
	Position int64 `json:"position,omitempty"`
	// EstimatedStart is when a Ready job is estimated to start (absent:
	// no estimate, as before any job of its line finished): an estimate,
	// from its place in line, its user's running attempts and the mean
	// run time of its job group; the "estimate" reason says from what.
	EstimatedStart *time.Time `json:"estimated_start,omitempty"`
}

// WhyReason is one link of the chain: a code and a sentence.
type WhyReason struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// AutoscalerStatus is the autoscaler's state: its settings and launch
// configs, every live machine (and the last gone ones), what they cost an
// hour against the cap, and the leader's last decision.
type AutoscalerStatus struct {
	Settings      AutoscalerSettings   `json:"settings"`
	LaunchConfigs []LaunchConfigStatus `json:"launch_configs"`
	Pools         []AutoscalerPool     `json:"pools"`
	Machines      []Machine            `json:"machines"`
	Nodes         int                  `json:"nodes"`
	SpendPerHour  money.Rate           `json:"spend_per_hour"` // the live machines', summed exactly
	LastRound     *AutoscaleRound      `json:"last_round,omitempty"`
	Decisions     []AutoscalerDecision `json:"decisions,omitempty"`
	// SpendHistory is what the fleet cost an hour over the last hours,
	// oldest first, at even steps up to now: from the machines the state
	// keeps (the live ones and the last gone ones), so it survives a
	// change of leader.
	SpendHistory []SpendPoint `json:"spend_history,omitempty"`
}

// SpendPoint is the autoscaler's fleet at one time: its machines' price
// an hour, summed exactly, and how many there were.
type SpendPoint struct {
	Time         time.Time  `json:"time"`
	SpendPerHour money.Rate `json:"spend_per_hour"`
	Nodes        int        `json:"nodes"`
}

// LaunchConfigStatus is a launch config with its live machines and, when
// it could not be filled, until when it is skipped and why.
type LaunchConfigStatus struct {
	LaunchConfig
	Live            int        `json:"live"`
	CapacityLimited bool       `json:"capacity_limited,omitempty"`
	Until           *time.Time `json:"until,omitempty"`
	Reason          string     `json:"reason,omitempty"`
	// Misconfigured: the provider can never fill it as it is (a
	// constraint no node meets, a missing driver); tried again at Until.
	Misconfigured bool `json:"misconfigured,omitempty"`
	// PricedAt is when the cloud's price was last read (price_from_cloud;
	// absent: not yet, PricePerHour is the placement's).
	PricedAt *time.Time `json:"priced_at,omitempty"`
}

// AutoscalerPool sums the machines of one pool of one cluster by state.
type AutoscalerPool struct {
	Cluster      string         `json:"cluster"`
	Pool         string         `json:"pool"`
	Machines     map[string]int `json:"machines"`
	SpendPerHour money.Rate     `json:"spend_per_hour"`
}

// Machine is a machine the autoscaler launched.
type Machine struct {
	ID           string     `json:"id"`
	Config       string     `json:"config"`
	Cluster      string     `json:"cluster"`
	Pool         string     `json:"pool"`
	State        string     `json:"state"`
	PricePerHour money.Rate `json:"price_per_hour"`
	ProviderID   string     `json:"provider_id,omitempty"`
	Instance     int64      `json:"instance,omitempty"`
	Running      int        `json:"running"`
	Created      time.Time  `json:"created"`
	Since        time.Time  `json:"since"`
	Reason       string     `json:"reason,omitempty"`
	// BootSeconds is how long the machine took from its launch to its
	// worker joining (0: not joined yet).
	BootSeconds float64 `json:"boot_seconds,omitempty"`
	// LastJobEnded is when an attempt last ended on its worker (absent:
	// none has).
	LastJobEnded *time.Time `json:"last_job_ended,omitempty"`
	// ForBatch and ForJob: the job the machine was made for alone (a
	// job with a machine_type); absent for a machine of the shared fleet.
	ForBatch int64 `json:"for_batch,omitempty"`
	ForJob   int64 `json:"for_job,omitempty"`
}

// AutoscaleRound is the leader's last decision.
type AutoscaleRound struct {
	At time.Time `json:"at"`
	// DemandCPU is the cores of the waiting jobs in the window.
	DemandCPU float64           `json:"demand_cpu"`
	Launches  []AutoscaleAction `json:"launches,omitempty"`
	Deletes   []AutoscaleAction `json:"deletes,omitempty"`
	Held      []AutoscaleHeld   `json:"held,omitempty"`
	// Skipped says why configs that could have served were not used.
	Skipped map[string]string `json:"skipped,omitempty"`
}

// AutoscaleAction is a launch (Config, Count) or a deletion (Machine).
type AutoscaleAction struct {
	Config  string `json:"config,omitempty"`
	Count   int    `json:"count,omitempty"`
	Machine string `json:"machine,omitempty"`
	Reason  string `json:"reason"`
}

// AutoscaleHeld is demand the last decision did not serve, and why.
type AutoscaleHeld struct {
	Jobs   int64   `json:"jobs"`
	CPU    float64 `json:"cpu"`
	Reason string  `json:"reason"`
	// Config is the launch config whose capacity-limited or
	// misconfigured mark holds these jobs, when that is the reason.
	Config string `json:"config,omitempty"`
}

// AutoscalerDecision is one of the recent decisions' reasons.
type AutoscalerDecision struct {
	Time time.Time `json:"time"`
	Text string    `json:"text"`
}
