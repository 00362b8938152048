// Package apiview turns the state's read records into the API's JSON
// types: the one place where the replicated state meets the wire.
//
// server/state returns its own records (state.BatchRecord,
// state.JobRecord, state.ProjectRecord, ...), copied out under one read
// lock and free of clocks; the HTTP handlers and the export to the
// history store convert them here, so a field of the API is written once
// and the state never imports api. What grows with time (a running
// attempt's cost, a token's expiry) is read at the now the caller passes.
package apiview

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/server/state"
)

// each converts every record of a list, in order (never nil).
func each[R, A any](rs []R, f func(*R) A) []A {
	out := make([]A, len(rs))
	for i := range rs {
		out[i] = f(&rs[i])
	}
	return out
}

// unixTime is a time of the state (unix ns) as the API shows it.
func unixTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// timePtr is an optional time of the state (0: none) as the API shows it.
func timePtr(ns int64) *time.Time {
	if ns == 0 {
		return nil
	}
	t := unixTime(ns)
	return &t
}

// Batch is a batch's status as the API shows it, its cost read at now.
func Batch(r *state.BatchRecord, now time.Time) api.Batch {
	out := api.Batch{
		ID:             int64(r.ID),
		Name:           r.Name,
		User:           r.User,
		BillingProject: r.BillingProject,
		Attributes:     r.Attributes,
		State:          api.BatchRunning,
		Cancelled:      r.Cancelled,
		CancelReason:   r.CancelReason,
		NJobs:          r.NJobs,

		CancelAfterNFailures: int64(r.CancelAfterFailures),
		Queue:                r.Queue,
		Priority:             int64(r.Priority),
		SLOSeconds:           float64(r.SLO) / 1e9,
		Callback:             r.Callback,
		CallbackResult:       r.CallbackResult,
		NPending:             r.Count(state.Pending),
		NReady:               r.Count(state.Ready),
		NRunning:             r.Count(state.Running) + r.Count(state.Creating),
		NSucceeded:           r.Count(state.Success),
		NFailed:              r.Count(state.Failed),
		NCancelled:           r.Count(state.Cancelled),
		NError:               r.Count(state.Error),
		NUpdates:             r.NUpdates,
		TimeCreated:          unixTime(r.Created),
		TimeCompleted:        timePtr(r.Completed),
		Cost:                 r.Cost(now.UnixNano()),
	}
	out.NCompleted = out.NSucceeded + out.NFailed + out.NCancelled + out.NError
	if r.Completed != 0 {
		out.State = api.BatchComplete
	}
	out.Deadline = timePtr(r.Deadline)
	if met, ok := r.SLOMet(); ok {
		out.SLOMet = &met
	}
	return out
}

// BatchList is a page of batches as the API shows it.
func BatchList(p state.BatchPage, now time.Time) api.BatchList {
	batch := func(r *state.BatchRecord) api.Batch { return Batch(r, now) }
	return api.BatchList{Batches: each(p.Batches, batch), LastID: int64(p.LastID)}
}

// Job is a job as the API shows it, the cost of a running attempt read
// at now.
func Job(r *state.JobRecord, now time.Time) api.Job {
	spec := r.Spec
	out := api.Job{
		BatchID:    int64(r.Batch),
		JobID:      int64(r.ID),
		Name:       r.Name,
		ArrayIndex: r.ArrayIndex,
		State:      JobState(r.State),
		Attempts:   each(r.Attempts, func(a *state.AttemptRecord) api.Attempt { return Attempt(a, now) }),
		Message:    r.Message,
		Command:    spec.Command,
		CPU:        float64(spec.CPUMilli) / 1000,
		Memory:     spec.Memory,
		Timeout:    float64(spec.TimeoutMs) / 1000,
		Retries:    int(spec.Retries),
		AlwaysRun:  spec.AlwaysRun,
		Attributes: spec.Attributes,
		Regions:    spec.Regions(),
		Pool:       spec.Pool(),
		Clusters:   spec.Clusters(),
		JobGroup:   r.GroupPath,
	}
	if g := spec.Gang(); g != nil {
		out.Gang, out.GangUniformity = int64(g.Size), g.Uniform
	}
	for _, kv := range spec.Labels() {
		k, v, _ := strings.Cut(kv, "=")
		if out.WorkerLabels == nil {
			out.WorkerLabels = map[string]string{}
		}
		out.WorkerLabels[k] = v
	}
	if typ, n := spec.GPUs(); n > 0 {
		out.GPUType, out.GPUs = typ, int(n)
	}
	if spec.Where != nil {
		out.MachineType, out.OnDemandOnly = spec.Where.MachineType, spec.Where.NoSpot
	}
	if p := spec.Policy(); p != nil {
		out.MaxLostAttempts, out.MaxSpotAttempts = int(p.MaxLost), int(p.MaxSpot)
		if p.OOMFactorMilli > 0 {
			out.OOMRetry = &api.OOMRetry{Factor: float64(p.OOMFactorMilli) / 1000, MaxMemory: p.OOMMaxMemory}
		}
	}
	if run := spec.Run; run != nil {
		out.Image, out.Network, out.MaxProcesses = run.Image, run.Network, run.MaxProcesses
		out.PreemptionGraceSeconds = float64(run.PreemptGraceMs) / 1000
		out.Nomad = run.Nomad
		out.Inputs, out.Outputs = files(run)
	}
	for _, p := range r.Parents {
		out.Parents = append(out.Parents, api.IDRange{int64(p.Lo), int64(p.Hi)})
	}
	if r.HasExit {
		code := int(r.Exit)
		out.ExitCode = &code
	}
	return out
}

