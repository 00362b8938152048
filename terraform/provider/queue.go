package provider

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/server/apiview"
)

// drover_queue: one queue of the tree, with the attributes of the
// placement config's queue block (same names, same rules: the config is
// checked at plan time with apiview.QueueFromAPI, the function the
// servers check a PUT with). Its path names it from the top
// ("genomics/gwas/tier1"); a parent must exist first (depends_on, or a
// reference to the parent's path).

type queueResource struct{ c *api.Client }

type amountsModel struct {
	CPU    types.Float64 `tfsdk:"cpu"`
	Memory types.String  `tfsdk:"memory"`
	GPUs   types.Map     `tfsdk:"gpus"`
}

type maxRunningModel struct {
	Jobs types.Int64   `tfsdk:"jobs"`
	CPU  types.Float64 `tfsdk:"cpu"`
}

type queueModel struct {
	Path                types.String     `tfsdk:"path"`
	Weight              types.Int64      `tfsdk:"weight"`
	Guarantee           *amountsModel    `tfsdk:"guarantee"`
	BorrowLimit         *amountsModel    `tfsdk:"borrow_limit"`
	LendLimit           *amountsModel    `tfsdk:"lend_limit"`
	MaxRunning          *maxRunningModel `tfsdk:"max_running"`
	ReclaimGrace        types.String     `tfsdk:"reclaim_grace"`
	MinRuntime          types.String     `tfsdk:"min_runtime"`
	Preemptible         types.Bool       `tfsdk:"preemptible"`
	PreemptAfter        types.String     `tfsdk:"preempt_after"`
	PreemptThreshold    types.Float64    `tfsdk:"preempt_threshold"`
	AllowPreemptionFrom types.List       `tfsdk:"allow_preemption_from"`
	Strategy            types.String     `tfsdk:"strategy"`
	HomeClusters        types.List       `tfsdk:"home_clusters"`
	MaxPriority         types.Int64      `tfsdk:"max_priority"`
	BillingProjects     types.List       `tfsdk:"billing_projects"`
	AllowProjects       types.List       `tfsdk:"allow_projects"`
}

func newQueue() resource.Resource { return &queueResource{} }

func (r *queueResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_queue"
}

func amountsAttr(desc string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true, Description: desc, Attributes: map[string]schema.Attribute{
		"cpu":    schema.Float64Attribute{Optional: true, Description: "Cores."},
		"memory": schema.StringAttribute{Optional: true, Description: "A size: \"64GiB\"."},
		"gpus":   schema.MapAttribute{Optional: true, ElementType: types.Int64Type, Description: "GPUs by type."},
	}}
}

func (r *queueResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	strs := func(desc string) schema.ListAttribute {
		return schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "A queue of drover's queue tree (organization / project / tier), as a placement config's queue block.",
		Attributes: map[string]schema.Attribute{
			"path": schema.StringAttribute{Required: true, Description: "The queue's path from the top: \"genomics/gwas/tier1\".",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"weight": schema.Int64Attribute{Optional: true, Computed: true, Description: "Its part among its siblings (default 1).",
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()}},
			"guarantee":    amountsAttr("Its nominal quota across all clusters."),
			"borrow_limit": amountsAttr("What it may hold beyond its guarantee (absent: no bound; zeros: a hard quota)."),
			"lend_limit":   amountsAttr("How much of its idle guarantee its siblings may borrow (absent: all)."),
			"max_running": schema.SingleNestedAttribute{Optional: true, Description: "Caps on what it and its children run at once.",
				Attributes: map[string]schema.Attribute{
					"jobs": schema.Int64Attribute{Optional: true},
					"cpu":  schema.Float64Attribute{Optional: true},
				}},
			"reclaim_grace":         schema.StringAttribute{Optional: true, Description: "How long borrowers keep its guarantee before it is reclaimed (a duration)."},
			"min_runtime":           schema.StringAttribute{Optional: true, Description: "No attempt younger than this is preempted (a duration)."},
			"preemptible":           schema.BoolAttribute{Optional: true},
			"preempt_after":         schema.StringAttribute{Optional: true, Description: "How long it waits below its threshold before it preempts for fair share."},
			"preempt_threshold":     schema.Float64Attribute{Optional: true, Description: "A fraction of its fair share, 0 to 1."},
			"allow_preemption_from": strs("The queues it may preempt."),
			"strategy":              schema.StringAttribute{Optional: true, Description: "spread, least-loaded, pack or cheapest."},
			"home_clusters":         strs("The clusters its jobs run in (none: any)."),
			"max_priority": schema.Int64Attribute{Optional: true, Description: "The highest priority a batch of anyone but an admin may ask in this leaf, 0 (the default) to 1000000; " +
				"each billing project's own max_priority, which its managers set, holds below it."},
			"billing_projects": strs("Projects whose batches run here unless they name another queue (a leaf's)."),
			"allow_projects":   strs("Projects that may name it."),
		},
	}
}

