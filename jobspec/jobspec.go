// Package jobspec reads drover jobspecs, HCL (or its JSON form), into API
// types. Every problem is reported as an hcl.Diagnostic carrying the file,
// line and column it is about.
//
//	variable "shards" { default = 100 }
//
//	batch "align" {
//	  billing_project = "genomics"
//	  attributes      = { sample_set = "1kg" }
//
//	  job "split" { command = ["sh", "-c", "echo splitting"] }
//
//	  job "align" {
//	    count      = var.shards
//	    depends_on = ["split"]
//	    command    = ["sh", "-c", "echo shard $DROVER_INDEX"]
//	    cpu        = 1
//	    memory     = "2GiB"
//	    timeout    = "30m"
//	    retries    = 2
//	  }
//	}
package jobspec

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
)

// Batch is a parsed jobspec.
type Batch struct {
	Name           string
	BillingProject string
	Attributes     map[string]string
	// Regions, Clusters, Pool and WorkerLabels are the default
	// constraint of the batch's jobs.
	Regions      []string
	Clusters     []string
	Pool         string
	WorkerLabels map[string]string
	// Image is the default image of the batch's jobs (empty: processes).
	Image string
	// OOMRetry is the default oom_retry of the batch's jobs (nil: none),
	// MaxSpotAttempts their default max_spot_attempts (0: none).
	OOMRetry        *api.OOMRetry
	MaxSpotAttempts int
	// CancelAfterNFailures cancels the batch once this many of its jobs
	// have failed (0: never).
	CancelAfterNFailures int64
	// Callback is the URL the batch is POSTed to once complete.
	Callback string
	// Queue is the leaf queue the batch runs in (empty: its billing
	// project's default); Priority orders it in the queue (higher first).
	Queue    string
	Priority int64
	// SLO is the batch's runtime target and Deadline the time it must
	// complete by (zero: none).
	SLO      time.Duration
	Deadline time.Time
	Jobs     []*Job
	// Groups are the batch's job groups (group "align" { ... } blocks,
	// nested), parents before their children; a job in one names it by
	// path (Job.Group).
	Groups []api.JobGroupSpec
	// groupRanges are the group blocks' headers, by Groups' index.
	groupRanges []hcl.Range
}

// Job is one job block: a single job, or an array when Count is set.
type Job struct {
	Name      string
	Array     bool
	Count     int64
	DependsOn []string
	Command   []string
	Env       map[string]string
	CPU       float64
	Memory    int64
	Timeout   time.Duration
	// PreemptionGrace is how long a preempted attempt has between SIGTERM
	// and SIGKILL to checkpoint (0: the default, 30 s).
	PreemptionGrace time.Duration
	Retries         int
	// MaxLostAttempts: see api.JobSpec (0: the server's default; -1: no
	// limit).
	MaxLostAttempts int
	// MaxSpotAttempts: see api.JobSpec (0: the batch's, or no cap).
	MaxSpotAttempts int
	// OOMRetry: oom_retry { factor = 2, max_memory = "16GiB" } (nil: the
	// batch's).
	OOMRetry   *api.OOMRetry
	AlwaysRun  bool
	Attributes map[string]string
	// Regions, Clusters, Pool and WorkerLabels restrict where the job
	// runs (nil and "": the batch's default).
	Regions      []string
	Clusters     []string
	Pool         string
	WorkerLabels map[string]string
	// GPUs each job needs, of GPUType (gpu = { type = "a100", count = 1 }).
	GPUType string
	GPUs    int64
	// MachineType gives each job a machine of its own, of this type.
	MachineType string
	// Image runs the job in a container (empty: the batch's image, or a
	// process); Network is the job's network (empty: api.NetworkBridge).
	Image   string
	Network string
	// MaxProcesses bounds the job's processes and threads (0: the
	// worker's default).
	MaxProcesses int64
	// Inputs and Outputs are the job's input and output blocks.
	Inputs  []api.InputFile
	Outputs []api.OutputFile

	// Group is the path of the job group block the job is in (empty:
	// none).
	Group string
	// Gang and GangUniformity: see api.JobSpec. InGang: the job is in a
	// group declared a gang (the batch's oom_retry and max_spot_attempts
	// are not its).
	Gang           bool
	GangUniformity string
	InGang         bool

	Range     hcl.Range   // the block's header
	depRanges []hcl.Range // one per DependsOn entry
}

// NumJobs is how many job IDs the block occupies.
func (j *Job) NumJobs() int64 {
	if j.Array {
		return j.Count
	}
	return 1
}

// NumJobs is the total number of jobs in the batch.
func (b *Batch) NumJobs() int64 {
	var n int64
	for _, j := range b.Jobs {
		n += j.NumJobs()
	}
	return n
}

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "batch", LabelNames: []string{"name"}},
	},
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "default"}, {Name: "description"}},
}

var batchSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "billing_project"}, {Name: "attributes"}, {Name: "regions"}, {Name: "clusters"}, {Name: "pool"}, {Name: "worker_labels"}, {Name: "image"},
		{Name: "cancel_after_n_failures"}, {Name: "callback"}, {Name: "queue"}, {Name: "priority"}, {Name: "slo"}, {Name: "deadline"}, {Name: "max_spot_attempts"}},
	Blocks: []hcl.BlockHeaderSchema{{Type: "job", LabelNames: []string{"name"}}, {Type: "group", LabelNames: []string{"name"}}, {Type: "oom_retry"}},
}

// groupSchema is a job group block's: its settings, its jobs and the
// groups nested in it.
var groupSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "attributes"}, {Name: "callback"}, {Name: "cancel_after_n_failures"}, {Name: "gang"}, {Name: "gang_uniformity"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "job", LabelNames: []string{"name"}}, {Type: "group", LabelNames: []string{"name"}}},
}

var jobSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "command", Required: true},
		{Name: "count"},
		{Name: "depends_on"},
		{Name: "env"},
		{Name: "cpu"},
		{Name: "memory"},
		{Name: "timeout"},
		{Name: "preemption_grace"},
		{Name: "retries"},
		{Name: "always_run"},
		{Name: "attributes"},
		{Name: "regions"},
		{Name: "clusters"},
		{Name: "pool"},
		{Name: "worker_labels"},
		{Name: "gpu"},
		{Name: "machine_type"},
		{Name: "image"},
		{Name: "network"},
		{Name: "max_processes"},
		{Name: "max_lost_attempts"},
		{Name: "max_spot_attempts"},
		{Name: "gang"},
		{Name: "gang_uniformity"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "input", LabelNames: []string{"name"}},
		{Type: "output", LabelNames: []string{"name"}},
		{Type: "oom_retry"},
	},
}

var oomRetrySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "factor", Required: true}, {Name: "max_memory", Required: true}},
}

var inputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "source", Required: true}, {Name: "path", Required: true}},
}

var outputSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "path", Required: true}, {Name: "destination", Required: true}},
}

// Functions usable in jobspec expressions.
var Functions = map[string]function.Function{
	"concat":     stdlib.ConcatFunc,
	"format":     stdlib.FormatFunc,
	"join":       stdlib.JoinFunc,
	"length":     stdlib.LengthFunc,
	"lower":      stdlib.LowerFunc,
	"max":        stdlib.MaxFunc,
	"min":        stdlib.MinFunc,
	"range":      stdlib.RangeFunc,
	"split":      stdlib.SplitFunc,
	"trimspace":  stdlib.TrimSpaceFunc,
	"upper":      stdlib.UpperFunc,
	"jsonencode": stdlib.JSONEncodeFunc,
}

// ParseFile reads and parses a jobspec file. vars are -var overrides.
func ParseFile(path string, vars map[string]string) (*Batch, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read jobspec", Detail: err.Error()}}
	}
	return Parse(path, src, vars)
}

// Parse parses a jobspec. The file is read as JSON when its name ends in
// .json, as HCL otherwise. All problems found are returned, not just the
// first.
func Parse(filename string, src []byte, vars map[string]string) (*Batch, hcl.Diagnostics) {
	var file *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(filename, ".json") {
		file, diags = hcljson.Parse(src, filename)
	} else {
		file, diags = hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	}
	if diags.HasErrors() {
		return nil, diags
	}
	content, d := file.Body.Content(rootSchema)
	diags = append(diags, d...)

	ctx, d := evalContext(content, vars)
	diags = append(diags, d...)

	var batchBlocks []*hcl.Block
	for _, blk := range content.Blocks {
		if blk.Type == "batch" {
			batchBlocks = append(batchBlocks, blk)
		}
	}
	switch len(batchBlocks) {
	case 0:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing batch block",
			Detail:   `A jobspec holds one batch "name" { ... } block with job blocks inside.`,
			Subject:  &hcl.Range{Filename: filename, Start: hcl.Pos{Line: 1, Column: 1, Byte: 0}, End: hcl.Pos{Line: 1, Column: 1, Byte: 0}},
		})
		return nil, diags
	case 1:
	default:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "More than one batch block",
			Detail:   "A jobspec describes exactly one batch; put the jobs of this one in the first batch block or in a file of their own.",
			Subject:  batchBlocks[1].DefRange.Ptr(),
		})
	}
	b, d := decodeBatch(batchBlocks[0], ctx)
	diags = append(diags, d...)
	if diags.HasErrors() {
		return nil, diags
	}
	return b, diags
}

func evalContext(content *hcl.BodyContent, overrides map[string]string) (*hcl.EvalContext, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	ctx := &hcl.EvalContext{Functions: Functions}
	vals := map[string]cty.Value{}
	declared := map[string]bool{}
	for _, blk := range content.Blocks {
		if blk.Type != "variable" {
			continue
		}
		name := blk.Labels[0]
		if declared[name] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate variable",
				Detail: fmt.Sprintf("Variable %q is declared twice.", name), Subject: blk.DefRange.Ptr()})
			continue
		}
		declared[name] = true
		vc, d := blk.Body.Content(variableSchema)
		diags = append(diags, d...)
		def := cty.NilVal
		if attr, ok := vc.Attributes["default"]; ok {
			v, d := attr.Expr.Value(&hcl.EvalContext{Functions: Functions})
			diags = append(diags, d...)
			def = v
		}
		if raw, ok := overrides[name]; ok {
			v, err := overrideValue(raw, def)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid -var value",
					Detail: fmt.Sprintf("-var %s=%s: %v", name, raw, err), Subject: blk.DefRange.Ptr()})
				continue
			}
			vals[name] = v
			continue
		}
		if def == cty.NilVal {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Variable has no value",
				Detail: fmt.Sprintf("Variable %q has no default; pass -var %s=VALUE.", name, name), Subject: blk.DefRange.Ptr()})
			continue
		}
		vals[name] = def
	}
	for _, name := range sortedKeys(overrides) {
		if !declared[name] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Undeclared variable",
				Detail: fmt.Sprintf("-var %s=...: the jobspec declares no variable %q; add variable %q { default = ... }.", name, name, name)})
		}
	}
	ctx.Variables = map[string]cty.Value{"var": cty.ObjectVal(vals)}
	return ctx, diags
}

// overrideValue converts a -var string to the type of the variable's default.
func overrideValue(raw string, def cty.Value) (cty.Value, error) {
	if def == cty.NilVal || def.IsNull() {
		return cty.StringVal(raw), nil
	}
	switch def.Type() {
	case cty.Number:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return cty.NilVal, fmt.Errorf("the variable is a number")
		}
		return cty.NumberFloatVal(f), nil
	case cty.Bool:
		v, err := strconv.ParseBool(raw)
		if err != nil {
			return cty.NilVal, fmt.Errorf("the variable is true or false")
		}
		return cty.BoolVal(v), nil
	case cty.String:
		return cty.StringVal(raw), nil
	}
	expr, diags := hclsyntax.ParseExpression([]byte(raw), "-var", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("%s", diags.Error())
	}
	v, diags := expr.Value(&hcl.EvalContext{Functions: Functions})
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("%s", diags.Error())
	}
	return v, nil
}

