package state

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// CommandType is the first byte of every Raft log entry drover writes.
type CommandType uint8

// Command types. Values are part of the log format: never renumber. A type
// with IgnoreUnknownFlag set may be skipped by servers that do not know it.
const (
	CmdBootstrap CommandType = iota + 1
	CmdCreateUser
	CmdCreateBillingProject
	CmdSetMember
	CmdCreateBatch
	CmdCreateUpdate
	CmdAddJobs
	CmdCommitUpdate
	CmdCancelBatch
	CmdPlan
	CmdEvents
	CmdActivate
	CmdRetire
	CmdRotateToken
	CmdExpireUpdates
	CmdSetCluster
	CmdSetTeam
	CmdApplyPlacement
	CmdScale
	CmdLaunchDone
	CmdMachineGone
	CmdGossipKeyring
	CmdCreateToken
	CmdRevokeToken
	CmdDeleteUser
	CmdSetSpendLimit
	CmdAudit
	CmdSetRates
	CmdMarkExported
	CmdForgetBatches
	CmdSetLogQuota
	CmdSetStoragePrefix
	CmdRemoveStoragePrefix
	CmdSetProjectSettings
	CmdJoinTokens
	// CmdSetSpendLimitExact and CmdSetRatesExact carry money as integers
	// of nano-dollars. CmdSetSpendLimit and CmdSetRates are the same
	// commands as servers before integral money wrote them (float
	// dollars), still read; new entries take the new types, so that such
	// a server meets an unknown command and stops instead of reading
	// nano-dollars as dollars.
	CmdSetSpendLimitExact
	CmdSetRatesExact
	CmdForgetInstances
	// CmdApplyPlacementExact is CmdApplyPlacement with its prices and
	// spend caps (pools', launch configs', the autoscaler's) as integers
	// of nano-dollars an hour. CmdApplyPlacement entries, written by
	// servers before integral prices with float dollars, are still read
	// (each price rounded once to the nearest nano-dollar); new entries
	// take the new type, so that such a server stops at an unknown
	// command instead of reading nano-dollars as dollars.
	CmdApplyPlacementExact
	CmdCallbackDone
	// CmdSetQueue sets one queue; CmdApplyPlacementQueues is
	// CmdApplyPlacementExact with queues (a server from before queues
	// stops at it rather than drop them).
	CmdSetQueue
	CmdApplyPlacementQueues
	CmdPreempt
	CmdDeleteBillingProject
	CmdRemoveDeclared
	CmdDecommission
	CmdAdoptStore
	CmdSetCloudPrices
	CmdRegisterNomadJob
	CmdDeregisterNomadJob
	CmdLaunchNomadJob
	CmdRetryJobs
	CmdCancelJobGroup
	CmdAutoApplyQueues
	CmdRollbackQueues
)

// IgnoreUnknownFlag marks a command that older servers may skip.
const IgnoreUnknownFlag CommandType = 128

var cmdNames = map[CommandType]string{
	CmdBootstrap: "bootstrap", CmdCreateUser: "create_user", CmdCreateBillingProject: "create_billing_project",
	CmdSetMember: "set_member", CmdCreateBatch: "create_batch", CmdCreateUpdate: "create_update",
	CmdAddJobs: "add_jobs", CmdCommitUpdate: "commit_update", CmdCancelBatch: "cancel_batch",
	CmdPlan: "plan", CmdEvents: "events", CmdActivate: "activate", CmdRetire: "retire",
	CmdRotateToken: "rotate_token", CmdExpireUpdates: "expire_updates",
	CmdSetCluster: "set_cluster", CmdSetTeam: "set_team", CmdApplyPlacement: "apply_placement",
	CmdScale: "scale", CmdLaunchDone: "launch_done", CmdMachineGone: "machine_gone",
	CmdGossipKeyring: "gossip_keyring", CmdCreateToken: "create_token", CmdRevokeToken: "revoke_token",
	CmdDeleteUser: "delete_user", CmdSetSpendLimit: "set_spend_limit", CmdAudit: "audit", CmdSetRates: "set_rates",
	CmdMarkExported: "mark_exported", CmdForgetBatches: "forget_batches", CmdSetLogQuota: "set_log_quota",
	CmdSetStoragePrefix: "set_storage_prefix", CmdRemoveStoragePrefix: "remove_storage_prefix", CmdSetProjectSettings: "set_project_settings",
	CmdJoinTokens: "join_tokens", CmdSetSpendLimitExact: "set_spend_limit_exact", CmdSetRatesExact: "set_rates_exact",
	CmdForgetInstances: "forget_instances", CmdApplyPlacementExact: "apply_placement_exact",
	CmdCallbackDone: "callback_done", CmdSetQueue: "set_queue", CmdApplyPlacementQueues: "apply_placement_queues", CmdPreempt: "preempt",
	CmdDeleteBillingProject: "delete_billing_project", CmdRemoveDeclared: "remove_declared", CmdDecommission: "decommission",
	CmdAdoptStore: "adopt_store", CmdSetCloudPrices: "set_cloud_prices",
	CmdRegisterNomadJob: "register_nomad_job", CmdDeregisterNomadJob: "deregister_nomad_job", CmdLaunchNomadJob: "launch_nomad_job", CmdRetryJobs: "retry_jobs",
	CmdCancelJobGroup: "cancel_job_group", CmdAutoApplyQueues: "auto_apply_queues", CmdRollbackQueues: "rollback_queues",
}

