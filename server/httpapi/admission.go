package httpapi

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// Limits bound what one request, one user and one billing project may add
// to the replicated state. They are checked before a command reaches Raft:
// applying a committed entry must never fail or run out of memory, because
// every replica, and every replay after a restart, would do the same. Zero
// means no limit for each of them.
type Limits struct {
	// MaxJobsPerBatch bounds the job IDs one batch may reserve.
	MaxJobsPerBatch int64
	// MaxJobsPerUpdate bounds the jobs one update (or one create request
	// with inline jobs) adds: a commit makes them live in one entry.
	MaxJobsPerUpdate int64
	// MaxQueuedJobsPerUser and MaxQueuedJobsPerProject bound the jobs a
	// user, and a billing project, has not seen finish yet (the job IDs
	// of open updates included).
	MaxQueuedJobsPerUser    int64
	MaxQueuedJobsPerProject int64
	// MaxBatchesPerUser bounds a user's live (not complete) batches.
	MaxBatchesPerUser int64
	// MaxOpenUpdatesPerUser bounds a user's updates that are neither
	// committed nor discarded.
	MaxOpenUpdatesPerUser int64
	// StateMemoryBudget bounds the estimated memory of the jobs the state
	// holds (all batches, finished ones included, until history moves
	// out of memory).
	StateMemoryBudget int64
	// MaxLogBytesPerAttempt bounds one attempt's log as this server holds
	// it.
	MaxLogBytesPerAttempt int64
	// MaxLogBytesPerBatch bounds the logs of one batch as this server
	// holds them (0: none).
	MaxLogBytesPerBatch int64
}

// The state's cost of a job, measured by `drover bench sched`
// (heap_bytes_per_job): about 33 bytes a job of an array, about 250 a
// distinct job, most of it the job's group and spec; a batch's record,
// maps and slices about a kilobyte before its names and attributes.
const (
	bytesPerJob   = 40
	bytesPerGroup = 220
	bytesPerBatch = 1024
	// bytesPerJobGroup is a job group's record, its index entry and its
	// derived counts, before its path, attributes and callback.
	bytesPerJobGroup = 300
)

// entriesCost estimates what entries add to the state.
func entriesCost(entries []state.JobEntry) (jobs, bytes int64) {
	for _, e := range entries {
		jobs += int64(e.Count)
		bytes += int64(e.Count)*bytesPerJob + bytesPerGroup
		if sp := e.Spec; sp != nil {
			for _, c := range sp.Command {
				bytes += int64(len(c))
			}
			for k, v := range sp.Env {
				bytes += int64(len(k) + len(v))
			}
			for k, v := range sp.Attributes {
				bytes += int64(len(k) + len(v))
			}
		}
	}
	return jobs, bytes
}

// submission is what a write asks the state to take.
type submission struct {
	batch         uint64 // 0: a new batch
	user, project string // of a new batch (the batch's own otherwise)
	by            string // who sends it (the rules know admins)
	key           string // idempotency key, if any
	// reserve is the n_jobs of an update left open for bunches; entries
	// are jobs sent inline (or, with intoUpdate, a bunch into an open
	// update, whose IDs were admitted when it was opened).
	reserve    int64
	entries    []state.JobEntry
	intoUpdate bool
	// batchBytes is the new batch's own size (name, attributes).
	batchBytes int64
	// groups are the job groups it declares (some may exist already:
	// counted all the same).
	groups []state.JobGroupDecl
	// queue and priority are a new batch's (state.CheckPriority).
	queue    string
	priority int64
	// rerun counts jobs of the batch a retry runs again: not new jobs,
	// but unfinished ones again (the queued-job limits count them);
	// recheck holds one of them of each spec, for the billing project's
	// rules as they are now (CheckJobs).
	rerun   int64
	recheck []state.JobEntry
}