func decodeBatch(blk *hcl.Block, ctx *hcl.EvalContext) (*Batch, hcl.Diagnostics) {
	b := &Batch{Name: blk.Labels[0]}
	content, diags := blk.Body.Content(batchSchema)
	if attr, ok := content.Attributes["billing_project"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		b.BillingProject = s
	}
	if attr, ok := content.Attributes["attributes"]; ok {
		m, d := evalStringMap(attr, ctx)
		diags = append(diags, d...)
		b.Attributes = m
	}
	b.Regions, b.Clusters, b.Pool, b.WorkerLabels = decodePlacement(content, ctx, &diags)
	if attr, ok := content.Attributes["image"]; ok {
		b.Image = decodeImage(attr, ctx, &diags)
	}
	if attr, ok := content.Attributes["cancel_after_n_failures"]; ok {
		n, d := evalInt(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if err := api.ValidateCancelAfter(n); err != nil {
				diags = append(diags, attrError(attr, "Invalid cancel_after_n_failures", err.Error()+"."))
			}
			b.CancelAfterNFailures = n
		}
	}
	if attr, ok := content.Attributes["callback"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if _, err := api.ParseCallback("callback", s); err != nil {
				diags = append(diags, attrError(attr, "Invalid callback", err.Error()+"."))
			}
			b.Callback = s
		}
	}
	if attr, ok := content.Attributes["queue"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if err := api.ValidateBatchQueue(s, 0); err != nil {
				diags = append(diags, attrError(attr, "Invalid queue", err.Error()+"."))
			}
			b.Queue = s
		}
	}
	if attr, ok := content.Attributes["slo"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			dur, err := time.ParseDuration(s)
			switch {
			case err != nil:
				diags = append(diags, attrError(attr, "Invalid slo", fmt.Sprintf("slo %q is not a duration: write it as \"6h\" or \"90m\".", s)))
			case dur <= 0 || dur.Seconds() > api.MaxSLOSeconds:
				diags = append(diags, attrError(attr, "Invalid slo", "slo must be more than 0 and at most one year."))
			}
			b.SLO = dur
		}
	}
	if attr, ok := content.Attributes["deadline"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				diags = append(diags, attrError(attr, "Invalid deadline", fmt.Sprintf("deadline %q is not a time: write it as \"2026-12-01T06:00:00Z\" (RFC 3339).", s)))
			}
			b.Deadline = t
		}
	}
	if attr, ok := content.Attributes["priority"]; ok {
		n, d := evalInt(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if err := api.ValidateBatchQueue("", n); err != nil {
				diags = append(diags, attrError(attr, "Invalid priority", err.Error()+"."))
			}
			b.Priority = n
		}
	}
	seen := map[string]*Job{}
	b.OOMRetry = decodeOOMRetry(content.Blocks.OfType("oom_retry"), 0, ctx, &diags)
	b.MaxSpotAttempts = decodeMaxSpot(content.Attributes, ctx, &diags)
	b.decodeJobs(content.Blocks, "", seen, ctx, &diags)
	if len(b.Jobs) == 0 && !diags.HasErrors() {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No jobs",
			Detail: `The batch has no job blocks; add job "name" { command = [...] }.`, Subject: blk.DefRange.Ptr()})
	}
	for _, j := range b.Jobs {
		for i, dep := range j.DependsOn {
			if _, ok := seen[dep]; !ok {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown dependency",
					Detail:  fmt.Sprintf("Job %q depends on %q, which is not a job of this batch%s", j.Name, dep, suggest(dep, seen)),
					Subject: j.depRanges[i].Ptr()})
			} else if dep == j.Name {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Dependency cycle",
					Detail: fmt.Sprintf("Job %q depends on itself.", j.Name), Subject: j.depRanges[i].Ptr()})
			}
		}
	}
	if !diags.HasErrors() {
		diags = append(diags, findCycle(b.Jobs, seen)...)
	}
	if !diags.HasErrors() {
		// The API's rule for gang groups, on the jobs as they will be
		// sent (IDs, the batch's defaults).
		var ge *api.GangGroupError
		if _, err := api.ValidateGangGroups(b.Groups, b.JobSpecs()); errors.As(err, &ge) {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid gang",
				Detail: fmt.Sprintf("Group %q: %v.", ge.Path, ge.Err), Subject: b.groupRanges[ge.Group].Ptr()})
		} else {
			diags = append(diags, b.gangCycle()...)
		}
	}
	return b, diags
}

// decodeJobs decodes the job and group blocks of the batch (path "") or
// of the job group at path, in file order: jobs take IDs in that order
// whatever group they are in, and a group is declared before the groups
// nested in it.
func (b *Batch) decodeJobs(blocks hcl.Blocks, path string, seen map[string]*Job, ctx *hcl.EvalContext, diags *hcl.Diagnostics) {
	groups := map[string]*hcl.Block{}
	for _, blk := range blocks {
		switch blk.Type {
		case "job":
			j, d := decodeJob(blk, ctx)
			*diags = append(*diags, d...)
			if prev, ok := seen[j.Name]; ok {
				*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate job name",
					Detail:  fmt.Sprintf("Job %q is already defined at %s; job names must be unique so depends_on can name them.", j.Name, rangeString(prev.Range)),
					Subject: blk.DefRange.Ptr()})
				continue
			}
			j.Group = path
			seen[j.Name] = j
			b.Jobs = append(b.Jobs, j)
		case "group":
			name := blk.Labels[0]
			sub := name
			if path != "" {
				sub = path + "/" + name
			}
			if prev, ok := groups[name]; ok {
				*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate job group",
					Detail:  fmt.Sprintf("Group %q is already defined at %s; groups in one place need different names.", name, rangeString(prev.DefRange)),
					Subject: blk.DefRange.Ptr()})
				continue
			}
			groups[name] = blk
			if err := api.ValidateJobGroupPath(sub); err != nil {
				*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid job group",
					Detail: err.Error() + ".", Subject: blk.LabelRanges[0].Ptr()})
				continue
			}
			b.decodeGroup(blk, sub, seen, ctx, diags)
		}
	}
}

