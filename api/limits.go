package api

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/drover-sched/drover/placement"
	"github.com/drover-sched/drover/storageurl"
)

// Limits on what a submission may ask for. Servers enforce them; the jobspec
// parser and the client check them too, so a mistake is reported at the
// line that made it, before anything is sent.
const (
	// MaxJobsPerBatch bounds the job IDs one batch may reserve.
	MaxJobsPerBatch = 1 << 31
	// MaxCPU is the most cores one job may ask for.
	MaxCPU = 4096
	// MaxMemory is the most memory one job may ask for: 64 TiB, twice
	// the largest machine a cloud rents. Servers bound a job further by
	// the largest machine their fleet offers (placement.Sizes.CheckSize).
	MaxMemory = 64 << 40
	// MinCPU is the smallest amount of a core a job can ask for: servers
	// count cores in thousandths.
	MinCPU = 0.001
	// MaxRetries bounds the further attempts a failed job may get.
	MaxRetries = 100
	// MaxLostAttempts bounds a job's max_lost_attempts (-1, no limit,
	// aside).
	MaxLostAttempts = 100
	// MaxSpotAttempts bounds a job's max_spot_attempts.
	MaxSpotAttempts = 100
	// MinOOMFactor and MaxOOMFactor bound OOMRetry.Factor: below the
	// one a retry could be given the memory it ran out of; beyond the
	// other one step asks for more than any sane next try.
	MinOOMFactor = 1.1
	MaxOOMFactor = 16
	// MaxTimeoutSeconds bounds a job's timeout (one year).
	MaxTimeoutSeconds = 365 * 24 * 3600
	// DefaultPreemptionGraceSeconds is a preempted attempt's time between
	// SIGTERM and SIGKILL when its job names none; a job may ask for up to
	// MaxPreemptionGraceSeconds.
	DefaultPreemptionGraceSeconds = 30
	MaxPreemptionGraceSeconds     = 3600
	// MaxEventMessage is the longest message a worker event keeps; servers
	// cut longer ones.
	MaxEventMessage = 4096
	// MaxNameBytes bounds the name of a job, batch, user or billing
	// project, and an idempotency key.
	MaxNameBytes = 256
	// MaxCommandBytes bounds a job's command line, all arguments together;
	// MaxCommandArgs the number of arguments.
	MaxCommandBytes = 64 << 10
	MaxCommandArgs  = 4096
	// MaxEnvBytes bounds a job's environment, names and values together;
	// MaxEnvVars the number of variables.
	MaxEnvBytes = 64 << 10
	MaxEnvVars  = 1024
	// MaxAttributes bounds the attributes of a job or batch and
	// MaxAttributeBytes each key and each value.
	MaxAttributes     = 64
	MaxAttributeBytes = 1024
	// MaxParentRanges bounds the parent IDs and ranges one entry names.
	MaxParentRanges = 10000
	// MaxWorkerName and MaxNodeID bound a worker's activation.
	MaxWorkerName = 256
	MaxNodeID     = 64
	// MaxVersion bounds the version a worker says it runs.
	MaxVersion = 64
	// MaxRegions bounds the regions one job may name, and its clusters.
	MaxRegions = 64
	// MaxPlaceName bounds a region, cluster, pool, team or GPU type name.
	MaxPlaceName = placement.MaxName
	// MaxGPUs bounds the GPUs of one job and of one worker.
	MaxGPUs = 64
	// MaxImageRef bounds an image reference.
	MaxImageRef = 512
	// MaxFiles bounds the inputs and, apart, the outputs of one job;
	// MaxURLBytes one file's URL and MaxPathBytes its path.
	MaxFiles     = 64
	MaxURLBytes  = storageurl.MaxURLBytes
	MaxPathBytes = 1024
	// MinJobProcesses and MaxJobProcesses bound a job's max_processes:
	// at most 65,536, twice the pid_max of a default Linux machine.
	MinJobProcesses = 1
	MaxJobProcesses = 1 << 16
	// MaxUsageBytes bounds the bytes in or out one attempt reports (1 PiB).
	MaxUsageBytes = 1 << 50
	// MaxCostDays bounds the days one cost report covers, and
	// MaxCostRows the users or batches it lists (DefaultCostRows when
	// the request names no limit).
	MaxCostDays     = 366
	MaxCostRows     = 10000
	DefaultCostRows = 100
)

