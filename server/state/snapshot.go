package state

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// snapshotVersion is bumped when the snapshot layout changes: 2 since
// money is integral (version 1 held float dollars, which Restore still
// reads; a server that reads only 1 refuses a 2 instead of reading
// nano-dollars as dollars), 3 since prices and spend caps (pools', launch
// configs', machines', the autoscaler's) are too (version 2 held them as
// float dollars, read as the nearest nano-dollar).
const snapshotVersion = 3

// Snapshot is a point-in-time copy of the state, taken under the read lock
// and encoded later without it.
type Snapshot struct {
	data *snapState
}

type snapState struct {
	Version      int
	Index        uint64
	NextBatch    uint64
	NextInstance uint32
	Users        []User
	Projects     []snapProject
	Instances    []snapInstance
	Batches      []snapBatch
	Clusters     []Cluster
	// Teams: a snapshot's from before queues, restored as queues
	// (Team.queue); new snapshots write Queues.
	Teams  []Team
	Groups []ClusterGroup // absent in snapshots from before cluster groups
	// The autoscaler's (absent in snapshots from before it).
	Autoscaler    Autoscaler
	LaunchConfigs []LaunchConfig
	Machines      []Machine
	Marks         []CapacityMark
	Decisions     []Decision
	// GossipKeys: the rotated gossip keyring (absent before rotation).
	GossipKeys []string
	// Tokens (absent before tokens had names: each user's TokenHash is
	// then its one token) and the audit log.
	Tokens []Token
	Audit  []AuditEntry
	Rates  []billing.Rate // every version of every resource's rate
	Bills  map[string]projectBill
	// AnonAudit: the audit log of callers without a valid token (absent
	// before it was kept apart).
	AnonAudit []AuditEntry
	// Queues: the queue tree (absent before queues); Stops: the attempts
	// told to stop (absent before preemption).
	Queues []Queue
	Stops  []snapStop
	// Decommissioned servers (absent before decommissioning).
	Decommissioned []Decommissioned
	// Timeline, Forks and HistoryStore (absent before timelines).
	Timeline     uint64
	Forks        []Fork
	HistoryStore string
	// NomadJobs: the Nomad jobs registered (absent before the Nomad API).
	NomadJobs []NomadJob
	// PastUse: users' decayed past use (absent before usage half-lives).
	PastUse []snapPast
	// QueueVersions, VersionSeq and AutoRuns: the trees' regenerated
	// settings (absent before auto_apply).
	QueueVersions []QueueVersion
	VersionSeq    uint64
	AutoRuns      map[string]int64
}

type snapProject struct {
	Name       string
	Members    []string
	Created    int64
	Roles      map[string]string // absent before roles: all members
	SpendLimit money.Amount      // a float of dollars before integral money
	LogQuota   int64             // absent before log quotas
	// Storage and AllowHostNetwork: absent before storage prefixes.
	Storage          []StoragePrefix
	AllowHostNetwork bool
	Batches          int64 // absent before projects could be deleted
	MaxPriority      int64 // absent before priority caps
}

type snapInstance struct {
	Instance
	Running   []snapKey
	Node      string // Instance.NodeID
	Region    string
	Cluster   string
	Pool      string
	Labels    StringMap
	GPUType   string
	GPUs      int64
	FreeGPU   int64
	Machine   string
	Config    string
	Version   string // absent before workers said
	LastEnded int64  // absent before machines told it
	Leaving   bool   // absent before workers said
}

type snapKey struct {
	Batch uint64
	Job   uint32
}

type snapUpdate struct {
	ID        uint32
	Start     uint32
	N         uint32
	Committed bool
	Discarded bool
	Key       string
	Created   int64
	Staged    []JobEntry
	NStaged   uint32
	Seen      []uint64
	// Touched and Reason: absent in snapshots from before update expiry
	// (Touched is then the creation time).
	Touched int64
	Reason  string
	// KeyDigest: absent before requests reusing a key were told apart.
	KeyDigest []byte
}

type snapGroup struct {
	First   uint32
	Count   uint32
	Spec    *Spec
	Parents []int32
	Pending uint32
	// Base: see group (absent before OOM retries: First).
	Base uint32
}

