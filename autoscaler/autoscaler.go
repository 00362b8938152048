// Package autoscaler decides how many machines each cluster's pools need
// and which launch configs provide them, under global and per-config caps
// on nodes, spend rate and add/remove rate (Aurora's Batch Autoscaler),
// from the head of each user's ready queue within a window (Hail Batch's
// windowed fair share), and retires machines that stay idle, never boot or
// go lame (Arvados' dispatcher). It is pure: Plan reads an Input copied
// from the replicated state, with the time in it, and returns decisions
// with their reasons; the server records them through Raft and the
// providers (autoscaler/provider/...) carry them out.
package autoscaler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/autoscaler/caps"
	"github.com/drover-sched/drover/money"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/scheduler"
)

// LaunchConfig is a way to get a machine: a machine type in a zone, spot or
// on-demand, that serves one pool of one cluster, at a price.
type LaunchConfig struct {
	Name        string
	Cluster     string
	Region      string
	Pool        string
	MachineType string
	Zone        string
	Spot        bool
	// Reserved: capacity bought ahead (a reservation), preferred by the
	// prefer-reserved strategy.
	Reserved bool
	CPUMilli int64
	Memory   int64
	GPUType  string
	GPUs     int64
	// PricePerHour is what one machine costs an hour.
	PricePerHour money.Rate

	// Limits of this config alone (zero: none).
	MaxNodes            int
	MaxPerHour          money.Rate
	MaxAddsPerMinute    int
	MaxRemovesPerMinute int
	// AwaitingPrice: the config takes the cloud's price and none has
	// been read yet; it is not launched until one is (its 0 would rank
	// it cheapest).
	AwaitingPrice bool
	// Capacity is how many machines of this config a provider that
	// holds configs to one (provider.CapacityHolder: the local provider)
	// runs at once before it refuses a launch for want of capacity (0:
	// no limit). The planner does not read it: as with a cloud, drover
	// learns of capacity by asking and being refused.
	Capacity int
}

// PricePerCoreHour is the config's price of one core for an hour, rounded
// to the nano-dollar: for people and estimates. Rank configs by it with
// ComparePricePerCore, which does not round. No cores: money.MaxRate.
func (c *LaunchConfig) PricePerCoreHour() money.Rate { return c.PricePerHour.Per(c.CPUMilli, 1000) }

// ComparePricePerCore compares two configs' prices of a core-hour
// exactly (cross-multiplied, money.ComparePer): two configs priced alike
// per core compare equal whatever float64 division would say, so the
// strategies' tie breaks decide between them.
func ComparePricePerCore(a, b *LaunchConfig) int {
	return money.ComparePer(a.PricePerHour, a.CPUMilli, b.PricePerHour, b.CPUMilli)
}

// Limits bound every config together (zero: no bound).
type Limits struct {
	MaxNodes            int
	MaxPerHour          money.Rate
	MaxAddsPerMinute    int
	MaxRemovesPerMinute int
}

// Timeouts of a machine's life.
type Timeouts struct {
	// Boot: a machine whose worker has not activated this long after the
	// launch is deleted.
	Boot time.Duration
	// Idle: an active machine with nothing running this long is deleted
	// (scale to zero).
	Idle time.Duration
	// Lame: an active machine not heard from this long is deleted (its
	// attempts run elsewhere once the servers retire its worker).
	Lame time.Duration
	// Backoff is the first wait of a capacity-limited config, doubled at
	// each new limit up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// SpotPreemptions: a spot config whose machines were reclaimed this
	// many times in a row is skipped for Backoff, so on-demand configs
	// take its place (0: never).
	SpotPreemptions int
}

// DefaultTimeouts are the timeouts a cluster gets when it names none.
func DefaultTimeouts() Timeouts {
	return Timeouts{Boot: 10 * time.Minute, Idle: 2 * time.Minute, Lame: 5 * time.Minute,
		Backoff: time.Minute, MaxBackoff: 30 * time.Minute, SpotPreemptions: 3}
}

// State is a machine's place in its life.
type State uint8

// States. A machine is Requested once its launch is recorded (the
// provider may not have answered), Launching once the provider made it,
// Active once its worker activated, Draining while it is being emptied
// for deletion, and Deleted once the provider removed it (or Failed when
// the provider could not make it).
const (
	Requested State = iota + 1
	Launching
	Active
	Draining
	Deleted
	Failed
)

var stateNames = map[State]string{Requested: "requested", Launching: "launching", Active: "active", Draining: "draining", Deleted: "deleted", Failed: "failed"}

func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Live reports whether a machine in this state is paid for: requested,
// launching, active or draining. The spend and node caps count these.
func (s State) Live() bool { return s >= Requested && s <= Draining }

