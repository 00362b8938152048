// Package state is drover's replicated state machine: the in-memory store of
// users, billing projects, batches, jobs, attempts and instances, and the
// typed commands that change it. Apply is deterministic: it never reads the
// clock, draws random numbers or does I/O; the leader stamps times and
// secrets into commands before they enter the Raft log.
package state

import (
	"fmt"

	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
)

// JobState is a job's place in the state diagram.
type JobState uint8

// Job states. Staged marks IDs reserved by an update that is not committed
// yet; such jobs are invisible.
const (
	Staged JobState = iota
	Pending
	Ready
	Creating
	Running
	Success
	Failed
	Cancelled
	Error
	numStates
)

// stateNames are the states' names: metric labels, words in refusals,
// and what the API shows (server/apiview's TestNamesAreTheWire holds
// them equal to api.JobPending and the rest).
var stateNames = [...]string{
	Staged:    "staged",
	Pending:   "pending",
	Ready:     "ready",
	Creating:  "creating",
	Running:   "running",
	Success:   "success",
	Failed:    "failed",
	Cancelled: "cancelled",
	Error:     "error",
}

func (s JobState) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("JobState(%d)", s)
}

// Final reports whether the job has ended: no transition leaves s but a
// retry's (RetryJobs), which runs it again.
func (s JobState) Final() bool { return s >= Success && s <= Error }

// ParseJobState maps a wire name to a state.
func ParseJobState(name string) (JobState, bool) {
	for i, n := range stateNames {
		if n == name && JobState(i) != Staged {
			return JobState(i), true
		}
	}
	return 0, false
}

// allowed[from][to] is the job state diagram. Running→Ready is a lost,
// preempted or retried attempt.
var allowed = [numStates][numStates]bool{
	Staged:   {Pending: true, Ready: true, Cancelled: true},
	Pending:  {Ready: true, Cancelled: true},
	Ready:    {Creating: true, Running: true, Cancelled: true},
	Creating: {Running: true, Cancelled: true, Ready: true},
	Running:  {Success: true, Failed: true, Error: true, Cancelled: true, Ready: true},
	// A retry (RetryJobs) runs what did not succeed again.
	Failed:    {Pending: true},
	Error:     {Pending: true},
	Cancelled: {Pending: true},
}

// TransitionAllowed reports whether the state diagram permits from→to.
// Pending→Cancelled is the cancellation of a job whose parent did not
// succeed or whose batch was cancelled before it became Ready.
func TransitionAllowed(from, to JobState) bool { return allowed[from][to] }

// Outcome is what a worker says about an attempt that ended.
type Outcome uint8

// Attempt outcomes. Lost is decided by the control plane when an instance
// disappears with the attempt on it.
const (
	OutcomeNone Outcome = iota
	OutcomeSuccess
	OutcomeFailed
	OutcomeError
	OutcomeCancelled
	OutcomeLost
	// OutcomePreempted: the control plane took the attempt back (its
	// cluster was evacuated); the job runs again and nothing counts
	// against its retries.
	OutcomePreempted
)

// outcomeNames are the outcomes' names: what a worker reports
// (ParseOutcome) and what the API shows, held equal to api.OutcomeSuccess
// and the rest by server/apiview's TestNamesAreTheWire.
var outcomeNames = [...]string{"", "success", "failed", "error", "cancelled", "lost", "preempted"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", o)
}

// ParseOutcome maps a wire name to an outcome.
func ParseOutcome(name string) (Outcome, bool) {
	for i, n := range outcomeNames {
		if n == name && i > 0 {
			return Outcome(i), true
		}
	}
	return 0, false
}

// Spec is the shared template of a job or job array. It is immutable once
// committed, so snapshots and readers share it without copying.
type Spec struct {
	Name       string
	Array      bool
	Command    []string
	Env        StringMap
	CPUMilli   int64
	Memory     int64
	TimeoutMs  int64
	Retries    uint16
	AlwaysRun  bool
	Attributes StringMap
	// Where constrains where the job may run (nil: anywhere). A pointer:
	// a batch of a million distinct jobs pays 8 bytes a job for it.
	Where *Where
	// Run says what the job runs in and the files it takes and gives
	// (nil: a process, no files), and how it comes back (Run.Policy).
	Run *Run
}

