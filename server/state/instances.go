package state

import (
	"fmt"
	"slices"
	"sort"
)

// ActivateResult names the new instance.
type ActivateResult struct {
	Instance uint32
	Replaced uint32 // the earlier incarnation retired by this activation, if any
}

// maxVersionBytes bounds Activate.Version (api.MaxVersion).
const maxVersionBytes = 64

func (s *instanceBook) applyActivate(c *Activate) any {
	if c.Name == "" || c.CPUMilli <= 0 || c.Memory <= 0 || c.TokenHash == "" {
		return errorf(ErrInvalid, "activation needs a name, cpu > 0, memory > 0 and a token")
	}
	if len(c.Version) > maxVersionBytes {
		return errorf(ErrInvalid, "a worker's version is at most %d bytes", maxVersionBytes)
	}
	region, cluster, pool := c.Region, c.Cluster, c.Pool
	if region == "" {
		region = DefaultRegion
	}
	if cluster == "" {
		cluster = DefaultCluster
	}
	if pool == "" {
		pool = DefaultPool
	}
	if err := checkPlaceName("pool", pool); err != nil {
		return err
	}
	if len(c.Labels) > 64 {
		return errorf(ErrInvalid, "a worker may carry at most 64 labels")
	}
	if c.GPUs < 0 || c.GPUs > MaxGPUs {
		return errorf(ErrInvalid, "a worker offers 0 to %d GPUs", MaxGPUs)
	}
	if c.GPUs > 0 {
		if err := checkPlaceName("GPU type", c.GPUType); err != nil {
			return err
		}
	}
	if c.JoinHash != "" || c.PreviousHash != "" {
		if id, ok := s.repeatedJoin(c); ok {
			return &ActivateResult{Instance: id}
		}
		if err := s.admitJoin(c.Machine, c.JoinHash, c.PreviousHash, c.Now); err != nil {
			return err
		}
	}
	if c.Machine != "" {
		if m := s.machines[c.Machine]; m == nil || !machineLive(m.State) || m.State == MachineDraining {
			return errorf(ErrConflict, "machine %q is not one the autoscaler has live; this worker should not run", c.Machine)
		}
	}
	if err := s.ensureCluster(cluster, region, c.Now); err != nil {
		return err
	}
	res := &ActivateResult{}
	inst := &Instance{
		Region:    region,
		Cluster:   cluster,
		Pool:      pool,
		Labels:    c.Labels,
		GPUType:   c.GPUType,
		GPUs:      c.GPUs,
		FreeGPUs:  c.GPUs,
		ID:        s.nextInstance,
		Name:      c.Name,
		NodeID:    c.NodeID,
		TokenHash: c.TokenHash,
		CPUMilli:  c.CPUMilli,
		Memory:    c.Memory,
		FreeMilli: c.CPUMilli,
		FreeMem:   c.Memory,
		Active:    true,
		Activated: c.Now,
		Version:   c.Version,
	}
	if old, ok := s.instByIdentity[inst.identity()]; ok {
		s.retire(s.instances[old], c.Now, fmt.Sprintf("worker %s activated again", c.Name), c.MaxLost, false)
		res.Replaced = old
	}
	s.nextInstance++
	s.instances[inst.ID] = inst
	if c.Machine != "" {
		// Checked above: it cannot fail.
		_ = s.linkMachine(inst, c.Machine, c.Now)
	}
	s.instTokens[c.TokenHash] = inst.ID
	s.instByIdentity[inst.identity()] = inst.ID
	res.Instance = inst.ID
	s.notifyWork()
	return res
}

func (s *instanceBook) applyRetire(c *Retire) any {
	inst, ok := s.instances[c.Instance]
	if !ok {
		return errorf(ErrNotFound, "instance %d does not exist", c.Instance)
	}
	if !inst.Active {
		return nil
	}
	if c.Preempted {
		s.preemptAll(inst, c.Now, fmt.Sprintf("preempted: worker %s left (%s)", inst.Name, c.Reason), true)
	}
	s.retire(inst, c.Now, c.Reason, c.MaxLost, false)
	return nil
}