// Machine is a machine drover launched.
type Machine struct {
	ID     string
	Config string
	State  State
	// PricePerHour as launched (a config's price may change later).
	PricePerHour money.Rate
	CPUMilli     int64
	Memory       int64
	// FreeMilli and FreeMemory: what an active machine has free now.
	FreeMilli  int64
	FreeMemory int64
	Created    time.Time
	// Since: when it entered its state.
	Since time.Time
	// IdleSince: when an active machine last ran nothing (zero: busy).
	IdleSince time.Time
	// Heard: when its worker last synced (zero: never).
	Heard time.Time
	// ProbeOK: the provider says the machine is up (a lame machine is
	// one not heard from whose probe fails too; providers that cannot
	// probe leave it false).
	ProbeOK bool
	// Deleted: when it left (for the remove rate).
	Deleted time.Time
}

// Mark records that a config could not be filled: it is skipped until
// Until.
type Mark struct {
	Config  string
	Until   time.Time
	Backoff time.Duration
	Reason  string
	// SpotPreemptions counts machines of a spot config reclaimed in a row.
	SpotPreemptions int
	// Misconfigured: the provider can never fill the config as it is.
	Misconfigured bool
}

// Shape is a kind of job waiting for a machine, and how many of it.
type Shape struct {
	CPUMilli int64
	Memory   int64
	GPUs     int64
	// Constraint: where it may run (its GPU type among it).
	Constraint placement.Constraint
	Count      int64
	// Gang, when not 0, names a gang (unique in the demand): its Count
	// members start together in one cluster or not at all, so their
	// machines are launched together (growGang). GangUniform is its
	// gang_uniformity ("pool", "label:KEY"; "": the cluster).
	Gang        uint64
	GangUniform string
	// Parts, for a gang of members of several sizes (a job group's: a
	// launcher beside its ranks), are its members by size, the largest
	// first, each with its Count; the shape's own size is then as large
	// as the largest in each resource, and its Count all of them.
	Parts []Shape
}

// parts are a gang's members by size: Parts, or the shape itself.
func (sh *Shape) parts() []Shape {
	if len(sh.Parts) > 0 {
		return slices.Clone(sh.Parts) // the input is the caller's
	}
	return []Shape{*sh}
}

// Input is a copy of what the autoscaler needs to decide.
type Input struct {
	Now      time.Time
	Configs  []LaunchConfig
	Limits   Limits
	Timeouts Timeouts
	// Strategy ranks the configs (nil: Cheapest).
	Strategy Strategy
	Machines []Machine
	Marks    []Mark
	// Demand is the windowed head of each user's queue (WindowedDemand),
	// in fair-share order.
	Demand []Shape
	// Private are jobs that each want a machine of their own, of a
	// machine type (served before Demand: a user asked for them by name).
	Private []PrivateDemand
	// Free is what the active workers have free now (launched by the
	// autoscaler or not): demand that fits there needs no machine.
	Free []Room
	// Draining is what draining machines have free: demand takes it back
	// (the machine is revived) before a new machine is launched.
	Draining []Room
	// Consolidate: when nothing waits for a new machine and the fleet
	// has room to spare, drain the least busy machine (at most half
	// busy): its jobs finish where they are and no new one goes there,
	// so the fleet shrinks to what its work needs.
	Consolidate bool
	// Unavailable names clusters that take no new machine (disabled or
	// down).
	Unavailable map[string]bool
	// Regions of the clusters (a config's Region wins when set).
	Regions map[string]string
	// ShrinkOnly: the autoscaler is disabled. It launches nothing and
	// drains nothing to consolidate, but still deletes the machines it
	// made that timed out, idled out or lost their launch config, so
	// none runs on unwatched.
	ShrinkOnly bool
}

// Room is what one active worker has free, and where it is. Machine
// names the autoscaler's machine it runs on (empty: a worker started by
// hand); the rooms of draining machines are in Input.Draining.
type Room struct {
	Machine                        string
	Region, Cluster, Pool, GPUType string
	CPUMilli, Memory, GPUs         int64
	// TotalMilli: the worker's cores in all (0: unknown, and the
	// right-sizing rule, scheduler.LeftForLarger, never holds there).
	TotalMilli int64
	// Spot: the worker is a spot machine.
	Spot bool
}

// PrivateDemand is one job that wants a machine of its own.
type PrivateDemand struct {
	// Ref names the job for the caller.
	Ref                    string
	MachineType            string
	Constraint             placement.Constraint
	CPUMilli, Memory, GPUs int64
}

// PrivateLaunch makes one job's machine.
type PrivateLaunch struct {
	Ref    string
	Config string
	Reason string
}

// Launch asks for Count machines of a config.
type Launch struct {
	Config string
	Count  int
	Reason string
}