// snapGroups is a batch's groups in a snapshot, encoded as []snapGroup.
// A snapshot is copied under the state's read lock and encoded while the
// state goes on changing; of a committed group only pending changes, so
// the copy keeps the group pointers and their pending counts (12 bytes a
// group instead of a 48-byte snapGroup: a million distinct jobs are a
// million groups) and the rest is read while encoding.
type snapGroups struct {
	groups  []*group
	pending []uint32
	parents []int32     // the batch's groupParents
	decoded []snapGroup // what a restore read
}

// CodecEncodeSelf writes the groups exactly as a []snapGroup.
func (sg *snapGroups) CodecEncodeSelf(e *codec.Encoder) {
	_, r := codec.GenHelperEncoder(e)
	if sg.groups == nil && sg.decoded != nil {
		e.MustEncode(sg.decoded)
		return
	}
	r.WriteArrayStart(len(sg.groups))
	for i, g := range sg.groups {
		var parents []int32 // nil, as before, for a group without
		if g.pHi > g.pLo {
			parents = sg.parents[g.pLo:g.pHi]
		}
		r.WriteArrayElem()
		e.MustEncode(&snapGroup{First: g.first, Count: g.count, Spec: g.spec, Parents: parents, Pending: sg.pending[i], Base: g.base})
	}
	r.WriteArrayEnd()
}

// CodecDecodeSelf reads what CodecEncodeSelf wrote.
func (sg *snapGroups) CodecDecodeSelf(d *codec.Decoder) {
	d.MustDecode(&sg.decoded)
}

type snapRange struct {
	Lo, Hi    uint32
	Remaining uint32
	Failed    uint32
	Children  []uint32
}

type snapAttempt = attemptRec

type snapBatch struct {
	ID             uint64
	Name           string
	User           string
	BillingProject string
	Attributes     map[string]string
	Key            string
	Created        int64
	Completed      int64
	Cancelled      bool
	CancelReason   string
	NextJob        uint32
	NJobs          int64
	Counts         []int64
	Updates        []snapUpdate
	Jobs           []byte // jobRecordSize bytes per job, little endian
	Groups         snapGroups
	Ranges         []snapRange
	Ready          []Range
	ReadyMilli     int64
	Messages       map[uint32]string
	History        map[uint32][]snapAttempt
	// Lost counts, per job ID, attempts lost with their instance (only
	// jobs that lost any; absent in snapshots from before the count).
	Lost map[uint32]uint8
	// Usage is the current attempts' reported usage, by job ID (absent
	// in snapshots from before usage).
	Usage map[uint32]Usage
	// Bill is what the batch has cost (absent before billing).
	Bill batchBill
	// Version and Exported: see Batch (absent before history).
	Version  uint64
	Exported uint64
	// KeyDigest: see snapUpdate.
	KeyDigest []byte
	// CancelAfter: see Batch.CancelAfterFailures (absent before it).
	CancelAfter uint32
	// Callback, CallbackVersion, CallbackResult: see Batch (absent before
	// callbacks).
	Callback        string
	CallbackVersion uint64
	CallbackResult  string
	// Queue and Priority: see Batch (absent before queues).
	Queue    string
	Priority int32
	// SLO and Deadline: see Batch (absent before SLOs).
	SLO      int64
	Deadline int64
	// ReadyAgain: how many of Ready's first runs came back to the queue
	// (readyQueue.again; absent before it).
	ReadyAgain int
	// Memory: see Batch.memory (absent before OOM retries).
	Memory map[uint32]int64
	// SpotLost counts, per job ID, attempts lost on spot machines of a
	// job with a spot cap (only jobs that have any; absent before it).
	SpotLost map[uint32]uint8
	// JobGroups: see Batch.jobGroups, in ID order (absent before job
	// groups).
	JobGroups []snapJobGroup
}

// snapJobGroup is a job group as a snapshot keeps it: what its counts and
// running charges are not rebuilt from.
type snapJobGroup struct {
	ID, Parent      uint32
	Path            string
	Attributes      StringMap
	Callback        string
	CancelAfter     uint32
	Cancelled       bool
	CancelReason    string
	Completed       int64
	Version         uint64
	CallbackVersion uint64
	CallbackResult  string
	Accrued         money.Amount
	Gang            bool
	GangUniformity  string
}