// ValidatePlaceName checks a region, cluster, pool, team or GPU type
// name: 1 to MaxPlaceName letters, digits, '-', '_' or '.'
// (placement.ValidateName, the one rule, which apply re-checks).
func ValidatePlaceName(what, s string) error { return placement.ValidateName(what, s) }

// ValidateName checks a name or key against MaxNameBytes.
func ValidateName(what, s string) error {
	if len(s) > MaxNameBytes {
		return fmt.Errorf("%s is %d bytes; the limit is %d", what, len(s), MaxNameBytes)
	}
	return nil
}

// ValidateCancelAfter checks a batch's cancel_after_n_failures: 0 (never)
// up to the jobs a batch may hold.
func ValidateCancelAfter(n int64) error {
	if n < 0 || n > MaxJobsPerBatch {
		return fmt.Errorf("cancel_after_n_failures is %d; it must be between 0 (never) and %d, the jobs a batch may hold", n, int64(MaxJobsPerBatch))
	}
	return nil
}

// ValidateAttributes checks attributes against MaxAttributes and
// MaxAttributeBytes.
func ValidateAttributes(attrs map[string]string) error {
	if len(attrs) > MaxAttributes {
		return fmt.Errorf("%d attributes; the limit is %d", len(attrs), MaxAttributes)
	}
	for k, v := range attrs {
		if len(k) > MaxAttributeBytes || len(v) > MaxAttributeBytes {
			return fmt.Errorf("attribute %.40q: keys and values are at most %d bytes", k, MaxAttributeBytes)
		}
	}
	return nil
}

// MaxWorkerLabels bounds the worker labels one job may ask for.
const MaxWorkerLabels = placement.MaxJobLabels

// ValidateWorkerLabels checks the worker labels a job asks for
// (placement.ValidateLabels).
func ValidateWorkerLabels(labels map[string]string) error {
	if err := placement.ValidateLabels(labels); err != nil {
		return fmt.Errorf("worker_labels: %w", err)
	}
	return nil
}