// decodeGroup decodes a group block at path: its settings, then what it
// holds.
func (b *Batch) decodeGroup(blk *hcl.Block, path string, seen map[string]*Job, ctx *hcl.EvalContext, diags *hcl.Diagnostics) {
	content, d := blk.Body.Content(groupSchema)
	*diags = append(*diags, d...)
	g := api.JobGroupSpec{Path: path}
	if attr, ok := content.Attributes["attributes"]; ok {
		m, d := evalStringMap(attr, ctx)
		*diags = append(*diags, d...)
		if err := api.ValidateAttributes(m); err != nil && !d.HasErrors() {
			*diags = append(*diags, attrError(attr, "Invalid attributes", err.Error()+"."))
		}
		g.Attributes = m
	}
	if attr, ok := content.Attributes["callback"]; ok {
		s, d := evalString(attr, ctx)
		*diags = append(*diags, d...)
		if !d.HasErrors() {
			if _, err := api.ParseCallback("callback", s); err != nil {
				*diags = append(*diags, attrError(attr, "Invalid callback", err.Error()+"."))
			}
			g.Callback = s
		}
	}
	if attr, ok := content.Attributes["cancel_after_n_failures"]; ok {
		n, d := evalInt(attr, ctx)
		*diags = append(*diags, d...)
		if !d.HasErrors() {
			if err := api.ValidateCancelAfter(n); err != nil {
				*diags = append(*diags, attrError(attr, "Invalid cancel_after_n_failures", err.Error()+"."))
			}
			g.CancelAfterNFailures = n
		}
	}
	if len(b.Groups) >= api.MaxJobGroupsPerRequest {
		*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Too many job groups",
			Detail: fmt.Sprintf("A jobspec declares at most %d job groups.", api.MaxJobGroupsPerRequest), Subject: blk.DefRange.Ptr()})
		return
	}
	if attr, ok := content.Attributes["gang"]; ok {
		v, d := attr.Expr.Value(ctx)
		*diags = append(*diags, d...)
		if !d.HasErrors() {
			bv, err := convert.Convert(v, cty.Bool)
			if err != nil || bv.IsNull() {
				*diags = append(*diags, attrError(attr, "Invalid gang", "gang is true or false."))
			} else {
				g.Gang = bv.True()
			}
		}
	}
	if attr, ok := content.Attributes["gang_uniformity"]; ok {
		s, d := evalString(attr, ctx)
		*diags = append(*diags, d...)
		g.GangUniformity = s
	}
	if err := api.ValidateJobGroups([]api.JobGroupSpec{g}); err != nil && (g.Gang || g.GangUniformity != "") {
		*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid gang", Detail: strings.TrimPrefix(err.Error(), "job_groups[0]: ") + ".", Subject: blk.DefRange.Ptr()})
	}
	b.Groups = append(b.Groups, g)
	b.groupRanges = append(b.groupRanges, blk.DefRange)
	jobs := len(b.Jobs)
	b.decodeJobs(content.Blocks, path, seen, ctx, diags)
	if g.Gang {
		for _, j := range b.Jobs[jobs:] {
			j.InGang = true
		}
	}
	if len(b.Jobs) == jobs && len(content.Blocks) == 0 {
		*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty job group",
			Detail: fmt.Sprintf(`Group %q holds no jobs; add job "name" { command = [...] } inside it, or remove it.`, path), Subject: blk.DefRange.Ptr()})
	}
}