func (r *queueResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

// ValidateConfig checks the queue with the servers' own rule, once every
// value is known, naming the attribute a message is about.
func (r *queueResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m queueModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !m.known() {
		return
	}
	q, diags := m.toAPI(ctx)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	if _, err := apiview.QueueFromAPI(q); err != nil {
		resp.Diagnostics.AddAttributeError(attributeOf(err.Error()), "Invalid queue", err.Error())
	}
}

// attributeOf is the attribute a validation message names (the path
// when it names none).
func attributeOf(msg string) path.Path {
	for _, name := range []string{"borrow_limit", "lend_limit", "guarantee", "max_running", "reclaim_grace", "min_runtime", "preempt_after",
		"preempt_threshold", "allow_preemption_from", "strategy", "home_clusters", "max_priority", "billing_projects", "allow_projects", "weight"} {
		if strings.Contains(msg, name) {
			return path.Root(name)
		}
	}
	return path.Root("path")
}

// known reports whether every value of the config is known (a value
// from another resource is unknown until it is made).
func (m *queueModel) known() bool {
	vals := []attr.Value{m.Path, m.Weight, m.ReclaimGrace, m.MinRuntime, m.Preemptible, m.PreemptAfter, m.PreemptThreshold,
		m.AllowPreemptionFrom, m.Strategy, m.HomeClusters, m.MaxPriority, m.BillingProjects, m.AllowProjects}
	for _, a := range []*amountsModel{m.Guarantee, m.BorrowLimit, m.LendLimit} {
		if a != nil {
			vals = append(vals, a.CPU, a.Memory, a.GPUs)
		}
	}
	if m.MaxRunning != nil {
		vals = append(vals, m.MaxRunning.Jobs, m.MaxRunning.CPU)
	}
	return !anyUnknown(vals...)
}

func strList(ctx context.Context, l types.List, diags *diag.Diagnostics) []string {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	var out []string
	diags.Append(l.ElementsAs(ctx, &out, false)...)
	return out
}

func gpuMap(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]int {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	var in map[string]int64
	diags.Append(m.ElementsAs(ctx, &in, false)...)
	out := make(map[string]int, len(in))
	for k, v := range in {
		out[k] = int(v)
	}
	return out
}

func (a *amountsModel) memory(what string, diags *diag.Diagnostics) int64 {
	if a.Memory.IsNull() || a.Memory.ValueString() == "" {
		return 0
	}
	n, err := units.ParseBytes(a.Memory.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root(what).AtName("memory"), "Invalid size", fmt.Sprintf("%s: memory %q: %v", what, a.Memory.ValueString(), err))
	}
	return n
}

// toAPI is the queue as the API takes it.
func (m *queueModel) toAPI(ctx context.Context) (api.Queue, diag.Diagnostics) {
	var diags diag.Diagnostics
	q := api.Queue{Path: m.Path.ValueString(), Weight: m.Weight.ValueInt64(), ReclaimGrace: m.ReclaimGrace.ValueString(),
		MinRuntime: m.MinRuntime.ValueString(), Preemptible: m.Preemptible.ValueBool(), PreemptAfter: m.PreemptAfter.ValueString(),
		PreemptThreshold: m.PreemptThreshold.ValueFloat64(), Strategy: m.Strategy.ValueString(),
		AllowPreemptionFrom: strList(ctx, m.AllowPreemptionFrom, &diags), HomeClusters: strList(ctx, m.HomeClusters, &diags),
		MaxPriority:     m.MaxPriority.ValueInt64(),
		BillingProjects: strList(ctx, m.BillingProjects, &diags), AllowProjects: strList(ctx, m.AllowProjects, &diags)}
	if q.BillingProjects == nil {
		q.BillingProjects = []string{}
	}
	if a := m.Guarantee; a != nil {
		q.Guarantee = api.Quota{CPU: a.CPU.ValueFloat64(), Memory: a.memory("guarantee", &diags), GPUs: gpuMap(ctx, a.GPUs, &diags)}
	}
	limit := func(what string, a *amountsModel) *api.Limit {
		if a == nil {
			return nil
		}
		l := &api.Limit{GPUs: gpuMap(ctx, a.GPUs, &diags)}
		if !a.CPU.IsNull() {
			v := a.CPU.ValueFloat64()
			l.CPU = &v
		}
		if !a.Memory.IsNull() {
			v := a.memory(what, &diags)
			l.Memory = &v
		}
		return l
	}
	q.BorrowLimit, q.LendLimit = limit("borrow_limit", m.BorrowLimit), limit("lend_limit", m.LendLimit)
	if mr := m.MaxRunning; mr != nil {
		q.MaxRunning = api.MaxRunning{Jobs: mr.Jobs.ValueInt64(), CPU: mr.CPU.ValueFloat64()}
	}
	return q, diags
}

