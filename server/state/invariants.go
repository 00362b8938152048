package state

import (
	"fmt"
	"maps"

	"github.com/drover-sched/drover/placement"

	"github.com/drover-sched/drover/billing"
)

// CheckInvariants recomputes every counter from the job records and
// reports the first one that disagrees: per-batch state counts and Ready
// cores, open updates and completion, per-user Ready and running cores,
// per-instance free resources and attempt lists, and the held totals.
func (s *State) CheckInvariants() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	type ucount struct{ readyMilli, runningMilli, ready, running int64 }
	users := map[string]*ucount{}
	instUsed := map[uint32][3]int64{}
	instRunning := map[uint32]int{}
	var held Footprint
	for _, b := range s.batches {
		held.Jobs += int64(b.nextJob) - 1
		held.Groups += int64(len(b.groups))
		n, bytes := b.jobGroupsHeld()
		held.JobGroups += n
		held.JobGroupBytes += bytes
		held.Batches++
	}
	if held != s.held {
		return fmt.Errorf("the state counts %+v held, recomputed %+v", s.held, held)
	}
	if err := s.checkTallies(); err != nil {
		return err
	}
	if err := s.checkMachines(); err != nil {
		return err
	}
	if err := s.checkInstanceRefs(); err != nil {
		return err
	}
	if err := s.checkStorage(); err != nil {
		return err
	}
	if held := s.recountNomad(); !maps.Equal(held, s.nomadHeld) {
		return fmt.Errorf("the state counts the Nomad jobs' projects as %v, recomputed %v", s.nomadHeld, held)
	}
	for _, b := range s.batches {
		if err := b.checkJobGroups(); err != nil {
			return err
		}
		var counts [numStates]int64
		var readyMilli int64
		u := users[b.User]
		if u == nil {
			u = &ucount{}
			users[b.User] = u
		}
		if q := &b.ready; q.again < 0 || q.head+q.again > len(q.runs) {
			return fmt.Errorf("batch %d: %d runs came back, of %d queued", b.ID, q.again, len(q.runs)-q.head)
		}
		for i := range b.jobs {
			j := &b.jobs[i]
			id := uint32(i + 1)
			counts[j.state]++
			if j.state == Staged {
				continue
			}
			g := b.groupOf(id)
			if g == nil {
				return fmt.Errorf("batch %d job %d has no group", b.ID, id)
			}
			inQueue := b.ready.contains(id)
			if (j.state == Ready) != inQueue {
				return fmt.Errorf("batch %d job %d: state %s but in ready queue = %v", b.ID, id, j.state, inQueue)
			}
			switch j.state {
			case Ready:
				readyMilli += g.spec.CPUMilli
				u.readyMilli += g.spec.CPUMilli
				u.ready++
			case Running:
				u.runningMilli += g.spec.CPUMilli
				u.running++
				used := instUsed[j.instance]
				_, gpus := g.spec.GPUs()
				instUsed[j.instance] = [3]int64{used[0] + g.spec.CPUMilli, used[1] + g.spec.Memory, used[2] + gpus}
				instRunning[j.instance]++
				if _, ok := s.instances[j.instance].running[attemptKey{b.ID, id}]; !ok {
					return fmt.Errorf("batch %d job %d running on instance %d which does not list it", b.ID, id, j.instance)
				}
			}
		}
		counts[Staged] = 0
		bc := b.counts
		bc[Staged] = 0
		if counts != bc {
			return fmt.Errorf("batch %d counts %v, recomputed %v", b.ID, b.counts, counts)
		}
		if readyMilli != b.readyMilli {
			return fmt.Errorf("batch %d readyMilli %d, recomputed %d", b.ID, b.readyMilli, readyMilli)
		}
		var total int64
		for _, n := range counts {
			total += n
		}
		if total != b.nJobs {
			return fmt.Errorf("batch %d has %d committed jobs, nJobs %d", b.ID, total, b.nJobs)
		}
		final := counts[Success] + counts[Failed] + counts[Cancelled] + counts[Error]
		open := 0
		for _, u := range b.updates {
			if !u.Committed && !u.Discarded {
				open++
			}
		}
		if open != b.open {
			return fmt.Errorf("batch %d counts %d open updates, has %d", b.ID, b.open, open)
		}
		if (b.Completed != 0) != (final == b.nJobs && open == 0) {
			return fmt.Errorf("batch %d completed=%d but %d/%d final", b.ID, b.Completed, final, b.nJobs)
		}
	}
	for name, u := range s.sched {
		want := users[name]
		if want == nil {
			want = &ucount{}
		}
		if u.readyMilli != want.readyMilli || u.runningMilli != want.runningMilli || u.readyJobs != want.ready || u.runningJobs != want.running {
			return fmt.Errorf("user %s counters ready=%d/%d running=%d/%d, recomputed ready=%d/%d running=%d/%d", name,
				u.readyJobs, u.readyMilli, u.runningJobs, u.runningMilli, want.ready, want.readyMilli, want.running, want.runningMilli)
		}
		for _, b := range u.active {
			if b.ready.empty() {
				return fmt.Errorf("user %s lists batch %d as active with an empty queue", name, b.ID)
			}
		}
	}
	active := 0
	for id, inst := range s.instances {
		if inst.Active && s.instByIdentity[inst.identity()] != id {
			return fmt.Errorf("active instance %d is not its node's (%s) in the identity index", id, inst.identity())
		}
		if inst.Active {
			active++
		}
		if !inst.Active {
			if len(inst.running) != 0 {
				return fmt.Errorf("retired instance %d still runs %d attempts", id, len(inst.running))
			}
			continue
		}
		used := instUsed[id]
		if inst.FreeMilli != inst.CPUMilli-used[0] || inst.FreeMem != inst.Memory-used[1] {
			return fmt.Errorf("instance %d free %d/%d, recomputed %d/%d", id, inst.FreeMilli, inst.FreeMem, inst.CPUMilli-used[0], inst.Memory-used[1])
		}
		if inst.FreeGPUs != inst.GPUs-used[2] || inst.FreeGPUs < 0 {
			return fmt.Errorf("instance %d free GPUs %d of %d, recomputed %d", id, inst.FreeGPUs, inst.GPUs, inst.GPUs-used[2])
		}
		if inst.FreeMilli < 0 || inst.FreeMem < 0 {
			return fmt.Errorf("instance %d oversubscribed: free %d/%d", id, inst.FreeMilli, inst.FreeMem)
		}
		if len(inst.running) != instRunning[id] {
			return fmt.Errorf("instance %d lists %d attempts, %d jobs run there", id, len(inst.running), instRunning[id])
		}
	}
	if err := s.checkBills(); err != nil {
		return err
	}
	if active != len(s.instByIdentity) {
		return fmt.Errorf("%d active instances, %d in the identity index", active, len(s.instByIdentity))
	}
	if err := s.checkStops(); err != nil {
		return err
	}
	return s.checkQueues()
}

