package state

import (
	"crypto/sha1"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/autoscaler/caps"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// The autoscaler's consensus state: its settings and launch configs, every
// machine it launched with its price and state, the configs it found
// capacity-limited, and the reasons of its last decisions. A decision is a
// Scale command the leader proposes; apply checks it against the caps
// again, so no leader, however stale its view, can take the live machines
// past a node or spend cap. Machine IDs and launch request keys are made
// from the Raft index of the Scale entry, so a new leader that repeats a
// launch the old one started sends the same key, and the provider makes
// nothing twice.

// Machine states (as the autoscaler package numbers them).
const (
	MachineRequested uint8 = iota + 1
	MachineLaunching
	MachineActive
	MachineDraining
	MachineDeleted
	MachineFailed
)

// MachineStateName names a machine state.
func MachineStateName(st uint8) string {
	switch st {
	case MachineRequested:
		return "requested"
	case MachineLaunching:
		return "launching"
	case MachineActive:
		return "active"
	case MachineDraining:
		return "draining"
	case MachineDeleted:
		return "deleted"
	case MachineFailed:
		return "failed"
	}
	return fmt.Sprintf("state(%d)", st)
}

func machineLive(st uint8) bool { return st >= MachineRequested && st <= MachineDraining }

// Autoscaler is the deployment's autoscaler: whether it runs, its caps
// over every config together, its timeouts and its ranking strategy.
// Durations are nanoseconds; zero caps are no cap. MaxPerHour is a
// money.Rate: a float of dollars in log entries and snapshots of servers
// before integral prices, read as the nearest nano-dollar.
type Autoscaler struct {
	Enabled             bool
	Strategy            string
	MaxNodes            int64
	MaxPerHour          money.Rate
	MaxAddsPerMinute    int64
	MaxRemovesPerMinute int64
	BootTimeout         int64
	IdleTimeout         int64
	LameTimeout         int64
	Backoff             int64
	MaxBackoff          int64
	Window              int64
	SpotPreemptions     int64
	// NamePrefix starts every machine's name (default "drover").
	NamePrefix string
	// Consolidate drains the least busy machine when the fleet has room
	// to spare (the API's default).
	Consolidate bool
}

// LaunchConfig is a machine type in a zone, spot or not, for one pool of
// one cluster, with its price and its own caps (money.Rate: nano-dollars
// an hour; a float of dollars from a server before integral prices is
// read as the nearest).
type LaunchConfig struct {
	Name                string
	Cluster             string
	Pool                string
	MachineType         string
	Zone                string
	Spot                bool
	Reserved            bool
	CPUMilli            int64
	Memory              int64
	GPUType             string
	GPUs                int64
	PricePerHour        money.Rate
	MaxNodes            int64
	MaxPerHour          money.Rate
	MaxAddsPerMinute    int64
	MaxRemovesPerMinute int64
	// PriceFromCloud: PricePerHour is what the cluster's provider says
	// the cloud charges (SetCloudPrices, refreshed by the leader), the
	// admin's price_per_hour only until the first is read (0: not
	// launched until then). PriceAt is when the cloud's price was last
	// read (0: never).
	PriceFromCloud bool
	PriceAt        int64
	// Capacity is how many machines of the config a provider that holds
	// configs to one (the local provider) runs at once before refusing a
	// launch for want of capacity, as a cloud does (0: no limit; 0 to
	// MaxCapacity). The planner does not read it.
	Capacity int64
}

// MaxCapacity bounds a launch config's capacity.
const MaxCapacity = 100_000

// sameMachine reports whether two configs make the same machine at the
// same price source: a cloud's price read for one holds for the other.
func (c *LaunchConfig) sameMachine(o *LaunchConfig) bool {
	return c.PriceFromCloud && o.PriceFromCloud && c.Cluster == o.Cluster && c.MachineType == o.MachineType && c.Zone == o.Zone &&
		c.Spot == o.Spot && c.CPUMilli == o.CPUMilli && c.Memory == o.Memory && c.GPUs == o.GPUs && c.GPUType == o.GPUType
}

// Machine is a machine the autoscaler launched.
type Machine struct {
	ID           string
	Config       string
	Cluster      string
	Pool         string
	State        uint8
	PricePerHour money.Rate // as launched
	CPUMilli     int64
	Memory       int64
	// Launch is the index of the Scale entry that asked for it; Request
	// the idempotency key of its launch (one per config in an entry).
	Launch     uint64
	Request    string
	ProviderID string
	// Instance is its worker once it activated (0: not yet).
	Instance uint32
	Created  int64
	Since    int64
	// Deleted is when its deletion was decided (for the remove rate).
	Deleted int64
	Reason  string
	// ForBatch and ForJob: the job this machine was made for alone (a job
	// with a machine_type); 0 for a machine of the shared fleet.
	ForBatch uint64
	ForJob   uint32
	// JoinHash is the hash of the machine's one-time join token (empty:
	// none minted yet, or a machine from before join tokens), JoinExpires
	// when the token stops working (the launch plus the boot timeout), and
	// JoinUsed when the machine got its worker (0: not yet): from then on
	// the token joins nothing.
	JoinHash    string
	JoinExpires int64
	JoinUsed    int64
}

// private reports whether the machine was made for one job.
func (m *Machine) private() bool { return m.ForBatch != 0 }

// CapacityMark says a config could not be filled; it is skipped until
// Until. SpotPreemptions counts its machines reclaimed since SpotSince
// (within SpotWindow of it).
type CapacityMark struct {
	Config          string
	Until           int64
	Backoff         int64
	Reason          string
	SpotPreemptions int64
	SpotSince       int64
	// Misconfigured: the provider said the config can never be filled as
	// it is (absent before); it waits the longest backoff.
	Misconfigured bool
}

// SpotWindow is how close together a spot config's reclaims must come to
// count towards Autoscaler.SpotPreemptions: a market that takes several
// machines back within it is one to stay away from for a while; one
// reclaim now and then is the price of spot.
const SpotWindow = int64(10 * time.Minute)

// Decision is one of the autoscaler's recent decisions, for people.
type Decision struct {
	Time int64
	Text string
}

// maxDecisions bounds the decisions kept; maxDeletedMachines the deleted
// or failed machines kept (the newest), so the state does not grow with
// every machine ever launched.
const (
	maxDecisions       = 256
	maxDeletedMachines = 1000
)

// MaxLaunchConfigs bounds the launch configs of a deployment, and
// MaxLaunchPerConfig the machines one Scale entry asks of one config.
const (
	MaxLaunchConfigs   = 1000
	MaxLaunchPerConfig = 1000
)

// ScaleLaunch asks for Count machines of a config.
type ScaleLaunch struct {
	Config string
	Count  int64
	Reason string
}

// ScaleDelete retires a machine.
type ScaleDelete struct {
	Machine string
	Reason  string
}

// Scale is one autoscaler decision.
type Scale struct {
	Now      int64
	Launches []ScaleLaunch
	Deletes  []ScaleDelete
	// Notes are the decision's other reasons (demand held, configs
	// skipped), kept with it.
	Notes []string
	// Revives takes draining machines back into service (their worker
	// still active): demand came back before they emptied.
	Revives []string
	// Private launches one machine for one Ready job that names a
	// machine_type: the job is creating until the machine's worker runs
	// it.
	Private []ScalePrivate
}

// ScalePrivate asks for a job's own machine, of a config of its machine
// type.
type ScalePrivate struct {
	Config string
	Batch  uint64
	Job    uint32
	Reason string
}

// ScaleResult lists the machines a Scale made, by launch request.
type ScaleResult struct {
	Requests []LaunchRequest
	// Capped counts machines apply refused for a cap the leader's view
	// missed.
	Capped int64
}

// LaunchRequest is one config's machines of a Scale, under one key.
type LaunchRequest struct {
	Key      string
	Config   string
	Machines []string
}

// LaunchDone records what the provider made of a request: the machines
// created (now launching), and, when it said so, that the rest could not
// be made (capacity or quota): those fail and the config is marked.
type LaunchDone struct {
	Now     int64
	Request string
	Created []LaunchedMachine
	// Refused: the provider gave a definite answer for the rest.
	Refused         bool
	CapacityLimited bool
	Reason          string
	// Misconfigured: refused because the config can never be filled as
	// it is (a constraint, a missing driver): marked for the longest
	// backoff, not as capacity.
	Misconfigured bool
}

// LaunchedMachine is a machine a provider made.
type LaunchedMachine struct {
	Machine    string
	ProviderID string
}

// MachineGone records that a machine no longer exists (deleted by drover,
// reclaimed by the cloud, or found missing). Its worker is retired.
type MachineGone struct {
	Now       int64
	Machine   string
	Reason    string
	Preempted bool
}

func (*Scale) Type() CommandType       { return CmdScale }
func (*LaunchDone) Type() CommandType  { return CmdLaunchDone }
func (*MachineGone) Type() CommandType { return CmdMachineGone }

// ValidateLaunchConfig checks a launch config as apply will, so the API
// refuses it before it reaches the log.
func ValidateLaunchConfig(c *LaunchConfig) error {
	if err := validateLaunchConfig(c); err != nil {
		return err
	}
	return nil
}

func validateLaunchConfig(c *LaunchConfig) *ApplyError {
	if err := checkPlaceName("launch config", c.Name); err != nil {
		return err
	}
	if err := checkPlaceName("cluster", c.Cluster); err != nil {
		return err
	}
	if c.Pool == "" {
		c.Pool = DefaultPool
	}
	if err := checkPlaceName("pool", c.Pool); err != nil {
		return err
	}
	if len(c.MachineType) > 128 || len(c.Zone) > 128 {
		return errorf(ErrInvalid, "launch config %s: machine type and zone are at most 128 bytes", c.Name)
	}
	if c.CPUMilli <= 0 || c.CPUMilli > 4096*1000 || c.Memory <= 0 || c.Memory > 1<<50 {
		return errorf(ErrInvalid, "launch config %s: cpu must be more than 0 and at most 4096 cores, memory more than 0", c.Name)
	}
	if c.GPUs < 0 || c.GPUs > MaxGPUs {
		return errorf(ErrInvalid, "launch config %s: 0 to %d GPUs", c.Name, MaxGPUs)
	}
	if c.GPUs > 0 {
		if err := checkPlaceName("GPU type", c.GPUType); err != nil {
			return err
		}
	}
	if err := validPrice("launch config "+c.Name+": price_per_hour", c.PricePerHour); err != nil {
		return err
	}
	if err := validPrice("launch config "+c.Name+": max_per_hour", c.MaxPerHour); err != nil {
		return err
	}
	for _, n := range []int64{c.MaxNodes, c.MaxAddsPerMinute, c.MaxRemovesPerMinute} {
		if n < 0 || n > 1e6 {
			return errorf(ErrInvalid, "launch config %s: node caps and rates are 0 (none) to 1,000,000", c.Name)
		}
	}
	if c.Capacity < 0 || c.Capacity > MaxCapacity {
		return errorf(ErrInvalid, "launch config %s: capacity %d is out of range (0, no limit, to %d)", c.Name, c.Capacity, MaxCapacity)
	}
	return nil
}

// ValidateAutoscaler checks autoscaler settings as apply will.
func ValidateAutoscaler(a *Autoscaler) error {
	if err := validateAutoscaler(a); err != nil {
		return err
	}
	return nil
}

func validateAutoscaler(a *Autoscaler) *ApplyError {
	switch a.Strategy {
	case "", "cheapest", "prefer-large", "prefer-reserved":
	default:
		return errorf(ErrInvalid, "autoscaler: unknown strategy %.40q (cheapest, prefer-large or prefer-reserved)", a.Strategy)
	}
	if err := validPrice("autoscaler: max_per_hour", a.MaxPerHour); err != nil {
		return err
	}
	for _, n := range []int64{a.MaxNodes, a.MaxAddsPerMinute, a.MaxRemovesPerMinute, a.SpotPreemptions} {
		if n < 0 || n > 1e6 {
			return errorf(ErrInvalid, "autoscaler: node caps, rates and spot preemptions are 0 to 1,000,000")
		}
	}
	for _, d := range []int64{a.BootTimeout, a.IdleTimeout, a.LameTimeout, a.Backoff, a.MaxBackoff, a.Window} {
		if d < 0 || d > int64(30*24*time.Hour) {
			return errorf(ErrInvalid, "autoscaler: timeouts are 0 to 30 days")
		}
	}
	if a.NamePrefix != "" && (len(a.NamePrefix) > 20 || !dnsLabel(a.NamePrefix)) {
		return errorf(ErrInvalid, "autoscaler: name_prefix %.30q: up to 20 lowercase letters, digits and '-', starting with a letter", a.NamePrefix)
	}
	return nil
}

// MaxPricePerHour bounds a machine's or a pool's price and a spend cap:
// a billion dollars an hour, far past any machine. Sums of prices
// saturate at money.MaxRate (money.Rate.Add), so no count of machines at
// it can wrap past a cap.
const MaxPricePerHour = 1_000_000_000 * money.DollarPerHour

// ValidatePrice checks a price or a spend cap (what names it) against 0
// and MaxPricePerHour, as apply will, so the API refuses it before the
// log.
func ValidatePrice(what string, r money.Rate) error {
	if err := validPrice(what, r); err != nil {
		return err
	}
	return nil
}

// validPrice is ValidatePrice's rule, which apply asks again.
func validPrice(what string, r money.Rate) *ApplyError {
	if r < 0 || r > MaxPricePerHour {
		return errorf(ErrInvalid, "%s: $%s an hour is out of range (0 to %s dollars an hour)", what, r, MaxPricePerHour)
	}
	return nil
}

// dnsLabel: lowercase letters, digits and '-', starting with a letter
// (what GCE and most clouds accept in a machine name).
func dnsLabel(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '-')) {
			return false
		}
	}
	return s != ""
}