// JobGroup is the job group jobs of sp are in (0: none but the batch; in
// a command, the 1-based index of a group it declares: JobGroupDecl).
func (sp *Spec) JobGroup() uint32 {
	if sp == nil || sp.Run == nil {
		return 0
	}
	return sp.Run.Group
}

// InJobGroup returns sp with its jobs in job group g: a copy, with a Run
// of its own.
func (sp *Spec) InJobGroup(g uint32) *Spec { return sp.withRun(func(r *Run) { r.Group = g }) }

// InGang is sp with its jobs members of gang g: a new spec.
func (sp *Spec) InGang(g *Gang) *Spec { return sp.withRun(func(r *Run) { r.Gang = g }) }

// withRun is a copy of sp with a copy of its Run (a new one if none)
// changed by set.
func (sp *Spec) withRun(set func(r *Run)) *Spec {
	c := *sp
	r := Run{}
	if sp.Run != nil {
		r = *sp.Run
	}
	set(&r)
	c.Run = &r
	return &c
}

// Policy is how a job of sp comes back after an attempt it did not end
// itself (nil: the server's defaults). Read-only.
func (sp *Spec) Policy() *Policy { return sp.policy() }

// policy is how the job comes back after an attempt it did not end
// itself (nil: the server's defaults).
func (sp *Spec) policy() *Policy {
	if sp.Run == nil {
		return nil
	}
	return sp.Run.Policy
}

// Policy is how a job comes back after an attempt it did not end itself.
type Policy struct {
	// MaxLost ends the job Error once this many of its attempts were lost
	// with their worker (0: the server's -max-lost-attempts; -1: never,
	// as Hail).
	MaxLost int16
	// OOMFactorMilli and OOMMaxMemory: an attempt the out-of-memory
	// killer ended runs again with its memory times OOMFactorMilli/1000,
	// up to OOMMaxMemory bytes, counted against no retry (0: it is the
	// job's error as before).
	OOMFactorMilli int32
	OOMMaxMemory   int64
	// MaxSpot: once the cloud reclaimed spot machines under this many of
	// the job's attempts, it runs on on-demand machines only (0: no cap,
	// spot or not as placement finds room). Those reclaims then count
	// against no MaxLost: a reclaim is the market's doing, not the job's.
	MaxSpot int16
}

// oomRetry returns the spec a job of sp runs again with after running out
// of memory (nil: it does not). Memory grows by the factor, rounded up to
// a MiB, to at most the bound; a spec at the bound is not retried.
func (sp *Spec) oomRetry() *Spec {
	p := sp.policy()
	if p == nil || p.OOMFactorMilli <= 1000 || sp.Memory >= p.OOMMaxMemory || sp.gang() != nil { // a gang is never split
		return nil
	}
	const mib = 1 << 20
	mem := p.OOMMaxMemory
	if sp.Memory <= p.OOMMaxMemory/int64(p.OOMFactorMilli)*1000 { // no overflow
		mem = min((sp.Memory*int64(p.OOMFactorMilli)/1000+mib-1)/mib*mib, p.OOMMaxMemory)
	}
	next := *sp
	next.Memory = mem
	return &next
}

// maxSpot is the number of attempts lost on spot machines after which
// the job runs on on-demand machines only (0: no cap).
func (sp *Spec) maxSpot() int {
	if p := sp.policy(); p != nil && sp.gang() == nil { // a gang is never split
		return int(p.MaxSpot)
	}
	return 0
}

// offSpot returns the spec a job of sp runs with once kept off spot
// machines (nil: it already is).
func (sp *Spec) offSpot() *Spec {
	if sp.Where != nil && sp.Where.NoSpot {
		return nil
	}
	next := *sp
	w := Where{}
	if sp.Where != nil {
		w = *sp.Where
	}
	w.NoSpot = true
	next.Where = &w
	return &next
}

// maxLost is the number of lost attempts that ends the job Error, given
// the limit of the loss at hand (0: none, for a loss that is not the
// job's doing, such as its machine deleted under it; otherwise the
// server's default, which the job's policy overrides).
func (sp *Spec) maxLost(def uint8) int {
	p := sp.policy()
	if def == 0 || p == nil || p.MaxLost == 0 {
		return int(def)
	}
	return max(int(p.MaxLost), 0)
}