// checkQueues checks the tree's links and recomputes what every queue's
// attempts hold, in all and per cluster, from the attempts running now.
func (s *placeBook) checkQueues() error {
	type use struct {
		cpu, mem, jobs int64
		byCluster      map[string]int64
		memByCluster   map[string]int64
		gpus           map[string]int64
	}
	for _, cl := range s.clusters {
		if cl.Group != "" && s.groups[cl.Group] == nil {
			return fmt.Errorf("cluster %s is in cluster group %s, which does not exist", cl.Name, cl.Group)
		}
	}
	got := map[string]*use{}
	for path, q := range s.queues {
		got[path] = &use{byCluster: map[string]int64{}, memByCluster: map[string]int64{}, gpus: map[string]int64{}}
		if q.Path != path {
			return fmt.Errorf("queue %s is kept under %s", q.Path, path)
		}
		if parent := placement.ParentQueue(path); q.parent != s.queues[parent] || (parent != "" && q.parent == nil) {
			return fmt.Errorf("queue %s is not linked to its parent %q", path, parent)
		}
		for _, p := range q.Projects {
			if s.projectQueue[p] != q {
				return fmt.Errorf("billing project %s of queue %s maps to another queue", p, path)
			}
		}
	}
	for _, b := range s.batches {
		if want := s.resolveQueue(b); b.leaf != want {
			path := func(q *Queue) string {
				if q == nil {
					return "none"
				}
				return q.Path
			}
			return fmt.Errorf("batch %d runs in queue %s, resolved %s", b.ID, path(b.leaf), path(want))
		}
	}
	for _, inst := range s.instances {
		for k := range inst.running {
			b := s.batches[k.batch]
			sp := b.groupOf(k.job).spec
			for q := s.queueOf(b); q != nil; q = q.parent {
				u := got[q.Path]
				u.cpu += sp.CPUMilli
				u.mem += sp.Memory
				u.jobs++
				u.byCluster[inst.Cluster] += sp.CPUMilli
				u.memByCluster[inst.Cluster] += sp.Memory
				if typ, n := sp.GPUs(); n > 0 {
					u.gpus[typ] += n
				}
			}
		}
	}
	for path, q := range s.queues {
		u := got[path]
		if q.used.milli != u.cpu || q.used.memory != u.mem || q.used.jobs != u.jobs {
			return fmt.Errorf("queue %s uses %d millicores, %d bytes and %d jobs, recomputed %d, %d and %d", path, q.used.milli, q.used.memory, q.used.jobs, u.cpu, u.mem, u.jobs)
		}
		for typ, v := range q.used.gpus {
			if u.gpus[typ] != v {
				return fmt.Errorf("queue %s uses %d %s GPUs, recomputed %d", path, v, typ, u.gpus[typ])
			}
		}
		for c, v := range q.used.byCluster {
			if u.byCluster[c] != v {
				return fmt.Errorf("queue %s uses %d millicores in cluster %s, recomputed %d", path, v, c, u.byCluster[c])
			}
		}
		for c, v := range q.used.memByCluster {
			if u.memByCluster[c] != v {
				return fmt.Errorf("queue %s uses %d bytes in cluster %s, recomputed %d", path, v, c, u.memByCluster[c])
			}
		}
		for c, v := range u.byCluster {
			if q.used.byCluster[c] != v || q.used.memByCluster[c] != u.memByCluster[c] {
				return fmt.Errorf("queue %s uses %d millicores and %d bytes in cluster %s, recomputed %d and %d", path, q.used.byCluster[c], q.used.memByCluster[c], c, v, u.memByCluster[c])
			}
		}
	}
	return nil
}