func suggest(name string, jobs map[string]*Job) string {
	best, bestDist := "", 3
	for other := range jobs {
		if d := levenshtein(name, other); d < bestDist || (d == bestDist && other < best) {
			best, bestDist = other, d
		}
	}
	if best == "" {
		return "."
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// gangCycle reports a gang group that waits for itself: its jobs start
// together, so each waits for what any of them depends on, and a loop
// through jobs outside it (a member depends on a job that depends on
// another member) never starts. Each gang group is one node of the
// depends_on graph.
func (b *Batch) gangCycle() hcl.Diagnostics {
	gangAt := map[string]int{} // gang group path → index in Groups
	for i, g := range b.Groups {
		if g.Gang {
			gangAt[g.Path] = i
		}
	}
	if len(gangAt) == 0 {
		return nil
	}
	byName := map[string]*Job{}
	for _, j := range b.Jobs {
		byName[j.Name] = j
	}
	node := func(j *Job) string {
		for p := j.Group; p != ""; {
			if _, ok := gangAt[p]; ok {
				return "group " + p
			}
			k := strings.LastIndexByte(p, '/')
			if k < 0 {
				break
			}
			p = p[:k]
		}
		return "job " + j.Name
	}
	edges := map[string][]string{}
	var nodes []string
	for _, j := range b.Jobs {
		n := node(j)
		if _, ok := edges[n]; !ok {
			nodes = append(nodes, n)
			edges[n] = nil
		}
		for _, dep := range j.DependsOn {
			if d := byName[dep]; d != nil && node(d) != n {
				edges[n] = append(edges[n], node(d))
			}
		}
	}
	color := map[string]int{} // 0 white, 1 grey, 2 black
	var stack []string
	var loop []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = 1
		stack = append(stack, n)
		for _, d := range edges[n] {
			switch color[d] {
			case 1:
				k := slices.Index(stack, d)
				loop = append(slices.Clone(stack[k:]), d)
				return true
			case 0:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = 2
		return false
	}
	for _, n := range nodes {
		if color[n] == 0 && visit(n) {
			for _, m := range loop {
				if path, ok := strings.CutPrefix(m, "group "); ok {
					return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid gang",
						Detail: fmt.Sprintf("Group %q: its jobs start together, so each waits for what any of them depends on, and through depends_on it waits for itself: %s. Remove one of these depends_on entries.",
							path, strings.Join(reverse(loop), " -> ")),
						Subject: b.groupRanges[gangAt[path]].Ptr()}}
				}
			}
			return nil // a loop of jobs alone: findCycle's
		}
	}
	return nil
}

// findCycle reports one dependency cycle, at the depends_on entry that
// closes it, naming the whole loop.
func findCycle(jobs []*Job, byName map[string]*Job) hcl.Diagnostics {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found hcl.Diagnostics
	var visit func(j *Job) bool
	visit = func(j *Job) bool {
		color[j.Name] = grey
		stack = append(stack, j.Name)
		for i, dep := range j.DependsOn {
			switch color[dep] {
			case grey:
				start := 0
				for k, n := range stack {
					if n == dep {
						start = k
					}
				}
				loop := append(append([]string(nil), stack[start:]...), dep)
				found = hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Dependency cycle",
					Detail:  fmt.Sprintf("Jobs depend on each other in a loop: %s. Remove one of these depends_on entries.", strings.Join(reverse(loop), " -> ")),
					Subject: j.depRanges[i].Ptr()}}
				return true
			case white:
				if visit(byName[dep]) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[j.Name] = black
		return false
	}
	for _, j := range jobs {
		if color[j.Name] == white && visit(j) {
			return found
		}
	}
	return nil
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func decodeJob(blk *hcl.Block, ctx *hcl.EvalContext) (*Job, hcl.Diagnostics) {
	j := &Job{Name: blk.Labels[0], Range: blk.DefRange, CPU: 1}
	content, diags := blk.Body.Content(jobSchema)
	if attr, ok := content.Attributes["command"]; ok {
		cmd, d := evalCommand(attr, ctx)
		j.Command, diags = cmd, append(diags, d...)
	}
	if attr, ok := content.Attributes["count"]; ok {
		n, d := evalInt(attr, ctx)
		diags = append(diags, d...)
		switch {
		case d.HasErrors():
		case n < 0:
			diags = append(diags, attrError(attr, "Invalid count", fmt.Sprintf("count is %d; it must be 0 or more.", n)))
		case n > api.MaxJobsPerBatch:
			diags = append(diags, attrError(attr, "Invalid count", fmt.Sprintf("count is %d; a batch holds at most %d jobs.", n, int64(api.MaxJobsPerBatch))))
		}
		j.Array, j.Count = true, n
	}
	if attr, ok := content.Attributes["depends_on"]; ok {
		exprs, d := hcl.ExprList(attr.Expr)
		diags = append(diags, d...)
		for _, e := range exprs {
			v, d := e.Value(ctx)
			diags = append(diags, d...)
			if d.HasErrors() {
				continue
			}
			if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid dependency",
					Detail: "depends_on lists job names as strings, as in [\"split\"].", Subject: e.Range().Ptr()})
				continue
			}
			j.DependsOn = append(j.DependsOn, v.AsString())
			j.depRanges = append(j.depRanges, e.Range())
		}
	}
	if attr, ok := content.Attributes["env"]; ok {
		m, d := evalStringMap(attr, ctx)
		j.Env, diags = m, append(diags, d...)
	}
	if attr, ok := content.Attributes["attributes"]; ok {
		m, d := evalStringMap(attr, ctx)
		j.Attributes, diags = m, append(diags, d...)
	}
	if attr, ok := content.Attributes["cpu"]; ok {
		v, d := evalNumber(attr, ctx)
		diags = append(diags, d...)
		switch {
		case d.HasErrors():
		case v <= 0 || math.IsNaN(v):
			diags = append(diags, attrError(attr, "Invalid cpu", fmt.Sprintf("cpu is %g cores; it must be more than 0 (fractions such as 0.25 are fine).", v)))
		case math.Round(v*1000) < 1:
			diags = append(diags, attrError(attr, "Invalid cpu", fmt.Sprintf("cpu is %g cores; the smallest amount is %g.", v, api.MinCPU)))
		case v > api.MaxCPU:
			diags = append(diags, attrError(attr, "Invalid cpu", fmt.Sprintf("cpu is %g cores; a job may ask for at most %d.", v, api.MaxCPU)))
		}
		j.CPU = v
	}
	if attr, ok := content.Attributes["memory"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			n, err := units.ParseBytes(s)
			switch {
			case err != nil:
				diags = append(diags, attrError(attr, "Invalid memory", err.Error()))
			case n <= 0:
				diags = append(diags, attrError(attr, "Invalid memory", "memory must be more than 0."))
			}
			j.Memory = n
		}
	}
	if attr, ok := content.Attributes["timeout"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			dur, err := time.ParseDuration(s)
			switch {
			case err != nil:
				diags = append(diags, attrError(attr, "Invalid timeout", fmt.Sprintf("timeout %q is not a duration: write it as \"90s\", \"30m\" or \"2h\".", s)))
			case dur <= 0:
				diags = append(diags, attrError(attr, "Invalid timeout", "timeout must be more than 0."))
			case dur.Seconds() > api.MaxTimeoutSeconds:
				diags = append(diags, attrError(attr, "Invalid timeout", fmt.Sprintf("timeout %s is longer than one year.", dur)))
			}
			j.Timeout = dur
		}
	}
	if attr, ok := content.Attributes["preemption_grace"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			dur, err := time.ParseDuration(s)
			switch {
			case err != nil:
				diags = append(diags, attrError(attr, "Invalid preemption_grace", fmt.Sprintf("preemption_grace %q is not a duration: write it as \"30s\" or \"5m\".", s)))
			case dur <= 0 || dur.Seconds() > api.MaxPreemptionGraceSeconds:
				diags = append(diags, attrError(attr, "Invalid preemption_grace", fmt.Sprintf("preemption_grace must be more than 0 and at most %s.", time.Duration(api.MaxPreemptionGraceSeconds)*time.Second)))
			}
			j.PreemptionGrace = dur
		}
	}
	j.Regions, j.Clusters, j.Pool, j.WorkerLabels = decodePlacement(content, ctx, &diags)
	if attr, ok := content.Attributes["gpu"]; ok {
		j.GPUType, j.GPUs = decodeGPU(attr, ctx, &diags)
	}
	if attr, ok := content.Attributes["machine_type"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if err := api.ValidatePlaceName("machine_type", s); err != nil {
				diags = append(diags, attrError(attr, "Invalid machine_type", err.Error()+"."))
			}
			j.MachineType = s
		}
	}
	if attr, ok := content.Attributes["image"]; ok {
		j.Image = decodeImage(attr, ctx, &diags)
	}
	if attr, ok := content.Attributes["network"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if err := api.ValidateNetwork(s); err != nil {
				diags = append(diags, attrError(attr, "Invalid network", err.Error()+"."))
			}
			j.Network = s
		}
	}
	if attr, ok := content.Attributes["max_processes"]; ok {
		n, d := evalInt(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() && (n < api.MinJobProcesses || n > api.MaxJobProcesses) {
			diags = append(diags, attrError(attr, "Invalid max_processes", fmt.Sprintf("max_processes is %d; it must be between %d and %d.", n, api.MinJobProcesses, api.MaxJobProcesses)))
		}
		j.MaxProcesses = n
	}
	diags = append(diags, decodeFiles(j, slices.Concat(content.Blocks.OfType("input"), content.Blocks.OfType("output")), ctx)...)
	j.OOMRetry = decodeOOMRetry(content.Blocks.OfType("oom_retry"), j.Memory, ctx, &diags)
	if attr, ok := content.Attributes["retries"]; ok {
		n, d := evalInt(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() && (n < 0 || n > api.MaxRetries) {
			diags = append(diags, attrError(attr, "Invalid retries", fmt.Sprintf("retries is %d; it must be between 0 and %d.", n, api.MaxRetries)))
		}
		j.Retries = int(n)
	}
	if attr, ok := content.Attributes["max_lost_attempts"]; ok {
		n, d := evalInt(attr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() && (n < -1 || n > api.MaxLostAttempts) {
			diags = append(diags, attrError(attr, "Invalid max_lost_attempts", fmt.Sprintf("max_lost_attempts is %d; it must be between 1 and %d, 0 (the server's default) or -1 (no limit).", n, api.MaxLostAttempts)))
		}
		j.MaxLostAttempts = int(n)
	}
	j.MaxSpotAttempts = decodeMaxSpot(content.Attributes, ctx, &diags)
	if attr, ok := content.Attributes["always_run"]; ok {
		v, d := attr.Expr.Value(ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			bv, err := convert.Convert(v, cty.Bool)
			if err != nil || bv.IsNull() {
				diags = append(diags, attrError(attr, "Invalid always_run", "always_run is true or false."))
			} else {
				j.AlwaysRun = bv.True()
			}
		}
	}
	if attr, ok := content.Attributes["gang"]; ok {
		v, d := attr.Expr.Value(ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			bv, err := convert.Convert(v, cty.Bool)
			if err != nil || bv.IsNull() {
				diags = append(diags, attrError(attr, "Invalid gang", "gang is true or false."))
			} else {
				j.Gang = bv.True()
			}
		}
	}
	if attr, ok := content.Attributes["gang_uniformity"]; ok {
		s, d := evalString(attr, ctx)
		diags = append(diags, d...)
		j.GangUniformity = s
	}
	if j.Gang || j.GangUniformity != "" {
		// The API's rule, on what the block says (count, oom_retry,
		// max_spot_attempts, machine_type).
		js := api.JobSpec{Count: j.Count, Gang: j.Gang, GangUniformity: j.GangUniformity, OOMRetry: j.OOMRetry, MaxSpotAttempts: j.MaxSpotAttempts, MachineType: j.MachineType}
		if !j.Array {
			js.Count = 1
		}
		if err := js.ValidateGang(); err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid gang", Detail: err.Error() + ".", Subject: blk.DefRange.Ptr()})
		}
	}
	return j, diags
}

// decodeImage reads image = "registry/name:tag".
func decodeImage(attr *hcl.Attribute, ctx *hcl.EvalContext, diags *hcl.Diagnostics) string {
	s, d := evalString(attr, ctx)
	*diags = append(*diags, d...)
	if d.HasErrors() {
		return ""
	}
	if err := api.ValidateImage(s); err != nil {
		*diags = append(*diags, attrError(attr, "Invalid image", err.Error()+"."))
	}
	return s
}

// decodeFiles reads a job's input and output blocks.
// decodeMaxSpot reads a max_spot_attempts attribute (0: none).
func decodeMaxSpot(attrs hcl.Attributes, ctx *hcl.EvalContext, diags *hcl.Diagnostics) int {
	attr, ok := attrs["max_spot_attempts"]
	if !ok {
		return 0
	}
	n, d := evalInt(attr, ctx)
	*diags = append(*diags, d...)
	if !d.HasErrors() && (n < 0 || n > api.MaxSpotAttempts) {
		*diags = append(*diags, attrError(attr, "Invalid max_spot_attempts", fmt.Sprintf("max_spot_attempts is %d; it must be between 1 and %d, or 0 (no cap).", n, api.MaxSpotAttempts)))
	}
	return int(n)
}

// decodeOOMRetry reads an oom_retry block (nil: none). mem is the job's
// memory when it names one (0: not known here; the API checks it).
func decodeOOMRetry(blocks hcl.Blocks, mem int64, ctx *hcl.EvalContext, diags *hcl.Diagnostics) *api.OOMRetry {
	if len(blocks) == 0 {
		return nil
	}
	if len(blocks) > 1 {
		*diags = append(*diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate oom_retry",
			Detail: fmt.Sprintf("oom_retry is already defined at %s.", rangeString(blocks[0].DefRange)), Subject: blocks[1].DefRange.Ptr()})
	}
	content, d := blocks[0].Body.Content(oomRetrySchema)
	*diags = append(*diags, d...)
	if d.HasErrors() {
		return nil
	}
	out := &api.OOMRetry{}
	attr := content.Attributes["factor"]
	v, d := attr.Expr.Value(ctx)
	*diags = append(*diags, d...)
	if !d.HasErrors() {
		f, err := convert.Convert(v, cty.Number)
		switch {
		case err != nil || f.IsNull():
			*diags = append(*diags, attrError(attr, "Invalid factor", "factor must be a number, such as 2."))
		default:
			out.Factor, _ = f.AsBigFloat().Float64()
			if out.Factor < api.MinOOMFactor || out.Factor > api.MaxOOMFactor {
				*diags = append(*diags, attrError(attr, "Invalid factor", fmt.Sprintf("factor is %g; it must be between %g and %g.", out.Factor, api.MinOOMFactor, float64(api.MaxOOMFactor))))
			}
		}
	}
	attr = content.Attributes["max_memory"]
	s, d := evalString(attr, ctx)
	*diags = append(*diags, d...)
	if !d.HasErrors() {
		n, err := units.ParseBytes(s)
		switch {
		case err != nil:
			*diags = append(*diags, attrError(attr, "Invalid max_memory", err.Error()))
		case n <= mem || n > api.MaxMemory:
			*diags = append(*diags, attrError(attr, "Invalid max_memory", fmt.Sprintf("max_memory is %s; it must be more than the job's memory and at most 64TiB.", s)))
		}
		out.MaxMemory = n
	}
	return out
}