// fleetSizes are the machine sizes the fleet offers now: its active
// workers', its launch configs' and its clusters' declared pools'
// (placement.NewSizes keeps those no other holds). Read at every
// submission of jobs: a machine that joins or a config an admin adds
// raises the bound at once.
func fleetSizes(r state.Reader) placement.Sizes {
	type shape struct {
		cpu, mem int64
		gpuType  string
		gpus     int64
	}
	seen := map[shape]bool{}
	var ms []placement.Machine
	add := func(cpu, mem int64, gpuType string, gpus int64, where func() string) {
		k := shape{cpu, mem, gpuType, gpus}
		if cpu <= 0 || mem <= 0 || seen[k] {
			return
		}
		seen[k] = true
		ms = append(ms, placement.Machine{CPUMilli: cpu, Memory: mem, GPUType: gpuType, GPUs: gpus, Where: where()})
	}
	for lc := range r.LaunchConfigs() {
		add(lc.CPUMilli, lc.Memory, lc.GPUType, lc.GPUs, func() string { return "launch config " + lc.Name + " of cluster " + lc.Cluster })
	}
	for cl := range r.Clusters() {
		for _, p := range cl.Pools {
			add(p.CPUMilli, p.Memory, p.GPUType, p.GPUs, func() string { return "pool " + p.Name + " of cluster " + cl.Name })
		}
	}
	for inst := range r.Instances() {
		add(inst.CPUMilli, inst.Memory, inst.GPUType, inst.GPUs, func() string {
			if inst.Cluster == "" {
				return "worker " + inst.Name
			}
			return "worker " + inst.Name + " in cluster " + inst.Cluster
		})
	}
	return placement.NewSizes(ms)
}

// checkSizes refuses a job larger than every machine the fleet offers
// (placement.Sizes.CheckSize: 400 naming the largest), which would wait
// for ever. Not checked again at apply: the fleet changes between submit
// and apply, and a job that fitted a machine that has since left waits
// for another as any job does.
func checkSizes(sizes placement.Sizes, entries []state.JobEntry) error {
	if len(sizes) == 0 {
		return nil
	}
	type size struct {
		cpu, mem int64
		gpuType  string
		gpus     int64
		oomMax   int64
	}
	checked := map[size]bool{}
	for i := range entries {
		sp := entries[i].Spec
		if sp == nil {
			continue
		}
		typ, n := sp.GPUs()
		k := size{sp.CPUMilli, sp.Memory, typ, n, 0}
		if p := sp.Policy(); p != nil {
			k.oomMax = p.OOMMaxMemory
		}
		if checked[k] {
			continue
		}
		checked[k] = true
		if err := sizes.CheckSize(sp.CPUMilli, sp.Memory, typ, n); err != nil {
			return codedf(http.StatusBadRequest, "job %d (%q): %v", entries[i].First, sp.Name, err)
		}
		if p := sp.Policy(); p != nil && p.OOMMaxMemory > 0 {
			if err := sizes.CheckSize(sp.CPUMilli, p.OOMMaxMemory, typ, n); err != nil {
				return codedf(http.StatusBadRequest, "job %d (%q): oom_retry max_memory: %v", entries[i].First, sp.Name, err)
			}
		}
	}
	return nil
}