// JobList is a page of a batch's jobs as the API shows it.
func JobList(p state.JobPage, now time.Time) api.JobList {
	job := func(r *state.JobRecord) api.Job { return Job(r, now) }
	out := api.JobList{Jobs: each(p.Jobs, job), LastID: int64(p.LastID)}
	if p.Batch.ID != 0 {
		b := Batch(&p.Batch, now)
		out.Batch = &b
	}
	for i := range p.JobGroups {
		out.JobGroups = append(out.JobGroups, JobGroup(&p.JobGroups[i], now))
	}
	return out
}

// Attempt is one attempt of a job as the API shows it, its cost (while
// it runs) read at now.
func Attempt(r *state.AttemptRecord, now time.Time) api.Attempt {
	a := api.Attempt{
		Attempt:   r.Attempt,
		Instance:  r.Instance,
		Cluster:   r.Cluster,
		Region:    r.Region,
		StartTime: timePtr(r.Start),
		EndTime:   timePtr(r.End),
		Message:   r.Message,
		State:     r.Outcome.String(),
		Memory:    r.Memory,
	}
	if u := r.Usage; u != nil {
		a.Usage = &api.Usage{
			CPUSeconds: float64(u.CPUMillis) / 1000, PeakMemory: u.PeakMemory, BytesIn: u.BytesIn, BytesOut: u.BytesOut,
			ImageSeconds: float64(u.ImageMillis) / 1000, InputSeconds: float64(u.InputMillis) / 1000, OutputSeconds: float64(u.OutputMillis) / 1000,
			Memory: u.Memory,
		}
	}
	if r.Running {
		a.State = api.JobRunning
		a.EndTime = nil
	}
	if r.Priced {
		cost := r.Cost(now.UnixNano())
		a.Cost, a.PricePerHour = &cost, r.PerHour.Rate()
		for _, l := range r.Lines {
			a.CostLines = append(a.CostLines, api.CostLine{Resource: l.Resource, Rate: l.Rated, Version: int(l.Version), Units: l.Units, PricePerHour: l.PerHour})
		}
	}
	if r.HasExit {
		code := int(r.Exit)
		a.ExitCode = &code
	}
	return a
}

// JobState is a job's state as the API names it.
func JobState(st state.JobState) string { return st.String() }

// User is a user as the API shows it, without its token.
func User(u *state.User) api.User {
	return api.User{Name: u.Name, Admin: u.Admin, TimeCreated: unixTime(u.Created)}
}

// Users lists users as the API shows them.
func Users(us []state.User) []api.User {
	return each(us, User)
}

// Token is a token as the API shows it (never its hash), expired or not
// at now.
func Token(t *state.Token, now time.Time) api.Token {
	out := api.Token{Accessor: t.Accessor, User: t.User, Name: t.Name, TimeCreated: unixTime(t.Created)}
	if t.Expires != 0 {
		out.ExpiresAt = timePtr(t.Expires)
		out.Expired = t.Expired(now.UnixNano())
	}
	return out
}

// Tokens lists tokens as the API shows them, in the state's order.
func Tokens(ts []state.Token, now time.Time) []api.Token {
	return each(ts, func(t *state.Token) api.Token { return Token(t, now) })
}

// BillingProject is a billing project as the API shows it, its cost read
// at now.
func BillingProject(p *state.ProjectRecord, now time.Time) api.BillingProject {
	members := p.SortedMembers()
	out := api.BillingProject{Name: p.Name, Members: members, TimeCreated: unixTime(p.Created), SpendLimit: p.SpendLimit, LogQuota: p.LogQuota,
		AllowHostNetwork: p.AllowHostNetwork, MaxPriority: p.MaxPriority, Cost: p.Cost(now.UnixNano())}
	for i := range p.Storage {
		out.Storage = append(out.Storage, StoragePrefix(&p.Storage[i]))
	}
	for _, m := range members {
		switch p.Role(m) {
		case state.RoleManager:
			out.Managers = append(out.Managers, m)
		case state.RoleViewer:
			out.Viewers = append(out.Viewers, m)
		}
	}
	return out
}