func decodeFiles(j *Job, blocks hcl.Blocks, ctx *hcl.EvalContext) hcl.Diagnostics {
	var diags hcl.Diagnostics
	defs := map[string]*hcl.Block{}
	paths := map[string]*hcl.Block{}
	for _, blk := range blocks {
		schema := inputSchema
		if blk.Type == "output" {
			schema = outputSchema
		}
		content, d := blk.Body.Content(schema)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		name := blk.Labels[0]
		key := blk.Type + " " + name
		if prev, ok := defs[key]; ok {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate " + blk.Type,
				Detail: fmt.Sprintf("%s %q is already defined at %s.", blk.Type, name, rangeString(prev.DefRange)), Subject: blk.DefRange.Ptr()})
			continue
		}
		defs[key] = blk
		if err := api.ValidatePlaceName(blk.Type+" name", name); err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + blk.Type + " name", Detail: err.Error() + ".", Subject: blk.DefRange.Ptr()})
		}
		urlAttr := content.Attributes["source"]
		if blk.Type == "output" {
			urlAttr = content.Attributes["destination"]
		}
		u, d := evalString(urlAttr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if err := api.ValidateFileURL(u); err != nil {
				diags = append(diags, attrError(urlAttr, "Invalid "+urlAttr.Name, err.Error()+"."))
			}
		}
		pathAttr := content.Attributes["path"]
		p, d := evalString(pathAttr, ctx)
		diags = append(diags, d...)
		if !d.HasErrors() {
			clean, err := api.CleanJobPath(p)
			switch {
			case err != nil:
				diags = append(diags, attrError(pathAttr, "Invalid path", err.Error()+"."))
			case paths[blk.Type+" "+clean] != nil:
				diags = append(diags, attrError(pathAttr, "Duplicate path", fmt.Sprintf("path %q is also the path of the %s at %s.", p, blk.Type, rangeString(paths[blk.Type+" "+clean].DefRange))))
			default:
				paths[blk.Type+" "+clean] = blk
			}
		}
		if blk.Type == "input" {
			j.Inputs = append(j.Inputs, api.InputFile{Name: name, Source: u, Path: p})
		} else {
			j.Outputs = append(j.Outputs, api.OutputFile{Name: name, Path: p, Destination: u})
		}
	}
	if len(j.Inputs) > api.MaxFiles || len(j.Outputs) > api.MaxFiles {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Too many files",
			Detail: fmt.Sprintf("job %q has %d inputs and %d outputs; the limit is %d of each.", j.Name, len(j.Inputs), len(j.Outputs), api.MaxFiles), Subject: j.Range.Ptr()})
	}
	return diags
}