// checkInstanceRefs: every instance a held attempt or a machine names is
// in the state (ForgetInstances leaves those), a retired one included;
// every instance token names its instance.
func (s *instanceBook) checkInstanceRefs() error {
	for _, m := range s.machines {
		if m.Instance != 0 && s.instances[m.Instance] == nil {
			return fmt.Errorf("machine %s names instance %d, which the state does not have", m.ID, m.Instance)
		}
	}
	for _, b := range s.batches {
		for i := range b.jobs {
			if j := &b.jobs[i]; j.attempt > 0 && j.instance != 0 && s.instances[j.instance] == nil {
				return fmt.Errorf("batch %d job %d attempt %d names instance %d, which the state does not have", b.ID, i+1, j.attempt, j.instance)
			}
		}
		for job, recs := range b.history {
			for _, rec := range recs {
				if rec.Instance != 0 && s.instances[rec.Instance] == nil {
					return fmt.Errorf("batch %d job %d attempt %d names instance %d, which the state does not have", b.ID, job, rec.Attempt, rec.Instance)
				}
			}
		}
	}
	for hash, id := range s.instTokens {
		if inst := s.instances[id]; inst == nil || inst.TokenHash != hash {
			return fmt.Errorf("an instance token names instance %d, which the state does not have under it", id)
		}
	}
	return nil
}

// checkMachines: an active machine and its worker point at each other,
// and a machine that is neither active nor draining has no active worker
// on it.
func (s *machineBook) checkMachines() error {
	for _, inst := range s.instances {
		if inst.Machine == "" || !inst.Active {
			continue
		}
		m := s.machines[inst.Machine]
		if m == nil {
			return fmt.Errorf("instance %d runs on machine %s, which the state does not have", inst.ID, inst.Machine)
		}
		if m.Instance != inst.ID || (m.State != MachineActive && m.State != MachineDraining) {
			return fmt.Errorf("instance %d runs on machine %s, which is %s with instance %d", inst.ID, m.ID, MachineStateName(m.State), m.Instance)
		}
	}
	// A creating job has exactly one machine of its own coming up, and a
	// machine coming up for a job has it creating.
	coming := map[attemptKey]int{}
	for _, m := range s.machines {
		if m.State == MachineActive {
			if inst := s.instances[m.Instance]; inst == nil || inst.Machine != m.ID {
				return fmt.Errorf("machine %s is active with instance %d, which does not run on it", m.ID, m.Instance)
			}
		}
		if m.private() && (m.State == MachineRequested || m.State == MachineLaunching) {
			b := s.batches[m.ForBatch]
			if b == nil || int(m.ForJob) > len(b.jobs) || b.jobs[m.ForJob-1].state != Creating {
				return fmt.Errorf("machine %s is %s for job %d/%d, which is not creating", m.ID, MachineStateName(m.State), m.ForBatch, m.ForJob)
			}
			coming[attemptKey{m.ForBatch, m.ForJob}]++
		}
	}
	for _, b := range s.batches {
		if b.counts[Creating] == 0 {
			continue
		}
		for i := range b.jobs {
			if b.jobs[i].state == Creating && coming[attemptKey{b.ID, uint32(i + 1)}] != 1 {
				return fmt.Errorf("job %d/%d is creating with %d machines of its own coming up", b.ID, i+1, coming[attemptKey{b.ID, uint32(i + 1)}])
			}
		}
	}
	return nil
}

// checkBills: every charge is of a running job, and each project's
// running sums are its batches' charges.
func (s *billingBook) checkBills() error {
	want := map[string]billing.Running{}
	for _, id := range s.batchIDs {
		b := s.batches[id]
		for job := range b.bill.Running {
			if st := b.jobs[job-1].state; st != Running {
				return fmt.Errorf("batch %d charges job %d, which is %s", id, job, st)
			}
		}
		var run billing.Running
		for _, c := range b.bill.Running {
			run.Add(c.Price, c.Start)
			w := want[b.BillingProject]
			w.Add(c.Price, c.Start)
			want[b.BillingProject] = w
		}
		if !run.Equal(b.bill.run) {
			return fmt.Errorf("batch %d's running sums are not its charges'", id)
		}
	}
	for name, p := range s.bills {
		if w := want[name]; !w.Equal(p.run) {
			return fmt.Errorf("billing project %s charges %d attempts; its batches %d, or at other prices", name, p.run.Len(), w.Len())
		}
	}
	return nil
}