// BillingProjects lists billing projects as the API shows them (nil for
// none, as the API always answered).
func BillingProjects(ps []state.ProjectRecord, now time.Time) []api.BillingProject {
	var out []api.BillingProject
	for i := range ps {
		out = append(out, BillingProject(&ps[i], now))
	}
	return out
}

// StoragePrefix is a storage prefix as the API shows it: never its
// credentials, only their kind.
func StoragePrefix(p *state.StoragePrefix) api.StoragePrefix {
	out := api.StoragePrefix{Prefix: p.URL, Credentials: p.Kind, AddedBy: p.AddedBy, TimeAdded: unixTime(p.Added)}
	if out.Credentials == "" {
		out.Credentials = api.CredentialsWorker
	}
	if p.S3Endpoint != "" || p.S3Region != "" || p.S3PathStyle {
		out.S3 = &api.S3Settings{Endpoint: p.S3Endpoint, Region: p.S3Region, PathStyle: p.S3PathStyle}
	}
	return out
}

// StoragePrefixes lists storage prefixes as the API shows them.
func StoragePrefixes(ps []state.StoragePrefix) []api.StoragePrefix {
	return each(ps, StoragePrefix)
}

// AuditEntries lists audit entries as the API shows them.
func AuditEntries(es []state.AuditEntry) []api.AuditEntry {
	out := make([]api.AuditEntry, len(es))
	for i, e := range es {
		out[i] = api.AuditEntry{Time: unixTime(e.Time), User: e.User, Token: e.Accessor, Method: e.Method,
			Route: e.Route, Path: e.Path, Remote: e.Remote, Status: e.Status, Message: e.Message, Count: max(1, int(e.Count))}
	}
	return out
}

// Rates lists rates as the API shows them.
func Rates(rs []state.RateRecord) []api.Rate {
	out := make([]api.Rate, len(rs))
	for i, r := range rs {
		out[i] = api.Rate{Resource: r.Resource, Version: int(r.Version), PricePerHour: r.PerHour, ValidFrom: unixTime(r.ValidFrom), InForce: r.InForce}
	}
	return out
}

// CostByDay lists a billing project's cost by day as the API shows it:
// today's row has what the running attempts have cost up to now in
// Running.
func CostByDay(days []state.CostDay) []api.CostRow {
	out := make([]api.CostRow, len(days))
	for i, d := range days {
		out[i] = api.CostRow{Day: time.Unix(int64(d.Day)*86400, 0).UTC().Format(time.DateOnly), Cost: d.Cost, Running: d.Running}
	}
	return out
}

// Cluster is a cluster as the API shows it, without what only the
// serving node knows (Heard, Down), which its caller adds.
func Cluster(c *state.ClusterInfo) api.Cluster {
	out := api.Cluster{
		Name: c.Name, Region: c.Region, Enabled: !c.Disabled, Reason: c.Reason, By: c.By, Declared: c.Declared, Group: c.Group,
		Workers: c.Workers, CPU: float64(c.CapacityMilli) / 1000, FreeCPU: float64(c.FreeMilli) / 1000,
		Memory: c.Memory, FreeMemory: c.FreeMemory, Running: c.Running, Since: timePtr(c.Since),
		Provider: c.Provider, ProviderSettings: maps.Clone(c.ProviderSettings),
	}
	for _, p := range c.Pools {
		out.Pools = append(out.Pools, api.Pool{Name: p.Name, CPU: float64(p.CPUMilli) / 1000, Memory: p.Memory, Preemptible: p.Preemptible,
			PricePerHour: p.PricePerHour, GPUType: p.GPUType, GPUs: int(p.GPUs)})
	}
	return out
}

// Instance is a worker instance as the API shows it.
func Instance(in *state.InstanceInfo) api.Instance {
	return api.Instance{
		ID: int64(in.ID), Name: in.Name, NodeID: in.NodeID, Active: in.Active, CPU: float64(in.CPUMilli) / 1000, Memory: in.Memory,
		FreeCPU: float64(in.FreeMilli) / 1000, FreeMemory: in.FreeMem, Running: in.Running,
		TimeActivated: unixTime(in.Activated), TimeRetired: timePtr(in.Retired), Reason: in.Reason,
		Region: in.Region, Cluster: in.Cluster, Pool: in.Pool, Labels: maps.Clone(in.Labels),
		GPUType: in.GPUType, GPUs: int(in.GPUs), FreeGPUs: int(in.FreeGPUs), Version: in.Version,
	}
}