func (t CommandType) String() string {
	if n, ok := cmdNames[t]; ok {
		return n
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// Command is implemented by every command struct.
type Command interface {
	Type() CommandType
}

// Bootstrap creates the first admin and the default billing project. It is a
// no-op once any admin exists.
type Bootstrap struct {
	Now            int64
	Admin          string
	TokenHash      string
	DefaultProject string
	// Timeline names the new cluster's history (see AdoptStore; 0: none,
	// as before timelines).
	Timeline uint64
}

// CreateUser adds a user with a hashed token, named "default", expiring
// at Expires (0: never).
type CreateUser struct {
	Now       int64
	Name      string
	Admin     bool
	TokenHash string
	Expires   int64
}

// RotateToken revokes every token of a user and gives it a new one
// ("default", expiring at Expires; 0: never): the way to recover a lost
// token.
type RotateToken struct {
	Now       int64
	User      string
	TokenHash string
	Expires   int64
}

// CreateBillingProject adds a billing project with its first members.
type CreateBillingProject struct {
	Now     int64
	Name    string
	Members []string
}

// DeleteBillingProject removes a billing project that never had a batch
// and that no queue names (a project that had batches keeps its name:
// the batches, live or in the history store, are its).
type DeleteBillingProject struct {
	Name string
}

// SetMember adds (Member, with Role; "" is RoleMember) or removes a user
// from a billing project.
type SetMember struct {
	Project string
	User    string
	Member  bool
	Role    string
}

// CreateBatch makes a batch owned by User. With Jobs, an update holding them
// is created and committed at once; with NJobs, an update reserving that many
// IDs is opened.
type CreateBatch struct {
	Now            int64
	User           string
	Name           string
	BillingProject string
	Attributes     StringMap
	Key            string
	NJobs          uint32
	Jobs           []JobEntry
	// Digest is RequestDigest of the request, kept with Key: the same key
	// with another digest is a different request, refused (nil: not
	// checked, as in entries from before the check).
	Digest []byte
	// Policy: the rules apply checks the jobs against again
	// (PolicyStorage: CheckJobs; PolicyNone in entries from before it).
	Policy uint8
	// CancelAfterFailures cancels the batch once this many of its jobs
	// have failed (Failed or Error); 0: never (and in entries from before
	// the option).
	CancelAfterFailures uint32
	// Callback is the URL the leader POSTs the batch to when it
	// completes (empty: none); the API checked it against the allowed
	// destinations.
	Callback string
	// Queue is the leaf queue the batch names (empty: its project's
	// default); Priority orders its jobs within the queue (higher first).
	Queue    string
	Priority int32
	// SLONs is the batch's runtime target (completion within it of its
	// creation) and DeadlineNs the time it must complete by (0: none).
	SLONs      int64
	DeadlineNs int64
	// Groups declares the job groups its jobs name (JobGroupDecl; absent
	// before job groups).
	Groups []JobGroupDecl
}

// CreateUpdate opens (NJobs) or creates and commits (Jobs) an update.
type CreateUpdate struct {
	Now   int64
	Batch uint64
	Key   string
	NJobs uint32
	Jobs  []JobEntry
	// Digest: see CreateBatch.
	Digest []byte
	// Policy: see CreateBatch; User is who sent the update (the rules
	// know admins).
	Policy uint8
	User   string
	// Groups: see CreateBatch.
	Groups []JobGroupDecl
}

// RequestDigest fingerprints what a create-batch request asks for (all but
// its time, its user and its key), so that a retry with the same
// idempotency key is told from a different request reusing it.
func (c *CreateBatch) RequestDigest() []byte {
	if len(c.Groups) > 0 {
		return digest(c.Name, c.BillingProject, c.Attributes, c.NJobs, c.Jobs, c.CancelAfterFailures, c.Callback, c.Queue, c.Priority, c.SLONs, c.DeadlineNs, c.Groups)
	}
	if c.SLONs != 0 || c.DeadlineNs != 0 {
		return digest(c.Name, c.BillingProject, c.Attributes, c.NJobs, c.Jobs, c.CancelAfterFailures, c.Callback, c.Queue, c.Priority, c.SLONs, c.DeadlineNs)
	}
	if c.Queue != "" || c.Priority != 0 {
		// Only when set: a request without them digests as it did before
		// the options, so a retry across an upgrade matches.
		return digest(c.Name, c.BillingProject, c.Attributes, c.NJobs, c.Jobs, c.CancelAfterFailures, c.Callback, c.Queue, c.Priority)
	}
	if c.CancelAfterFailures != 0 || c.Callback != "" {
		return digest(c.Name, c.BillingProject, c.Attributes, c.NJobs, c.Jobs, c.CancelAfterFailures, c.Callback)
	}
	return digest(c.Name, c.BillingProject, c.Attributes, c.NJobs, c.Jobs)
}

// RequestDigest fingerprints what an update request asks for: see
// CreateBatch.RequestDigest.
func (c *CreateUpdate) RequestDigest() []byte {
	if len(c.Groups) > 0 {
		return digest(c.Batch, c.NJobs, c.Jobs, c.Groups)
	}
	return digest(c.Batch, c.NJobs, c.Jobs)
}

// digest is the SHA-256 of the values' canonical encoding (the log's own).
func digest(parts ...any) []byte {
	h := sha256.New()
	if err := codec.NewEncoder(h, msgpackHandle).Encode(parts); err != nil {
		panic(fmt.Sprintf("digest: %v", err)) // plain values and entries always encode
	}
	return h.Sum(nil)
}

// AddJobs stages a bunch of jobs in an open update.
type AddJobs struct {
	Batch  uint64
	Update uint32
	Jobs   []JobEntry
	// Now stamps the update's last activity (0 in entries from before
	// update expiry).
	Now int64
	// Policy and User: see CreateUpdate.
	Policy uint8
	User   string
	// Groups: see CreateBatch.
	Groups []JobGroupDecl
}

// CommitUpdate makes an update's staged jobs live.
type CommitUpdate struct {
	Now    int64
	Batch  uint64
	Update uint32
}

// UpdateRef names an update of a batch.
type UpdateRef struct {
	Batch  uint64
	Update uint32
}

// ExpireUpdates discards open updates that received nothing since Before:
// a client that reserved job IDs and went away must not hold them, and
// its user's open-update allowance, for ever.
type ExpireUpdates struct {
	Now     int64
	Before  int64
	Reason  string
	Updates []UpdateRef
}

// CancelBatch cancels a batch.
type CancelBatch struct {
	Now    int64
	Batch  uint64
	Reason string
}

// Placement puts jobs First..First+Count-1 of Batch on Instance as attempt
// Attempt (each job's previous attempt number plus one).
type Placement struct {
	Batch    uint64
	First    uint32
	Count    uint32
	Attempt  uint16
	Instance uint32
}

// Plan is a scheduling round. Every placement is re-checked at apply.
type Plan struct {
	Now        int64
	Placements []Placement
	// Reserve: an attempt is billed from Now, its reservation, not from
	// when its worker starts its command. Plans of leaders from before
	// it (false) apply as they did: billed from the start the worker
	// reports.
	Reserve bool
}

// Event is a worker's report about an attempt.
type Event struct {
	Instance uint32
	Batch    uint64
	Job      uint32
	Attempt  uint16
	Started  bool // true: started; false: completed
	Outcome  Outcome
	Exit     int32
	Start    int64
	End      int64
	Message  string
	// Usage is the attempt's usage so far (Sample) or in all (completed);
	// nil: none reported.
	Usage *Usage
	// Sample: a usage report of a running attempt, neither started nor
	// completed.
	Sample bool
	// OOM: the out-of-memory killer ended the attempt (one that failed
	// or errored).
	OOM bool
	// Leaving: a preempted attempt whose worker is going away with its
	// machine (on a spot machine, a reclaim: Policy.MaxSpot).
	Leaving bool
}

// Events records a group of worker events in one log entry.
type Events struct {
	Now    int64
	Events []Event
}

// Activate registers a worker. An active instance with the same name is
// retired first: its previous incarnation is gone.
type Activate struct {
	Now       int64
	Name      string
	CPUMilli  int64
	Memory    int64
	TokenHash string
	// NodeID identifies the worker across restarts (empty in entries from
	// before node IDs: the Name did).
	NodeID string
	// MaxLost ends a job Error once its attempts were lost with this many
	// instances (0 in entries from before the limit: no limit).
	MaxLost uint8
	// Where the worker is (empty in entries from before placement: the
	// default region, cluster and pool) and its free-form labels.
	Region  string
	Cluster string
	Pool    string
	Labels  StringMap
	// GPUs of one type the worker offers (0 in entries from before GPUs).
	GPUType string
	GPUs    int64
	// Machine is the autoscaler's machine the worker runs on (empty: a
	// worker started by hand).
	Machine string
	// JoinHash and PreviousHash say how a worker proved it may join
	// Machine without the worker secret: the hash of the machine's
	// one-time join token, or the hash of the instance token of the
	// machine's last worker (a restarted worker that kept its data dir).
	// Both empty: the server checked the worker secret (entries from
	// before join tokens too).
	JoinHash     string
	PreviousHash string
	// Version is the drover version the worker runs (empty in entries
	// from before workers said; at most 64 bytes).
	Version string
}

// Retire removes an instance; its running attempts are lost and their jobs
// return to Ready (or end Cancelled when their batch is cancelled).
type Retire struct {
	Now      int64
	Instance uint32
	Reason   string
	MaxLost  uint8 // as in Activate
	// Preempted: the worker left because its machine is going away; what
	// it still ran is preempted (run again, counted as neither a failure
	// nor a lost attempt), not lost.
	Preempted bool
}

func (*Bootstrap) Type() CommandType            { return CmdBootstrap }
func (*CreateUser) Type() CommandType           { return CmdCreateUser }
func (*CreateBillingProject) Type() CommandType { return CmdCreateBillingProject }
func (*DeleteBillingProject) Type() CommandType { return CmdDeleteBillingProject }
func (*SetMember) Type() CommandType            { return CmdSetMember }
func (*CreateBatch) Type() CommandType          { return CmdCreateBatch }
func (*CreateUpdate) Type() CommandType         { return CmdCreateUpdate }
func (*AddJobs) Type() CommandType              { return CmdAddJobs }
func (*CommitUpdate) Type() CommandType         { return CmdCommitUpdate }
func (*CancelBatch) Type() CommandType          { return CmdCancelBatch }
func (*Plan) Type() CommandType                 { return CmdPlan }
func (*Events) Type() CommandType               { return CmdEvents }
func (*Activate) Type() CommandType             { return CmdActivate }
func (*Retire) Type() CommandType               { return CmdRetire }
func (*RotateToken) Type() CommandType          { return CmdRotateToken }
func (*ExpireUpdates) Type() CommandType        { return CmdExpireUpdates }

func newCommand(t CommandType) Command {
	switch t {
	case CmdBootstrap:
		return &Bootstrap{}
	case CmdCreateUser:
		return &CreateUser{}
	case CmdCreateBillingProject:
		return &CreateBillingProject{}
	case CmdSetMember:
		return &SetMember{}
	case CmdCreateBatch:
		return &CreateBatch{}
	case CmdCreateUpdate:
		return &CreateUpdate{}
	case CmdAddJobs:
		return &AddJobs{}
	case CmdCommitUpdate:
		return &CommitUpdate{}
	case CmdCancelBatch:
		return &CancelBatch{}
	case CmdPlan:
		return &Plan{}
	case CmdEvents:
		return &Events{}
	case CmdActivate:
		return &Activate{}
	case CmdRetire:
		return &Retire{}
	case CmdRotateToken:
		return &RotateToken{}
	case CmdExpireUpdates:
		return &ExpireUpdates{}
	case CmdSetCluster:
		return &SetCluster{}
	case CmdSetTeam:
		return &SetTeam{}
	case CmdSetQueue:
		return &SetQueue{}
	case CmdPreempt:
		return &Preempt{}
	case CmdDeleteBillingProject:
		return &DeleteBillingProject{}
	case CmdRemoveDeclared:
		return &RemoveDeclared{}
	case CmdDecommission:
		return &Decommission{}
	case CmdAdoptStore:
		return &AdoptStore{}
	case CmdSetCloudPrices:
		return &SetCloudPrices{}
	case CmdApplyPlacement, CmdApplyPlacementExact, CmdApplyPlacementQueues:
		return &ApplyPlacement{}
	case CmdScale:
		return &Scale{}
	case CmdLaunchDone:
		return &LaunchDone{}
	case CmdMachineGone:
		return &MachineGone{}
	case CmdGossipKeyring:
		return &GossipKeyring{}
	case CmdCreateToken:
		return &CreateToken{}
	case CmdRevokeToken:
		return &RevokeToken{}
	case CmdDeleteUser:
		return &DeleteUser{}
	case CmdSetSpendLimit, CmdSetSpendLimitExact:
		return &SetSpendLimit{}
	case CmdSetLogQuota:
		return &SetLogQuota{}
	case CmdAudit:
		return &Audit{}
	case CmdSetRates, CmdSetRatesExact:
		return &SetRates{}
	case CmdMarkExported:
		return &MarkExported{}
	case CmdForgetBatches:
		return &ForgetBatches{}
	case CmdSetStoragePrefix:
		return &SetStoragePrefix{}
	case CmdRemoveStoragePrefix:
		return &RemoveStoragePrefix{}
	case CmdSetProjectSettings:
		return &SetProjectSettings{}
	case CmdJoinTokens:
		return &JoinTokens{}
	case CmdCallbackDone:
		return &CallbackDone{}
	case CmdForgetInstances:
		return &ForgetInstances{}
	case CmdRegisterNomadJob:
		return &RegisterNomadJob{}
	case CmdDeregisterNomadJob:
		return &DeregisterNomadJob{}
	case CmdLaunchNomadJob:
		return &LaunchNomadJob{}
	case CmdRetryJobs:
		return &RetryJobs{}
	case CmdCancelJobGroup:
		return &CancelJobGroup{}
	case CmdAutoApplyQueues:
		return &AutoApplyQueues{}
	case CmdRollbackQueues:
		return &RollbackQueues{}
	}
	return nil
}

var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.Canonical = true
	// Structs travel as arrays in field order: no field names to encode
	// or look up. Fields of commands and snapshots may only be appended.
	h.StructToArray = true
	return h
}()

// Encode serialises a command as one type byte followed by msgpack.
func Encode(c Command) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(c.Type()))
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(c); err != nil {
		return nil, fmt.Errorf("encode %s command: %w", c.Type(), err)
	}
	// Raft keeps the entry (in flight, then in its log cache) as long as
	// it is recent: the buffer's growth room, up to as much again as the
	// entry, would stay with it.
	if b := buf.Bytes(); cap(b)-len(b) > len(b)/8 {
		return bytes.Clone(b), nil
	}
	return buf.Bytes(), nil
}

// ErrUnknownCommand is returned by Decode for a type this server does not
// know and that is not flagged as ignorable.
var ErrUnknownCommand = fmt.Errorf("unknown command type")

// Decode parses a log entry written by Encode. It returns (nil, nil) for an
// unknown command flagged IgnoreUnknownFlag.
func Decode(data []byte) (Command, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("empty log entry")
	}
	t := CommandType(data[0])
	c := newCommand(t &^ IgnoreUnknownFlag)
	if c == nil {
		if t&IgnoreUnknownFlag != 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("%w %d", ErrUnknownCommand, uint8(t))
	}
	if err := codec.NewDecoderBytes(data[1:], msgpackHandle).Decode(c); err != nil {
		return nil, fmt.Errorf("decode %s command: %w", t, err)
	}
	return c, nil
}