// Delete retires a machine.
type Delete struct {
	Machine string
	Reason  string
}

// Held is demand the plan does not serve, and why.
type Held struct {
	CPUMilli int64 // of all the jobs held
	Jobs     int64
	Reason   string
	// Marked is the launch config whose capacity-limited or
	// misconfigured mark holds the jobs ("" for any other reason), so a
	// reader can say which config and until when.
	Marked string
}

// Output is one decision.
type Output struct {
	Launches []Launch
	Deletes  []Delete
	// Revives are draining machines demand takes back.
	Revives []string
	// Private are machines made each for one job.
	Private []PrivateLaunch
	Held    []Held
	// Skipped says why configs that could have served demand were not
	// used (capacity-limited, at a cap), by config.
	Skipped map[string]string
	// Sizes are the machines the decision found it could launch, by
	// cluster and pool in the strategy's order: configs available (not
	// capacity-limited or misconfigured, priced, in a cluster that takes
	// machines) and under the node and spend caps before it launched
	// anything for the demand. The scheduler leaves an idle worker at
	// least twice the size of the one it would launch for a job to larger
	// jobs (scheduler.LeftForLarger), as the decision did when it counted
	// the free room for the demand; none when it planned no growth
	// (disabled).
	Sizes []scheduler.PoolSize
	// served[i]: the configs that got machines for Demand[i], for tests.
	served [][]string
}

// Plan decides one round: deletions first (idle, never booted, lame),
// then launches for the demand, cheapest-ranked config first, within every
// cap. It never plans a launch that would take the live machines past a
// node or spend cap, counting what is requested and launching too.
func Plan(in *Input) *Output {
	p := newPlanner(in)
	p.retire()
	if !in.ShrinkOnly {
		p.grow()
		p.consolidate()
	}
	return p.out
}

// planner holds a round's running totals.
type planner struct {
	in      *Input
	out     *Output
	free    []Room // the active workers' room left after the demand
	configs map[string]*LaunchConfig
	marks   map[string]*Mark
	// live machines and spend, in all and per config, as decided so far.
	nodes       int
	spend       money.Rate
	cfgNodes    map[string]int
	cfgSpend    map[string]money.Rate
	adds        int // launched in the last minute
	cfgAdds     map[string]int
	removes     int
	cfgRemoves  map[string]int
	ranked      []*LaunchConfig
	deleted     map[string]bool
	openBins    map[string][]bin // room on launching machines and on new ones, by config
	reasonCount map[string]int
	sizes       map[[2]string][]scheduler.PoolSize // Output.Sizes by cluster and pool
}

// bin is room on one machine (launching or planned) for demand.
type bin struct{ cpu, mem, gpus int64 }