// admit checks a submission against the billing project's rules
// (state.CheckJobs: 403 for a file outside its storage prefixes or a host
// network it does not allow; state.CheckPriority: 403 for a new batch's
// priority above its cap), the fleet's largest machine (checkSizes: 400)
// and the limits, and returns a 413 error (too
// big for the servers) or a 429 (beyond what one user or billing project
// may hold at once) naming the limit when it does not fit. A repeat of an
// earlier request (same idempotency key) is always admitted: the state
// answers it with the first result.
func (s *batchHandlers) admit(sub submission) error {
	var a state.Admission
	var checked *state.ApplyError
	var budget billing.Budget
	var sizes placement.Sizes
	var fleet []gangMachine
	var gangQueue error
	s.state.Read(func(r state.Reader) {
		if a = r.Admission(sub.batch, sub.user, sub.project, sub.key); !a.Repeat {
			checked, budget = r.CheckJobs(a.ProjectName, sub.by, slices.Concat(sub.entries, sub.recheck)), r.Budget(a.ProjectName)
			if checked == nil && sub.batch == 0 {
				checked = r.CheckPriority(a.ProjectName, sub.by, sub.queue, sub.priority)
			}
			if checked == nil && len(sub.entries) > 0 {
				sizes = fleetSizes(r)
				if hasGang(sub.entries) {
					fleet = gangFleet(r)
					gangQueue = gangQueueCheck(r, sub, a.ProjectName)
				}
			}
		}
	})
	if a.Repeat {
		return nil
	}
	if checked != nil {
		return checked
	}
	if err := checkSizes(sizes, sub.entries); err != nil {
		return err
	}
	if err := checkGangs(fleet, sub.entries); err != nil {
		return err
	}
	if gangQueue != nil {
		return gangQueue
	}
	if now := time.Now().UnixNano(); budget.Reached(now) {
		return codedf(http.StatusPaymentRequired, "billing project %s has spent %s of its %s spend limit: no new work until a manager or an admin raises it (drover billing-project set-limit %s DOLLARS)",
			a.ProjectName, budget.Cost(now).Display(), budget.Limit.Display(), a.ProjectName)
	}
	jobs, bytes := entriesCost(sub.entries)
	if sub.intoUpdate {
		bytes -= jobs * bytesPerJob // counted at reservation
		jobs = 0
	}
	newJobs := sub.reserve + jobs
	bytes += sub.reserve * bytesPerJob
	if sub.batch == 0 {
		bytes += bytesPerBatch + sub.batchBytes
	}
	for _, g := range sub.groups {
		bytes += bytesPerJobGroup + int64(len(g.Path)+len(g.Callback))
		for k, v := range g.Attributes {
			bytes += int64(len(k) + len(v))
		}
	}
	lim := s.cfg.Limits
	owner := "user " + a.UserName
	tooLarge := func(format string, args ...any) error {
		return codedf(http.StatusRequestEntityTooLarge, format, args...)
	}
	tooMany := func(format string, args ...any) error {
		return codedf(http.StatusTooManyRequests, format, args...)
	}
	switch {
	case lim.MaxJobsPerBatch > 0 && a.BatchJobs+newJobs > lim.MaxJobsPerBatch:
		what := "the batch would hold"
		if sub.batch == 0 {
			what = "the new batch would hold"
		}
		return tooLarge("%s %d jobs; the limit is %d jobs per batch (server setting max_jobs_per_batch): split the work into several batches",
			what, a.BatchJobs+newJobs, lim.MaxJobsPerBatch)
	case !sub.intoUpdate && lim.MaxJobsPerUpdate > 0 && newJobs > lim.MaxJobsPerUpdate:
		return tooLarge("this update would add %d jobs; the limit is %d jobs per update (server setting max_jobs_per_update): submit the batch in several updates",
			newJobs, lim.MaxJobsPerUpdate)
	case lim.MaxQueuedJobsPerUser > 0 && newJobs+sub.rerun > 0 && a.User.Queued+newJobs+sub.rerun > lim.MaxQueuedJobsPerUser:
		return tooMany("%s has %d jobs that have not finished (open updates included) and this adds %d; the limit is %d (server setting max_queued_jobs_per_user): wait for some to finish, or cancel batches no longer needed",
			owner, a.User.Queued, newJobs+sub.rerun, lim.MaxQueuedJobsPerUser)
	case lim.MaxQueuedJobsPerProject > 0 && newJobs+sub.rerun > 0 && a.Project.Queued+newJobs+sub.rerun > lim.MaxQueuedJobsPerProject:
		return tooMany("billing project %s has %d jobs that have not finished (open updates included) and this adds %d; the limit is %d (server setting max_queued_jobs_per_billing_project): wait for some to finish, or cancel batches no longer needed",
			a.ProjectName, a.Project.Queued, newJobs+sub.rerun, lim.MaxQueuedJobsPerProject)
	case lim.MaxOpenUpdatesPerUser > 0 && sub.reserve > 0 && a.User.OpenUpdates+1 > lim.MaxOpenUpdatesPerUser:
		return tooMany("%s has %d open updates (reserved with n_jobs, not committed yet); the limit is %d (server setting max_open_updates_per_user): commit or cancel them first (an idle one is discarded after the server's update_idle_timeout)",
			owner, a.User.OpenUpdates, lim.MaxOpenUpdatesPerUser)
	case lim.MaxBatchesPerUser > 0 && newJobs > 0 && !a.BatchLive && a.User.Batches+1 > lim.MaxBatchesPerUser:
		return tooMany("%s has %d batches running (not complete); the limit is %d (server setting max_batches_per_user): add updates to a running batch, or wait for some to complete",
			owner, a.User.Batches, lim.MaxBatchesPerUser)
	}
	if lim.StateMemoryBudget > 0 {
		held := a.Held.Jobs*bytesPerJob + a.Held.Groups*bytesPerGroup + a.Held.Batches*bytesPerBatch + a.Held.JobGroups*bytesPerJobGroup + a.Held.JobGroupBytes
		if held+bytes > lim.StateMemoryBudget {
			return tooLarge("this would bring the jobs the servers hold in memory to about %d MiB; the limit is %d MiB (server setting state_memory_budget): submit less at once, or ask an operator to raise the budget",
				(held+bytes)>>20, lim.StateMemoryBudget>>20)
		}
	}
	return nil
}

// gangMachine is a machine a gang could ever use: an active worker, or
// what a launch config may add (n of them; 0: no cap).
type gangMachine struct {
	cluster, region, pool string
	labels                map[string]string
	spot                  bool
	cpu, mem              int64
	gpuType               string
	gpus                  int64
	n                     int64 // machines (0: as many as wanted)
}