// retire deactivates an instance. Its running attempts are lost: their jobs
// go back to Ready with the next attempt, end Cancelled when their batch is
// cancelled, or end Error once maxLost instances (0: no limit; a job's
// Policy may set its own) lost them, so a job that takes its worker down
// does not travel the whole fleet. reclaimed: the instance's machine was
// taken back by the cloud (a spot reclaim, when the machine is spot).
func (s *instanceBook) retire(inst *Instance, now int64, reason string, maxLost uint8, reclaimed bool) {
	inst.Active = false
	inst.Retired = now
	inst.Reason = reason
	if s.instByIdentity[inst.identity()] == inst.ID {
		delete(s.instByIdentity, inst.identity())
	}
	keys := sortedAttempts(inst.running)
	msg := fmt.Sprintf("attempt lost: instance %s retired (%s)", inst.Name, reason)
	for _, k := range keys {
		b := s.batches[k.batch]
		j := &b.jobs[k.job-1]
		j.end = now
		j.outcome = OutcomeLost
		g := b.groupOf(k.job)
		s.endAttempt(b, g, k.job, inst, now)
		note := ""
		if reclaimed && g.spec.maxSpot() > 0 && s.spot(inst) {
			g, note = s.spotReclaimed(b, g, k.job, j)
		} else if j.lost < 255 {
			j.lost++
		}
		switch {
		case b.cancelledFor(g.spec):
			b.setMessage(k.job, msg)
			s.finish(b, k.job, j, Cancelled, now)
		case g.spec.maxLost(maxLost) > 0 && int(j.lost) >= g.spec.maxLost(maxLost):
			b.setMessage(k.job, fmt.Sprintf("lost with %d workers (a job that takes its worker down is not run again); the last: instance %s retired (%s)", j.lost, inst.Name, reason))
			s.finish(b, k.job, j, Error, now)
		default:
			b.setMessage(k.job, msg+note)
			s.requeue(b, g, k.job, j, true, now)
		}
	}
	inst.running = nil
	inst.FreeMilli, inst.FreeMem, inst.FreeGPUs = 0, 0, 0
	s.notifyInstance(inst.ID)
	s.notifyWork()
}

// EventsResult counts applied and ignored (stale or repeated) events.
type EventsResult struct {
	Applied int
	Ignored int
	// Skipped are the indexes of the ignored events, in order (what a
	// reader of the applied entry, the change feed, must not take for
	// what happened).
	Skipped []int
}

// Took reports whether the event at index i of the command was applied.
func (r *EventsResult) Took(i int) bool {
	_, found := slices.BinarySearch(r.Skipped, i)
	return !found
}

// InstanceByTokenHash returns the instance owning a token hash.
func (s *instanceBook) InstanceByTokenHash(hash string) (Instance, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.instTokens[hash]
	if !ok {
		return Instance{}, false
	}
	return s.instanceCopy(id), true
}

// instanceCopy returns an instance for a reader, without its running set.
func (s *instanceBook) instanceCopy(id uint32) Instance {
	inst := *s.instances[id]
	inst.running = nil
	return inst
}

// ActiveByNodeID returns the active instance of a worker node ID.
func (s *instanceBook) ActiveByNodeID(nodeID string) (Instance, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.instByIdentity[nodeIdentity(nodeID)]
	if !ok {
		return Instance{}, false
	}
	return s.instanceCopy(id), true
}

// ActiveCount is how many instances are active (a kept count).
func (s *instanceBook) ActiveCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.instByIdentity)
}

// InstanceCounts is how many instances the state holds, active and
// retired: a retired one stays until nothing held refers to it and its
// retention window has passed (ForgetInstances).
func (s *instanceBook) InstanceCounts() (active, retired int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	active = len(s.instByIdentity)
	return active, len(s.instances) - active
}

