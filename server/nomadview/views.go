package nomadview

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/jobspec/nomadspec"
	"github.com/drover-sched/drover/server/state"
)

// Registered is a Nomad job as the state keeps it, with the batch of its
// current version as drover's API shows it (nil: a template, or a batch
// no longer to be read).
type Registered struct {
	Rec   state.NomadJob
	Batch *api.Batch
}

// Spec decodes the job as registered.
func (r *Registered) Spec() (*nomad.Job, error) {
	var j nomad.Job
	if err := json.Unmarshal(r.Rec.Spec, &j); err != nil {
		return nil, fmt.Errorf("job %q: its stored spec does not decode: %w", r.Rec.ID, err)
	}
	return &j, nil
}

// CurrentBatch is the batch of the job's current version (0: none).
func (r *Registered) CurrentBatch() uint64 {
	if n := len(r.Rec.Batches); n > 0 {
		return r.Rec.Batches[n-1].Batch
	}
	return 0
}

// Status is the job's status in Nomad's words: pending until something
// of it starts, running while anything of it is unfinished, dead once it
// is complete or stopped. A template runs (waits for its launches) until
// stopped.
func (r *Registered) Status() string {
	switch {
	case r.Rec.Stopped:
		return "dead"
	case r.Rec.Template:
		return "running"
	case r.Batch == nil || r.Batch.Complete():
		return "dead"
	case r.Batch.NRunning > 0 || r.Batch.NCompleted > 0:
		return "running"
	}
	return "pending"
}

// Job is the job as GET /v1/job/:id answers: the spec as registered,
// canonicalized, with the server's fields.
func (r *Registered) Job() (*nomad.Job, error) {
	j, err := r.Spec()
	if err != nil {
		return nil, err
	}
	j.Canonicalize()
	rec := &r.Rec
	j.Namespace, j.ID = &rec.Namespace, &rec.ID
	status := r.Status()
	j.Status = &status
	j.Stop = new(rec.Stopped)
	j.Version = new(rec.Version)
	j.SubmitTime = new(rec.SubmitTime)
	j.CreateIndex, j.ModifyIndex, j.JobModifyIndex = new(rec.CreateIndex), new(rec.ModifyIndex), new(rec.JobModifyIndex)
	j.Stable = new(true)
	if rec.Parent != "" {
		j.ParentID = new(rec.Parent)
	}
	return j, nil
}

// Stub is the job as GET /v1/jobs lists it.
func (r *Registered) Stub() (*nomad.JobListStub, error) {
	j, err := r.Job()
	if err != nil {
		return nil, err
	}
	stub := &nomad.JobListStub{
		ID: *j.ID, Name: deref(j.Name), Namespace: *j.Namespace, Datacenters: j.Datacenters,
		Type: deref(j.Type), Priority: deref(j.Priority), Periodic: j.Periodic != nil, ParameterizedJob: j.ParameterizedJob != nil,
		Stop: r.Rec.Stopped, Status: *j.Status, ParentID: r.Rec.Parent,
		CreateIndex: r.Rec.CreateIndex, ModifyIndex: r.Rec.ModifyIndex, JobModifyIndex: r.Rec.JobModifyIndex,
		SubmitTime: r.Rec.SubmitTime,
	}
	return stub, nil
}

// Place is where a drover job of a Nomad job is: its group, task and
// allocation index.
func Place(j *api.Job) (group, task string, index int64) {
	group, task = j.Attributes[nomadspec.AttrGroup], j.Attributes[nomadspec.AttrTask]
	index = j.ArrayIndex
	if s, ok := j.Attributes[nomadspec.AttrIndex]; ok {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			index = i
		}
	}
	return group, task, index
}

// Summary counts the job's allocations by group in Nomad's states: a
// group's drover jobs of its main tasks, each as the allocation it runs
// as (queued until placed).
func (r *Registered) Summary(jobs []api.Job) *nomad.JobSummary {
	s := &nomad.JobSummary{JobID: r.Rec.ID, Namespace: r.Rec.Namespace, Summary: map[string]nomad.TaskGroupSummary{},
		CreateIndex: r.Rec.CreateIndex, ModifyIndex: r.Rec.ModifyIndex}
	if spec, err := r.Spec(); err == nil {
		for _, g := range spec.TaskGroups {
			if g.Name != nil {
				s.Summary[*g.Name] = nomad.TaskGroupSummary{}
			}
		}
	}
	seen := map[string]bool{}
	for i := range jobs {
		j := &jobs[i]
		group, _, index := Place(j)
		key := group + "\x00" + strconv.FormatInt(index, 10)
		if group == "" || seen[key] {
			continue // an allocation counts once, by its first task
		}
		seen[key] = true
		tg := s.Summary[group]
		switch j.State {
		case api.JobPending, api.JobReady, api.JobCreating:
			tg.Queued++
		case api.JobRunning:
			tg.Running++
		case api.JobSuccess:
			tg.Complete++
		case api.JobFailed, api.JobError:
			tg.Failed++
		case api.JobCancelled:
			tg.Complete++
		}
		s.Summary[group] = tg
	}
	return s
}

