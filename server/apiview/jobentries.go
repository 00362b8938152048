package apiview

import (
	"math"
	"slices"
	"time"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/state"
)

// The API's jobs turned into the state's entries, and a worker's events
// and syncs both ways: what a handler receives is checked and converted
// here, and what a worker is told is built here.

// JobEntries validates API job specs and turns them into state entries,
// applying defaults (1 core, 1 GiB per core). Errors name the offending job.
func JobEntries(specs []api.JobSpec) ([]state.JobEntry, error) {
	if err := api.ValidateJobs(specs); err != nil {
		return nil, err
	}
	out := make([]state.JobEntry, 0, len(specs))
	for i := range specs {
		js := &specs[i]
		cpu := js.CPU
		if cpu == 0 {
			cpu = 1
		}
		milli := int64(math.Round(cpu * 1000))
		mem := js.Memory
		if mem == 0 {
			mem = milli * (1 << 30) / 1000
		}
		out = append(out, state.JobEntry{
			First:        uint32(js.JobID),
			Count:        uint32(js.NumJobs()),
			Parents:      ranges(js.ParentIDs, js.ParentRanges),
			BatchParents: ranges(js.BatchParentIDs, js.BatchParentRanges),
			Spec: &state.Spec{
				Name:       js.Name,
				Array:      js.Count > 0,
				Command:    js.Command,
				Env:        js.Env,
				CPUMilli:   milli,
				Memory:     mem,
				TimeoutMs:  int64(js.TimeoutSeconds * 1000),
				Retries:    uint16(js.Retries),
				AlwaysRun:  js.AlwaysRun,
				Attributes: js.Attributes,
				Where:      where(js.Regions, js.Clusters, js.Pool, js.WorkerLabels, js.GPUType, js.GPUs, js.MachineType),
				Run:        run(js),
			},
		})
	}
	return out, nil
}

// policy is how a validated job comes back after attempts it did not end
// (nil: the server's defaults).
func policy(js *api.JobSpec) *state.Policy {
	if js.MaxLostAttempts == 0 && js.OOMRetry == nil && js.MaxSpotAttempts == 0 {
		return nil
	}
	p := &state.Policy{MaxLost: int16(js.MaxLostAttempts), MaxSpot: int16(js.MaxSpotAttempts)}
	if o := js.OOMRetry; o != nil {
		p.OOMFactorMilli, p.OOMMaxMemory = int32(math.Round(o.Factor*1000)), o.MaxMemory
	}
	return p
}

// run is a validated job's container, network, process limit and files
// (nil: a process on the default network with the worker's limit and no
// files). The default network, api.NetworkBridge, is kept as "". Paths are
// kept as written: the worker expands the job's variables in them and
// checks them again.
func run(js *api.JobSpec) *state.Run {
	network := js.Network
	if network == api.NetworkBridge {
		network = ""
	}
	grace := int64(math.Round(js.PreemptionGraceSeconds * 1000))
	pol := policy(js)
	if js.Image == "" && network == "" && js.MaxProcesses == 0 && len(js.Inputs) == 0 && len(js.Outputs) == 0 && grace == 0 && !js.Nomad && pol == nil && !js.Gang {
		return nil
	}
	r := &state.Run{Image: js.Image, Network: network, MaxProcesses: js.MaxProcesses, PreemptGraceMs: grace, Nomad: js.Nomad, Policy: pol}
	if js.Gang {
		r.Gang = &state.Gang{Size: uint32(js.Count), Uniform: js.GangUniformity}
	}
	for _, f := range js.Inputs {
		r.Inputs = append(r.Inputs, state.File{Name: f.Name, URL: f.Source, Path: f.Path})
	}
	for _, f := range js.Outputs {
		r.Outputs = append(r.Outputs, state.File{Name: f.Name, URL: f.Destination, Path: f.Path})
	}
	return r
}

// where is a job's placement constraint, its regions and clusters sorted
// and deduped and its labels sorted, so equal sets share one constraint (nil: none).
func where(regions, clusters []string, pool string, labels map[string]string, gpuType string, gpus int, machineType string) *state.Where {
	if len(regions) == 0 && len(clusters) == 0 && pool == "" && len(labels) == 0 && gpus == 0 && machineType == "" {
		return nil
	}
	w := &state.Where{Pool: pool, MachineType: machineType}
	for k, v := range labels {
		w.Labels = append(w.Labels, k+"="+v)
	}
	slices.Sort(w.Labels)
	if gpus > 0 {
		w.GPUType, w.GPUs = gpuType, int64(gpus)
	}
	if len(regions) > 0 {
		w.Regions = slices.Compact(slices.Sorted(slices.Values(regions)))
	}
	if len(clusters) > 0 {
		w.Clusters = slices.Compact(slices.Sorted(slices.Values(clusters)))
	}
	return w
}

// ranges converts validated parent IDs and ranges.
func ranges(ids []int64, rs []api.IDRange) []state.Range {
	var out []state.Range
	for _, id := range ids {
		out = append(out, state.Range{Lo: uint32(id), Hi: uint32(id)})
	}
	for _, r := range rs {
		out = append(out, state.Range{Lo: uint32(r[0]), Hi: uint32(r[1])})
	}
	return out
}

// CreateBatch is the command that creates a batch a request describes,
// its jobs already checked into entries: the API's handler (after
// admission) and the leader's launches of Nomad's periodic jobs build it
// alike.
func CreateBatch(user string, req *api.CreateBatchRequest, entries []state.JobEntry, groups []state.JobGroupDecl, now time.Time) *state.CreateBatch {
	cmd := &state.CreateBatch{
		Groups: groups,
		Now:    now.UnixNano(), User: user, Name: req.Name, BillingProject: req.BillingProject,
		Attributes: req.Attributes, Key: req.IdempotencyKey, NJobs: uint32(req.NJobs), Jobs: entries, Policy: state.PolicyPriority,
		CancelAfterFailures: uint32(req.CancelAfterNFailures), Callback: req.Callback,
		Queue: req.Queue, Priority: int32(req.Priority), SLONs: int64(req.SLOSeconds * 1e9),
	}
	if req.Deadline != nil {
		cmd.DeadlineNs = req.Deadline.UnixNano()
	}
	if cmd.Key != "" {
		cmd.Digest = cmd.RequestDigest()
	}
	return cmd
}