// NetworkHost is a job's network when it shares its worker machine's
// (api.NetworkHost, held equal by server/apiview's TestNamesAreTheWire):
// only a billing project that allows it may run such jobs (CheckJobs).
const NetworkHost = "host"

// Run is a job's container image, network and process limit, and the
// files copied into its directory before the command and out of it after
// success.
type Run struct {
	Image string
	// Network is "none" or NetworkHost, or empty for the default,
	// "bridge" (the API's words). (Before the bridge, a container's
	// default was none, and its entries say so.)
	Network string
	Inputs  []File
	Outputs []File
	// MaxProcesses bounds the job's processes and threads (0: the
	// worker's default).
	MaxProcesses int64
	// PreemptGraceMs is how long a preempted attempt has between SIGTERM
	// and SIGKILL (0: the default, 30 s). In Run, not Spec: a spec of a
	// plain process pays nothing for it.
	PreemptGraceMs int64
	// Nomad: the job came from a Nomad job, and its worker gives it
	// Nomad's runtime environment (api.JobSpec.Nomad).
	Nomad bool
	// Policy says how the job comes back when an attempt ends through no
	// fault of its command (nil: the server's defaults). In Run, not
	// Spec, as PreemptGraceMs: a million distinct specs of plain
	// processes keep their size (a pointer more in Spec moved it up a
	// size class, 16 bytes a job).
	Policy *Policy
	// Group is the job group of the job (Spec.JobGroup). In Run, not
	// Spec, for the same reason: Spec is 112 bytes, a size class.
	Group uint32
	// Gang makes the jobs of an array start together or not at all
	// (nil: each on its own).
	Gang *Gang
}

// Gang is how the jobs of an array, or of a job group declared a gang,
// start: all of them in one round, on
// workers of one cluster (and of one pool, or with one value of a worker
// label, as Uniform says: "", "pool" or "label:KEY"), or none of them. A
// member that fails or is lost stops the others, and the gang (those of
// its jobs that have not succeeded) starts again as a whole.
type Gang struct {
	Size    uint32
	Uniform string
	// Lead is how many of the gang's members come before the first job
	// of the entry whose spec this is: 0 for an array's gang (one
	// entry); a job group's gang spans entries (gang.go: gangSpan).
	Lead uint32
}

// gang returns the gang jobs of sp are members of (nil: none).
func (sp *Spec) gang() *Gang {
	if sp == nil || sp.Run == nil {
		return nil
	}
	return sp.Run.Gang
}

// Gang is gang for readers (nil: none).
func (sp *Spec) Gang() *Gang { return sp.gang() }

// File is an input (URL copied to Path) or an output (Path copied to URL).
// Path is relative to the job's directory.
type File struct {
	Name string
	URL  string
	Path string
}

// Usage is what an attempt used, as its worker reported it (checked
// against the instance before it reaches the log).
type Usage struct {
	CPUMillis    int64 // CPU time
	PeakMemory   int64 // bytes
	BytesIn      int64 // input files
	BytesOut     int64 // output files
	ImageMillis  int64 // getting the image
	InputMillis  int64 // copying inputs
	OutputMillis int64 // copying outputs
	Memory       int64 // bytes charged at the sample
}

// Where is a job's placement constraint, and the GPUs it needs (which
// also narrow where it may run).
type Where struct {
	Regions []string // sorted, no duplicates (none: any region)
	Pool    string   // empty: any pool
	GPUType string   // with GPUs > 0
	GPUs    int64
	// MachineType: each job runs on a machine of its own of this type,
	// made for it by the autoscaler (empty: on the shared workers).
	MachineType string
	// Labels the worker must carry, each "key=value", sorted, no
	// duplicate key (none: any worker).
	Labels []string
	// Clusters the job may run in, sorted, no duplicates (none: any).
	Clusters []string
	// NoSpot: only on machines that are not spot. Apply sets it on a
	// job of its own once spot took Policy.MaxSpot of its attempts
	// (Spec.offSpot).
	NoSpot bool
}

// Size is one job of the spec as placement's quota rule reads it.
func (sp *Spec) Size() placement.Size {
	typ, n := sp.GPUs()
	return placement.Size{CPUMilli: sp.CPUMilli, Memory: sp.Memory, GPUType: typ, GPUs: n}
}