// Validate checks one job spec against the limits and reports the first
// problem, naming the field. Zero CPU and Memory are valid: servers read
// them as 1 core and 1 GiB per core.
func (s *JobSpec) Validate() error {
	if s.JobID < 1 || s.JobID > MaxJobsPerBatch {
		return fmt.Errorf("job_id must be between 1 and %d (IDs count from 1 within the update)", int64(MaxJobsPerBatch))
	}
	if s.Count < 0 || s.Count > MaxJobsPerBatch {
		return fmt.Errorf("count is %d; it must be between 0 and %d", s.Count, int64(MaxJobsPerBatch))
	}
	if len(s.Command) == 0 && s.Image == "" || len(s.Command) > 0 && s.Command[0] == "" {
		return errors.New(`command is empty; give the program and its arguments, as in ["sh", "-c", "echo hi"] (a container job without a command runs its image's entrypoint and cmd)`)
	}
	if err := ValidateName("name", s.Name); err != nil {
		return err
	}
	if s.JobGroup != "" {
		if err := placement.ValidateJobGroupPath(s.JobGroup); err != nil {
			return fmt.Errorf("job_group: %w", err)
		}
	}
	if err := s.ValidateGang(); err != nil {
		return err
	}
	if len(s.Command) > MaxCommandArgs {
		return fmt.Errorf("command has %d arguments; the limit is %d", len(s.Command), MaxCommandArgs)
	}
	if n := sumLen(s.Command); n > MaxCommandBytes {
		return fmt.Errorf("command is %d bytes; the limit is %d (pass large data in an input file)", n, MaxCommandBytes)
	}
	if len(s.Env) > MaxEnvVars {
		return fmt.Errorf("env has %d variables; the limit is %d", len(s.Env), MaxEnvVars)
	}
	envBytes := 0
	for k, v := range s.Env {
		envBytes += len(k) + len(v)
	}
	if envBytes > MaxEnvBytes {
		return fmt.Errorf("env is %d bytes; the limit is %d", envBytes, MaxEnvBytes)
	}
	if err := ValidateAttributes(s.Attributes); err != nil {
		return err
	}
	if len(s.Regions) > MaxRegions {
		return fmt.Errorf("regions names %d regions; the limit is %d", len(s.Regions), MaxRegions)
	}
	for _, r := range s.Regions {
		if err := ValidatePlaceName("region", r); err != nil {
			return err
		}
	}
	if s.Pool != "" {
		if err := ValidatePlaceName("pool", s.Pool); err != nil {
			return err
		}
	}
	if len(s.Clusters) > MaxRegions {
		return fmt.Errorf("clusters names %d clusters; the limit is %d", len(s.Clusters), MaxRegions)
	}
	for _, c := range s.Clusters {
		if err := ValidatePlaceName("cluster", c); err != nil {
			return err
		}
	}
	if err := ValidateWorkerLabels(s.WorkerLabels); err != nil {
		return err
	}
	if s.GPUs < 0 || s.GPUs > MaxGPUs {
		return fmt.Errorf("gpus is %d; a job may ask for 0 to %d", s.GPUs, MaxGPUs)
	}
	if s.GPUs > 0 {
		if err := ValidatePlaceName("gpu_type", s.GPUType); err != nil {
			return fmt.Errorf("a job that asks for GPUs names their type: %w", err)
		}
	} else if s.GPUType != "" {
		return fmt.Errorf("gpu_type %q without gpus: give the count too", s.GPUType)
	}
	if s.MachineType != "" {
		if err := ValidatePlaceName("machine_type", s.MachineType); err != nil {
			return err
		}
	}
	if err := s.validateRun(); err != nil {
		return err
	}
	if len(s.ParentIDs)+len(s.ParentRanges)+len(s.BatchParentIDs)+len(s.BatchParentRanges) > MaxParentRanges {
		return fmt.Errorf("more than %d parent IDs and ranges; name consecutive parents as ranges", MaxParentRanges)
	}
	if s.CPU < 0 || s.CPU > MaxCPU || math.IsNaN(s.CPU) {
		return fmt.Errorf("cpu is %g; it must be between 0 and %d cores (0 means 1)", s.CPU, MaxCPU)
	}
	if s.CPU != 0 && math.Round(s.CPU*1000) < 1 {
		return fmt.Errorf("cpu %g is below the smallest unit, %g cores", s.CPU, MinCPU)
	}
	if s.Memory < 0 {
		return fmt.Errorf("memory is %d bytes; it must be positive (0 means 1 GiB per core)", s.Memory)
	}
	if s.Memory > MaxMemory {
		return fmt.Errorf("memory is %d bytes; a job may ask for at most %d (64 TiB, more than any machine has)", s.Memory, int64(MaxMemory))
	}
	if s.TimeoutSeconds < 0 || math.IsNaN(s.TimeoutSeconds) || s.TimeoutSeconds > MaxTimeoutSeconds {
		return fmt.Errorf("timeout_seconds is %g; it must be between 0 (no limit) and one year", s.TimeoutSeconds)
	}
	if s.Retries < 0 || s.Retries > MaxRetries {
		return fmt.Errorf("retries is %d; it must be between 0 and %d", s.Retries, MaxRetries)
	}
	if s.MaxLostAttempts < -1 || s.MaxLostAttempts > MaxLostAttempts {
		return fmt.Errorf("max_lost_attempts is %d; it must be between 1 and %d, 0 (the server's default) or -1 (no limit)", s.MaxLostAttempts, MaxLostAttempts)
	}
	if s.MaxSpotAttempts < 0 || s.MaxSpotAttempts > MaxSpotAttempts {
		return fmt.Errorf("max_spot_attempts is %d; it must be between 1 and %d, or 0 (no cap)", s.MaxSpotAttempts, MaxSpotAttempts)
	}
	if o := s.OOMRetry; o != nil {
		mem := s.Memory
		if mem == 0 { // 1 GiB per core
			mem = int64(math.Round(cmp.Or(s.CPU, 1)*1000)) * (1 << 30) / 1000
		}
		if o.Factor < MinOOMFactor || o.Factor > MaxOOMFactor || math.IsNaN(o.Factor) {
			return fmt.Errorf("oom_retry factor is %g; it must be between %g and %g", o.Factor, MinOOMFactor, float64(MaxOOMFactor))
		}
		if o.MaxMemory > MaxMemory || o.MaxMemory <= mem {
			return fmt.Errorf("oom_retry max_memory is %d bytes; it must be more than the job's memory (%d) and at most %d", o.MaxMemory, mem, int64(MaxMemory))
		}
	}
	if g := s.PreemptionGraceSeconds; g < 0 || math.IsNaN(g) || g > MaxPreemptionGraceSeconds {
		return fmt.Errorf("preemption_grace_seconds is %g; it must be between 0 (the default, %d s) and %d", g, DefaultPreemptionGraceSeconds, MaxPreemptionGraceSeconds)
	}
	if s.MaxProcesses != 0 && (s.MaxProcesses < MinJobProcesses || s.MaxProcesses > MaxJobProcesses) {
		return fmt.Errorf("max_processes is %d; it must be between %d and %d (0: the worker's default)", s.MaxProcesses, MinJobProcesses, MaxJobProcesses)
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("env name %q is not a valid variable name", k)
		}
	}
	if err := validRanges(s.ParentIDs, s.ParentRanges); err != nil {
		return fmt.Errorf("parents: %w", err)
	}
	if err := validRanges(s.BatchParentIDs, s.BatchParentRanges); err != nil {
		return fmt.Errorf("batch parents: %w", err)
	}
	return nil
}