func newPlanner(in *Input) *planner {
	p := &planner{in: in, out: &Output{Skipped: map[string]string{}}, configs: map[string]*LaunchConfig{}, marks: map[string]*Mark{},
		cfgNodes: map[string]int{}, cfgSpend: map[string]money.Rate{}, cfgAdds: map[string]int{}, cfgRemoves: map[string]int{},
		deleted: map[string]bool{}, openBins: map[string][]bin{}, reasonCount: map[string]int{}}
	for i := range in.Configs {
		c := &in.Configs[i]
		p.configs[c.Name] = c
		p.ranked = append(p.ranked, c)
	}
	strategy := in.Strategy
	if strategy == nil {
		strategy = Cheapest
	}
	slices.SortStableFunc(p.ranked, func(a, b *LaunchConfig) int {
		if c := strategy(a, b); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := range in.Marks {
		p.marks[in.Marks[i].Config] = &in.Marks[i]
	}
	minuteAgo := in.Now.Add(-time.Minute)
	for i := range in.Machines {
		m := &in.Machines[i]
		if m.State.Live() {
			p.nodes++
			p.spend = p.spend.Add(m.PricePerHour)
			p.cfgNodes[m.Config]++
			p.cfgSpend[m.Config] = p.cfgSpend[m.Config].Add(m.PricePerHour)
		}
		if m.Created.After(minuteAgo) {
			p.adds++
			p.cfgAdds[m.Config]++
		}
		if (m.State == Deleted || m.State == Draining) && !m.Deleted.IsZero() && m.Deleted.After(minuteAgo) {
			p.removes++
			p.cfgRemoves[m.Config]++
		}
		// A machine still coming up takes demand before new ones do.
		if m.State == Requested || m.State == Launching {
			p.openBins[m.Config] = append(p.openBins[m.Config], bin{m.CPUMilli, m.Memory, p.gpusOf(m.Config)})
		}
	}
	return p
}

func (p *planner) gpusOf(config string) int64 {
	if c := p.configs[config]; c != nil {
		return c.GPUs
	}
	return 0
}

// retire deletes machines that never booted or went lame (always), and
// idle ones (within the remove rates).
func (p *planner) retire() {
	t := p.in.Timeouts
	now := p.in.Now
	for i := range p.in.Machines {
		m := &p.in.Machines[i]
		var reason string
		switch {
		case (m.State == Requested || m.State == Launching) && t.Boot > 0 && now.Sub(m.Created) >= t.Boot:
			reason = fmt.Sprintf("boot timeout: no worker within %s of the launch", t.Boot)
		case m.State == Active && t.Lame > 0 && !m.Heard.IsZero() && now.Sub(m.Heard) >= t.Lame && !m.ProbeOK:
			reason = fmt.Sprintf("lame: not heard from for %s", now.Sub(m.Heard).Round(time.Second))
		case p.configs[m.Config] == nil && (m.State == Requested || m.State == Launching || (m.State == Active && !m.IdleSince.IsZero())):
			// Its config was removed: it goes once it runs nothing, not
			// after the idle timeout (no new work is sent its way).
			reason = "its launch config " + m.Config + " was removed"
		default:
			continue
		}
		p.remove(m, reason)
	}
	// Idle machines, longest idle first, within the remove rates. While
	// the provider refuses a config of a cluster for quota, an idle
	// machine there goes at once (Arvados' dispatcher does the same): the
	// quota it holds may be what a waiting job's config needs.
	quota := map[string]string{}
	for _, mk := range p.marks {
		if c := p.configs[mk.Config]; c != nil && now.Before(mk.Until) && strings.Contains(strings.ToUpper(mk.Reason), "QUOTA") {
			quota[c.Cluster] = mk.Config
		}
	}
	var idle []*Machine
	for i := range p.in.Machines {
		m := &p.in.Machines[i]
		if m.State != Active || p.deleted[m.ID] || m.IdleSince.IsZero() {
			continue
		}
		c := p.configs[m.Config]
		if (t.Idle > 0 && now.Sub(m.IdleSince) >= t.Idle) || (c != nil && quota[c.Cluster] != "") {
			idle = append(idle, m)
		}
	}
	slices.SortFunc(idle, func(a, b *Machine) int {
		if c := a.IdleSince.Compare(b.IdleSince); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, m := range idle {
		if lim := p.in.Limits.MaxRemovesPerMinute; lim > 0 && p.removes >= lim {
			break
		}
		if c := p.configs[m.Config]; c != nil && c.MaxRemovesPerMinute > 0 && p.cfgRemoves[m.Config] >= c.MaxRemovesPerMinute {
			continue
		}
		reason := fmt.Sprintf("idle for %s", now.Sub(m.IdleSince).Round(time.Second))
		if c := p.configs[m.Config]; c != nil && quota[c.Cluster] != "" && (t.Idle <= 0 || now.Sub(m.IdleSince) < t.Idle) {
			reason += fmt.Sprintf(", while the provider refuses %s for quota: its quota is freed", quota[c.Cluster])
		}
		p.remove(m, reason)
		p.removes++
		p.cfgRemoves[m.Config]++
	}
}

// remove records a deletion; the machine no longer counts as live, so its
// spend is free for new launches only once it is gone (it stays counted
// until then: a draining machine is still paid for).
func (p *planner) remove(m *Machine, reason string) {
	p.deleted[m.ID] = true
	p.out.Deletes = append(p.out.Deletes, Delete{Machine: m.ID, Reason: reason})
}

// grow serves the demand, shape by shape in fair-share order, with the
// best-ranked config that fits it, is available and has room under every
// cap; what no config can take is held with the reason of the best config
// that could have.
func (p *planner) grow() {
	launched := map[string]int{}
	p.private()
	p.launchable()
	p.free = slices.Clone(p.in.Free)
	draining := slices.Clone(p.in.Draining)
	revived := map[string]bool{}
	p.out.served = make([][]string, len(p.in.Demand))
	for si, sh := range p.in.Demand {
		if sh.Gang != 0 {
			p.growGang(si, &sh, launched)
			continue
		}
		left := p.fitFree(p.free, &sh)
		if left > 0 && len(draining) > 0 {
			// Machines being drained are paid for already: take them
			// back before launching new ones.
			for i := range draining {
				if left == 0 {
					break
				}
				n := p.fitFree(draining[i:i+1], &Shape{CPUMilli: sh.CPUMilli, Memory: sh.Memory, GPUs: sh.GPUs, Constraint: sh.Constraint, Count: left})
				if n < left && !revived[draining[i].Machine] {
					revived[draining[i].Machine] = true
					p.out.Revives = append(p.out.Revives, draining[i].Machine)
				}
				left = n
			}
		}
		var why, marked string
		for _, c := range p.ranked {
			if left == 0 {
				break
			}
			if !p.serves(c, &sh) {
				continue
			}
			if r := p.unavailable(c); r != "" {
				if why == "" {
					why, marked = r, p.markedBy(c)
				}
				p.out.Skipped[c.Name] = r
				continue
			}
			// Room on machines already coming up or planned first.
			left = p.fill(c.Name, &sh, left)
			for left > 0 {
				if r := p.capped(c); r != "" {
					if why == "" {
						why = r
					}
					p.out.Skipped[c.Name] = r
					break
				}
				p.addMachine(c)
				if n := len(p.out.served[si]); n == 0 || p.out.served[si][n-1] != c.Name {
					p.out.served[si] = append(p.out.served[si], c.Name)
				}
				launched[c.Name]++
				left = p.fill(c.Name, &sh, left)
			}
		}
		if left > 0 {
			if why == "" {
				why = "no launch config fits it"
			}
			p.hold(sh.CPUMilli*left, left, why, marked)
		}
	}
	for _, c := range p.ranked {
		if n := launched[c.Name]; n > 0 {
			where := ""
			if c.Zone != "" {
				where = " in " + c.Zone
			}
			p.out.Launches = append(p.out.Launches, Launch{Config: c.Name, Count: n,
				Reason: fmt.Sprintf("%d × %s%s for waiting jobs (%s, $%.4g per core-hour)", n, c.MachineType, where, c.Cluster+"/"+c.Pool, c.PricePerCoreHour().Dollars())})
		}
	}
}

// growGang provides for a gang whole or not at all, as the scheduler
// starts one: room free now in one cluster (one pool, for a gang of one
// pool) that holds every member needs no machine; else the first config
// in the strategy's order whose cluster can hold the whole gang, with its
// room free now and on its machines coming up and new machines of that
// config alone (one pool, one machine type: one value of any label its
// machines carry), launches them, within the node and $/hour caps for all
// of them (the add rate only spreads them over the next minutes). A gang
// no config can hold whole waits for room, said in Output.Held; no
// machine is launched for a part of it. Room free on workers counts for a
// gang of one label value only as its config's own machines.
func (p *planner) growGang(si int, sh *Shape, launched map[string]int) {
	// rooms returns the indexes in p.free of the workers of cluster (and
	// pool, for a gang of one pool) whose room may count for the gang.
	rooms := func(cluster, pool string) []int {
		var out []int
		for i := range p.free {
			if p.free[i].Cluster == cluster && (sh.GangUniform == "" || (sh.GangUniform == "pool" && p.free[i].Pool == pool)) {
				out = append(out, i)
			}
		}
		return out
	}
	parts := sh.parts()
	for i := range parts {
		parts[i].Constraint = sh.Constraint
	}
	// try fits the gang in the rooms at idx, each part in turn, and keeps
	// what it took when all of it fits, returning how many members of
	// each part it could not place.
	try := func(idx []int, commit func(left []int64) bool) []int64 {
		trial := make([]Room, len(idx))
		for j, i := range idx {
			trial[j] = p.free[i]
		}
		left := make([]int64, len(parts))
		for k := range parts {
			left[k] = p.fitFree(trial, &parts[k])
		}
		if commit(left) {
			for j, i := range idx {
				p.free[i] = trial[j]
			}
		}
		return left
	}
	none := func(left []int64) bool { return !slices.ContainsFunc(left, func(n int64) bool { return n > 0 }) }
	if !strings.HasPrefix(sh.GangUniform, "label:") {
		seen := map[[2]string]bool{}
		for i := range p.free {
			key := [2]string{p.free[i].Cluster, ""}
			if sh.GangUniform == "pool" {
				key[1] = p.free[i].Pool
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			if none(try(rooms(key[0], key[1]), none)) {
				return
			}
		}
	}
	var why, marked string
	for _, c := range p.ranked {
		if !p.serves(c, sh) {
			continue
		}
		if r := p.unavailable(c); r != "" {
			if why == "" {
				why, marked = r, p.markedBy(c)
			}
			p.out.Skipped[c.Name] = r
			continue
		}
		if slices.ContainsFunc(parts, func(pt Shape) bool { return fits(1, c.CPUMilli, c.Memory, c.GPUs, &pt) <= 0 }) {
			continue // a member no machine of it holds
		}
		var idx []int
		if !strings.HasPrefix(sh.GangUniform, "label:") {
			idx = rooms(c.Cluster, c.Pool)
		}
		// What the cluster's free room and the config's machines coming
		// up take, on trial, and new machines for the rest, each filled
		// in turn (newMachines).
		bins := slices.Clone(p.openBins[c.Name])
		var need int64
		var rest []int64
		ok := false
		try(idx, func(left []int64) bool {
			rest = slices.Clone(left)
			for k := range parts {
				rest[k] = fillBins(bins, &parts[k], rest[k])
			}
			need = newMachines(c, parts, rest)
			if r := p.cappedFor(c, need); r != "" {
				if why == "" {
					why = r
				}
				p.out.Skipped[c.Name] = r
				return false
			}
			ok = true
			return true
		})
		if !ok {
			continue
		}
		p.openBins[c.Name] = bins
		for range need {
			if r := p.capped(c); r != "" {
				// The add rate: the rest in the minutes after.
				p.out.Skipped[c.Name] = r
				break
			}
			p.addMachine(c)
			launched[c.Name]++
		}
		if need > 0 {
			p.out.served[si] = append(p.out.served[si], c.Name)
			for k := range parts {
				p.fill(c.Name, &parts[k], rest[k])
			}
		}
		return
	}
	if why == "" {
		why = fmt.Sprintf("no launch config can hold its gang of %d in one cluster", sh.Count)
	}
	p.hold(sh.cores(sh.Count), sh.Count, why, marked)
}

// newMachines is how many new machines of config c hold left members of
// each part (each part's members fit one machine alone), each machine
// filled in turn: the largest members first, or the smallest first,
// whichever takes fewer machines (as the scheduler packs a gang).
func newMachines(c *LaunchConfig, parts []Shape, left []int64) int64 {
	count := func(backwards bool) int64 {
		left := slices.Clone(left)
		var n int64
		for slices.ContainsFunc(left, func(m int64) bool { return m > 0 }) {
			b := bin{c.CPUMilli, c.Memory, c.GPUs}
			for i := range parts {
				k := i
				if backwards {
					k = len(parts) - 1 - i
				}
				left[k] -= take(left[k], &b.cpu, &b.mem, &b.gpus, &parts[k])
			}
			n++
		}
		return n
	}
	n := count(false)
	if len(parts) > 1 {
		n = min(n, count(true))
	}
	return n
}

// cappedFor says which node or $/hour cap stops n more machines of config
// c (the add rate aside), or "".
func (p *planner) cappedFor(c *LaunchConfig, n int64) string {
	if n <= 0 {
		return ""
	}
	l := p.in.Limits
	spend, own := p.spend, p.cfgSpend[c.Name]
	for range n - 1 {
		spend, own = spend.Add(c.PricePerHour), own.Add(c.PricePerHour)
	}
	return caps.Hold(caps.Limits{MaxNodes: int64(l.MaxNodes), MaxPerHour: l.MaxPerHour},
		caps.Use{Nodes: int64(p.nodes) + n - 1, PerHour: spend},
		c.Name, caps.Limits{MaxNodes: int64(c.MaxNodes), MaxPerHour: c.MaxPerHour},
		caps.Use{Nodes: int64(p.cfgNodes[c.Name]) + n - 1, PerHour: own}, c.PricePerHour)
}

// fillBins places up to left jobs of the shape in bins, first fit, and
// returns how many are left.
func fillBins(bins []bin, sh *Shape, left int64) int64 {
	for i := range bins {
		if left == 0 {
			break
		}
		b := &bins[i]
		left -= take(left, &b.cpu, &b.mem, &b.gpus, sh)
	}
	return left
}

// private makes one machine for each job that names a machine type: the
// best-ranked config of that type where the job may run, available and
// under every cap.
func (p *planner) private() {
	for _, d := range p.in.Private {
		sh := Shape{CPUMilli: d.CPUMilli, Memory: d.Memory, GPUs: d.GPUs, Constraint: d.Constraint, Count: 1}
		why, marked := "", ""
		done := false
		for _, c := range p.ranked {
			if c.MachineType != d.MachineType || !p.serves(c, &sh) {
				continue
			}
			r, m := p.unavailable(c), p.markedBy(c)
			if r == "" {
				r, m = p.capped(c), ""
			}
			if r != "" {
				if why == "" {
					why, marked = r, m
				}
				p.out.Skipped[c.Name] = r
				continue
			}
			p.addMachine(c)
			// Its room is its job's alone.
			p.openBins[c.Name] = p.openBins[c.Name][:len(p.openBins[c.Name])-1]
			p.out.Private = append(p.out.Private, PrivateLaunch{Ref: d.Ref, Config: c.Name,
				Reason: fmt.Sprintf("%s in %s for job %s alone (%s/%s)", c.MachineType, c.Zone, d.Ref, c.Cluster, c.Pool)})
			done = true
			break
		}
		if !done {
			if why == "" {
				why = fmt.Sprintf("no launch config of machine type %s where it may run", d.MachineType)
			}
			p.hold(d.CPUMilli, 1, why, marked)
		}
	}
}

// launchable records in Output.Sizes the machines each pool can launch
// now, in the strategy's order (the first that holds a job is the one
// grow would launch for it), and indexes them for fitFree. The add rate
// is left out: it only delays a launch to the next minute, and a job that
// took a large idle machine in the meantime would hold it for its whole
// run.
func (p *planner) launchable() {
	p.sizes = map[[2]string][]scheduler.PoolSize{}
	for _, c := range p.ranked {
		if c.GPUs > 0 || c.CPUMilli <= 0 || p.unavailable(c) != "" || p.cappedAt(c, 0, 0) != "" {
			continue
		}
		s := scheduler.PoolSize{Cluster: c.Cluster, Pool: c.Pool, CPUMilli: c.CPUMilli, Memory: c.Memory, Spot: c.Spot}
		k := [2]string{c.Cluster, c.Pool}
		if slices.Contains(p.sizes[k], s) {
			continue
		}
		p.sizes[k] = append(p.sizes[k], s)
		p.out.Sizes = append(p.out.Sizes, s)
	}
}

// fitFree places what it can of a shape on the free room of active
// workers where the shape may run, and returns how many jobs are left. An
// idle worker the scheduler leaves to larger jobs (scheduler.LeftForLarger)
// is no room for the shape.
func (p *planner) fitFree(free []Room, sh *Shape) int64 {
	left := sh.Count
	k := &sh.Constraint
	for i := range free {
		if left == 0 {
			break
		}
		r := &free[i]
		if !k.Serves(r.Cluster, r.Region, r.Pool, r.GPUType, r.GPUs, sh.GPUs, r.Spot) {
			continue
		}
		if p.in.Unavailable[r.Cluster] {
			continue
		}
		if sh.GPUs == 0 && scheduler.LeftForLarger(sh.CPUMilli, sh.Memory, r.TotalMilli, r.CPUMilli, p.sizes[[2]string{r.Cluster, r.Pool}], sh.Constraint.NoSpot) {
			continue
		}
		left -= take(left, &r.CPUMilli, &r.Memory, &r.GPUs, sh)
	}
	return left
}

// consolidate drains the least busy machine when nothing waits for a new
// machine and the rest of the fleet has at least one machine's worth of
// room left after the demand.
func (p *planner) consolidate() {
	if !p.in.Consolidate || len(p.out.Launches) > 0 || len(p.out.Held) > 0 || len(p.out.Revives) > 0 || len(p.out.Private) > 0 {
		return
	}
	if lim := p.in.Limits.MaxRemovesPerMinute; lim > 0 && p.removes >= lim {
		return
	}
	left := map[string]int64{}
	var total int64
	for _, r := range p.free {
		total += r.CPUMilli
		if r.Machine != "" {
			left[r.Machine] = r.CPUMilli
		}
	}
	var best *Machine
	for i := range p.in.Machines {
		m := &p.in.Machines[i]
		if m.State != Active || p.deleted[m.ID] || m.CPUMilli <= 0 {
			continue
		}
		busy := m.CPUMilli - m.FreeMilli
		// Its room untouched by the demand, at most half busy, and the
		// rest of the fleet keeps a machine's worth of room.
		if left[m.ID] != m.FreeMilli || 2*busy > m.CPUMilli || total-m.FreeMilli < m.CPUMilli {
			continue
		}
		if best == nil || busy < best.CPUMilli-best.FreeMilli || (busy == best.CPUMilli-best.FreeMilli && m.ID < best.ID) {
			best = m
		}
	}
	if best == nil || best.FreeMilli == best.CPUMilli {
		// An idle machine is the idle timeout's to delete.
		return
	}
	if c := p.configs[best.Config]; c != nil && c.MaxRemovesPerMinute > 0 && p.cfgRemoves[best.Config] >= c.MaxRemovesPerMinute {
		return
	}
	p.remove(best, fmt.Sprintf("underused: %g of %g cores busy while the fleet has %g cores to spare; it takes no new job and goes when its jobs end",
		float64(best.CPUMilli-best.FreeMilli)/1000, float64(best.CPUMilli)/1000, float64(total-best.FreeMilli)/1000))
}

func (p *planner) hold(cpu, jobs int64, reason, marked string) {
	key := marked + "\x00" + reason
	if i, ok := p.reasonCount[key]; ok {
		p.out.Held[i].CPUMilli += cpu
		p.out.Held[i].Jobs += jobs
		return
	}
	p.reasonCount[key] = len(p.out.Held)
	p.out.Held = append(p.out.Held, Held{CPUMilli: cpu, Jobs: jobs, Reason: reason, Marked: marked})
}

// serves reports whether a machine of config c can run one job of the
// shape where the shape may run.
func (p *planner) serves(c *LaunchConfig, sh *Shape) bool {
	if c.CPUMilli < sh.CPUMilli || c.Memory < sh.Memory {
		return false
	}
	region := c.Region
	if region == "" {
		region = p.in.Regions[c.Cluster]
	}
	return sh.Constraint.Serves(c.Cluster, region, c.Pool, c.GPUType, c.GPUs, sh.GPUs, c.Spot)
}

// unavailable says why a config may not be launched at all now.
func (p *planner) unavailable(c *LaunchConfig) string {
	if p.in.Unavailable[c.Cluster] {
		return "cluster " + c.Cluster + " takes no new machines (disabled or down)"
	}
	if c.AwaitingPrice {
		return "waiting for the cloud's price of " + c.MachineType
	}
	if m := p.marks[c.Name]; m != nil && p.in.Now.Before(m.Until) {
		if m.Misconfigured {
			return fmt.Sprintf("misconfigured, tried again at %s (%s)", m.Until.UTC().Format("15:04:05"), m.Reason)
		}
		return fmt.Sprintf("capacity-limited until %s (%s)", m.Until.UTC().Format("15:04:05"), m.Reason)
	}
	return ""
}

// markedBy names config c when its own mark (capacity-limited or
// misconfigured) is what makes it unavailable now, else "".
func (p *planner) markedBy(c *LaunchConfig) string {
	if p.in.Unavailable[c.Cluster] {
		return ""
	}
	if m := p.marks[c.Name]; m != nil && p.in.Now.Before(m.Until) {
		return c.Name
	}
	return ""
}

// capped says which cap stops one more machine of config c, or "": the
// caps' one rule (caps.Hold), which apply asks again before it records
// the machine.
func (p *planner) capped(c *LaunchConfig) string {
	return p.cappedAt(c, int64(p.adds), int64(p.cfgAdds[c.Name]))
}

// cappedAt is capped with adds and cfgAdds machines added in the last
// minute, in all and of config c.
func (p *planner) cappedAt(c *LaunchConfig, adds, cfgAdds int64) string {
	l := p.in.Limits
	return caps.Hold(caps.Limits{MaxNodes: int64(l.MaxNodes), MaxPerHour: l.MaxPerHour, MaxAddsPerMinute: int64(l.MaxAddsPerMinute)},
		caps.Use{Nodes: int64(p.nodes), PerHour: p.spend, Adds: adds},
		c.Name, caps.Limits{MaxNodes: int64(c.MaxNodes), MaxPerHour: c.MaxPerHour, MaxAddsPerMinute: int64(c.MaxAddsPerMinute)},
		caps.Use{Nodes: int64(p.cfgNodes[c.Name]), PerHour: p.cfgSpend[c.Name], Adds: cfgAdds}, c.PricePerHour)
}

// addMachine plans one machine of config c.
func (p *planner) addMachine(c *LaunchConfig) {
	p.nodes++
	p.spend = p.spend.Add(c.PricePerHour)
	p.cfgNodes[c.Name]++
	p.cfgSpend[c.Name] = p.cfgSpend[c.Name].Add(c.PricePerHour)
	p.adds++
	p.cfgAdds[c.Name]++
	p.openBins[c.Name] = append(p.openBins[c.Name], bin{c.CPUMilli, c.Memory, c.GPUs})
}

// fill places up to left jobs of the shape in the room of config's
// machines coming up or planned, first fit, and returns how many are left.
func (p *planner) fill(config string, sh *Shape, left int64) int64 {
	bins := p.openBins[config]
	left = fillBins(bins, sh, left)
	// Full machines need not be looked at again.
	p.openBins[config] = slices.DeleteFunc(bins, func(b bin) bool { return b.cpu <= 0 || b.mem <= 0 })
	return left
}

// take places as many of left jobs of the shape as fit in the room of
// cpu, mem and gpus, takes their room, and returns how many.
func take(left int64, cpu, mem, gpus *int64, sh *Shape) int64 {
	n := fits(left, *cpu, *mem, *gpus, sh)
	if n <= 0 {
		return 0
	}
	*cpu -= n * sh.CPUMilli
	*mem -= n * sh.Memory
	*gpus -= n * sh.GPUs
	return n
}

// fits is how many of left jobs of the shape fit in room of cpu, memory
// and GPUs.
func fits(left, cpu, mem, gpus int64, sh *Shape) int64 {
	n := left
	if sh.CPUMilli > 0 {
		n = min(n, cpu/sh.CPUMilli)
	}
	if sh.Memory > 0 {
		n = min(n, mem/sh.Memory)
	}
	if sh.GPUs > 0 {
		n = min(n, gpus/sh.GPUs)
	}
	return n
}