// decodePlacement reads regions = [...], clusters = [...], pool = "..."
// and worker_labels = { KEY = "VALUE" } of a batch or job.
func decodePlacement(content *hcl.BodyContent, ctx *hcl.EvalContext, diags *hcl.Diagnostics) ([]string, []string, string, map[string]string) {
	regions := decodePlaces(content, ctx, diags, "region", `["us-east1", "europe-west4"]`)
	clusters := decodePlaces(content, ctx, diags, "cluster", `["gpu-east", "batch-west"]`)
	var pool string
	if attr, ok := content.Attributes["pool"]; ok {
		s, d := evalString(attr, ctx)
		*diags = append(*diags, d...)
		if !d.HasErrors() {
			if err := api.ValidatePlaceName("pool", s); err != nil {
				*diags = append(*diags, attrError(attr, "Invalid pool", err.Error()+"."))
			}
			pool = s
		}
	}
	var labels map[string]string
	if attr, ok := content.Attributes["worker_labels"]; ok {
		m, d := evalStringMap(attr, ctx)
		*diags = append(*diags, d...)
		if !d.HasErrors() {
			if err := api.ValidateWorkerLabels(m); err != nil {
				*diags = append(*diags, attrError(attr, "Invalid worker_labels", strings.TrimPrefix(err.Error(), "worker_labels: ")+"."))
			}
			labels = m
		}
	}
	return regions, clusters, pool, labels
}

// decodePlaces reads regions = [...] or clusters = [...]: a list of
// what's names, at most api.MaxRegions.
func decodePlaces(content *hcl.BodyContent, ctx *hcl.EvalContext, diags *hcl.Diagnostics, what, example string) []string {
	attr, ok := content.Attributes[what+"s"]
	if !ok {
		return nil
	}
	invalid := "Invalid " + what + "s"
	v, d := evalTo(attr, ctx, cty.List(cty.String), "a list of "+what+" names, as in "+example)
	*diags = append(*diags, d...)
	if d.HasErrors() || v.IsNull() {
		return nil
	}
	var names []string
	bad := false
	for _, e := range v.AsValueSlice() {
		if e.IsNull() {
			*diags = append(*diags, attrError(attr, invalid, what+"s has a null element."))
			bad = true
			continue
		}
		if err := api.ValidatePlaceName(what, e.AsString()); err != nil {
			*diags = append(*diags, attrError(attr, invalid, err.Error()+"."))
			bad = true
			continue
		}
		names = append(names, e.AsString())
	}
	if len(names) == 0 && !bad {
		*diags = append(*diags, attrError(attr, invalid, fmt.Sprintf("%ss is empty; leave it out to allow every %s.", what, what)))
	}
	if len(names) > api.MaxRegions {
		*diags = append(*diags, attrError(attr, invalid, fmt.Sprintf("%ss names %d %ss; the limit is %d.", what, len(names), what, api.MaxRegions)))
	}
	return names
}

// decodeGPU reads gpu = { type = "a100", count = 1 }.
func decodeGPU(attr *hcl.Attribute, ctx *hcl.EvalContext, diags *hcl.Diagnostics) (string, int64) {
	bad := func(detail string) (string, int64) {
		*diags = append(*diags, attrError(attr, "Invalid gpu", detail))
		return "", 0
	}
	v, d := attr.Expr.Value(ctx)
	*diags = append(*diags, d...)
	if d.HasErrors() {
		return "", 0
	}
	if v.IsNull() || !v.IsWhollyKnown() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		return bad(`gpu is an object, as in { type = "a100", count = 1 }.`)
	}
	m := v.AsValueMap()
	for k := range m {
		if k != "type" && k != "count" {
			return bad(fmt.Sprintf("gpu has no %q; it takes type and count.", k))
		}
	}
	typ, ok := m["type"]
	if !ok || typ.IsNull() || typ.Type() != cty.String {
		return bad(`gpu needs a type, as in { type = "a100", count = 1 }.`)
	}
	if err := api.ValidatePlaceName("gpu type", typ.AsString()); err != nil {
		return bad(err.Error() + ".")
	}
	count := int64(1)
	if c, ok := m["count"]; ok {
		cn, err := convert.Convert(c, cty.Number)
		if err != nil || cn.IsNull() {
			return bad("gpu count must be a whole number.")
		}
		f, _ := cn.AsBigFloat().Float64()
		if f != float64(int64(f)) || f < 1 || f > api.MaxGPUs {
			return bad(fmt.Sprintf("gpu count is %g; it must be a whole number from 1 to %d.", f, api.MaxGPUs))
		}
		count = int64(f)
	}
	return typ.AsString(), count
}

func attrError(attr *hcl.Attribute, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: attr.Expr.Range().Ptr()}
}

func evalTo(attr *hcl.Attribute, ctx *hcl.EvalContext, ty cty.Type, what string) (cty.Value, hcl.Diagnostics) {
	v, diags := attr.Expr.Value(ctx)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	cv, err := convert.Convert(v, ty)
	if err != nil || cv.IsNull() || !cv.IsWhollyKnown() {
		return cty.NilVal, hcl.Diagnostics{attrError(attr, "Invalid "+attr.Name, fmt.Sprintf("%s must be %s.", attr.Name, what))}
	}
	return cv, nil
}

func evalString(attr *hcl.Attribute, ctx *hcl.EvalContext) (string, hcl.Diagnostics) {
	v, diags := evalTo(attr, ctx, cty.String, "a string")
	if diags.HasErrors() {
		return "", diags
	}
	return v.AsString(), nil
}

