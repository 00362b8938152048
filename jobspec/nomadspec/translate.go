package nomadspec

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/api"
)

// MHzPerCore is the rate at which a Nomad task's `cpu` (MHz) becomes
// drover cores: 1,000 MHz is one core, so Nomad's default of 100 MHz is a
// tenth of one. `cores` is taken as it is.
const MHzPerCore = 1000

// MaxPayload bounds a dispatch's payload, as Nomad does (16 KiB).
const MaxPayload = 16 << 10

// NeutralPriority is Nomad's default priority (50), which is drover's 0:
// a Nomad priority p orders the batch at p − 50 in its queue.
const NeutralPriority = 50

// Attributes a translated batch carries, so that drover's own API, CLI
// and UI show where it came from and the Nomad API finds it again.
const (
	AttrJob       = "nomad.job"       // the Nomad job's ID
	AttrNamespace = "nomad.namespace" // its namespace
	AttrGroup     = "nomad.group"     // a job's task group
	AttrTask      = "nomad.task"      // a job's task
	AttrIndex     = "nomad.index"     // a job's allocation index, where the group's jobs are not an array
)

// Translation is a Nomad job as drover runs it.
type Translation struct {
	// Batch is the batch the job becomes: its jobs in group order, a
	// group's prestart tasks before its main tasks and its poststop tasks
	// after them.
	Batch api.CreateBatchRequest
	// Tasks says which group and task each entry of Batch.Jobs runs.
	Tasks []TaskRef
	// Periodic and Parameterized, when set, make the job a template:
	// registering it starts nothing; the leader launches Batch on
	// schedule, or a dispatch does.
	Periodic      *nomad.PeriodicConfig
	Parameterized *nomad.ParameterizedJobConfig
	// Warnings name what drover reads but does not act on (an affinity,
	// a spread, an update strategy), as Nomad's register response does.
	Warnings []string
}

// TaskRef names the group and task of one entry of a translation's jobs,
// and the allocation index of a single job (-1: the entry is an array of
// the group's count, indexed by DROVER_INDEX).
type TaskRef struct {
	Group, Task string
	Index       int
}

// Error is why a Nomad job cannot run on drover: the block it is about
// (`group "g" > task "t" > service`) and, when the job was read from a
// file, where that block is.
type Error struct {
	Path  string
	Range *hcl.Range
	Msg   string
}

func (e *Error) Error() string {
	where := e.Path
	if e.Range != nil {
		where = fmt.Sprintf("%s:%d:%d: %s", e.Range.Filename, e.Range.Start.Line, e.Range.Start.Column, e.Path)
	}
	if where == "" {
		return e.Msg
	}
	return where + ": " + e.Msg
}

// Errors are all the refusals of one job.
type Errors []*Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// translator holds one translation's state.
type translator struct {
	blocks Blocks
	job    *nomad.Job
	errs   Errors
	warn   []string
}

func (t *translator) refuse(path, format string, args ...any) {
	e := &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
	if r, ok := t.blocks[path]; ok {
		e.Range = &r
	} else {
		// The nearest enclosing block that was written.
		for p := path; p != ""; {
			i := strings.LastIndex(p, " > ")
			if i < 0 {
				break
			}
			p = p[:i]
			if r, ok := t.blocks[p]; ok {
				e.Range = &r
				break
			}
		}
	}
	t.errs = append(t.errs, e)
}

func (t *translator) warnf(format string, args ...any) {
	t.warn = append(t.warn, fmt.Sprintf(format, args...))
}

// Translate turns a Nomad job into a drover batch. blocks (from Parse; nil
// for a job sent as JSON) lets a refusal name its line. The job is
// canonicalized on a copy first, as Nomad's server does, so a job sent
// with its defaults left out means what it means to Nomad.
func Translate(in *nomad.Job, blocks Blocks) (out *Translation, err error) {
	if in == nil {
		return nil, errors.New("no job")
	}
	if p := nullIn(reflect.ValueOf(in), "Job"); p != "" {
		return nil, Errors{{Path: p, Msg: "null where a block is expected"}}
	}
	job, err := clone(in)
	if err != nil {
		return nil, fmt.Errorf("copy the job: %w", err)
	}
	defer func() {
		// Nomad's Canonicalize is not written for hostile input; a panic
		// in it is a refusal, not a crash.
		if r := recover(); r != nil {
			out, err = nil, Errors{{Msg: fmt.Sprintf("the job cannot be read: %v", r)}}
		}
	}()
	job.Canonicalize()
	t := &translator{blocks: blocks, job: job}
	out = &Translation{}
	t.translateJob(out)
	if len(t.errs) > 0 {
		// In the order they were written, those without a line last.
		slices.SortStableFunc(t.errs, func(a, b *Error) int {
			switch {
			case a.Range == nil || b.Range == nil:
				return cmpBool(a.Range == nil, b.Range == nil)
			case a.Range.Start.Line != b.Range.Start.Line:
				return a.Range.Start.Line - b.Range.Start.Line
			}
			return a.Range.Start.Column - b.Range.Start.Column
		})
		return nil, t.errs
	}
	out.Warnings = t.warn
	return out, nil
}