const jobRecordSize = 8 + 8 + 4 + 4 + 2 + 2 + 1 + 1

// packJobs encodes job records, and returns the lost and spot-lost
// counts of the jobs that have any (kept beside the records, whose size
// is fixed).
func packJobs(jobs []job) ([]byte, map[uint32]uint8, map[uint32]uint8) {
	out := make([]byte, len(jobs)*jobRecordSize)
	var lost, spotLost map[uint32]uint8
	for i := range jobs {
		j := &jobs[i]
		if j.lost > 0 {
			if lost == nil {
				lost = map[uint32]uint8{}
			}
			lost[uint32(i+1)] = j.lost
		}
		if j.spotLost > 0 {
			if spotLost == nil {
				spotLost = map[uint32]uint8{}
			}
			spotLost[uint32(i+1)] = j.spotLost
		}
		p := out[i*jobRecordSize:]
		binary.LittleEndian.PutUint64(p[0:], uint64(j.start))
		binary.LittleEndian.PutUint64(p[8:], uint64(j.end))
		binary.LittleEndian.PutUint32(p[16:], j.instance)
		binary.LittleEndian.PutUint32(p[20:], uint32(j.exit))
		binary.LittleEndian.PutUint16(p[24:], j.attempt)
		binary.LittleEndian.PutUint16(p[26:], j.failures)
		p[28] = byte(j.state)
		p[29] = byte(j.outcome)
	}
	return out, lost, spotLost
}

func unpackJobs(data []byte) ([]job, error) {
	if len(data)%jobRecordSize != 0 {
		return nil, fmt.Errorf("job records: %d bytes is not a multiple of %d", len(data), jobRecordSize)
	}
	jobs := make([]job, len(data)/jobRecordSize)
	for i := range jobs {
		p := data[i*jobRecordSize:]
		jobs[i] = job{
			start:    int64(binary.LittleEndian.Uint64(p[0:])),
			end:      int64(binary.LittleEndian.Uint64(p[8:])),
			instance: binary.LittleEndian.Uint32(p[16:]),
			exit:     int32(binary.LittleEndian.Uint32(p[20:])),
			attempt:  binary.LittleEndian.Uint16(p[24:]),
			failures: binary.LittleEndian.Uint16(p[26:]),
			state:    JobState(p[28]),
			outcome:  Outcome(p[29]),
		}
	}
	return jobs, nil
}