// Ended reports whether an attempt ended (the API shows one that runs,
// or was placed and has not started yet, as running).
func Ended(a *api.Attempt) bool { return a.State != "" && a.State != api.JobRunning }

// ClientStatus is an attempt's allocation status in Nomad's words.
func ClientStatus(a *api.Attempt) string {
	switch a.State {
	case "", api.JobRunning:
		if a.StartTime == nil {
			return nomad.AllocClientStatusPending
		}
		return nomad.AllocClientStatusRunning
	case api.OutcomeSuccess:
		return nomad.AllocClientStatusComplete
	case api.OutcomeFailed, api.OutcomeError:
		return nomad.AllocClientStatusFailed
	case api.OutcomeCancelled:
		return nomad.AllocClientStatusComplete
	}
	return nomad.AllocClientStatusLost // lost, preempted
}

// desired is an attempt's desired status: run while it should, stop
// once the batch was cancelled or it ended.
func desired(b *api.Batch, a *api.Attempt) string {
	if !Ended(a) && (b == nil || !b.Cancelled) {
		return nomad.AllocDesiredStatusRun
	}
	return nomad.AllocDesiredStatusStop
}

func nanos(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixNano()
}

// allocName is Nomad's name of an allocation: job.group[index].
func allocName(job, group string, index int64) string {
	return fmt.Sprintf("%s.%s[%d]", job, group, index)
}

// AllocStub is one attempt as an allocation list shows it.
func (r *Registered) AllocStub(j *api.Job, a *api.Attempt) *nomad.AllocationListStub {
	group, task, idx := Place(j)
	status := ClientStatus(a)
	return &nomad.AllocationListStub{
		ID: AllocID(uint64(j.BatchID), uint32(j.JobID), a.Attempt), EvalID: EvalID(uint64(j.BatchID), EvalRegister),
		Name: allocName(r.Rec.ID, group, idx), Namespace: r.Rec.Namespace, NodeID: NodeID(a.Instance), NodeName: a.Instance,
		JobID: r.Rec.ID, JobType: nomad.JobTypeBatch, JobVersion: r.versionOf(uint64(j.BatchID)), TaskGroup: group,
		DesiredStatus: desired(r.Batch, a), ClientStatus: status, ClientDescription: a.Message,
		TaskStates: map[string]*nomad.TaskState{task: taskState(a)},
		// The indexes of its version's registration: the state's own moves
		// with every entry, which would make every answer new.
		CreateIndex: r.Rec.JobModifyIndex, ModifyIndex: r.Rec.ModifyIndex, CreateTime: nanos(a.StartTime), ModifyTime: max(nanos(a.EndTime), nanos(a.StartTime)),
	}
}

// Alloc is one attempt as GET /v1/allocation/:id answers.
func (r *Registered) Alloc(j *api.Job, a *api.Attempt) (*nomad.Allocation, error) {
	stub := r.AllocStub(j, a)
	job, err := r.Job()
	if err != nil {
		return nil, err
	}
	return &nomad.Allocation{
		ID: stub.ID, Namespace: stub.Namespace, EvalID: stub.EvalID, Name: stub.Name, NodeID: stub.NodeID, NodeName: stub.NodeName,
		JobID: stub.JobID, Job: job, TaskGroup: stub.TaskGroup, DesiredStatus: stub.DesiredStatus, ClientStatus: stub.ClientStatus,
		ClientDescription: stub.ClientDescription, TaskStates: stub.TaskStates,
		CreateIndex: stub.CreateIndex, ModifyIndex: stub.ModifyIndex, AllocModifyIndex: stub.ModifyIndex,
		CreateTime: stub.CreateTime, ModifyTime: stub.ModifyTime,
	}, nil
}

// versionOf is the job version a batch ran.
func (r *Registered) versionOf(batch uint64) uint64 {
	for _, v := range r.Rec.Batches {
		if v.Batch == batch {
			return v.Version
		}
	}
	return r.Rec.Version
}

// taskState is an attempt as the state of its task.
func taskState(a *api.Attempt) *nomad.TaskState {
	ts := &nomad.TaskState{State: "pending"}
	if a.StartTime != nil {
		ts.State, ts.StartedAt = "running", *a.StartTime
		ts.Events = append(ts.Events, &nomad.TaskEvent{Type: nomad.TaskStarted, Time: a.StartTime.UnixNano(), DisplayMessage: "Task started by client"})
	}
	if Ended(a) {
		ts.State = "dead"
		if a.EndTime != nil {
			ts.FinishedAt = *a.EndTime
		}
		ts.Failed = a.State != api.OutcomeSuccess && a.State != api.OutcomeCancelled
		ev := &nomad.TaskEvent{Type: nomad.TaskTerminated, Time: nanos(a.EndTime), DisplayMessage: a.Message}
		if a.ExitCode != nil {
			ev.ExitCode = *a.ExitCode
			if ev.DisplayMessage == "" {
				ev.DisplayMessage = fmt.Sprintf("Exit Code: %d", *a.ExitCode)
			}
		}
		ts.Events = append(ts.Events, ev)
	}
	return ts
}