// Instances lists instances as the API shows them.
func Instances(ins []state.InstanceInfo) []api.Instance { return each(ins, Instance) }

// Queue is a queue, its settings and what it uses, as the API shows it.
func Queue(q *state.QueueInfo) api.Queue {
	out := api.Queue{
		Path: q.Path, Weight: q.EffectiveWeight(), Guarantee: quota(q.Guarantee),
		BorrowLimit: limit(q.BorrowLimit), LendLimit: limit(q.LendLimit),
		MaxRunning:   api.MaxRunning{Jobs: q.Limits.MaxRunningJobs, CPU: float64(q.Limits.MaxRunningMilli) / 1000},
		ReclaimGrace: duration(q.ReclaimGraceNs), MinRuntime: duration(q.MinRuntimeNs),
		Preemptible: q.Preemption.Preemptible, PreemptAfter: duration(q.Preemption.AfterNs),
		PreemptThreshold:    float64(q.Preemption.ThresholdPermille) / 1000,
		AllowPreemptionFrom: slices.Clone(q.Preemption.AllowFrom),
		Strategy:            string(q.Strategy), HomeClusters: slices.Clone(q.HomeClusters), MaxPriority: q.MaxPriority,
		UsageHalfLife:   duration(q.UsageHalfLifeNs),
		BillingProjects: slices.Clone(q.Projects), AllowProjects: slices.Clone(q.AllowProjects),
		Leaf: q.Leaf, Used: api.Quota{CPU: float64(q.UsedMilli) / 1000, Memory: q.UsedMemory, GPUs: gpuCounts(q.UsedGPUs)},
		UsedJobs: q.UsedJobs,
	}
	if out.BillingProjects == nil {
		out.BillingProjects = []string{}
	}
	if q.RecommendPermille > 0 {
		out.Recommend = &api.QueueRecommendSettings{Percentile: float64(q.RecommendPermille) / 1000}
	}
	if a := q.AutoApply; a.On() {
		out.AutoApply = &api.QueueAutoApply{Every: duration(a.EveryNs), MaxChange: float64(a.MaxChangePermille) / 1000, DryRun: a.DryRun, Days: a.Days, Keep: a.Keep,
			Rebalance: a.Rebalance, High: float64(a.HighPermille) / 1000, Low: float64(a.LowPermille) / 1000}
	}
	if !q.BorrowLimit.IsZero() {
		c := q.Queue.Queue.Quota()
		out.Cap = &api.Quota{CPU: float64(c.CPUMilli) / 1000, Memory: c.Memory, GPUs: gpuCounts(c.GPUs)}
	}
	if len(q.UsedByCluster) > 0 {
		out.UsedByCluster = map[string]float64{}
		for k, v := range q.UsedByCluster {
			out.UsedByCluster[k] = float64(v) / 1000
		}
	}
	return out
}

// QueueWaiting is a queue as the API lists it, with what the Ready jobs
// of its subtree ask for (the leader's read model reckons it) and, for a
// leaf, its decayed past use in core-hours.
func QueueWaiting(q *state.QueueInfo, waiting placement.Resources, jobs int64, pastCoreHours float64) api.Queue {
	out := Queue(q)
	out.Waiting, out.WaitingJobs, out.PastUseCoreHours = quota(waiting), jobs, math.Round(pastCoreHours*1000)/1000
	return out
}

func quota(r placement.Resources) api.Quota {
	return api.Quota{CPU: float64(r.CPUMilli) / 1000, Memory: r.Memory, GPUs: gpuCounts(r.GPUs)}
}

func limit(l placement.Limit) *api.Limit {
	if l.IsZero() {
		return nil
	}
	out := &api.Limit{GPUs: gpuCounts(l.GPUs)}
	if l.CPUMilli != nil {
		c := float64(*l.CPUMilli) / 1000
		out.CPU = &c
	}
	if l.Memory != nil {
		m := *l.Memory
		out.Memory = &m
	}
	return out
}

// duration words nanoseconds as a Go duration ("" for 0).
func duration(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Duration(ns).String()
}

// gpuCounts is a count of GPUs by type as the API shows it.
func gpuCounts(m map[string]int64) map[string]int {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

// files are a job's input and output files as the wire names them.
func files(run *state.Run) (in []api.InputFile, out []api.OutputFile) {
	for _, f := range run.Inputs {
		in = append(in, api.InputFile{Name: f.Name, Source: f.URL, Path: f.Path})
	}
	for _, f := range run.Outputs {
		out = append(out, api.OutputFile{Name: f.Name, Path: f.Path, Destination: f.URL})
	}
	return in, out
}