// Snapshot copies the state. Specs are immutable and shared; everything that
// changes is copied.
func (s *State) Snapshot() *Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := &snapState{
		Version:      snapshotVersion,
		Index:        s.index,
		NextBatch:    s.nextBatch,
		NextInstance: s.nextInstance,
	}
	for _, name := range sortedKeys(s.users) {
		d.Users = append(d.Users, *s.users[name])
	}
	for _, name := range sortedKeys(s.projects) {
		p := s.projects[name]
		d.Projects = append(d.Projects, snapProject{Name: p.Name, Members: sortedKeys(p.Members), Created: p.Created,
			Roles: maps.Clone(p.Roles), SpendLimit: p.SpendLimit, LogQuota: p.LogQuota, Storage: slices.Clone(p.Storage), AllowHostNetwork: p.AllowHostNetwork, Batches: p.Batches, MaxPriority: p.MaxPriority})
	}
	instIDs := make([]uint32, 0, len(s.instances))
	for id := range s.instances {
		instIDs = append(instIDs, id)
	}
	sort.Slice(instIDs, func(i, j int) bool { return instIDs[i] < instIDs[j] })
	for _, id := range instIDs {
		inst := s.instances[id]
		si := snapInstance{Instance: *inst, Node: inst.NodeID, Region: inst.Region, Cluster: inst.Cluster, Pool: inst.Pool, Labels: inst.Labels,
			GPUType: inst.GPUType, GPUs: inst.GPUs, FreeGPU: inst.FreeGPUs, Machine: inst.Machine, Config: inst.Config, Version: inst.Version, LastEnded: inst.LastEnded, Leaving: inst.Leaving}
		si.Instance.running = nil
		for k := range inst.running {
			si.Running = append(si.Running, snapKey{k.batch, k.job})
		}
		sort.Slice(si.Running, func(i, j int) bool {
			a, b := si.Running[i], si.Running[j]
			if a.Batch != b.Batch {
				return a.Batch < b.Batch
			}
			return a.Job < b.Job
		})
		d.Instances = append(d.Instances, si)
	}
	for _, id := range s.batchIDs {
		d.Batches = append(d.Batches, s.batches[id].snapshot())
	}
	for _, name := range sortedKeys(s.clusters) {
		cl := *s.clusters[name]
		cl.Pools = slices.Clone(cl.Pools)
		d.Clusters = append(d.Clusters, cl)
	}
	for _, name := range sortedKeys(s.groups) {
		d.Groups = append(d.Groups, *s.groups[name])
	}
	d.Autoscaler = s.autoscaler
	for _, name := range sortedKeys(s.launchConfigs) {
		d.LaunchConfigs = append(d.LaunchConfigs, *s.launchConfigs[name])
	}
	for _, id := range s.sortedMachineIDs() {
		d.Machines = append(d.Machines, *s.machines[id])
	}
	for _, name := range sortedKeys(s.marks) {
		d.Marks = append(d.Marks, *s.marks[name])
	}
	d.Decisions = slices.Clone(s.decisions)
	d.GossipKeys = slices.Clone(s.gossipKeys)
	for _, id := range sortedKeys(s.decommissioned) {
		d.Decommissioned = append(d.Decommissioned, s.decommissioned[id])
	}
	for _, k := range sortedNomadKeys(s.nomadJobs) {
		d.NomadJobs = append(d.NomadJobs, s.nomadJobs[k].copy())
	}
	d.Tokens = make([]Token, 0, len(s.tokens))
	for _, h := range sortedKeys(s.tokens) {
		d.Tokens = append(d.Tokens, *s.tokens[h])
	}
	d.Audit = slices.Clone(s.audit)
	d.AnonAudit = slices.Clone(s.anonAudit)
	for _, name := range sortedKeys(s.rates) {
		d.Rates = append(d.Rates, s.rates[name]...)
	}
	d.Bills = map[string]projectBill{}
	for name, p := range s.bills {
		c := *p
		c.Daily = maps.Clone(p.Daily)
		d.Bills[name] = c
	}
	for _, path := range sortedKeys(s.queues) {
		q := *s.queues[path]
		q.Queue = cloneQueue(q.Queue)
		q.Projects, q.AllowProjects = slices.Clone(q.Projects), slices.Clone(q.AllowProjects)
		q.parent, q.used = nil, queueUse{}
		d.Queues = append(d.Queues, q)
	}
	d.Stops = s.snapStops()
	d.PastUse = s.snapPastUse()
	for _, v := range s.queueVersions {
		v.Before, v.After = slices.Clone(v.Before), slices.Clone(v.After)
		d.QueueVersions = append(d.QueueVersions, v)
	}
	d.VersionSeq, d.AutoRuns = s.versionSeq, maps.Clone(s.autoRuns)
	d.Timeline, d.Forks, d.HistoryStore = s.timeline, slices.Clone(s.forks), s.historyStore
	return &Snapshot{data: d}
}