// RequestKey is the idempotency key of the launch of a config's machines
// by the Scale entry at index: a UUID (GCE's requestId must be one) made
// from the deployment's prefix, the index and the config, so every leader
// makes the same.
func RequestKey(prefix string, index uint64, config string) string {
	sum := sha1.Sum([]byte(fmt.Sprintf("drover/%s/%d/%s", prefix, index, config)))
	sum[6] = sum[6]&0x0f | 0x50 // version 5
	sum[8] = sum[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
}

func (a *Autoscaler) prefix() string {
	if a.NamePrefix == "" {
		return "drover"
	}
	return a.NamePrefix
}

// liveTotals counts live machines and their spend, in all and for one
// config, and the adds and removes of the minute before now.
type liveTotals struct {
	nodes, adds, removes int64
	spend                money.Rate // an integer sum: the map's order is no matter
}

// roomFor reports whether one more machine of cfg stays within the node,
// spend and add caps, over every config (all) and its own (one): the
// caps' one rule, which the autoscaler's planner asked first.
func (a *Autoscaler) roomFor(cfg *LaunchConfig, all, one liveTotals) bool {
	return caps.Hold(caps.Limits{MaxNodes: a.MaxNodes, MaxPerHour: a.MaxPerHour, MaxAddsPerMinute: a.MaxAddsPerMinute}, all.use(),
		cfg.Name, caps.Limits{MaxNodes: cfg.MaxNodes, MaxPerHour: cfg.MaxPerHour, MaxAddsPerMinute: cfg.MaxAddsPerMinute}, one.use(), cfg.PricePerHour) == ""
}

// use is what the caps count of the totals.
func (t liveTotals) use() caps.Use { return caps.Use{Nodes: t.nodes, PerHour: t.spend, Adds: t.adds} }

func (s *machineBook) totals(config string, now int64) (all, one liveTotals) {
	minuteAgo := now - int64(time.Minute)
	for _, m := range s.machines {
		for _, t := range []*liveTotals{&all, &one} {
			if t == &one && m.Config != config {
				continue
			}
			if machineLive(m.State) {
				t.nodes++
				t.spend = t.spend.Add(m.PricePerHour)
			}
			if m.Created > minuteAgo {
				t.adds++
			}
			if m.Deleted > minuteAgo {
				t.removes++
			}
		}
	}
	return all, one
}

func (s *machineBook) applyScale(index uint64, c *Scale) any {
	res := &ScaleResult{}
	a := &s.autoscaler
	seq := 0
	for _, l := range c.Launches {
		cfg := s.launchConfigs[l.Config]
		if cfg == nil || l.Count <= 0 {
			continue
		}
		if cl := s.clusters[cfg.Cluster]; cl != nil && cl.Disabled {
			res.Capped += l.Count
			continue
		}
		if m := s.marks[cfg.Name]; m != nil && c.Now < m.Until {
			res.Capped += l.Count
			continue
		}
		req := LaunchRequest{Key: RequestKey(a.prefix(), index, cfg.Name), Config: cfg.Name}
		// The caps again, with this entry's machines counted: a leader's
		// view may be behind the log.
		all, one := s.totals(cfg.Name, c.Now)
		n := min(l.Count, MaxLaunchPerConfig)
		for k := int64(0); k < n; k++ {
			if !a.roomFor(cfg, all, one) {
				res.Capped += l.Count - k
				break
			}
			for _, t := range []*liveTotals{&all, &one} {
				t.nodes++
				t.adds++
				t.spend = t.spend.Add(cfg.PricePerHour)
			}
			id := fmt.Sprintf("%s-%d-%d", a.prefix(), index, seq)
			seq++
			m := &Machine{ID: id, Config: cfg.Name, Cluster: cfg.Cluster, Pool: cfg.Pool, State: MachineRequested, PricePerHour: cfg.PricePerHour,
				CPUMilli: cfg.CPUMilli, Memory: cfg.Memory, Launch: index, Request: req.Key, Created: c.Now, Since: c.Now, Reason: l.Reason}
			s.machines[id] = m
			req.Machines = append(req.Machines, id)
		}
		if len(req.Machines) > 0 {
			res.Requests = append(res.Requests, req)
			s.decide(c.Now, l.Reason)
		}
	}
	for _, pv := range c.Private {
		cfg := s.launchConfigs[pv.Config]
		b := s.batches[pv.Batch]
		if cfg == nil || b == nil || b.Cancelled || pv.Job < 1 || int(pv.Job) > len(b.jobs) {
			continue
		}
		j := &b.jobs[pv.Job-1]
		g := b.groupOf(pv.Job)
		if j.state != Ready || g == nil || g.spec.Where == nil || g.spec.Where.MachineType != cfg.MachineType || !s.configAdmits(cfg, b, g.spec) {
			continue
		}
		if cl := s.clusters[cfg.Cluster]; (cl != nil && cl.Disabled) || (s.marks[cfg.Name] != nil && c.Now < s.marks[cfg.Name].Until) || !s.quotaAdmits(b, g.spec) || s.spendReached(b.BillingProject, c.Now) {
			res.Capped++
			continue
		}
		if all, one := s.totals(cfg.Name, c.Now); !a.roomFor(cfg, all, one) {
			res.Capped++
			continue
		}
		id := fmt.Sprintf("%s-%d-%d", a.prefix(), index, seq)
		seq++
		key := RequestKey(a.prefix(), index, fmt.Sprintf("%s/%d/%d", cfg.Name, pv.Batch, pv.Job))
		s.machines[id] = &Machine{ID: id, Config: cfg.Name, Cluster: cfg.Cluster, Pool: cfg.Pool, State: MachineRequested, PricePerHour: cfg.PricePerHour,
			CPUMilli: cfg.CPUMilli, Memory: cfg.Memory, Launch: index, Request: key, Created: c.Now, Since: c.Now, Reason: pv.Reason,
			ForBatch: pv.Batch, ForJob: pv.Job}
		// Ready -> Creating: out of the queue, waiting for its machine.
		if s.hooks.Transition != nil {
			s.hooks.Transition(s.index, b.ID, pv.Job, Ready, Creating)
		}
		s.dequeue(b, Range{pv.Job, pv.Job}, g.spec.CPUMilli)
		b.count(g.spec, Ready, -1)
		b.count(g.spec, Creating, 1)
		j.state = Creating
		res.Requests = append(res.Requests, LaunchRequest{Key: key, Config: cfg.Name, Machines: []string{id}})
		s.decide(c.Now, pv.Reason)
	}
	for _, d := range c.Deletes {
		m := s.machines[d.Machine]
		if m == nil || !machineLive(m.State) || m.State == MachineDraining {
			continue
		}
		s.unlinkPrivate(m, c.Now)
		m.State, m.Since, m.Deleted, m.Reason = MachineDraining, c.Now, c.Now, d.Reason
		s.decide(c.Now, fmt.Sprintf("delete %s: %s", m.ID, d.Reason))
		if m.Instance != 0 {
			s.notifyInstance(m.Instance)
		}
	}
	for _, id := range c.Revives {
		m := s.machines[id]
		if m == nil || m.State != MachineDraining {
			continue
		}
		if inst := s.instances[m.Instance]; inst == nil || !inst.Active {
			continue
		}
		m.State, m.Since, m.Deleted, m.Reason = MachineActive, c.Now, 0, "revived: jobs wait"
		s.decide(c.Now, "revive "+m.ID+": jobs wait for its room")
		s.notifyWork()
	}
	for _, n := range c.Notes {
		s.decide(c.Now, n)
	}
	return res
}

// decide keeps a decision's reason, dropping the oldest past maxDecisions.
func (s *machineBook) decide(now int64, text string) {
	if len(text) > 1024 {
		text = text[:1024]
	}
	s.decisions = append(s.decisions, Decision{Time: now, Text: text})
	if len(s.decisions) > maxDecisions {
		s.decisions = slices.Delete(s.decisions, 0, len(s.decisions)-maxDecisions)
	}
}

func (s *machineBook) applyLaunchDone(c *LaunchDone) any {
	created := map[string]string{}
	for _, lm := range c.Created {
		created[lm.Machine] = lm.ProviderID
	}
	var cfg string
	failed := 0
	for _, id := range s.sortedMachineIDs() {
		m := s.machines[id]
		if m.Request != c.Request {
			continue
		}
		cfg = m.Config
		if pid, ok := created[id]; ok {
			if m.State == MachineRequested {
				m.State, m.Since, m.ProviderID = MachineLaunching, c.Now, pid
			}
			continue
		}
		if c.Refused && m.State == MachineRequested {
			s.unlinkPrivate(m, c.Now)
			m.State, m.Since, m.Deleted, m.Reason = MachineFailed, c.Now, c.Now, "not made: "+c.Reason
			failed++
		}
	}
	switch {
	case c.Misconfigured && cfg != "":
		s.markMisconfigured(cfg, c.Now, c.Reason)
		s.decide(c.Now, fmt.Sprintf("%s misconfigured (%s): %d of its machines not made; fix the launch config or the provider", cfg, c.Reason, failed))
	case c.CapacityLimited && cfg != "":
		s.markCapacity(cfg, c.Now, c.Reason)
		s.decide(c.Now, fmt.Sprintf("%s capacity-limited (%s): %d of its machines not made", cfg, c.Reason, failed))
	}
	s.trimMachines()
	return nil
}

// markMisconfigured marks a config the provider can never fill as it is:
// skipped for the longest backoff (an hour when none is set), then tried
// again (an operator may have fixed the provider meanwhile).
func (s *machineBook) markMisconfigured(config string, now int64, reason string) {
	m := s.marks[config]
	if m == nil {
		m = &CapacityMark{Config: config}
		s.marks[config] = m
	}
	m.Backoff = s.autoscaler.MaxBackoff
	if m.Backoff <= 0 {
		m.Backoff = int64(time.Hour)
	}
	m.Until, m.Reason, m.Misconfigured = now+m.Backoff, reason, true
}

// markCapacity marks a config capacity-limited, doubling its backoff when
// it was marked before (up to MaxBackoff).
func (s *machineBook) markCapacity(config string, now int64, reason string) {
	a := &s.autoscaler
	first := a.Backoff
	if first <= 0 {
		first = int64(time.Minute)
	}
	m := s.marks[config]
	if m == nil {
		m = &CapacityMark{Config: config}
		s.marks[config] = m
	}
	switch {
	case m.Backoff == 0:
		m.Backoff = first
	case now < m.Until+2*m.Backoff:
		m.Backoff *= 2
	default:
		m.Backoff = first
	}
	if a.MaxBackoff > 0 {
		m.Backoff = min(m.Backoff, a.MaxBackoff)
	}
	m.Until, m.Reason, m.Misconfigured = now+m.Backoff, reason, false
}

func (s *machineBook) applyMachineGone(c *MachineGone) any {
	m := s.machines[c.Machine]
	if m == nil || m.State == MachineDeleted || m.State == MachineFailed {
		return nil
	}
	if m.State != MachineDraining {
		m.Deleted = c.Now
	}
	s.unlinkPrivate(m, c.Now)
	m.State, m.Since, m.Reason = MachineDeleted, c.Now, c.Reason
	if inst := s.instances[m.Instance]; inst != nil && inst.Active {
		s.retire(inst, c.Now, "machine "+m.ID+" gone: "+c.Reason, 0, c.Preempted)
	}
	if cfg := s.launchConfigs[m.Config]; cfg != nil && cfg.Spot && c.Preempted {
		mk := s.marks[cfg.Name]
		if mk == nil {
			mk = &CapacityMark{Config: cfg.Name}
			s.marks[cfg.Name] = mk
		}
		if mk.SpotPreemptions == 0 || c.Now-mk.SpotSince > SpotWindow {
			mk.SpotPreemptions, mk.SpotSince = 0, c.Now
		}
		mk.SpotPreemptions++
		if n := s.autoscaler.SpotPreemptions; n > 0 && mk.SpotPreemptions >= n {
			s.markCapacity(cfg.Name, c.Now, fmt.Sprintf("spot machines reclaimed %d times in %s; on-demand configs meanwhile",
				mk.SpotPreemptions, time.Duration(c.Now-mk.SpotSince).Round(time.Second)))
			mk.SpotPreemptions = 0
		}
	}
	s.decide(c.Now, fmt.Sprintf("%s gone: %s", m.ID, c.Reason))
	s.trimMachines()
	s.notifyWork()
	return nil
}

// linkMachine ties an activating worker to the machine it runs on.
func (s *machineBook) linkMachine(inst *Instance, machine string, now int64) *ApplyError {
	m := s.machines[machine]
	if m == nil || !machineLive(m.State) || m.State == MachineDraining {
		return errorf(ErrConflict, "machine %q is not one the autoscaler has live", machine)
	}
	if m.Instance != 0 {
		if old := s.instances[m.Instance]; old != nil && old.Active && old.ID != inst.ID {
			s.retire(old, now, "its machine's worker activated again", 0, false)
		}
	}
	m.Instance, m.State, m.Since = inst.ID, MachineActive, now
	if m.JoinHash != "" && m.JoinUsed == 0 {
		// A machine with a worker has no use for its join token.
		m.JoinUsed = now
	}
	inst.Machine, inst.Config = machine, m.Config
	if m.private() {
		s.startPrivate(m, inst, now)
	}
	return nil
}

// startPrivate runs a private machine's job on its worker as soon as the
// worker activates: creating -> running, a new attempt. A worker too
// small for it (a config that changed), or a billing project that reached
// its spend limit while the machine came up, sends the job back to Ready
// and drains the machine.
func (s *batchBook) startPrivate(m *Machine, inst *Instance, now int64) {
	b := s.batches[m.ForBatch]
	if b == nil || int(m.ForJob) > len(b.jobs) || b.jobs[m.ForJob-1].state != Creating {
		return
	}
	j := &b.jobs[m.ForJob-1]
	g := b.groupOf(m.ForJob)
	size := g.spec.Size()
	if !inst.free().Fits(size) {
		s.dropPrivate(b.ID, m.ForJob, now, "its worker is too small for it")
		s.requeue(b, g, m.ForJob, j, true, now)
		return
	}
	if s.spendReached(b.BillingProject, now) {
		s.dropPrivate(b.ID, m.ForJob, now, "its job's billing project reached its spend limit")
		s.requeue(b, g, m.ForJob, j, true, now)
		return
	}
	if j.attempt > 0 {
		b.archive(m.ForJob, j)
	}
	if s.hooks.Transition != nil {
		s.hooks.Transition(s.index, b.ID, m.ForJob, Creating, Running)
	}
	*j = job{state: Running, attempt: j.attempt + 1, instance: inst.ID, failures: j.failures, lost: j.lost, spotLost: j.spotLost}
	b.count(g.spec, Creating, -1)
	b.count(g.spec, Running, 1)
	inst.hold(size, 1)
	if inst.running == nil {
		inst.running = map[attemptKey]struct{}{}
	}
	inst.running[attemptKey{b.ID, m.ForJob}] = struct{}{}
	s.charge(b, g.spec, inst, +1)
	u := s.userSched(b.User)
	u.runningMilli += size.CPUMilli
	u.runningJobs++
	s.notifyInstance(inst.ID)
}

// unlinkPrivate sends a private machine's job back to Ready when the
// machine goes (failed, deleted, drained) before the job started on it.
func (s *batchBook) unlinkPrivate(m *Machine, now int64) {
	if !m.private() {
		return
	}
	b := s.batches[m.ForBatch]
	if b == nil || int(m.ForJob) > len(b.jobs) || b.jobs[m.ForJob-1].state != Creating {
		return
	}
	s.requeue(b, b.groupOf(m.ForJob), m.ForJob, &b.jobs[m.ForJob-1], true, now)
}

// dropPrivate drains the live machine made for a job (its job was
// cancelled, ended or no longer needs it).
func (s *machineBook) dropPrivate(batch uint64, id uint32, now int64, reason string) {
	for _, mid := range s.sortedMachineIDs() {
		m := s.machines[mid]
		if m.ForBatch == batch && m.ForJob == id && machineLive(m.State) && m.State != MachineDraining {
			m.State, m.Since, m.Deleted, m.Reason = MachineDraining, now, now, reason
			if m.Instance != 0 {
				s.notifyInstance(m.Instance)
			}
		}
	}
}

// reserved reports whether an instance runs on a machine kept for one job
// or being drained, or its worker said it is leaving: the scheduler places
// nothing there.
func (s *machineBook) reserved(inst *Instance) bool {
	if inst.Leaving {
		return true
	}
	if inst.Machine == "" {
		return false
	}
	m := s.machines[inst.Machine]
	return m != nil && (m.State == MachineDraining || m.private())
}

// draining reports whether an instance's machine is being emptied for
// deletion: no new attempt goes there.
func (s *machineBook) draining(inst *Instance) bool {
	if inst.Machine == "" {
		return false
	}
	m := s.machines[inst.Machine]
	return m != nil && m.State == MachineDraining
}

// trimMachines drops the oldest deleted and failed machines past
// maxDeletedMachines.
func (s *machineBook) trimMachines() {
	var gone []*Machine
	for _, m := range s.machines {
		if !machineLive(m.State) {
			gone = append(gone, m)
		}
	}
	if len(gone) <= maxDeletedMachines {
		return
	}
	slices.SortFunc(gone, func(a, b *Machine) int {
		if a.Since != b.Since {
			if a.Since < b.Since {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, m := range gone[:len(gone)-maxDeletedMachines] {
		delete(s.machines, m.ID)
	}
}

func (s *machineBook) sortedMachineIDs() []string {
	ids := make([]string, 0, len(s.machines))
	for id := range s.machines {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *machineBook) applyJoinTokens(c *JoinTokens) any {
	for _, t := range c.Tokens {
		m := s.machines[t.Machine]
		if m == nil || m.State != MachineRequested || m.JoinHash != "" || t.Hash == "" || len(t.Hash) > 128 {
			continue
		}
		m.JoinHash, m.JoinExpires = t.Hash, t.Expires
	}
	return nil
}

// machineRates are the rates launch configs being set give (see
// billing.MachineRates): for each config new or changed in price or
// shape, a version of each of its rates from now. A config set again as
// it was adds nothing, so a rate an admin set over it stays in force.
func (s *machineBook) machineRates(configs []LaunchConfig) []RateEntry {
	var out []RateEntry
	for i := range configs {
		lc := &configs[i]
		if old := s.launchConfigs[lc.Name]; old != nil && old.Pool == lc.Pool && old.PricePerHour == lc.PricePerHour &&
			old.CPUMilli == lc.CPUMilli && old.Memory == lc.Memory && old.GPUs == lc.GPUs && old.GPUType == lc.GPUType {
			continue
		}
		for _, r := range billing.MachineRates(billing.Machine{Config: lc.Name, Pool: lc.Pool, CPUMilli: lc.CPUMilli, Memory: lc.Memory,
			GPUType: lc.GPUType, GPUs: lc.GPUs, PerHour: lc.PricePerHour}) {
			out = append(out, RateEntry{Resource: r.Resource, Price: r.PerHour})
		}
	}
	return out
}