// GPUs returns the GPUs one job of the spec needs, and their type.
func (sp *Spec) GPUs() (string, int64) {
	if sp.Where == nil {
		return "", 0
	}
	return sp.Where.GPUType, sp.Where.GPUs
}

// Regions returns the regions the spec allows (nil: any).
func (sp *Spec) Regions() []string {
	if sp.Where == nil {
		return nil
	}
	return sp.Where.Regions
}

// Pool returns the pool the spec asks for ("": any).
func (sp *Spec) Pool() string {
	if sp.Where == nil {
		return ""
	}
	return sp.Where.Pool
}

// Clusters returns the clusters the spec allows (nil: any; read-only).
func (sp *Spec) Clusters() []string {
	if sp.Where == nil {
		return nil
	}
	return sp.Where.Clusters
}

// Labels returns the worker labels the spec asks for (read-only).
func (sp *Spec) Labels() []string {
	if sp.Where == nil {
		return nil
	}
	return sp.Where.Labels
}

// Range is an inclusive range of job IDs.
type Range struct{ Lo, Hi uint32 }

// Len is the number of IDs in the range.
func (r Range) Len() uint32 { return r.Hi - r.Lo + 1 }

// JobEntry is a job or job array as it travels in commands: Count jobs that
// share Spec and parents. First and Parents are relative to the update (1 is
// the update's first job); BatchParents are absolute IDs of jobs committed
// by earlier updates.
type JobEntry struct {
	First        uint32
	Count        uint32
	Parents      []Range
	BatchParents []Range
	Spec         *Spec
}

// job is the per-job record, kept compact because a batch may hold millions.
type job struct {
	start    int64 // current attempt's start, unix ns (0: not started)
	end      int64 // current attempt's end, unix ns
	instance uint32
	exit     int32
	attempt  uint16 // number of the current (or last) attempt; 0: never placed
	failures uint16 // attempts that ended Failed or Error (counted against retries)
	lost     uint8  // attempts lost with their instance (bounded by MaxLost)
	spotLost uint8  // of them, on spot machines (bounded by Policy.MaxSpot)
	state    JobState
	outcome  Outcome
}

// group is one committed JobEntry inside a batch.
//
// A batch of a million distinct jobs holds a million groups, so a group
// is kept to 32 bytes: its parents live in the batch (Batch.parentsOf),
// and a commit makes its groups in one array (commit).
type group struct {
	first    uint32
	count    uint32
	pLo, pHi uint32 // its parent ranges: the batch's groupParents[pLo:pHi]
	pending  uint32 // parent ranges with unfinished jobs
	// base is the first ID of the job array the group is part of: first,
	// unless a job of the array was given a group of its own
	// (Batch.isolate); a job's array index is its ID - base.
	base uint32
	spec *Spec
}

// depRange tracks one dependency: the children groups wait until every job in
// [lo, hi] is final; if any did not succeed they are cancelled unless
// always_run.
type depRange struct {
	r         Range
	remaining uint32
	failed    uint32
	children  []uint32 // first job IDs of waiting groups
}

// attemptRec is an attempt that is no longer the current one.
type attemptRec struct {
	Attempt  uint16
	Instance uint32
	Start    int64
	End      int64
	Exit     int32
	Outcome  Outcome
	Message  string
	// Usage is the attempt's last reported usage (nil: none reported).
	Usage *Usage
	// Memory is what the attempt was given when that is not its job's
	// spec's any more (a retry after running out of memory has more; 0:
	// the spec's).
	Memory int64
}

// update is a block of job IDs reserved in a batch.
type update struct {
	ID        uint32
	Start     uint32
	N         uint32
	Committed bool
	Discarded bool // the batch was cancelled while the update was open
	Key       string
	KeyDigest []byte // the digest of the request that made it with Key
	Created   int64
	// Touched is when the update last received a bunch (its creation
	// until then); an open update idle too long is discarded.
	Touched int64
	// Reason says why a discarded update was discarded.
	Reason  string
	staged  []stagedBunch // bunches received so far, in arrival order (kept apart: appending a bunch copies nothing)
	nStaged uint32
	seen    []uint64 // bitset of staged IDs (relative, from 1)
}

