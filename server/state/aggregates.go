package state

import (
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/placement"
)

// The state is split into aggregates, each owning its tables and the
// methods that apply commands to them, read them and check their
// invariants. State routes commands to them (applyLocked) and holds them
// together: each aggregate names, as embedded pointers, the aggregates
// whose tables or rules its methods use, all wired to the one State by
// wire. Snapshot, Restore and CheckInvariants are State's: they span
// every table.

// core is what every aggregate shares: the lock, the applied index, the
// change notifications and the tests' seams, and the state itself for a
// consistent read (Read).
type core struct {
	mu    stateLock
	index uint64 // last applied Raft index
	hooks Hooks
	// betweenHolds is a test's seam into ApplyBatch (see there).
	betweenHolds func(i int)
	// preparing is a test's seam: it runs when a commit has been made
	// on its copies, before it is published (prepareCommitUpdate).
	preparing func()
	st        *State
}

// identityBook owns who may call: users, their tokens (by hash), and the
// two audit logs.
type identityBook struct {
	*core
	*billingBook
	*memberBook

	users  map[string]*User
	tokens map[string]*Token // by hash
	audit  []AuditEntry      // the last MaxAuditEntries of known callers, oldest first
	// anonAudit: the last MaxAnonymousAuditEntries of callers without a
	// valid token, oldest first.
	anonAudit []AuditEntry
}

// billingBook owns what work costs and who pays: billing projects (members,
// storage prefixes, spend limits, log quotas), the rates in force and each
// project's bill.
type billingBook struct {
	*core
	*batchBook
	*identityBook
	*placeBook

	rates    map[string][]billing.Rate // by resource, versions by ValidFrom
	bills    map[string]*projectBill   // what each billing project has cost
	projects map[string]*BillingProject
}

// placeBook owns where work may go: clusters, cluster groups, the queue tree
// (with each project's default queue and the queues in order) and the
// attempts told to stop.
type placeBook struct {
	*core
	*batchBook
	*billingBook
	*instanceBook
	*machineBook

	clusters map[string]*Cluster
	queues   map[string]*Queue // by path
	// pastUse is each user's decayed use in each queue tree that has a
	// usage half-life (placement.Decay), by top queue and user, and each
	// leaf queue's of such a tree (pastKey).
	pastUse map[pastKey]pastUse
	// stopping: the attempts told to stop (Preempt) until they end.
	stopping     map[attemptKey]stopOrder
	groups       map[string]*ClusterGroup
	projectQueue map[string]*Queue // derived from queues: each project's default queue
	queueOrder   []*Queue          // derived: the queues by path (a parent before its children)
	// queueVersions are the kept versions of the trees' regenerated
	// settings, oldest first (QueueVersion); versionSeq numbers them;
	// autoRuns is when each tree (by top queue) was last regenerated.
	queueVersions []QueueVersion
	versionSeq    uint64
	autoRuns      map[string]int64
	// pathScratch holds the quotas quotaAdmits reads (apply's alone).
	pathScratch [placement.MaxQueueDepth]placement.Quota
}

// machineBook owns the autoscaler's side: its settings, launch configs,
// the machines it launched, capacity marks and its recent decisions.
type machineBook struct {
	*core
	*batchBook
	*billingBook
	*instanceBook
	*placeBook

	// The autoscaler's settings, launch configs, machines, capacity
	// marks and recent decisions.
	autoscaler    Autoscaler
	launchConfigs map[string]*LaunchConfig
	machines      map[string]*Machine
	marks         map[string]*CapacityMark
	decisions     []Decision
}

// instanceBook owns the workers: instances by ID, by token hash and by
// identity, and the next instance ID.
type instanceBook struct {
	*core
	*batchBook
	*machineBook
	*placeBook

	nextInstance   uint32
	instances      map[uint32]*Instance
	instTokens     map[string]uint32
	instByIdentity map[string]uint32
}

// memberBook owns the servers' own records: the gossip keyring,
// decommissioned servers and the timeline of history stores.
type memberBook struct {
	*core

	// gossipKeys is the gossip keyring, primary first (nil until an
	// operator rotates keys).
	gossipKeys []string
	// decommissioned are the servers an operator removed for good: not
	// made voters again (autopilot asks), by ID.
	decommissioned map[string]Decommissioned
	// timeline, forks and historyStore: see timeline.go.
	timeline     uint64
	forks        []Fork
	historyStore string
}

// batchBook owns the work: batches and their jobs, idempotency keys, each
// user's ready queues, the job IDs reserved and the tallies admission
// reads.
type batchBook struct {
	*core
	*billingBook
	*identityBook
	*instanceBook
	*machineBook
	*memberBook
	*placeBook

	nextBatch uint64
	batches   map[uint64]*Batch
	batchIDs  []uint64 // ascending
	keys      map[string]uint64
	// jobCounts: jobs by state over all batches, kept as they move
	// (metrics read it instead of walking the batches).
	jobTotals totals
	sched     map[string]*userSched
	held      Footprint // job IDs reserved, groups and batches, over all batches (admission)
	// userTallies and projectTallies: what each user and billing project
	// holds (admission); batches point at theirs.
	userTallies    map[string]*Tally
	projectTallies map[string]*Tally
}

// wire points every aggregate at the shared core and at the aggregates
// it uses.
func (s *State) wire() {
	s.core.st = s
	s.identityBook.core = &s.core
	s.identityBook.billingBook = &s.billingBook
	s.identityBook.memberBook = &s.memberBook
	s.billingBook.core = &s.core
	s.billingBook.batchBook = &s.batchBook
	s.billingBook.identityBook = &s.identityBook
	s.billingBook.placeBook = &s.placeBook
	s.placeBook.core = &s.core
	s.placeBook.batchBook = &s.batchBook
	s.placeBook.billingBook = &s.billingBook
	s.placeBook.instanceBook = &s.instanceBook
	s.placeBook.machineBook = &s.machineBook
	s.machineBook.core = &s.core
	s.machineBook.batchBook = &s.batchBook
	s.machineBook.billingBook = &s.billingBook
	s.machineBook.instanceBook = &s.instanceBook
	s.machineBook.placeBook = &s.placeBook
	s.instanceBook.core = &s.core
	s.instanceBook.batchBook = &s.batchBook
	s.instanceBook.machineBook = &s.machineBook
	s.instanceBook.placeBook = &s.placeBook
	s.memberBook.core = &s.core
	s.batchBook.core = &s.core
	s.batchBook.billingBook = &s.billingBook
	s.batchBook.identityBook = &s.identityBook
	s.batchBook.instanceBook = &s.instanceBook
	s.batchBook.machineBook = &s.machineBook
	s.batchBook.memberBook = &s.memberBook
	s.batchBook.placeBook = &s.placeBook
	s.nomadBook.core = &s.core
	s.nomadBook.batchBook = &s.batchBook
}