func evalNumber(attr *hcl.Attribute, ctx *hcl.EvalContext) (float64, hcl.Diagnostics) {
	v, diags := evalTo(attr, ctx, cty.Number, "a number")
	if diags.HasErrors() {
		return 0, diags
	}
	f, _ := v.AsBigFloat().Float64()
	return f, nil
}

func evalInt(attr *hcl.Attribute, ctx *hcl.EvalContext) (int64, hcl.Diagnostics) {
	f, diags := evalNumber(attr, ctx)
	if diags.HasErrors() {
		return 0, diags
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<40 {
		return 0, hcl.Diagnostics{attrError(attr, "Invalid "+attr.Name, fmt.Sprintf("%s must be a whole number, not %g.", attr.Name, f))}
	}
	return int64(f), nil
}

func evalStringMap(attr *hcl.Attribute, ctx *hcl.EvalContext) (map[string]string, hcl.Diagnostics) {
	v, diags := evalTo(attr, ctx, cty.Map(cty.String), "a map of strings, as in { KEY = \"value\" }")
	if diags.HasErrors() {
		return nil, diags
	}
	out := map[string]string{}
	for k, val := range v.AsValueMap() {
		if val.IsNull() {
			return nil, hcl.Diagnostics{attrError(attr, "Invalid "+attr.Name, fmt.Sprintf("%s.%s is null.", attr.Name, k))}
		}
		out[k] = val.AsString()
	}
	return out, nil
}

// evalCommand accepts a list of strings (argv) or one string, which is run
// with sh -c.
func evalCommand(attr *hcl.Attribute, ctx *hcl.EvalContext) ([]string, hcl.Diagnostics) {
	v, diags := attr.Expr.Value(ctx)
	if diags.HasErrors() {
		return nil, diags
	}
	if !v.IsWhollyKnown() {
		// A value no one gave (a variable whose default names nothing):
		// cty cannot say what it is.
		return nil, hcl.Diagnostics{attrError(attr, "Invalid command", "command depends on a value that is not known when the jobspec is read; give every variable it uses a value.")}
	}
	if v.Type() == cty.String && !v.IsNull() {
		if strings.TrimSpace(v.AsString()) == "" {
			return nil, hcl.Diagnostics{attrError(attr, "Empty command", "command is empty.")}
		}
		return []string{"sh", "-c", v.AsString()}, nil
	}
	lv, err := convert.Convert(v, cty.List(cty.String))
	if err != nil || lv.IsNull() {
		return nil, hcl.Diagnostics{attrError(attr, "Invalid command", `command is a list of strings, as in ["sh", "-c", "echo hi"], or one string run with sh -c.`)}
	}
	var argv []string
	for _, e := range lv.AsValueSlice() {
		if e.IsNull() {
			return nil, hcl.Diagnostics{attrError(attr, "Invalid command", "command has a null element.")}
		}
		argv = append(argv, e.AsString())
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, hcl.Diagnostics{attrError(attr, "Empty command", "command needs at least the program to run.")}
	}
	return argv, nil
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// FormatDiagnostics prints one line per problem: file:line:col: summary:
// detail.
func FormatDiagnostics(diags hcl.Diagnostics) string {
	var sb strings.Builder
	for _, d := range diags {
		loc := ""
		if d.Subject != nil {
			loc = rangeString(*d.Subject) + ": "
		}
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		fmt.Fprintf(&sb, "%s%s: %s", loc, sev, d.Summary)
		if d.Detail != "" {
			fmt.Fprintf(&sb, ": %s", d.Detail)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// JobSpecs turns the jobspec into API job specs: IDs are dense from 1 in
// file order, an array takes Count consecutive IDs, and depending on an
// array means depending on all of it.
func (b *Batch) JobSpecs() []api.JobSpec {
	first := map[string]int64{}
	byName := map[string]*Job{}
	next := int64(1)
	for _, j := range b.Jobs {
		first[j.Name] = next
		byName[j.Name] = j
		next += j.NumJobs()
	}
	var out []api.JobSpec
	for _, j := range b.Jobs {
		if j.NumJobs() == 0 {
			continue
		}
		spec := api.JobSpec{
			JobID:          first[j.Name],
			Name:           j.Name,
			Command:        j.Command,
			Env:            j.Env,
			CPU:            j.CPU,
			Memory:         j.Memory,
			TimeoutSeconds: j.Timeout.Seconds(),
			Retries:        j.Retries,

			MaxLostAttempts:        j.MaxLostAttempts,
			MaxSpotAttempts:        j.MaxSpotAttempts,
			PreemptionGraceSeconds: j.PreemptionGrace.Seconds(),
			AlwaysRun:              j.AlwaysRun,
			Attributes:             j.Attributes,
			Regions:                j.Regions,
			Clusters:               j.Clusters,
			Pool:                   j.Pool,
			WorkerLabels:           j.WorkerLabels,
			GPUs:                   int(j.GPUs),
			GPUType:                j.GPUType,
			MachineType:            j.MachineType,
			Image:                  j.Image,
			Network:                j.Network,
			Inputs:                 j.Inputs,
			Outputs:                j.Outputs,
			MaxProcesses:           j.MaxProcesses,
			JobGroup:               j.Group,
			Gang:                   j.Gang,
			GangUniformity:         j.GangUniformity,
		}
		if spec.Regions == nil {
			spec.Regions = b.Regions
		}
		if spec.Clusters == nil {
			spec.Clusters = b.Clusters
		}
		if spec.Image == "" {
			spec.Image = b.Image
		}
		spec.OOMRetry = j.OOMRetry
		// The batch's defaults that would run one member of a gang
		// apart from the others are not a gang's.
		if spec.OOMRetry == nil && !j.Gang && !j.InGang {
			spec.OOMRetry = b.OOMRetry
		}
		if spec.MaxSpotAttempts == 0 && !j.Gang && !j.InGang {
			spec.MaxSpotAttempts = b.MaxSpotAttempts
		}
		if spec.Pool == "" {
			spec.Pool = b.Pool
		}
		if spec.WorkerLabels == nil {
			spec.WorkerLabels = b.WorkerLabels
		}
		if j.Array {
			spec.Count = j.Count
		}
		deps := append([]string(nil), j.DependsOn...)
		sort.Slice(deps, func(a, c int) bool { return first[deps[a]] < first[deps[c]] })
		for _, dep := range deps {
			if n := byName[dep].NumJobs(); n > 0 {
				spec.ParentRanges = append(spec.ParentRanges, api.IDRange{first[dep], first[dep] + n - 1})
			}
		}
		out = append(out, spec)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