// Batch is a set of jobs in one billing project.
type Batch struct {
	ID             uint64
	Name           string
	User           string
	BillingProject string
	Attributes     map[string]string
	Key            string
	keyDigest      []byte // the digest of the request that made it with Key
	Created        int64
	Completed      int64 // unix ns when it last became complete; 0 while running
	Cancelled      bool
	CancelReason   string
	// CancelAfterFailures cancels the batch once this many of its jobs
	// have failed (Failed or Error; 0: never).
	CancelAfterFailures uint32
	// Callback is the URL the leader POSTs the batch to once complete;
	// callbackVersion the completion (version) it last reported, with
	// callbackResult how that went.
	Callback string
	// Queue is the leaf queue the batch names (empty: its billing
	// project's default; State.queueOf resolves it); Priority orders its
	// jobs within the queue, higher first.
	Queue    string
	Priority int32
	// SLO is the batch's runtime target and Deadline the time it must
	// complete by (unix ns; 0: none): SLOMet says whether it did.
	SLO             int64
	Deadline        int64
	leaf            *Queue // derived: the leaf it runs in (State.resolveQueue)
	callbackVersion uint64
	callbackResult  string
	bill            batchBill // what it has cost
	// version is the Raft index at which the batch last became complete
	// (or, complete, last changed); exported is the version the history
	// store holds (0: none). A batch leaves the state only once they are
	// equal.
	version  uint64
	exported uint64

	nextJob uint32 // next unreserved job ID
	open    int    // updates neither committed nor discarded
	nJobs   int64  // committed jobs
	counts  [numStates]int64
	tot     *totals // the state's totals over all batches (metrics)
	updates []*update

	jobs   []job    // index: job ID - 1
	groups []*group // sorted by first
	// groupParents holds the groups' parent ranges, as indices into
	// ranges (appended to only: a snapshot's copy stays valid).
	groupParents []int32
	ranges       []*depRange
	points       []pointRef // ranges with Lo == Hi, sorted by id
	spans        []int32    // ranges with Lo < Hi, sorted by Lo
	spanMaxHi    []uint32   // prefix maximum of Hi over spans
	ready        readyQueue
	readyMilli   int64 // cpu of Ready jobs, subtracted from the user at cancel
	// private: some of its groups name a machine type (derived from the
	// groups, so the autoscaler reads only such batches' queues).
	private  bool
	messages map[uint32]string
	history  map[uint32][]attemptRec
	// usage is the current attempt's last reported usage, by job (only
	// jobs whose worker reported any).
	usage map[uint32]Usage
	// memory is the current attempt's memory, by job, when the job's
	// spec no longer says it (it ran out of memory and runs again with
	// more: attemptRec.Memory).
	memory map[uint32]int64

	// jobGroups are its job groups, by ID - 1 (parents before their
	// children), groupByPath the same by path; dirtyGroups those whose
	// completion is to be settled (settleGroups).
	jobGroups   []*JobGroup
	groupByPath map[string]uint32
	dirtyGroups []uint32

	// live: counted in the tallies as a live batch (Completed == 0).
	live         bool
	userTally    *Tally
	projectTally *Tally
}

type pointRef struct {
	id uint32
	r  int32
}

// Instance is a worker machine that has activated.
type Instance struct {
	ID        uint32
	Name      string // a label; several instances may share it
	TokenHash string
	CPUMilli  int64
	Memory    int64
	FreeMilli int64
	FreeMem   int64
	Active    bool
	Activated int64
	Retired   int64
	Reason    string
	// NodeID is the worker's identity, kept in its data dir: activating
	// again with it retires the earlier incarnation. Empty for instances
	// activated before node IDs, which were identified by Name. Snapshots
	// carry it as snapInstance.Node (fields travel by position, and the
	// embedded Instance is followed by Running).
	NodeID string `codec:"-"`
	// Where the worker is, and its labels (snapshots carry them after
	// Node, as NodeID).
	Region  string    `codec:"-"`
	Cluster string    `codec:"-"`
	Pool    string    `codec:"-"`
	Labels  StringMap `codec:"-"`
	// GPUs of one type (snapshots carry them after Labels).
	GPUType  string `codec:"-"`
	GPUs     int64  `codec:"-"`
	FreeGPUs int64  `codec:"-"`
	// Machine is the autoscaler's machine it runs on (snapshots carry it
	// after FreeGPU), and Config the machine's launch config, whose rates
	// price its attempts (after Machine).
	Machine string `codec:"-"`
	Config  string `codec:"-"`
	// Version is the drover version the worker runs (snapshots carry it
	// after Config), and LastEnded when an attempt last ended on it
	// (after Version; 0: none has).
	Version   string `codec:"-"`
	LastEnded int64  `codec:"-"`
	// Leaving: the worker said it is going away with its machine (a
	// preempted event with Event.Leaving): nothing more is placed on it
	// (snapshots carry it after LastEnded).
	Leaving bool `codec:"-"`
	running map[attemptKey]struct{}
}