func (b *Batch) snapshot() snapBatch {
	sb := snapBatch{
		ID: b.ID, Name: b.Name, User: b.User, BillingProject: b.BillingProject, Attributes: b.Attributes,
		Key: b.Key, Created: b.Created, Completed: b.Completed, Cancelled: b.Cancelled, CancelReason: b.CancelReason, CancelAfter: b.CancelAfterFailures,
		Callback: b.Callback, CallbackVersion: b.callbackVersion, CallbackResult: b.callbackResult,
		Queue: b.Queue, Priority: b.Priority, SLO: b.SLO, Deadline: b.Deadline,
		NextJob: b.nextJob, NJobs: b.nJobs, Counts: append([]int64(nil), b.counts[:]...),
		Ready:      append([]Range(nil), b.ready.items()...),
		ReadyMilli: b.readyMilli,
		ReadyAgain: b.ready.again,
	}
	if len(b.memory) > 0 {
		sb.Memory = maps.Clone(b.memory)
	}
	for _, jg := range b.jobGroups {
		sb.JobGroups = append(sb.JobGroups, snapJobGroup{
			ID: jg.ID, Parent: jg.Parent, Path: jg.Path, Attributes: jg.Attributes, Callback: jg.Callback,
			CancelAfter: jg.CancelAfterFailures, Cancelled: jg.Cancelled, CancelReason: jg.CancelReason,
			Completed: jg.Completed, Version: jg.version, CallbackVersion: jg.callbackVersion, CallbackResult: jg.callbackResult,
			Accrued: jg.accrued, Gang: jg.Gang, GangUniformity: jg.GangUniformity,
		})
	}
	sb.Jobs, sb.Lost, sb.SpotLost = packJobs(b.jobs)
	for _, u := range b.updates {
		sb.Updates = append(sb.Updates, snapUpdate{
			ID: u.ID, Start: u.Start, N: u.N, Committed: u.Committed, Discarded: u.Discarded, Key: u.Key,
			Created: u.Created, Staged: u.jobEntries(), NStaged: u.nStaged,
			Seen: append([]uint64(nil), u.seen...), Touched: u.Touched, Reason: u.Reason, KeyDigest: u.KeyDigest,
		})
	}
	sb.Groups.groups = append([]*group(nil), b.groups...)
	sb.Groups.parents = b.groupParents
	sb.Groups.pending = make([]uint32, len(b.groups))
	for i, g := range b.groups {
		sb.Groups.pending[i] = g.pending
	}
	sb.Ranges = make([]snapRange, len(b.ranges))
	for i, r := range b.ranges {
		sb.Ranges[i] = snapRange{Lo: r.r.Lo, Hi: r.r.Hi, Remaining: r.remaining, Failed: r.failed,
			Children: append([]uint32(nil), r.children...)}
	}
	if len(b.messages) > 0 {
		sb.Messages = make(map[uint32]string, len(b.messages))
		for k, v := range b.messages {
			sb.Messages[k] = v
		}
	}
	if len(b.history) > 0 {
		sb.History = make(map[uint32][]snapAttempt, len(b.history))
		for k, v := range b.history {
			sb.History[k] = append([]snapAttempt(nil), v...)
		}
	}
	if len(b.usage) > 0 {
		sb.Usage = maps.Clone(b.usage)
	}
	sb.Bill = batchBill{Accrued: b.bill.Accrued, Running: maps.Clone(b.bill.Running), Daily: maps.Clone(b.bill.Daily)}
	sb.Version, sb.Exported = b.version, b.exported
	sb.KeyDigest = b.keyDigest
	return sb
}

// Index is the Raft index the snapshot was taken at.
func (sn *Snapshot) Index() uint64 { return sn.data.Index }