func hasGang(entries []state.JobEntry) bool {
	for i := range entries {
		if entries[i].Spec != nil && entries[i].Spec.Gang() != nil {
			return true
		}
	}
	return false
}

// gangFleet lists the workers and what the launch configs may add.
func gangFleet(r state.Reader) []gangMachine {
	region := map[string]string{}
	for cl := range r.Clusters() {
		region[cl.Name] = cl.Region
	}
	var out []gangMachine
	made := map[string]int64{} // workers on machines of each launch config
	var madeAll int64
	for inst := range r.Instances() {
		out = append(out, gangMachine{cluster: inst.Cluster, region: inst.Region, pool: inst.Pool, labels: inst.Labels, spot: r.Spot(inst),
			cpu: inst.CPUMilli, mem: inst.Memory, gpuType: inst.GPUType, gpus: inst.GPUs, n: 1})
		if inst.Config != "" {
			made[inst.Config]++
			madeAll++
		}
	}
	// What the autoscaler may still add: none when it does not run; each
	// config up to its max_nodes and all of them up to the autoscaler's,
	// less the machines they made already (counted above as workers).
	as := r.Autoscaler()
	if !as.Enabled {
		return out
	}
	left := int64(-1) // the autoscaler's cap left (-1: none)
	if as.MaxNodes > 0 {
		left = max(as.MaxNodes-madeAll, 0)
	}
	for lc := range r.LaunchConfigs() {
		n := left // 0 in a gangMachine is no cap
		if lc.MaxNodes > 0 {
			n = max(lc.MaxNodes-made[lc.Name], 0)
			if left >= 0 {
				n = min(n, left)
			}
		}
		if n == 0 {
			continue
		}
		if n < 0 {
			n = 0 // no cap
		}
		out = append(out, gangMachine{cluster: lc.Cluster, region: region[lc.Cluster], pool: lc.Pool, spot: lc.Spot,
			cpu: lc.CPUMilli, mem: lc.Memory, gpuType: lc.GPUType, gpus: lc.GPUs, n: n})
	}
	return out
}

// gangPart is the members of one size of a gang in a request.
type gangPart struct {
	sp *state.Spec
	n  int64
}

// gangsOf lists the gangs of a request's entries, each with its first
// entry (which speaks for its gang: its uniformity, its place) and its
// parts, one per size: a job group's gang spans specs, of sizes of their
// own.
func gangsOf(entries []state.JobEntry) (firsts []int, parts map[uint32][]gangPart) {
	for i := range entries {
		sp := entries[i].Spec
		g := sp.Gang()
		if g == nil || g.Lead > entries[i].First {
			continue
		}
		key := entries[i].First - g.Lead
		if parts == nil {
			parts = map[uint32][]gangPart{}
		}
		if _, seen := parts[key]; !seen {
			firsts = append(firsts, i)
		}
		// Specs of one size are one part.
		ps := parts[key]
		if j := slices.IndexFunc(ps, func(pt gangPart) bool { return pt.sp.Size() == sp.Size() }); j >= 0 {
			ps[j].n += int64(entries[i].Count)
		} else {
			parts[key] = append(ps, gangPart{sp, int64(entries[i].Count)})
		}
	}
	return firsts, parts
}

// gangSize is what a gang's members take together.
func gangSize(parts []gangPart) (placement.Size, int64) {
	var all placement.Size
	var n int64
	for _, pt := range parts {
		sz := pt.sp.Size()
		all.CPUMilli += pt.n * sz.CPUMilli
		all.Memory += pt.n * sz.Memory
		if sz.GPUs > 0 {
			all.GPUs += pt.n * sz.GPUs
			all.GPUType = sz.GPUType
		}
		n += pt.n
	}
	return all, n
}