// fromAPI sets the model from the queue the servers hold, keeping how the
// configuration wrote a value the servers hold the same (a size, a
// duration), so only a real change shows in a plan.
func (m *queueModel) fromAPI(ctx context.Context, q *api.Queue) diag.Diagnostics {
	var diags diag.Diagnostics
	m.Path, m.Weight = types.StringValue(q.Path), types.Int64Value(q.Weight)
	m.ReclaimGrace = sameDuration(m.ReclaimGrace, q.ReclaimGrace)
	m.MinRuntime = sameDuration(m.MinRuntime, q.MinRuntime)
	m.PreemptAfter = sameDuration(m.PreemptAfter, q.PreemptAfter)
	m.Preemptible = optBool(m.Preemptible, q.Preemptible)
	m.PreemptThreshold = optFloat(m.PreemptThreshold, q.PreemptThreshold)
	m.Strategy = optString(m.Strategy, q.Strategy)
	m.AllowPreemptionFrom = optList(ctx, m.AllowPreemptionFrom, q.AllowPreemptionFrom, &diags)
	m.HomeClusters = optList(ctx, m.HomeClusters, q.HomeClusters, &diags)
	m.MaxPriority = optInt(m.MaxPriority, q.MaxPriority)
	m.BillingProjects = optList(ctx, m.BillingProjects, q.BillingProjects, &diags)
	m.AllowProjects = optList(ctx, m.AllowProjects, q.AllowProjects, &diags)
	g := q.Guarantee
	if g.CPU == 0 && g.Memory == 0 && len(g.GPUs) == 0 && m.Guarantee == nil {
		m.Guarantee = nil
	} else {
		m.Guarantee = amountsFrom(ctx, m.Guarantee, &g.CPU, &g.Memory, g.GPUs, &diags)
	}
	limit := func(old *amountsModel, l *api.Limit) *amountsModel {
		if l == nil {
			return nil
		}
		return amountsFrom(ctx, old, l.CPU, l.Memory, l.GPUs, &diags)
	}
	m.BorrowLimit, m.LendLimit = limit(m.BorrowLimit, q.BorrowLimit), limit(m.LendLimit, q.LendLimit)
	if q.MaxRunning == (api.MaxRunning{}) && m.MaxRunning == nil {
		m.MaxRunning = nil
	} else {
		var old maxRunningModel
		if m.MaxRunning != nil {
			old = *m.MaxRunning
		}
		m.MaxRunning = &maxRunningModel{Jobs: optInt(old.Jobs, q.MaxRunning.Jobs), CPU: optFloat(old.CPU, q.MaxRunning.CPU)}
	}
	return diags
}

func amountsFrom(ctx context.Context, old *amountsModel, cpu *float64, mem *int64, gpus map[string]int, diags *diag.Diagnostics) *amountsModel {
	var o amountsModel
	if old != nil {
		o = *old
	} else {
		o = amountsModel{CPU: types.Float64Null(), Memory: types.StringNull(), GPUs: types.MapNull(types.Int64Type)}
	}
	out := amountsModel{CPU: types.Float64Null(), Memory: types.StringNull(), GPUs: types.MapNull(types.Int64Type)}
	if cpu != nil {
		out.CPU = optFloat(o.CPU, *cpu)
	}
	if mem != nil && (*mem != 0 || !o.Memory.IsNull()) {
		out.Memory = sameSize(o.Memory, *mem)
	}
	if len(gpus) > 0 {
		in := make(map[string]int64, len(gpus))
		for k, v := range gpus {
			in[k] = int64(v)
		}
		v, d := types.MapValueFrom(ctx, types.Int64Type, in)
		diags.Append(d...)
		out.GPUs = v
	}
	return &out
}