// WriteTo encodes the snapshot.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	if err := codec.NewEncoder(cw, msgpackHandle).Encode(sn.data); err != nil {
		return cw.n, fmt.Errorf("encode snapshot: %w", err)
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Restore replaces the whole state with a snapshot written by WriteTo.
// Hooks are kept.
func (s *State) Restore(r io.Reader) error {
	var d snapState
	if err := codec.NewDecoder(r, msgpackHandle).Decode(&d); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	if d.Version < 1 || d.Version > snapshotVersion {
		return fmt.Errorf("snapshot version %d: this server reads versions 1 to %d", d.Version, snapshotVersion)
	}
	fresh := New()
	fresh.index = d.Index
	fresh.nextBatch = d.NextBatch
	fresh.nextInstance = d.NextInstance
	for i := range d.Clusters {
		cl := d.Clusters[i]
		fresh.clusters[cl.Name] = &cl
	}
	for i := range d.Teams {
		q := d.Teams[i].queue()
		fresh.queues[q.Path] = &q
	}
	for i := range d.Queues {
		q := d.Queues[i]
		fresh.queues[q.Path] = &q
	}
	for _, p := range d.PastUse {
		fresh.pastUse[pastKey{p.Top, p.User}] = pastUse{Use: p.Use, At: p.At}
	}
	fresh.queueVersions, fresh.versionSeq = d.QueueVersions, d.VersionSeq
	if d.AutoRuns != nil {
		fresh.autoRuns = d.AutoRuns
	}
	for _, st := range d.Stops {
		fresh.stopping[attemptKey{st.Batch, st.Job}] = stopOrder{attempt: st.Attempt, at: st.At, reason: st.Reason}
	}
	for i := range d.Groups {
		g := d.Groups[i]
		fresh.groups[g.Name] = &g
	}
	fresh.autoscaler = d.Autoscaler
	for i := range d.LaunchConfigs {
		c := d.LaunchConfigs[i]
		fresh.launchConfigs[c.Name] = &c
	}
	for i := range d.Machines {
		m := d.Machines[i]
		fresh.machines[m.ID] = &m
	}
	for i := range d.Marks {
		m := d.Marks[i]
		fresh.marks[m.Config] = &m
	}
	fresh.decisions = d.Decisions
	fresh.gossipKeys = d.GossipKeys
	for _, dc := range d.Decommissioned {
		fresh.decommissioned[dc.ID] = dc
	}
	for i := range d.NomadJobs {
		j := d.NomadJobs[i]
		fresh.nomadJobs[NomadKey{j.Namespace, j.ID}] = &j
	}
	fresh.timeline, fresh.forks, fresh.historyStore = d.Timeline, d.Forks, d.HistoryStore
	for i := range d.Users {
		u := d.Users[i]
		fresh.users[u.Name] = &u
		if d.Tokens == nil && u.TokenHash != "" {
			fresh.addToken(&Token{Hash: u.TokenHash, User: u.Name, Name: "default", Created: u.Created})
		}
	}
	for i := range d.Tokens {
		t := d.Tokens[i]
		fresh.tokens[t.Hash] = &t
	}
	fresh.audit, fresh.anonAudit = d.Audit, d.AnonAudit
	for _, r := range d.Rates {
		fresh.rates[r.Resource] = append(fresh.rates[r.Resource], r)
	}
	for name, p := range d.Bills {
		// The running sums are rebuilt from the batches' charges
		// (restoreCharges); a snapshot from before integral money
		// carries float sums here, which are dropped.
		p.Running, p.RunPrice, p.RunPriceStart, p.run = 0, 0, 0, billing.Running{}
		fresh.bills[name] = &p
	}
	for _, p := range d.Projects {
		bp := &BillingProject{Name: p.Name, Members: map[string]bool{}, Roles: p.Roles, Created: p.Created, SpendLimit: p.SpendLimit, LogQuota: p.LogQuota,
			Storage: p.Storage, AllowHostNetwork: p.AllowHostNetwork, Batches: p.Batches, MaxPriority: p.MaxPriority}
		if bp.Roles == nil {
			bp.Roles = map[string]string{}
		}
		for _, m := range p.Members {
			bp.Members[m] = true
		}
		fresh.projects[p.Name] = bp
	}
	for _, si := range d.Instances {
		inst := si.Instance
		inst.NodeID = si.Node
		inst.Region, inst.Cluster, inst.Pool, inst.Labels = si.Region, si.Cluster, si.Pool, si.Labels
		inst.GPUType, inst.GPUs, inst.FreeGPUs = si.GPUType, si.GPUs, si.FreeGPU
		inst.Machine, inst.Config, inst.Version, inst.LastEnded, inst.Leaving = si.Machine, si.Config, si.Version, si.LastEnded, si.Leaving
		if inst.Cluster == "" { // a snapshot from before placement
			inst.Region, inst.Cluster, inst.Pool = DefaultRegion, DefaultCluster, DefaultPool
		}
		if fresh.clusters[inst.Cluster] == nil {
			fresh.clusters[inst.Cluster] = &Cluster{Name: inst.Cluster, Region: inst.Region, Created: inst.Activated, Since: inst.Activated}
		}
		inst.running = map[attemptKey]struct{}{}
		for _, k := range si.Running {
			inst.running[attemptKey{k.Batch, k.Job}] = struct{}{}
		}
		fresh.instances[inst.ID] = &inst
		fresh.instTokens[inst.TokenHash] = inst.ID
		if inst.Active {
			fresh.instByIdentity[inst.identity()] = inst.ID
		}
	}
	for _, sb := range d.Batches {
		b, err := restoreBatch(sb)
		if err != nil {
			return fmt.Errorf("batch %d: %w", sb.ID, err)
		}
		fresh.batches[b.ID] = b
		fresh.batchIDs = append(fresh.batchIDs, b.ID)
		fresh.held.Jobs += int64(b.nextJob) - 1
		fresh.held.Groups += int64(len(b.groups))
		n, bytes := b.jobGroupsHeld()
		fresh.held.JobGroups += n
		fresh.held.JobGroupBytes += bytes
		fresh.held.Batches++
		if b.Key != "" {
			fresh.keys[b.User+"\x00"+b.Key] = b.ID
		}
		u := fresh.userSched(b.User)
		if !b.ready.empty() {
			u.readyMilli += b.readyMilli
			u.readyJobs += b.counts[Ready]
			u.active = append(u.active, b) // batchIDs ascend, so active stays sorted
		}
		for id := range b.jobs {
			if b.jobs[id].state == Running {
				u.runningMilli += b.groupOf(uint32(id + 1)).spec.CPUMilli
				u.runningJobs++
			}
		}
		fresh.restoreCharges(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index, s.nextBatch, s.nextInstance = fresh.index, fresh.nextBatch, fresh.nextInstance
	s.batches, s.batchIDs, s.keys = fresh.batches, fresh.batchIDs, fresh.keys
	s.users, s.tokens, s.projects, s.audit, s.rates, s.bills = fresh.users, fresh.tokens, fresh.projects, fresh.audit, fresh.rates, fresh.bills
	s.anonAudit = fresh.anonAudit
	s.instances, s.instTokens, s.instByIdentity = fresh.instances, fresh.instTokens, fresh.instByIdentity
	s.sched, s.held = fresh.sched, fresh.held
	s.clusters, s.queues, s.groups = fresh.clusters, fresh.queues, fresh.groups
	s.stopping = fresh.stopping
	s.pastUse = fresh.pastUse
	s.queueVersions, s.versionSeq, s.autoRuns = fresh.queueVersions, fresh.versionSeq, fresh.autoRuns
	s.autoscaler, s.launchConfigs, s.machines, s.marks, s.decisions = fresh.autoscaler, fresh.launchConfigs, fresh.machines, fresh.marks, fresh.decisions
	s.gossipKeys = fresh.gossipKeys
	s.decommissioned = fresh.decommissioned
	s.nomadJobs = fresh.nomadJobs
	s.nomadHeld = fresh.recountNomad()
	s.timeline, s.forks, s.historyStore = fresh.timeline, fresh.forks, fresh.historyStore
	s.recomputeTallies()
	s.recomputeQueueUse()
	s.notifyAllInstances()
	s.notifyWork()
	if s.hooks.Keyring != nil {
		s.hooks.Keyring()
	}
	return nil
}

func restoreBatch(sb snapBatch) (*Batch, error) {
	jobs, err := unpackJobs(sb.Jobs)
	if err != nil {
		return nil, err
	}
	b := &Batch{
		ID: sb.ID, Name: sb.Name, User: sb.User, BillingProject: sb.BillingProject, Attributes: sb.Attributes,
		Key: sb.Key, Created: sb.Created, Completed: sb.Completed, Cancelled: sb.Cancelled, CancelReason: sb.CancelReason,
		CancelAfterFailures: sb.CancelAfter,
		Callback:            sb.Callback, callbackVersion: sb.CallbackVersion, callbackResult: sb.CallbackResult,
		Queue: sb.Queue, Priority: sb.Priority, SLO: sb.SLO, Deadline: sb.Deadline,
		nextJob: sb.NextJob, nJobs: sb.NJobs, jobs: jobs, readyMilli: sb.ReadyMilli,
		messages: sb.Messages, version: sb.Version, exported: sb.Exported, keyDigest: sb.KeyDigest,
	}
	if b.Completed != 0 && b.version == 0 {
		// Complete before history: a version every server agrees on.
		b.version = 1
	}
	copy(b.counts[:], sb.Counts)
	for id, n := range sb.Lost {
		if id < 1 || int(id) > len(jobs) {
			return nil, fmt.Errorf("batch %d: lost count for job %d of %d", sb.ID, id, len(jobs))
		}
		jobs[id-1].lost = n
	}
	for id, n := range sb.SpotLost {
		if id < 1 || int(id) > len(jobs) {
			return nil, fmt.Errorf("batch %d: spot-lost count for job %d of %d", sb.ID, id, len(jobs))
		}
		jobs[id-1].spotLost = n
	}
	for _, u := range sb.Updates {
		if !u.Committed && !u.Discarded {
			b.open++
		}
		touched := u.Touched
		if touched == 0 {
			touched = u.Created
		}
		b.updates = append(b.updates, &update{
			ID: u.ID, Start: u.Start, N: u.N, Committed: u.Committed, Discarded: u.Discarded, Key: u.Key,
			Created: u.Created, Touched: touched, Reason: u.Reason, staged: stagedBunches(u.Staged, u.Start), nStaged: u.NStaged, seen: u.Seen,
			KeyDigest: u.KeyDigest,
		})
	}
	b.groups = make([]*group, len(sb.Groups.decoded))
	groups := make([]group, len(sb.Groups.decoded))
	for i, g := range sb.Groups.decoded {
		lo := uint32(len(b.groupParents))
		b.groupParents = append(b.groupParents, g.Parents...)
		base := g.Base
		if base == 0 || base > g.First {
			base = g.First
		}
		groups[i] = group{first: g.First, count: g.Count, base: base, spec: g.Spec, pLo: lo, pHi: uint32(len(b.groupParents)), pending: g.Pending}
		b.groups[i] = &groups[i]
		if g.Spec != nil && g.Spec.Where != nil && g.Spec.Where.MachineType != "" {
			b.private = true
		}
	}
	b.ranges = make([]*depRange, len(sb.Ranges))
	for i, r := range sb.Ranges {
		b.ranges[i] = &depRange{r: Range{r.Lo, r.Hi}, remaining: r.Remaining, failed: r.Failed, children: r.Children}
	}
	b.indexRanges(0)
	for _, r := range sb.Ready {
		b.ready.push(r)
	}
	if sb.ReadyAgain < 0 || sb.ReadyAgain > len(sb.Ready) {
		return nil, fmt.Errorf("batch %d: %d of %d ready runs came back", sb.ID, sb.ReadyAgain, len(sb.Ready))
	}
	b.ready.again = sb.ReadyAgain
	if len(sb.History) > 0 {
		b.history = make(map[uint32][]attemptRec, len(sb.History))
		for k, v := range sb.History {
			b.history[k] = v
		}
	}
	b.bill = sb.Bill
	if len(sb.Usage) > 0 {
		b.usage = sb.Usage
	}
	if len(sb.Memory) > 0 {
		b.memory = sb.Memory
	}
	for i, g := range sb.JobGroups {
		if g.ID != uint32(i+1) || g.Parent >= g.ID {
			return nil, fmt.Errorf("batch %d: job group %d (%s) of parent %d out of order", sb.ID, g.ID, g.Path, g.Parent)
		}
		jg := &JobGroup{
			ID: g.ID, Parent: g.Parent, Path: g.Path, Attributes: g.Attributes, Callback: g.Callback,
			CancelAfterFailures: g.CancelAfter, Cancelled: g.Cancelled, CancelReason: g.CancelReason,
			Completed: g.Completed, version: g.Version, callbackVersion: g.CallbackVersion, callbackResult: g.CallbackResult,
			accrued: g.Accrued, depth: 1, Gang: g.Gang, GangUniformity: g.GangUniformity,
		}
		if g.Parent != 0 {
			jg.depth = b.jobGroups[g.Parent-1].depth + 1
		}
		b.addJobGroup(jg)
		jg.dirty = false
	}
	b.dirtyGroups = nil
	for _, g := range b.groups {
		if g.spec != nil && int(g.spec.JobGroup()) > len(b.jobGroups) {
			return nil, fmt.Errorf("batch %d: jobs from %d are in job group %d of %d", sb.ID, g.first, g.spec.JobGroup(), len(b.jobGroups))
		}
	}
	b.recountGroups()
	return b, nil
}

// stagedBunches keeps a restored update's staged entries as one bunch.
func stagedBunches(entries []JobEntry, start uint32) []stagedBunch {
	if len(entries) == 0 {
		return nil
	}
	return []stagedBunch{newStagedBunch(entries, start)}
}
