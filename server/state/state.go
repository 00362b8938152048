package state

import (
	"fmt"
	"sort"

	"github.com/drover-sched/drover/billing"
)

// ErrorKind classifies a rejected command so the API can pick a status code.
type ErrorKind int

// Error kinds.
const (
	ErrInvalid      ErrorKind = iota + 1 // the request cannot be applied as written (400)
	ErrNotFound                          // a named object does not exist (404)
	ErrConflict                          // the object is in a state that forbids it (409)
	ErrForbidden                         // the caller may not do this (403)
	ErrUnauthorized                      // the caller did not prove who it is (401)
)

// ApplyError is a command rejected by the state machine. It is returned as the
// Apply response, never panicked: rejection is deterministic too.
type ApplyError struct {
	Kind ErrorKind
	Msg  string
}

func (e *ApplyError) Error() string { return e.Msg }

func errorf(kind ErrorKind, format string, args ...any) *ApplyError {
	return &ApplyError{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Hooks are told about changes so that loops outside the state machine can
// react. They run on apply's goroutine, with the state lock held, and must
// not block or call back into the State; Transition alone may run before
// the change it reports is visible to readers (an update's commit is made
// without the lock and published after, prepareCommitUpdate), in the
// same order either way.
type Hooks struct {
	// Work: jobs became Ready or resources were freed; the scheduler should run.
	Work func()
	// Instance: the assignments or kills of one instance changed.
	Instance func(id uint32)
	// AllInstances: possibly every instance's kills changed (a batch was
	// cancelled).
	AllInstances func()
	// Transition is called for every job state change (tests and metrics),
	// with the Raft index of the command that made it.
	Transition func(index, batch uint64, job uint32, from, to JobState)
	// Keyring: the gossip keyring changed (GossipKeyring).
	Keyring func()
	// Spend: a billing project with a spend limit started or ended an
	// attempt, or its limit changed: when it reaches its limit may have
	// moved (SpendCheck).
	Spend func()
}

// State is the whole replicated state. All methods are safe for concurrent
// use; Apply holds the write lock, readers hold the read lock briefly.
type State struct {
	core
	identityBook
	billingBook
	placeBook
	machineBook
	instanceBook
	memberBook
	batchBook
	nomadBook
}

// New returns an empty state.
func New() *State {
	s := &State{}
	s.nextBatch, s.nextInstance = 1, 1
	s.batches = map[uint64]*Batch{}
	s.keys = map[string]uint64{}
	s.users = map[string]*User{}
	s.tokens = map[string]*Token{}
	s.rates = map[string][]billing.Rate{}
	s.bills = map[string]*projectBill{}
	s.projects = map[string]*BillingProject{}
	s.instances = map[uint32]*Instance{}
	s.instTokens = map[string]uint32{}
	s.instByIdentity = map[string]uint32{}
	s.clusters = map[string]*Cluster{}
	s.queues = map[string]*Queue{}
	s.stopping = map[attemptKey]stopOrder{}
	s.pastUse = map[pastKey]pastUse{}
	s.autoRuns = map[string]int64{}
	s.groups = map[string]*ClusterGroup{}
	s.launchConfigs = map[string]*LaunchConfig{}
	s.machines = map[string]*Machine{}
	s.marks = map[string]*CapacityMark{}
	s.projectQueue = map[string]*Queue{}
	s.sched = map[string]*userSched{}
	s.userTallies = map[string]*Tally{}
	s.projectTallies = map[string]*Tally{}
	s.decommissioned = map[string]Decommissioned{}
	s.nomadJobs = map[NomadKey]*NomadJob{}
	s.nomadHeld = map[string]nomadTally{}
	s.wire()
	return s
}

// SetHooks installs change notifications. Call before applying anything.
func (s *State) SetHooks(h Hooks) {
	s.mu.Lock()
	s.hooks = h
	s.mu.Unlock()
}

// Index returns the Raft index of the last applied command.
func (s *State) Index() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index
}

// Apply applies one decoded command at a Raft index and returns its result:
// a command-specific value or an *ApplyError.
func (s *State) Apply(index uint64, c Command) any {
	return s.ApplyBatch([]uint64{index}, []Command{c})[0]
}

// ApplyBatch applies several commands in order. Raft hands over up to 64
// entries at once (several 10,000-job bunches while batches are
// submitted); holding the lock for all of them stalled readers (the
// scheduling round, workers' syncs) for up to 300 ms. So the lock is held
// for a bounded amount of work: entries are applied under one hold while
// the work they carry (work: jobs, placements, events) stays within
// holdWork, and an entry larger than that holds it alone. A reader waits
// behind at most holdWork of work or one entry, whose cost the limits on
// an entry bound (a request's body for a bunch of jobs, the leader's
// MaxPlacements and MaxEventsPerEntry). An update's commit, whose cost
// grows with the update, is prepared without the lock and holds it only
// to be published (prepare). Taking the lock for every entry instead
// hands it over up to 64 times a batch where a submission's small
// entries need not, each time perhaps to a reader that waits for a core.
// No clock decides when to let go. Every state between two entries is
// one the log passes through, so readers may see it. betweenHolds, for
// tests, runs with the lock let go before the entry at i.
func (s *State) ApplyBatch(indexes []uint64, cmds []Command) []any {
	out := make([]any, len(cmds))
	o := s.mu.obs.Load()
	for i := 0; i < len(cmds); {
		if i > 0 && s.betweenHolds != nil {
			s.betweenHolds(i)
		}
		if p := s.prepare(o, indexes[i], cmds[i]); p != nil {
			tk := s.mu.lockApply(o)
			out[i] = s.publish(o, indexes[i], cmds[i], p)
			s.mu.unlockApply(o, tk, 1)
			i++
			continue
		}
		tk := s.mu.lockApply(o)
		held, n := 0, 0
		for ; i < len(cmds); i++ {
			w := work(cmds[i])
			if n > 0 && held+w > holdWork {
				break
			}
			out[i] = s.applyEntry(o, indexes[i], cmds[i])
			held, n = held+w, n+1
		}
		s.mu.unlockApply(o, tk, n)
	}
	return out
}

// holdWork is the work (see work) that apply does under one hold of the
// state's lock, unless one entry carries more: about a millisecond of
// CPU.
const holdWork = 4096

// work is what applying c costs in the units of holdWork: the jobs,
// placed jobs or events it carries, plus one. A command whose cost
// depends on the state rather than on its size (a commit makes its whole
// update live, a cancellation or a retirement ends what is running,
// forgetting batches drops them) counts as a whole hold, so it holds the
// lock alone.
func work(c Command) int {
	switch c := c.(type) {
	case *AddJobs:
		return 1 + len(c.Jobs)
	case *CreateBatch:
		return 1 + len(c.Jobs)
	case *RegisterNomadJob:
		if c.Batch != nil {
			return 1 + len(c.Batch.Jobs)
		}
		return 1
	case *LaunchNomadJob:
		if c.Child.Batch != nil {
			return 1 + len(c.Child.Batch.Jobs)
		}
		return 1
	case *CreateUpdate:
		return 1 + len(c.Jobs)
	case *Plan:
		n := 1
		for _, p := range c.Placements {
			n += int(p.Count)
		}
		return n
	case *Events:
		return 1 + len(c.Events)
	case *CommitUpdate, *CancelBatch, *CancelJobGroup, *RetryJobs, *DeregisterNomadJob, *ForgetBatches, *ExpireUpdates, *Retire, *ForgetInstances, *ApplyPlacement, *DeleteUser:
		return holdWork
	}
	return 1
}

func (s *State) applyLocked(index uint64, c Command) any {
	if index > s.index {
		s.index = index
	}
	switch c := c.(type) {
	case nil:
		return nil
	case *Bootstrap:
		return s.applyBootstrap(c)
	case *CreateUser:
		return s.applyCreateUser(c)
	case *CreateBillingProject:
		return s.applyCreateBillingProject(c)
	case *DeleteBillingProject:
		return s.applyDeleteBillingProject(c)
	case *RemoveDeclared:
		return s.applyRemoveDeclared(c)
	case *Decommission:
		return s.applyDecommission(c)
	case *SetMember:
		return s.applySetMember(c)
	case *CreateBatch:
		return s.applyCreateBatch(c)
	case *CreateUpdate:
		return s.applyCreateUpdate(c)
	case *AddJobs:
		return s.applyAddJobs(c)
	case *CommitUpdate:
		return s.prepareCommitUpdate(s.index, c)()
	case *CancelBatch:
		return s.applyCancelBatch(c)
	case *Plan:
		return s.applyPlan(c)
	case *Events:
		return s.applyEvents(c)
	case *Activate:
		return s.applyActivate(c)
	case *Retire:
		return s.applyRetire(c)
	case *RotateToken:
		return s.applyRotateToken(c)
	case *ExpireUpdates:
		return s.applyExpireUpdates(c)
	case *SetCluster:
		return s.applySetCluster(c)
	case *SetTeam:
		return s.applySetTeam(c)
	case *SetQueue:
		return s.applySetQueue(c)
	case *AutoApplyQueues:
		return s.applyAutoApplyQueues(c)
	case *RollbackQueues:
		return s.applyRollbackQueues(c)
	case *Preempt:
		return s.applyPreempt(c)
	case *RetryJobs:
		return s.applyRetryJobs(c)
	case *CancelJobGroup:
		return s.applyCancelJobGroup(c)
	case *ApplyPlacement:
		return s.applyApplyPlacement(c)
	case *Scale:
		return s.applyScale(index, c)
	case *LaunchDone:
		return s.applyLaunchDone(c)
	case *MachineGone:
		return s.applyMachineGone(c)
	case *GossipKeyring:
		return s.applyGossipKeyring(c)
	case *CreateToken:
		return s.applyCreateToken(c)
	case *RevokeToken:
		return s.applyRevokeToken(c)
	case *DeleteUser:
		return s.applyDeleteUser(c)
	case *SetSpendLimit:
		return s.applySetSpendLimit(c)
	case *SetLogQuota:
		return s.applySetLogQuota(c)
	case *Audit:
		return s.applyAudit(c)
	case *SetRates:
		return s.applySetRates(c)
	case *MarkExported:
		return s.applyMarkExported(c)
	case *AdoptStore:
		return s.applyAdoptStore(c)
	case *SetCloudPrices:
		return s.applySetCloudPrices(c)
	case *ForgetBatches:
		return s.applyForgetBatches(c)
	case *ForgetInstances:
		return s.applyForgetInstances(c)
	case *CallbackDone:
		return s.applyCallbackDone(c)
	case *SetStoragePrefix:
		return s.applySetStoragePrefix(c)
	case *RemoveStoragePrefix:
		return s.applyRemoveStoragePrefix(c)
	case *SetProjectSettings:
		return s.applySetProjectSettings(c)
	case *JoinTokens:
		return s.applyJoinTokens(c)
	case *RegisterNomadJob:
		return s.applyRegisterNomadJob(c)
	case *DeregisterNomadJob:
		return s.applyDeregisterNomadJob(c)
	case *LaunchNomadJob:
		return s.applyLaunchNomadJob(c)
	}
	panic(fmt.Sprintf("state: no apply for %T", c))
}

func (s *core) notifyWork() {
	if s.hooks.Work != nil {
		s.hooks.Work()
	}
}

func (s *core) notifyInstance(id uint32) {
	if s.hooks.Instance != nil {
		s.hooks.Instance(id)
	}
}

func (s *core) notifyAllInstances() {
	if s.hooks.AllInstances != nil {
		s.hooks.AllInstances()
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