func sumLen(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s)
	}
	return n
}

func validRanges(ids []int64, rs []IDRange) error {
	for _, id := range ids {
		if id < 1 || id > MaxJobsPerBatch {
			return fmt.Errorf("job ID %d is out of range", id)
		}
	}
	for _, r := range rs {
		if r[0] < 1 || r[1] < r[0] || r[1] > MaxJobsPerBatch {
			return fmt.Errorf("range [%d, %d] is not a range of job IDs (first <= last, from 1)", r[0], r[1])
		}
	}
	return nil
}

// ValidateJobs checks a bunch of job specs: each one, and that together
// they hold no more than MaxJobsPerBatch jobs. The error names the entry,
// as in `jobs[3] (job_id 4, "align"): cpu is -1; ...`.
func ValidateJobs(specs []JobSpec) error { return validateJobs(specs, 0) }

// validateJobs is ValidateJobs for entries that start at index first of a
// larger submission.
func validateJobs(specs []JobSpec, first int) error {
	var total int64
	for i := range specs {
		js := &specs[i]
		err := js.Validate()
		if err == nil {
			if total += js.NumJobs(); total > MaxJobsPerBatch {
				err = fmt.Errorf("more than %d jobs", int64(MaxJobsPerBatch))
			}
		}
		if err != nil {
			where := fmt.Sprintf("jobs[%d] (job_id %d", first+i, js.JobID)
			if js.Name != "" {
				where += fmt.Sprintf(", %q", js.Name)
			}
			return fmt.Errorf("%s): %w", where, err)
		}
	}
	return nil
}