// nullIn finds a null element of a slice or map anywhere in v (JSON
// allows "TaskGroups": [null]; Nomad's Canonicalize would panic on it),
// and names its field.
func nullIn(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return ""
		}
		return nullIn(v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			if p := nullIn(v.Field(i), path+"."+v.Type().Field(i).Name); p != "" {
				return p
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			e := v.Index(i)
			if (e.Kind() == reflect.Pointer || e.Kind() == reflect.Map) && e.IsNil() {
				return fmt.Sprintf("%s[%d]", path, i)
			}
			if p := nullIn(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		if v.Type().Elem().Kind() == reflect.Interface {
			return "" // a driver's free-form config
		}
		for it := v.MapRange(); it.Next(); {
			e := it.Value()
			key := fmt.Sprintf("%s[%v]", path, it.Key())
			if e.Kind() == reflect.Pointer && e.IsNil() {
				return key
			}
			if p := nullIn(e, key); p != "" {
				return p
			}
		}
	}
	return ""
}

func (t *translator) jobPath() string { return Labelled("job", deref(t.job.ID)) }

func (t *translator) translateJob(out *Translation) {
	job := t.job
	id := deref(job.ID)
	if id == "" {
		t.refuse("", "the job has no ID")
		return
	}
	switch typ := deref(job.Type); typ {
	case nomad.JobTypeBatch:
	case nomad.JobTypeService:
		if in := t.blocks; in != nil {
			t.refuse("", `job %q is a service job (type = "service", Nomad's default when type is not set): drover runs batch jobs; set type = "batch"`, id)
		} else {
			t.refuse("", `job %q is a service job: drover runs batch jobs (Type "batch")`, id)
		}
		return
	case nomad.JobTypeSysbatch, nomad.JobTypeSystem:
		t.refuse("", "job %q is a %s job, which runs on every node: drover places each job where its queue and fair share say, and has no per-node jobs; use type = \"batch\" with a count", id, typ)
		return
	default:
		t.refuse("", "job %q has type %q: drover runs batch jobs", id, typ)
		return
	}
	if len(job.Payload) > MaxPayload {
		t.refuse("", "the dispatch payload is %d bytes; Nomad and drover take at most %d", len(job.Payload), MaxPayload)
	}
	b := &out.Batch
	b.Name = id
	b.BillingProject = namespaceProject(deref(job.Namespace))
	b.IdempotencyKey = ""
	b.Attributes = map[string]string{}
	for k, v := range job.Meta {
		b.Attributes[k] = v
	}
	// After the meta: a meta key of the same name does not say otherwise.
	b.Attributes[AttrJob], b.Attributes[AttrNamespace] = id, deref(job.Namespace)
	if err := api.ValidateAttributes(b.Attributes); err != nil {
		t.refuse("meta", "%v", err)
	}
	b.Priority = int64(deref(job.Priority)) - NeutralPriority
	if job.IsMultiregion() {
		t.refuse("multiregion", "multiregion jobs are a Nomad Enterprise deployment feature; drover spreads a batch across regions by its queue's strategy")
	}
	if v := deref(job.ConsulNamespace); v != "" {
		t.refuse("", "consul_namespace: drover does not talk to Consul on a job's behalf")
	}
	if v := deref(job.VaultNamespace); v != "" {
		t.refuse("", "vault_namespace: drover does not talk to Vault on a job's behalf")
	}
	if len(job.Affinities) > 0 {
		t.warnf("%s: affinity is a preference drover does not weigh; its queue's strategy orders the clusters", t.jobPath())
	}
	if len(job.Spreads) > 0 {
		t.warnf("%s: spread is a preference drover does not weigh; its queue's strategy spreads work", t.jobPath())
	}
	if job.Periodic != nil && deref(job.Periodic.Enabled) {
		out.Periodic = job.Periodic
		t.checkPeriodic(job.Periodic)
	}
	if job.ParameterizedJob != nil && !job.Dispatched {
		out.Parameterized = job.ParameterizedJob
		switch job.ParameterizedJob.Payload {
		case "", "optional", "required", "forbidden":
		default:
			t.refuse("parameterized", "payload is %q; it is optional, required or forbidden", job.ParameterizedJob.Payload)
		}
	}
	place := t.placement("", job.Region, job.Datacenters, job.NodePool, job.Constraints)
	nextID := int64(1)
	for _, g := range job.TaskGroups {
		t.translateGroup(out, g, place, &nextID)
		if nextID-1 > api.MaxJobsPerBatch {
			t.refuse(Labelled("group", deref(g.Name)), "the job's groups make %d jobs or more; a batch may hold %d", nextID-1, int64(api.MaxJobsPerBatch))
			return
		}
	}
	if len(job.TaskGroups) == 0 {
		t.refuse("", "job %q has no group: a job runs the tasks of its groups", id)
	}
}

// namespaceProject is the billing project a Nomad namespace names:
// "default" is the user's default project.
func namespaceProject(ns string) string {
	if ns == "" || ns == "default" {
		return ""
	}
	return ns
}

func (t *translator) checkPeriodic(p *nomad.PeriodicConfig) {
	specs := p.Specs
	if p.Spec != nil && *p.Spec != "" {
		specs = append([]string{*p.Spec}, specs...)
	}
	if len(specs) == 0 {
		t.refuse("periodic", "a periodic job needs a cron expression (cron = \"*/15 * * * *\")")
	}
	if st := deref(p.SpecType); st != "" && st != nomad.PeriodicSpecCron {
		t.refuse("periodic", "spec type %q: drover reads cron expressions", st)
	}
	if _, err := NextLaunch(p, time.Unix(0, 0)); err != nil {
		t.refuse("periodic", "%v", err)
	}
}

// where is a job's place: drover regions, clusters, pool and worker
// labels.
type where struct {
	regions  []string
	clusters []string
	pool     string
	labels   map[string]string
}

// placement reads a job's or group's region, datacenters, node pool and
// constraints into drover's regions, clusters, pool and worker labels,
// refusing a constraint drover cannot honour. A Nomad region is a drover
// region, a datacenter (machines in one place, within a region) a drover
// cluster, a node pool or node class a drover pool, a node's meta a
// worker's labels.
func (t *translator) placement(path string, region *string, dcs []string, pool *string, cons []*nomad.Constraint) where {
	var w where
	if r := deref(region); r != "" && r != "global" {
		w.regions = []string{r}
	}
	if len(dcs) > 0 && !slices.Contains(dcs, "*") {
		for _, dc := range dcs {
			if strings.ContainsAny(dc, "*?[") {
				t.refuse(path, "datacenter %q: drover matches clusters by name, not by pattern", dc)
			}
		}
		w.clusters = t.narrow(path, w.clusters, dcs, "datacenters")
	}
	if p := deref(pool); p != "" && p != "default" && p != "all" {
		w.pool = p
	}
	for _, c := range cons {
		t.constraint(path, c, &w)
	}
	return w
}

// narrow intersects the regions (or clusters) allowed so far with more.
func (t *translator) narrow(path string, have, more []string, what string) []string {
	if len(have) == 0 {
		return slices.Clone(more)
	}
	var out []string
	for _, r := range have {
		if slices.Contains(more, r) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.refuse(path, "%s %v leave none of %v: the job could run nowhere", what, more, have)
	}
	return out
}

// constraint applies one constraint block.
func (t *translator) constraint(path string, c *nomad.Constraint, w *where) {
	cpath := Path(nonEmpty(path, t.jobPath()), "constraint")
	if path == "" {
		cpath = "constraint"
	}
	op := c.Operand
	if op == "" {
		op = "="
	}
	attr := strings.TrimSpace(c.LTarget)
	switch attr {
	case "${node.datacenter}", "${node.region}":
		list := &w.regions
		if attr == "${node.datacenter}" {
			list = &w.clusters
		}
		switch op {
		case "=", "==", "is":
			*list = t.narrow(cpath, *list, []string{c.RTarget}, attr)
		case "set_contains_any":
			*list = t.narrow(cpath, *list, splitList(c.RTarget), attr)
		default:
			t.refuse(cpath, "%s %s %q: drover restricts a job to a list of regions or clusters; use = or set_contains_any", attr, op, c.RTarget)
		}
		return
	case "${node.class}", "${node.pool}":
		if op != "=" && op != "==" && op != "is" {
			t.refuse(cpath, "%s %s %q: a drover job runs in one pool; use =", attr, op, c.RTarget)
			return
		}
		if w.pool != "" && w.pool != c.RTarget {
			t.refuse(cpath, "%s = %q and pool %q: a drover job runs in one pool", attr, c.RTarget, w.pool)
			return
		}
		w.pool = c.RTarget
		return
	}
	if key, ok := strings.CutPrefix(attr, "${meta."); ok && strings.HasSuffix(key, "}") {
		key = strings.TrimSuffix(key, "}")
		if op != "=" && op != "==" && op != "is" {
			t.refuse(cpath, "%s %s %q: drover matches a worker's label by its value; use =", attr, op, c.RTarget)
			return
		}
		t.label(cpath, w, key, c.RTarget)
		return
	}
	switch op {
	case nomad.ConstraintDistinctHosts, nomad.ConstraintDistinctProperty:
		t.warnf("%s: %s is not needed on drover: each job has its own place on a machine, and the scheduler packs them", cpath, op)
		return
	}
	if strings.HasPrefix(attr, "${attr.kernel.name}") && (op == "=" || op == "==") && c.RTarget == "linux" {
		return // every drover worker runs Linux
	}
	t.refuse(cpath, "a constraint on %s has no drover meaning: drover places a job by region (${node.region}), cluster (${node.datacenter}), pool (${node.class}, node_pool), worker label (${meta.KEY}) and GPU type (device)", nonEmpty(attr, "(no attribute)"))
}

// label adds the worker label key = value to w, refusing another value
// of the same key (the job could run nowhere) and a key or value drover's
// workers cannot carry.
func (t *translator) label(path string, w *where, key, value string) {
	if old, ok := w.labels[key]; ok && old != value {
		t.refuse(path, "${meta.%s} = %q and = %q: the job could run nowhere", key, old, value)
		return
	}
	if err := api.ValidateWorkerLabels(map[string]string{key: value}); err != nil {
		t.refuse(path, "${meta.%s}: %v", key, err)
		return
	}
	if _, ok := w.labels[key]; !ok && len(w.labels) >= api.MaxWorkerLabels {
		t.refuse(path, "${meta.%s}: a job may ask for at most %d worker labels", key, api.MaxWorkerLabels)
		return
	}
	if w.labels == nil {
		w.labels = map[string]string{}
	}
	w.labels[key] = value
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// translateGroup adds a group's tasks to the batch.
func (t *translator) translateGroup(out *Translation, g *nomad.TaskGroup, place where, nextID *int64) {
	name := deref(g.Name)
	gpath := Labelled("group", name)
	count := deref(g.Count)
	if count < 0 || count > api.MaxJobsPerBatch {
		t.refuse(gpath, "count is %d; it must be between 0 and %d", count, int64(api.MaxJobsPerBatch))
		return
	}
	for _, v := range sortedKeys(g.Volumes) {
		t.refuse(Path(gpath, Labelled("volume", v)), "host and CSI volumes have no drover meaning: a job reads its inputs (artifact blocks) and writes its outputs to storage")
	}
	if len(g.Services) > 0 {
		t.refuse(Path(gpath, "service"), "service blocks register with Consul or Nomad's service catalog; a drover batch job serves nothing")
	}
	if g.Consul != nil && g.Consul.Namespace != "" {
		t.refuse(Path(gpath, "consul"), "drover does not talk to Consul on a job's behalf")
	}
	if g.Scaling != nil {
		t.refuse(Path(gpath, "scaling"), "scaling policies scale services; a batch's size is its count")
	}
	network := t.groupNetwork(gpath, g.Networks)
	if len(g.Affinities) > 0 || len(g.Spreads) > 0 {
		t.warnf("%s: affinity and spread are preferences drover does not weigh", gpath)
	}
	gplace := t.placement(gpath, nil, nil, nil, g.Constraints)
	gplace = t.merge(gpath, place, gplace)
	if len(g.Tasks) == 0 {
		t.refuse(gpath, "group %q has no task", name)
		return
	}
	var pre, main, post []*nomad.Task
	for _, task := range g.Tasks {
		tpath := Path(gpath, Labelled("task", task.Name))
		switch {
		case task.Lifecycle == nil:
			main = append(main, task)
		case task.Lifecycle.Sidecar:
			t.refuse(Path(tpath, "lifecycle"), "sidecar tasks run beside the main tasks for as long as they run; a drover job runs alone (run it as its own job)")
		case task.Lifecycle.Hook == nomad.TaskLifecycleHookPrestart:
			pre = append(pre, task)
		case task.Lifecycle.Hook == nomad.TaskLifecycleHookPoststop:
			post = append(post, task)
		case task.Lifecycle.Hook == nomad.TaskLifecycleHookPoststart:
			t.refuse(Path(tpath, "lifecycle"), "poststart tasks start once the main tasks have; drover orders jobs by their ends only (prestart and poststop)")
		default:
			t.refuse(Path(tpath, "lifecycle"), "hook %q: it is prestart, poststart or poststop", task.Lifecycle.Hook)
		}
	}
	if len(main) == 0 && len(g.Tasks) > 0 {
		t.refuse(gpath, "group %q has no main task (one without a lifecycle block)", name)
		return
	}
	// Without lifecycle tasks a task is an array of the group's count;
	// with them, each allocation index is a job of its own, so that the
	// index's main tasks wait for its own prestart tasks only.
	perIndex := len(pre)+len(post) > 0 && count > 1
	if perIndex && int64(count)*int64(len(g.Tasks)) > api.MaxJobsPerBatch {
		t.refuse(gpath, "count %d × %d tasks is more jobs than a batch may hold (%d)", count, len(g.Tasks), int64(api.MaxJobsPerBatch))
		return
	}
	specs := map[*nomad.Task]api.JobSpec{}
	for _, task := range g.Tasks {
		if s, ok := t.translateTask(g, task, gplace, network); ok {
			specs[task] = s
		}
	}
	if len(t.errs) > 0 || count == 0 {
		return
	}
	add := func(task *nomad.Task, index int, parents []int64) int64 {
		s := specs[task]
		s.JobID = *nextID
		s.ParentIDs = parents
		if index >= 0 {
			s.Env = maps.Clone(s.Env)
			s.Env["NOMAD_ALLOC_INDEX"] = strconv.Itoa(index)
			s.Attributes = maps.Clone(s.Attributes)
			s.Attributes[AttrIndex] = strconv.Itoa(index)
		} else if count > 1 {
			s.Count = int64(count)
		}
		*nextID += max(s.Count, 1)
		out.Batch.Jobs = append(out.Batch.Jobs, s)
		out.Tasks = append(out.Tasks, TaskRef{Group: name, Task: task.Name, Index: index})
		return s.JobID
	}
	stage := func(index int) {
		var preIDs, mainIDs []int64
		for _, task := range pre {
			preIDs = append(preIDs, add(task, index, nil))
		}
		for _, task := range main {
			mainIDs = append(mainIDs, add(task, index, preIDs))
		}
		for _, task := range post {
			add(task, index, mainIDs)
		}
	}
	if perIndex {
		for i := range count {
			stage(i)
		}
	} else if count == 1 {
		stage(0)
	} else {
		stage(-1)
	}
}

// merge combines a job's place with a group's (the group narrows it).
func (t *translator) merge(path string, job, group where) where {
	out := job
	if len(group.regions) > 0 {
		out.regions = t.narrow(path, job.regions, group.regions, "the group's regions")
	}
	if len(group.clusters) > 0 {
		out.clusters = t.narrow(path, job.clusters, group.clusters, "the group's datacenters")
	}
	if group.pool != "" {
		if job.pool != "" && job.pool != group.pool {
			t.refuse(path, "pool %q and the job's pool %q: a drover job runs in one pool", group.pool, job.pool)
		}
		out.pool = group.pool
	}
	if len(group.labels) > 0 {
		out.labels = maps.Clone(job.labels)
		for _, k := range sortedKeys(group.labels) {
			t.label(path, &out, k, group.labels[k])
		}
	}
	return out
}

// groupNetwork reads a group's network block into drover's network mode.
func (t *translator) groupNetwork(gpath string, nets []*nomad.NetworkResource) string {
	if len(nets) == 0 {
		return ""
	}
	npath := Path(gpath, "network")
	if len(nets) > 1 {
		t.refuse(npath, "a group has at most one network")
	}
	n := nets[0]
	if len(n.ReservedPorts)+len(n.DynamicPorts) > 0 {
		t.refuse(npath, "port blocks map ports for services to be reached; a drover job reaches out (bridge) and is reached by nothing")
	}
	if n.DNS != nil || n.CNI != nil || n.Hostname != "" {
		t.refuse(npath, "dns, cni and hostname settings have no drover meaning")
	}
	switch n.Mode {
	case "", "bridge":
		return api.NetworkBridge
	case "host":
		return api.NetworkHost
	case "none":
		return api.NetworkNone
	}
	t.refuse(npath, "mode %q: drover's networks are bridge, host and none", n.Mode)
	return ""
}

// Config keys of each driver that drover reads; any other is refused.
var driverKeys = map[string][]string{
	"exec":     {"command", "args"},
	"raw_exec": {"command", "args"},
	"docker":   {"image", "command", "args", "entrypoint"},
	"podman":   {"image", "command", "args", "entrypoint"},
}

// Config keys read and not acted on: a warning, not a refusal.
var driverIgnored = map[string]string{
	"force_pull":         "drover pulls by digest and caches what it pulled",
	"image_pull_timeout": "drover's workers bound every pull",
	"work_dir":           "",
	"init":               "drover reaps a job's processes itself",
}

// translateTask translates one task into a job spec.
func (t *translator) translateTask(g *nomad.TaskGroup, task *nomad.Task, place where, network string) (api.JobSpec, bool) {
	group := deref(g.Name)
	tpath := Path(Labelled("group", group), Labelled("task", task.Name))
	before := len(t.errs)
	s := api.JobSpec{Name: group + "." + task.Name, Regions: place.regions, Clusters: place.clusters, Pool: place.pool, WorkerLabels: place.labels, Network: network}
	keys, ok := driverKeys[task.Driver]
	if !ok {
		t.refuse(tpath, "driver %q: drover runs exec and raw_exec tasks as processes, docker and podman tasks as OCI containers", task.Driver)
		return s, false
	}
	cfg := task.Config
	for _, k := range sortedKeys(cfg) {
		if slices.Contains(keys, k) {
			continue
		}
		if why, ok := driverIgnored[k]; ok {
			if k == "work_dir" {
				t.refuse(Path(tpath, "config"), "work_dir: a drover job starts in its own directory")
				continue
			}
			t.warnf("%s > config: %s is not needed: %s", tpath, k, why)
			continue
		}
		t.refuse(Path(tpath, "config"), "%s of the %s driver has no drover meaning (drover reads %s)", k, task.Driver, strings.Join(keys, ", "))
	}
	command, ok1 := configString(cfg, "command")
	args, ok2 := configStrings(cfg, "args")
	entry, ok3 := configStrings(cfg, "entrypoint")
	if !ok1 || !ok2 || !ok3 {
		t.refuse(Path(tpath, "config"), "command is a string, args and entrypoint lists of strings")
	}
	switch task.Driver {
	case "exec", "raw_exec":
		if command == "" {
			t.refuse(Path(tpath, "config"), "the %s driver needs command", task.Driver)
		}
		s.Command = append([]string{command}, args...)
	default:
		image, ok := configString(cfg, "image")
		if !ok || image == "" {
			t.refuse(Path(tpath, "config"), "the %s driver needs image", task.Driver)
		}
		s.Image = image
		if err := api.ValidateImage(image); image != "" && err != nil {
			t.refuse(Path(tpath, "config"), "image: %v", err)
		}
		s.Command = slices.Concat(entry, nonEmptyList(command), args)
		if command == "" && len(entry) == 0 && len(args) > 0 {
			t.refuse(Path(tpath, "config"), "args without command or entrypoint: drover runs a task's command, or its image's entrypoint and cmd when the task names none; give the command with its args")
		}
	}
	if task.User != "" {
		t.refuse(tpath, "user %q: drover runs every job as a user of its own, never one the job names", task.User)
	}
	if len(task.Services) > 0 {
		t.refuse(Path(tpath, "service"), "service blocks register with Consul or Nomad's service catalog; a drover batch job serves nothing")
	}
	if task.Vault != nil {
		t.refuse(Path(tpath, "vault"), "drover does not fetch Vault tokens for a job")
	}
	if task.Consul != nil {
		t.refuse(Path(tpath, "consul"), "drover does not talk to Consul on a job's behalf")
	}
	if len(task.VolumeMounts) > 0 {
		t.refuse(Path(tpath, "volume_mount"), "volumes have no drover meaning: a job reads its inputs (artifact blocks) and writes its outputs to storage")
	}
	if task.CSIPluginConfig != nil {
		t.refuse(Path(tpath, "csi_plugin"), "CSI plugins run as services; drover runs batch jobs")
	}
	if len(task.Secrets) > 0 {
		t.refuse(Path(tpath, "secret"), "drover does not fetch secrets for a job")
	}
	if task.DispatchPayload != nil && t.job.ParameterizedJob == nil {
		t.refuse(Path(tpath, "dispatch_payload"), "dispatch_payload is for parameterized jobs")
	}
	if len(task.Actions) > 0 {
		t.refuse(Path(tpath, "action"), "actions run commands in a live allocation on demand; drover has no such command")
	}
	if task.Schedule != nil {
		t.refuse(Path(tpath, "schedule"), "task schedules are a Nomad Enterprise feature; use a periodic job")
	}
	if len(task.Affinities) > 0 {
		t.warnf("%s: affinity is a preference drover does not weigh", tpath)
	}
	tplace := t.placement(tpath, nil, nil, nil, task.Constraints)
	merged := t.merge(tpath, place, tplace)
	s.Regions, s.Clusters, s.Pool, s.WorkerLabels = merged.regions, merged.clusters, merged.pool, merged.labels
	t.resources(tpath, task.Resources, &s)
	s.Retries = retries(g, task)
	if d := deref(g.MaxRunDuration); d > 0 {
		s.TimeoutSeconds = d.Seconds()
	}
	if kt := deref(task.KillTimeout); kt > 0 {
		s.PreemptionGraceSeconds = min(kt.Seconds(), api.MaxPreemptionGraceSeconds)
	}
	s.Nomad = true
	s.Env = map[string]string{
		// The worker interpolates the index (NomadEnv).
		"NOMAD_ALLOC_NAME": fmt.Sprintf("%s.%s[${NOMAD_ALLOC_INDEX}]", deref(t.job.ID), group),
		"NOMAD_JOB_ID":     deref(t.job.ID),
		"NOMAD_JOB_NAME":   deref(t.job.Name),
		"NOMAD_GROUP_NAME": group,
		"NOMAD_TASK_NAME":  task.Name,
		"NOMAD_NAMESPACE":  deref(t.job.Namespace),
		"NOMAD_REGION":     deref(t.job.Region),
	}
	meta := map[string]string{}
	maps.Copy(meta, t.job.Meta)
	maps.Copy(meta, g.Meta)
	maps.Copy(meta, task.Meta)
	for k, v := range meta {
		s.Env["NOMAD_META_"+k] = v
		s.Env["NOMAD_META_"+strings.ToUpper(k)] = v
	}
	maps.Copy(s.Env, task.Env)
	t.templates(tpath, task.Templates, &s)
	if dp := task.DispatchPayload; dp != nil && dp.File != "" && len(t.job.Payload) > 0 {
		if !filepath.IsLocal(dp.File) {
			t.refuse(Path(tpath, "dispatch_payload"), "file %q: the payload is written under the task's local directory", dp.File)
		}
		s.Env[api.NomadPayloadFileEnv] = dp.File
		s.Env[api.NomadPayloadEnv] = base64.StdEncoding.EncodeToString(t.job.Payload)
	}
	s.Attributes = map[string]string{AttrGroup: group, AttrTask: task.Name}
	for i, a := range task.Artifacts {
		t.artifact(tpath, i, a, &s)
	}
	if task.Lifecycle != nil && task.Lifecycle.Hook == nomad.TaskLifecycleHookPoststop {
		s.AlwaysRun = true
	}
	if len(t.errs) > before {
		return s, false
	}
	s.JobID = 1
	if err := s.Validate(); err != nil {
		t.refuse(tpath, "%v", err)
		return s, false
	}
	return s, true
}

// retries is how many more attempts a task gets, as Nomad counts them for
// a batch job: restart.attempts restarts in place, then with mode "fail"
// reschedule.attempts new allocations, each with its restarts again.
func retries(g *nomad.TaskGroup, task *nomad.Task) int {
	rp := g.RestartPolicy
	if task.RestartPolicy != nil {
		rp = task.RestartPolicy
	}
	restarts := 0
	if rp != nil {
		restarts = max(deref(rp.Attempts), 0)
	}
	resched := 0
	if r := g.ReschedulePolicy; r != nil {
		if deref(r.Unlimited) {
			return api.MaxRetries
		}
		resched = max(deref(r.Attempts), 0)
	}
	n := int64(restarts+1)*int64(resched+1) - 1
	return int(min(n, int64(api.MaxRetries)))
}

// resources reads a task's resources block.
func (t *translator) resources(tpath string, r *nomad.Resources, s *api.JobSpec) {
	rpath := Path(tpath, "resources")
	if r == nil {
		return
	}
	switch {
	case deref(r.Cores) > 0:
		s.CPU = float64(*r.Cores)
	case deref(r.CPU) > 0:
		s.CPU = float64(*r.CPU) / MHzPerCore
	}
	if s.CPU > 0 && s.CPU < api.MinCPU {
		s.CPU = api.MinCPU
	}
	mb := max(deref(r.MemoryMB), deref(r.MemoryMaxMB))
	if mb > 0 {
		if int64(mb) > api.MaxMemory>>20 {
			t.refuse(rpath, "memory %d MB is more than a job may ask for", mb)
			return
		}
		s.Memory = int64(mb) << 20
	}
	if len(r.Networks) > 0 {
		t.refuse(Path(rpath, "network"), "task networks reserve ports and bandwidth for services; drover has no such reservation")
	}
	if r.NUMA != nil {
		t.refuse(Path(rpath, "numa"), "drover does not pin a job to NUMA nodes")
	}
	for _, d := range r.Devices {
		dpath := Path(rpath, Labelled("device", d.Name))
		parts := strings.Split(d.Name, "/")
		typ := parts[len(parts)-1]
		if len(parts) == 3 {
			typ = parts[1]
		}
		if typ != "gpu" {
			t.refuse(dpath, "device %q: drover schedules GPUs only", d.Name)
			continue
		}
		if s.GPUs > 0 {
			t.refuse(dpath, "a drover job asks for GPUs of one type, once")
			continue
		}
		n := deref(d.Count)
		if n == 0 {
			n = 1
		}
		if n > api.MaxGPUs {
			t.refuse(dpath, "count %d: a job may ask for at most %d GPUs", n, api.MaxGPUs)
			continue
		}
		s.GPUs = int(n)
		model := ""
		if len(parts) == 3 {
			model = parts[2]
		}
		for _, c := range d.Constraints {
			if strings.TrimSpace(c.LTarget) == "${device.model}" && (c.Operand == "" || c.Operand == "=" || c.Operand == "==") {
				model = c.RTarget
				continue
			}
			t.refuse(Path(dpath, "constraint"), "a constraint on %s has no drover meaning: a GPU's type is its model (${device.model} = ...)", c.LTarget)
		}
		if model == "" {
			t.refuse(dpath, "drover schedules GPUs by type: name the model (device \"nvidia/gpu/a100\", or a constraint on ${device.model})")
			continue
		}
		s.GPUType = strings.ToLower(model)
		if err := api.ValidatePlaceName("gpu_type", s.GPUType); err != nil {
			t.refuse(dpath, "model %q: %v", model, err)
		}
		if len(d.Affinities) > 0 {
			t.warnf("%s: affinity is a preference drover does not weigh", dpath)
		}
	}
}

// artifact reads an artifact block into an input file.
func (t *translator) artifact(tpath string, i int, a *nomad.TaskArtifact, s *api.JobSpec) {
	apath := Path(tpath, "artifact")
	src := deref(a.GetterSource)
	if len(a.GetterOptions)+len(a.GetterHeaders) > 0 {
		t.refuse(apath, "options and headers steer go-getter; drover fetches a URL its billing project's storage allows, as it is")
		return
	}
	if mode := deref(a.GetterMode); mode != "" && mode != "any" && mode != "file" {
		t.refuse(apath, "mode %q: drover fetches one file per artifact", mode)
		return
	}
	dest := deref(a.RelativeDest)
	if dest == "" || dest == "local/" || strings.HasSuffix(dest, "/") {
		base := src[strings.LastIndexAny(src, "/")+1:]
		if k := strings.IndexAny(base, "?#"); k >= 0 {
			base = base[:k]
		}
		dest = strings.TrimSuffix(nonEmpty(dest, "local/"), "/") + "/" + base
	}
	s.Inputs = append(s.Inputs, api.InputFile{Name: fmt.Sprintf("artifact%d", i), Source: src, Path: dest})
}

func configString(cfg map[string]any, key string) (string, bool) {
	v, ok := cfg[key]
	if !ok || v == nil {
		return "", true
	}
	s, ok := v.(string)
	return s, ok
}

func configStrings(cfg map[string]any, key string) ([]string, bool) {
	v, ok := cfg[key]
	if !ok || v == nil {
		return nil, true
	}
	switch l := v.(type) {
	case []string:
		return l, true
	case []any:
		out := make([]string, len(l))
		for i, x := range l {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	case string:
		return []string{l}, true
	}
	return nil, false
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func nonEmptyList(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// templates reads a task's template blocks: each rendered by the worker
// before the task starts, with the task's environment (env "NAME") and
// text/template's own functions, into its destination under the task's
// directory, or into its environment (env = true).
func (t *translator) templates(tpath string, tmpls []*nomad.Template, s *api.JobSpec) {
	if len(tmpls) == 0 {
		return
	}
	path := Path(tpath, "template")
	var out []api.NomadTemplate
	for _, tm := range tmpls {
		if deref(tm.SourcePath) != "" {
			t.refuse(path, "source reads a file on the Nomad client's machine; give the template as data")
			continue
		}
		if tm.Uid != nil && *tm.Uid != -1 || tm.Gid != nil && *tm.Gid != -1 {
			t.refuse(path, "uid and gid: a rendered file belongs to the job's own user")
			continue
		}
		dest := strings.TrimPrefix(deref(tm.DestPath), "./")
		if !filepath.IsLocal(dest) {
			t.refuse(path, "destination %q: it is a path under the task's directory (local/..., secrets/...)", deref(tm.DestPath))
			continue
		}
		nt := api.NomadTemplate{Data: deref(tm.EmbeddedTmpl), Dest: dest, Env: deref(tm.Envvars), Left: deref(tm.LeftDelim), Right: deref(tm.RightDelim)}
		if p := deref(tm.Perms); p != "" {
			v, err := strconv.ParseUint(p, 8, 32)
			if err != nil || v > 0o777 {
				t.refuse(path, "perms %q: an octal mode up to 0777", p)
				continue
			}
			nt.Perms = uint32(v)
		}
		if _, err := api.CheckNomadTemplate(&nt); err != nil {
			t.refuse(path, "%v", err)
			continue
		}
		out = append(out, nt)
	}
	if len(out) == 0 {
		return
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.refuse(path, "%v", err)
		return
	}
	s.Env[api.NomadTemplatesEnv] = string(data)
}