// Values the configuration left out and the servers hold at their zero
// stay null; those it set, or the servers changed, are the servers'.
func optString(old types.String, v string) types.String {
	if v == "" && (old.IsNull() || old.ValueString() == "") {
		return old
	}
	return types.StringValue(v)
}

func optBool(old types.Bool, v bool) types.Bool {
	if !v && old.IsNull() {
		return old
	}
	return types.BoolValue(v)
}

func optFloat(old types.Float64, v float64) types.Float64 {
	if v == 0 && old.IsNull() {
		return old
	}
	return types.Float64Value(v)
}

func optInt(old types.Int64, v int64) types.Int64 {
	if v == 0 && old.IsNull() {
		return old
	}
	return types.Int64Value(v)
}

func optList(ctx context.Context, old types.List, v []string, diags *diag.Diagnostics) types.List {
	if len(v) == 0 && (old.IsNull() || len(old.Elements()) == 0) {
		if old.IsNull() || old.IsUnknown() {
			return types.ListNull(types.StringType)
		}
		return old
	}
	l, d := types.ListValueFrom(ctx, types.StringType, v)
	diags.Append(d...)
	return l
}

// sameDuration keeps the configuration's spelling of a duration the
// servers hold ("10m" for their "10m0s").
func sameDuration(old types.String, v string) types.String {
	if v == "" {
		if old.IsNull() || old.ValueString() == "" {
			return old
		}
		return types.StringNull()
	}
	if !old.IsNull() {
		a, err1 := time.ParseDuration(old.ValueString())
		b, err2 := time.ParseDuration(v)
		if err1 == nil && err2 == nil && a == b {
			return old
		}
	}
	return types.StringValue(shortDuration(v))
}

// shortDuration spells a duration the servers hold the shortest way
// ("5m" for "5m0s"), as a configuration would: what an import writes.
func shortDuration(v string) string {
	d, err := time.ParseDuration(v)
	if err != nil || d == 0 {
		return v
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sameSize keeps the configuration's spelling of a size the servers hold.
func sameSize(old types.String, v int64) types.String {
	if !old.IsNull() {
		if n, err := units.ParseBytes(old.ValueString()); err == nil && n == v {
			return old
		}
	}
	return types.StringValue(units.FormatBytes(v))
}

func (r *queueResource) put(ctx context.Context, m *queueModel, diags *diag.Diagnostics) {
	q, d := m.toAPI(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	got, err := r.c.PutQueue(ctx, &q)
	if err != nil {
		diags.AddAttributeError(attributeOf(err.Error()), "Cannot set queue "+q.Path, err.Error())
		return
	}
	diags.Append(m.fromAPI(ctx, got)...)
}

func (r *queueResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *queueModel) {
		if _, err := r.c.GetQueue(ctx, m.Path.ValueString()); err == nil {
			resp.Diagnostics.AddAttributeError(path.Root("path"), "Queue exists",
				fmt.Sprintf("queue %s exists already: import it (terraform import ADDRESS %s) to manage it here", m.Path.ValueString(), m.Path.ValueString()))
			return
		}
		r.put(ctx, m, &resp.Diagnostics)
	})
}

func (r *queueResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m queueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	q, err := r.c.GetQueue(ctx, m.Path.ValueString())
	if api.IsStatus(err, http.StatusNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read queue "+m.Path.ValueString(), err.Error())
		return
	}
	resp.Diagnostics.Append(m.fromAPI(ctx, q)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *queueResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *queueModel) { r.put(ctx, m, &resp.Diagnostics) })
}

func (r *queueResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m queueModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteQueue(ctx, m.Path.ValueString()); err != nil && !api.IsStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("Cannot delete queue "+m.Path.ValueString(), err.Error())
	}
}

func (r *queueResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	q, err := r.c.GetQueue(ctx, req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Cannot import queue "+req.ID, err.Error())
		return
	}
	m := queueModel{Weight: types.Int64Null(), ReclaimGrace: types.StringNull(), MinRuntime: types.StringNull(), Preemptible: types.BoolNull(),
		PreemptAfter: types.StringNull(), PreemptThreshold: types.Float64Null(), Strategy: types.StringNull(),
		AllowPreemptionFrom: types.ListNull(types.StringType), HomeClusters: types.ListNull(types.StringType), MaxPriority: types.Int64Null(),
		BillingProjects: types.ListNull(types.StringType), AllowProjects: types.ListNull(types.StringType)}
	resp.Diagnostics.Append(m.fromAPI(ctx, q)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