// free is what the instance has free, as placement's rule of node fit
// reads it.
func (in *Instance) free() placement.Free {
	return placement.Free{CPUMilli: in.FreeMilli, Memory: in.FreeMem, GPUs: in.FreeGPUs}
}

// hold takes n jobs of a size from what the instance has free (n < 0
// gives them back).
func (in *Instance) hold(sz placement.Size, n int64) {
	in.FreeMilli -= n * sz.CPUMilli
	in.FreeMem -= n * sz.Memory
	in.FreeGPUs -= n * sz.GPUs
}

// identity is what a later activation of the same worker is recognised by.
func (inst *Instance) identity() string {
	if inst.NodeID != "" {
		return nodeIdentity(inst.NodeID)
	}
	return "name:" + inst.Name
}

func nodeIdentity(nodeID string) string { return "node:" + nodeID }

type attemptKey struct {
	batch uint64
	job   uint32
}

// User is an account. Tokens are stored as SHA-256 hashes.
type User struct {
	Name  string
	Admin bool
	// TokenHash is the hash of the token the user was created with (a
	// retried create is recognised by it); tokens live in State.tokens.
	TokenHash string
	Created   int64
	// Deleted is when the user was deleted (0: not): its tokens are gone,
	// its batches stay, and the name is not given out again.
	Deleted int64
}

// Roles a user has in a billing project. A member submits batches and
// sees the project's; a manager also manages its members and spend limit;
// a viewer only reads.
const (
	RoleMember  = "member"
	RoleManager = "manager"
	RoleViewer  = "viewer"
)

// ValidRole reports whether r is a billing project role.
func ValidRole(r string) bool { return r == RoleMember || r == RoleManager || r == RoleViewer }

// BillingProject groups users and their batches.
type BillingProject struct {
	Name string
	// Members holds every user with a role in the project; Roles those
	// whose role is not RoleMember.
	Members map[string]bool
	Roles   map[string]string
	Created int64
	// SpendLimit in dollars (0: none).
	SpendLimit money.Amount
	// LogQuota bounds, in bytes, the job logs each server keeps of the
	// project's batches (0: none).
	LogQuota int64
	// Storage are the prefixes its jobs' files may name, sorted by URL.
	Storage []StoragePrefix
	// AllowHostNetwork lets its members run jobs on network "host".
	AllowHostNetwork bool
	// Batches counts the batches ever made in it (a project that had
	// one cannot be deleted: its name stays with them).
	Batches int64
	// MaxPriority is the highest priority its batches may ask (0 to
	// placement.MaxPriority; its managers set it), below its queue's own
	// (placement.PriorityCap); admins' batches are held to neither.
	MaxPriority int64
}

// role is a user's role in the project ("" for none).
func (p *BillingProject) role(user string) string {
	if !p.Members[user] {
		return ""
	}
	if r := p.Roles[user]; r != "" {
		return r
	}
	return RoleMember
}

// userSched holds a user's scheduling counters and the batches that have
// Ready jobs, in ID order (the user's FIFO).
type userSched struct {
	name         string
	readyMilli   int64
	runningMilli int64
	readyJobs    int64
	runningJobs  int64
	active       []*Batch
}

// addCount moves n jobs into (or, negative, out of) state st, in the
// batch's counts and the state's totals.
func (b *Batch) addCount(st JobState, n int64) {
	b.counts[st] += n
	if b.tot != nil {
		b.tot.jobs[st] += n
	}
}

// totals are counts over all batches, kept as they change.
type totals struct {
	jobs [numStates]int64
	live int // batches not complete
}