// MaxPriority bounds a batch's priority either side of 0, and a queue's
// and a billing project's max_priority (placement's bound).
const MaxPriority = placement.MaxPriority

// MaxSLOSeconds bounds a batch's SLO (one year), and MaxDeadline how far
// ahead its deadline may be.
const (
	MaxSLOSeconds = 365 * 24 * 3600
	MaxDeadline   = 10 * 365 * 24 * time.Hour
)

// ValidateSLO checks a batch's SLO and deadline.
func ValidateSLO(slo float64, deadline *time.Time, now time.Time) error {
	if slo < 0 || math.IsNaN(slo) || slo > MaxSLOSeconds {
		return fmt.Errorf("slo_seconds is %g; it must be between 0 (none) and one year", slo)
	}
	if deadline != nil && (deadline.Before(time.Unix(0, 1)) || deadline.After(now.Add(MaxDeadline))) {
		return fmt.Errorf("deadline %s must be after 1970 and within ten years", deadline.Format(time.RFC3339))
	}
	return nil
}

// ValidateMaxPriority checks a queue's or a billing project's
// max_priority (placement.ValidateMaxPriority, the one rule, which apply
// re-checks).
func ValidateMaxPriority(what string, max int64) error {
	return placement.ValidateMaxPriority(what, max)
}

// ValidateBatchQueue checks the queue a batch names (a path of names,
// empty: its project's default) and its priority.
func ValidateBatchQueue(queue string, priority int64) error {
	if err := placement.ValidatePriority(priority); err != nil {
		return err
	}
	if queue == "" {
		return nil
	}
	return placement.ValidateQueuePath(queue)
}

// Bounds of job groups: per batch (MaxJobGroups), declared in one
// request (MaxJobGroupsPerRequest, MaxJobGroupBytes of paths, attributes
// and callbacks together), and of a path (placement's rule).
const (
	MaxJobGroups           = 10_000
	MaxJobGroupsPerRequest = 1000
	MaxJobGroupBytes       = 1 << 20
	MaxJobGroupDepth       = placement.MaxJobGroupDepth
	MaxJobGroupSegment     = placement.MaxJobGroupSegment
	// JobGroupsPerPage bounds the groups a page of jobs carries
	// (JobList.JobGroups).
	JobGroupsPerPage = 200
)

// ValidateJobGroups checks the job groups a request declares: their
// number and size, each path (ValidateJobGroupPath), attributes and
// cancel_after_n_failures, and that no path is declared twice. Callbacks
// are checked against the servers' allowed destinations by the server.
func ValidateJobGroups(groups []JobGroupSpec) error {
	if len(groups) > MaxJobGroupsPerRequest {
		return fmt.Errorf("job_groups declares %d groups; at most %d a request (a batch holds up to %d over its updates)", len(groups), MaxJobGroupsPerRequest, MaxJobGroups)
	}
	seen := make(map[string]bool, len(groups))
	size := 0
	for i := range groups {
		g := &groups[i]
		err := placement.ValidateJobGroupPath(g.Path)
		if err == nil && seen[g.Path] {
			err = fmt.Errorf("job group %s is declared twice", g.Path)
		}
		if err == nil {
			err = errors.Join(ValidateAttributes(g.Attributes), ValidateCancelAfter(g.CancelAfterNFailures))
		}
		if err == nil && g.Callback != "" {
			_, err = ParseCallback("callback", g.Callback)
		}
		if err == nil && !g.Gang && g.GangUniformity != "" {
			err = errors.New("gang_uniformity is set without gang = true")
		}
		if err == nil {
			err = validateGangUniformity(g.GangUniformity)
		}
		if err != nil {
			return fmt.Errorf("job_groups[%d]: %w", i, err)
		}
		seen[g.Path] = true
		size += len(g.Path) + len(g.Callback) + len(g.GangUniformity)
		for k, v := range g.Attributes {
			size += len(k) + len(v)
		}
	}
	if size > MaxJobGroupBytes {
		return fmt.Errorf("job_groups are %d bytes of paths, attributes and callbacks; at most %d a request", size, MaxJobGroupBytes)
	}
	return nil
}