// Evaluations are the evaluations of the job's versions: each version's
// registration (complete; with the groups drover could not place yet and
// a blocked evaluation while any wait) and, once stopped, its stop.
func (r *Registered) Evaluations(waiting map[string]string) []*nomad.Evaluation {
	var out []*nomad.Evaluation
	for _, v := range r.Rec.Batches {
		out = append(out, r.eval(v.Batch, EvalRegister, waiting))
		if r.Batch != nil && uint64(r.Batch.ID) == v.Batch && len(waiting) > 0 {
			out = append(out, r.eval(v.Batch, EvalBlocked, nil))
		}
	}
	if r.Rec.Stopped {
		if b := r.CurrentBatch(); b != 0 {
			out = append(out, r.eval(b, EvalStop, nil))
		}
	}
	return out
}

// Eval is one evaluation of a batch of the job.
func (r *Registered) Eval(batch uint64, kind EvalKind, waiting map[string]string) *nomad.Evaluation {
	return r.eval(batch, kind, waiting)
}

func (r *Registered) eval(batch uint64, kind EvalKind, waiting map[string]string) *nomad.Evaluation {
	e := &nomad.Evaluation{
		ID: EvalID(batch, kind), Namespace: r.Rec.Namespace, JobID: r.Rec.ID, Type: nomad.JobTypeBatch,
		Status: nomad.EvalStatusComplete, TriggeredBy: "job-register", Priority: 50,
		CreateIndex: r.Rec.CreateIndex, ModifyIndex: r.Rec.ModifyIndex, JobModifyIndex: r.Rec.JobModifyIndex,
		CreateTime: r.Rec.SubmitTime, ModifyTime: r.Rec.SubmitTime,
	}
	switch kind {
	case EvalRegister:
		if len(waiting) > 0 {
			e.BlockedEval = EvalID(batch, EvalBlocked)
			e.FailedTGAllocs = map[string]*nomad.AllocationMetric{}
			for group, why := range waiting {
				e.FailedTGAllocs[group] = &nomad.AllocationMetric{ConstraintFiltered: map[string]int{why: 1}, NodesEvaluated: 0}
			}
			e.StatusDescription = "created due to placement conflicts"
		}
	case EvalBlocked:
		e.Status, e.TriggeredBy, e.PreviousEval = nomad.EvalStatusBlocked, "queued-allocs", EvalID(batch, EvalRegister)
		e.StatusDescription = "created to place remaining allocations"
	case EvalStop:
		e.TriggeredBy = "job-deregister"
	}
	return e
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// NodeStub is a worker as Nomad's node list shows it: a drover region is
// its datacenter, its pool its node class and pool; a retired worker is
// down. It advertises no HTTP address: Nomad's clients then read logs
// through the servers.
func NodeStub(in *api.Instance) *nomad.NodeListStub {
	status := "ready"
	if !in.Active {
		status = "down"
	}
	return &nomad.NodeListStub{
		ID: NodeID(in.Name), Datacenter: in.Cluster, Name: in.Name, NodeClass: in.Pool, NodePool: nonEmpty(in.Pool, "default"),
		Version: in.Version, Drain: false, SchedulingEligibility: "eligible", Status: status, StatusDescription: in.Reason,
		Drivers: map[string]*nomad.DriverInfo{
			"exec": {Detected: true, Healthy: true}, "raw_exec": {Detected: true, Healthy: true}, "docker": {Detected: true, Healthy: true},
		},
	}
}

// Node is a worker as GET /v1/node/:id answers.
func Node(in *api.Instance) *nomad.Node {
	stub := NodeStub(in)
	return &nomad.Node{
		ID: stub.ID, Datacenter: stub.Datacenter, Name: stub.Name, NodeClass: stub.NodeClass, NodePool: stub.NodePool,
		Status: stub.Status, StatusDescription: stub.StatusDescription, SchedulingEligibility: stub.SchedulingEligibility,
		Drivers:    stub.Drivers,
		Attributes: map[string]string{"kernel.name": "linux", "drover.cluster": in.Cluster, "drover.version": in.Version},
		Meta:       in.Labels,
		NodeResources: &nomad.NodeResources{
			Cpu:    nomad.NodeCpuResources{CpuShares: int64(in.CPU * 1000), TotalCpuCores: uint16(in.CPU)},
			Memory: nomad.NodeMemoryResources{MemoryMB: in.Memory >> 20},
		},
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