// ActiveInstances returns the IDs of active instances.
func (s *instanceBook) ActiveInstances() []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []uint32
	for id, inst := range s.instances {
		if inst.Active {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// InstanceInfo is an instance as a read returns it (server/apiview shows it to the API).
type InstanceInfo struct {
	ID        uint32
	Name      string
	NodeID    string
	CPUMilli  int64
	Memory    int64
	FreeMilli int64
	FreeMem   int64
	Active    bool
	Running   int
	Activated int64
	Retired   int64
	Reason    string
	Region    string
	Cluster   string
	Pool      string
	Labels    StringMap // read-only
	GPUType   string
	GPUs      int64
	FreeGPUs  int64
	Version   string
}

// Instances lists every instance, active first, then by ID.
func (s *instanceBook) Instances() (out []InstanceInfo) {
	s.Read(func(r Reader) { out = r.InstanceRecords() })
	return
}

// InstanceRecords is Instances within a consistent read.
func (r Reader) InstanceRecords() []InstanceInfo {
	s := r.s
	out := make([]InstanceInfo, 0, len(s.instances))
	for _, inst := range s.instances {
		out = append(out, InstanceInfo{
			ID: inst.ID, Name: inst.Name, NodeID: inst.NodeID, CPUMilli: inst.CPUMilli, Memory: inst.Memory,
			FreeMilli: inst.FreeMilli, FreeMem: inst.FreeMem, Active: inst.Active, Running: len(inst.running),
			Activated: inst.Activated, Retired: inst.Retired, Reason: inst.Reason,
			Region: inst.Region, Cluster: inst.Cluster, Pool: inst.Pool, Labels: inst.Labels,
			GPUType: inst.GPUType, GPUs: inst.GPUs, FreeGPUs: inst.FreeGPUs, Version: inst.Version,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Active != out[j].Active {
			return out[i].Active
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// WorkerView is what one instance should be doing according to the state:
// the attempts it must run, and which of the attempts it reported it must
// kill.
type WorkerView struct {
	Active bool
	Assign []AssignmentInfo
	Kill   []AttemptID
	// Preempt are held attempts told to stop for other queues' work.
	Preempt []PreemptOrder
	// Orphans are attempts placed on the instance whose batch was cancelled
	// before the worker took them: nobody will ever report on them, so the
	// caller records them as cancelled on the worker's behalf.
	Orphans []AttemptID
	Running int
}

// AttemptID names an attempt.
type AttemptID struct {
	Batch   uint64
	Job     uint32
	Attempt uint16
}

// AssignmentInfo is an attempt to run with its job's spec.
type AssignmentInfo struct {
	AttemptID
	Index int64
	Spec  *Spec
	// Project is the billing project of the job's batch (whose storage
	// prefixes its files lie under).
	Project string
}

// WorkerView reconciles a worker's report (the attempts it holds) with the
// state: attempts placed on the instance that the worker does not hold are
// assigned; held attempts that are not running there any more, or whose
// batch is cancelled, are killed.
func (s *instanceBook) WorkerView(instance uint32, known []AttemptID) WorkerView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	inst := s.instances[instance]
	if inst == nil {
		return WorkerView{}
	}
	v := WorkerView{Active: inst.Active, Running: len(inst.running)}
	held := make(map[attemptKey]uint16, len(known))
	for _, k := range known {
		held[attemptKey{k.Batch, k.Job}] = k.Attempt
		b := s.batches[k.Batch]
		if b == nil || k.Job < 1 || int(k.Job) > len(b.jobs) {
			v.Kill = append(v.Kill, k)
			continue
		}
		j := &b.jobs[k.Job-1]
		if j.state != Running || j.attempt != k.Attempt || j.instance != instance {
			// Finished attempts the worker still holds are not killed: they
			// wait for their completed event to be acknowledged. Anything
			// else it holds is stale, preempted attempts included.
			if j.attempt != k.Attempt || j.instance != instance || (j.state == Ready && j.outcome == OutcomePreempted) {
				v.Kill = append(v.Kill, k)
			}
			continue
		}
		if b.cancelledFor(b.groupOf(k.Job).spec) {
			v.Kill = append(v.Kill, k)
			continue
		}
		if o, ok := s.stopping[attemptKey{k.Batch, k.Job}]; ok && o.attempt == k.Attempt {
			v.Preempt = append(v.Preempt, PreemptOrder{AttemptID: k, Reason: o.reason, GraceMs: b.groupOf(k.Job).spec.preemptGrace()})
		}
	}
	for k := range inst.running {
		if a, ok := held[k]; ok && a == s.batches[k.batch].jobs[k.job-1].attempt {
			continue
		}
		b := s.batches[k.batch]
		j := &b.jobs[k.job-1]
		g := b.groupOf(k.job)
		if b.cancelledFor(g.spec) {
			v.Orphans = append(v.Orphans, AttemptID{k.batch, k.job, j.attempt})
			continue
		}
		v.Assign = append(v.Assign, AssignmentInfo{
			AttemptID: AttemptID{k.batch, k.job, j.attempt},
			Index:     int64(k.job - g.base),
			Spec:      g.spec,
			Project:   b.BillingProject,
		})
	}
	sort.Slice(v.Orphans, func(i, j int) bool {
		a, b := v.Orphans[i], v.Orphans[j]
		if a.Batch != b.Batch {
			return a.Batch < b.Batch
		}
		return a.Job < b.Job
	})
	sort.Slice(v.Assign, func(i, j int) bool {
		a, b := v.Assign[i], v.Assign[j]
		if a.Batch != b.Batch {
			return a.Batch < b.Batch
		}
		return a.Job < b.Job
	})
	return v
}

// evacuate preempts every attempt running in a cluster.
func (s *instanceBook) evacuate(cl *Cluster, now int64) int {
	n := 0
	for _, id := range s.sortedInstanceIDs() {
		inst := s.instances[id]
		if !inst.Active || inst.Cluster != cl.Name || len(inst.running) == 0 {
			continue
		}
		n += s.preemptAll(inst, now, fmt.Sprintf("preempted: cluster %s disabled (%s)", cl.Name, cl.Reason), false)
	}
	return n
}

// preemptAll preempts every attempt running on an instance: their jobs
// run again (or end Cancelled with their batch), and nothing counts
// against their retries. It returns how many it preempted.
func (s *instanceBook) preemptAll(inst *Instance, now int64, msg string, reclaimed bool) int {
	n := 0
	spot := reclaimed && s.spot(inst)
	for _, k := range sortedAttempts(inst.running) {
		b := s.batches[k.batch]
		j := &b.jobs[k.job-1]
		j.end = now
		j.outcome = OutcomePreempted
		g := b.groupOf(k.job)
		s.endAttempt(b, g, k.job, inst, now)
		note := ""
		if spot && g.spec.maxSpot() > 0 && !b.cancelledFor(g.spec) {
			g, note = s.spotReclaimed(b, g, k.job, j)
		}
		b.setMessage(k.job, msg+note)
		if b.cancelledFor(g.spec) {
			s.finish(b, k.job, j, Cancelled, now)
		} else {
			s.requeue(b, g, k.job, j, true, now)
		}
		n++
	}
	s.notifyInstance(inst.ID)
	return n
}

// spotReclaimed counts an attempt of job id lost to a spot reclaim against
// the job's max_spot_attempts (not its lost attempts: the market's doing,
// not the job's). At the cap the job is given a group of its own, kept
// off spot machines, which it returns with what to add to its message.
func (s *instanceBook) spotReclaimed(b *Batch, g *group, id uint32, j *job) (*group, string) {
	if j.spotLost < 255 {
		j.spotLost++
	}
	limit := g.spec.maxSpot()
	next := g.spec.offSpot()
	if int(j.spotLost) < limit || next == nil || b.cancelledFor(g.spec) {
		return g, ""
	}
	return s.isolate(b, id, next), fmt.Sprintf("; spot machines were reclaimed under %d of its attempts (max_spot_attempts %d): it runs on on-demand machines from now on", j.spotLost, limit)
}

func (s *instanceBook) sortedInstanceIDs() []uint32 {
	ids := make([]uint32, 0, len(s.instances))
	for id := range s.instances {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