// ValidateJobGroupPath checks a job group's path (placement's rule, which
// apply checks again).
func ValidateJobGroupPath(path string) error { return placement.ValidateJobGroupPath(path) }

// ValidateGang checks a gang: an array of 2 to MaxGangSize jobs, with
// nothing that would run one member apart from the others, and a
// uniformity that names a pool or a worker label.
func (s *JobSpec) ValidateGang() error {
	if !s.Gang {
		if s.GangUniformity != "" {
			return errors.New("gang_uniformity is set without gang = true")
		}
		return nil
	}
	switch {
	case s.Count < 2 || s.Count > MaxGangSize:
		return fmt.Errorf("a gang is an array of 2 to %d jobs that start together; count is %d", MaxGangSize, s.Count)
	case s.OOMRetry != nil:
		return errors.New("a gang takes no oom_retry: a member given more memory would start apart from the others")
	case s.MaxSpotAttempts != 0:
		return errors.New("a gang takes no max_spot_attempts: a member kept off spot would start apart from the others")
	case s.MachineType != "":
		return errors.New("a gang takes no machine_type: its members start together on the workers of one cluster")
	}
	return validateGangUniformity(s.GangUniformity)
}

// validateGangUniformity checks what a gang's members share besides their
// cluster: "" (nothing), "pool" or "label:KEY".
func validateGangUniformity(u string) error {
	switch {
	case u == "" || u == "pool":
	case strings.HasPrefix(u, "label:"):
		if err := placement.ValidateLabels(map[string]string{strings.TrimPrefix(u, "label:"): ""}); err != nil {
			return fmt.Errorf("gang_uniformity %q: %w", u, err)
		}
	default:
		return fmt.Errorf(`gang_uniformity %.70q: write "pool" (one pool) or "label:KEY" (one value of a worker label), or leave it out (one cluster)`, u)
	}
	return nil
}

// GangGroupError is a job group declared a gang whose jobs cannot be one:
// Group indexes it in the request's job_groups.
type GangGroupError struct {
	Group int
	Path  string
	Err   error
}

func (e *GangGroupError) Error() string {
	return fmt.Sprintf("job_groups[%d] (%s): %v", e.Group, e.Path, e.Err)
}

func (e *GangGroupError) Unwrap() error { return e.Err }