// checkGangs refuses a gang that no place it may use could ever hold all
// at once: no cluster (pool, value of its label, as its uniformity says)
// among those its constraint allows, with every worker there and every
// machine its launch configs may add (400 naming the most one holds). It
// would wait for ever. A place holds a gang of one size when its machines
// hold that many members; a gang of several sizes when its machines hold
// each size's members alone and the sum of all of them (which refuses
// less than packing would, never more). Like checkSizes, not checked
// again at apply; a queue's home clusters are not read (it refuses less,
// never more). An empty fleet refuses nothing.
func checkGangs(fleet []gangMachine, entries []state.JobEntry) error {
	if len(fleet) == 0 {
		return nil
	}
	firsts, gangs := gangsOf(entries)
	for _, i := range firsts {
		sp := entries[i].Spec
		g := sp.Gang()
		parts := gangs[entries[i].First]
		all, total := gangSize(parts)
		k := sp.Constraint()
		label, byLabel := strings.CutPrefix(g.Uniform, "label:")
		type place struct {
			members  []int64 // of each part alone
			cpu, mem int64   // of all its capped machines
			gpus     int64
			uncapped bool // a launch config without a cap
		}
		places := map[string]*place{}
		for _, m := range fleet {
			if k.Admits(&placement.Cluster{Name: m.cluster, Region: m.region}, m.pool, m.labels, m.spot) != 0 {
				continue
			}
			key := m.cluster
			switch {
			case g.Uniform == "pool":
				key += "\x00" + m.pool
			case byLabel:
				v, ok := m.labels[label]
				if !ok {
					continue
				}
				key += "\x00" + v
			}
			pl := places[key]
			if pl == nil {
				pl = &place{members: make([]int64, len(parts))}
				places[key] = pl
			}
			useful := false
			for j, pt := range parts {
				per := int64(math.MaxInt64)
				if pt.sp.CPUMilli > 0 {
					per = m.cpu / pt.sp.CPUMilli
				}
				if pt.sp.Memory > 0 {
					per = min(per, m.mem/pt.sp.Memory)
				}
				if typ, gpus := pt.sp.GPUs(); gpus > 0 {
					if m.gpuType != typ {
						per = 0
					}
					per = min(per, m.gpus/gpus)
				}
				per = min(per, pt.n)
				switch {
				case per <= 0:
				case m.n == 0:
					pl.members[j] = pt.n // no cap: as many machines as it takes
				default:
					pl.members[j] = min(pl.members[j]+per*min(m.n, pt.n), pt.n)
				}
				useful = useful || per > 0
			}
			if !useful {
				continue
			}
			if m.n == 0 {
				pl.uncapped = true
				continue
			}
			c := min(m.n, total)
			pl.cpu = satAdd(pl.cpu, satMul(m.cpu, c))
			pl.mem = satAdd(pl.mem, satMul(m.mem, c))
			if m.gpuType == all.GPUType {
				pl.gpus = satAdd(pl.gpus, satMul(m.gpus, c))
			}
		}
		best, where, holds := int64(0), "", false
		for key, pl := range places {
			var n int64
			each := true
			for j, pt := range parts {
				n += pl.members[j]
				each = each && pl.members[j] >= pt.n
			}
			if each && (len(parts) == 1 || pl.uncapped || (pl.cpu >= all.CPUMilli && pl.mem >= all.Memory && pl.gpus >= all.GPUs)) {
				holds = true
				break
			}
			if n > best || (n == best && key < where) {
				best, where = n, key
			}
		}
		if !holds {
			place := "no cluster it may use"
			if where != "" {
				place = "cluster " + strings.ReplaceAll(where, "\x00", " / ")
			}
			if len(parts) > 1 {
				return codedf(http.StatusBadRequest, "job %d (%q): a gang of %d members (%d cores, %s in all) must start together in one cluster%s, and none it may use could ever hold it (%s holds %d of them by size alone, with all its workers and every machine its launch configs may add)",
					entries[i].First, sp.Name, total, all.CPUMilli/1000, units.FormatBytes(all.Memory), uniformWords(g.Uniform), place, best)
			}
			return codedf(http.StatusBadRequest, "job %d (%q): a gang of %d members must start together in one cluster%s, and none it may use could ever hold it: the most is %d (%s, with all its workers and every machine its launch configs may add)",
				entries[i].First, sp.Name, total, uniformWords(g.Uniform), best, place)
		}
	}
	return nil
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if b != 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// uniformWords says what else a gang's members share.
func uniformWords(u string) string {
	switch {
	case u == "pool":
		return " and one pool"
	case strings.HasPrefix(u, "label:"):
		return " with one value of label " + strings.TrimPrefix(u, "label:")
	}
	return ""
}

// gangQueueCheck refuses a gang that the queues its batch runs in could
// never hold at once (their limits with nothing running: quota,
// max_running): it would wait for ever.
func gangQueueCheck(r state.Reader, sub submission, project string) error {
	firsts, gangs := gangsOf(sub.entries)
	for _, i := range firsts {
		all, n := gangSize(gangs[sub.entries[i].First])
		if q := r.GangQueueRoom(sub.batch, project, sub.queue, all, n); q != "" {
			return codedf(http.StatusBadRequest, "job %d (%q): a gang of %d members must start together, and queue %s could never hold them all at once (its quota or max_running, with nothing else running)",
				sub.entries[i].First, sub.entries[i].Spec.Name, n, q)
		}
	}
	return nil
}