// ValidateGangGroups checks the job groups a request declares gangs
// against its jobs: a gang group's jobs (those naming it or a group
// below it) are 2 to MaxGangSize jobs with consecutive IDs, of one
// placement (regions, clusters, pool, worker labels, GPUs of one type;
// their sizes may differ, a launcher beside its ranks), none a gang of its own, none with oom_retry, max_spot_attempts
// or machine_type (each would start a member apart), none waiting for
// another member; no gang group is inside another. The error is a
// *GangGroupError; with none, it returns each gang group's members, by
// path.
func ValidateGangGroups(groups []JobGroupSpec, specs []JobSpec) (map[string]GangMembers, error) {
	byGang := gangMembersOf(groups, specs)
	for gi := range groups {
		g := &groups[gi]
		if !g.Gang {
			continue
		}
		fail := func(format string, args ...any) error {
			return &GangGroupError{Group: gi, Path: g.Path, Err: fmt.Errorf(format, args...)}
		}
		for k := range groups {
			if groups[k].Gang && k != gi && strings.HasPrefix(g.Path, groups[k].Path+"/") {
				return nil, fail("a gang group cannot be inside another (%s)", groups[k].Path)
			}
		}
		members, n := byGang[g.Path].Specs, byGang[g.Path].Jobs
		if n < 2 || n > MaxGangSize {
			return nil, fail("a gang is 2 to %d jobs that start together; its jobs in this request are %d (a gang group's jobs all come with it)", MaxGangSize, n)
		}
		first := &specs[members[0]]
		next := first.JobID
		gpus := first // the first member with GPUs
		for _, i := range members {
			js := &specs[i]
			if gpus.GPUs == 0 && js.GPUs > 0 {
				gpus = js
			}
			switch {
			case js.JobID != next:
				return nil, fail("its jobs have consecutive IDs, and job %d follows job %d", js.JobID, next-1)
			case js.Gang:
				return nil, fail("job %d is a gang of its own inside a gang group", js.JobID)
			case js.OOMRetry != nil:
				return nil, fail("job %d takes oom_retry: a member given more memory would start apart from the others", js.JobID)
			case js.MaxSpotAttempts != 0:
				return nil, fail("job %d takes max_spot_attempts: a member kept off spot would start apart from the others", js.JobID)
			case js.MachineType != "":
				return nil, fail("job %d takes machine_type: a gang's members start together on the workers of one cluster", js.JobID)
			case !samePlace(js, first):
				return nil, fail("its jobs ask for one place (regions, clusters, pool, worker labels); job %d asks for another than job %d", js.JobID, first.JobID)
			case js.GPUs > 0 && js.GPUType != gpus.GPUType:
				return nil, fail("its jobs' GPUs are of one type; job %d asks for %q, job %d for %q", js.JobID, js.GPUType, gpus.JobID, gpus.GPUType)
			}
			last := first.JobID + n - 1
			for _, p := range js.ParentIDs {
				if p >= first.JobID && p <= last {
					return nil, fail("job %d depends on job %d of the same gang, which starts together: it would never start", js.JobID, p)
				}
			}
			for _, r := range js.ParentRanges {
				if r[0] <= last && r[1] >= first.JobID {
					return nil, fail("job %d depends on jobs %d to %d of the same gang, which starts together: it would never start", js.JobID, r[0], r[1])
				}
			}
			next += js.NumJobs()
		}
	}
	return byGang, nil
}

// samePlace reports whether two jobs ask for the same place (their sizes
// and GPUs aside).
func samePlace(a, b *JobSpec) bool {
	set := func(xs []string) []string { return slices.Compact(slices.Sorted(slices.Values(xs))) }
	return a.Pool == b.Pool && slices.Equal(set(a.Regions), set(b.Regions)) && slices.Equal(set(a.Clusters), set(b.Clusters)) && maps.Equal(a.WorkerLabels, b.WorkerLabels)
}

// GangMembers are the jobs of a job group declared a gang (those in it or
// below it): their indexes in a request's specs, by job ID, and how many
// jobs they are.
type GangMembers struct {
	Specs []int
	Jobs  int64
}

// gangMembersOf maps the path of each job group declared a gang to its
// members: one walk up each job's path.
func gangMembersOf(groups []JobGroupSpec, specs []JobSpec) map[string]GangMembers {
	out := map[string]GangMembers{}
	for i := range groups {
		if groups[i].Gang {
			out[groups[i].Path] = GangMembers{}
		}
	}
	if len(out) == 0 {
		return out
	}
	for i := range specs {
		for p := specs[i].JobGroup; p != ""; {
			if m, ok := out[p]; ok {
				m.Specs = append(m.Specs, i)
				m.Jobs += specs[i].NumJobs()
				out[p] = m
			}
			k := strings.LastIndexByte(p, '/')
			if k < 0 {
				break
			}
			p = p[:k]
		}
	}
	for _, m := range out {
		slices.SortFunc(m.Specs, func(a, b int) int { return cmp.Compare(specs[a].JobID, specs[b].JobID) })
	}
	return out
}
