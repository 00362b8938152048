package provider

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
)

// drover_billing_project: a billing project, its members with their
// roles, its spend limit, log quota and whether its jobs may use the
// host's network (its storage prefixes are drover_storage_prefix
// resources of their own). Destroying one that had batches is refused
// by drover (the name stays with them): remove it from the configuration
// with `terraform state rm` instead.

type projectResource struct{ c *api.Client }

type projectModel struct {
	Name             types.String `tfsdk:"name"`
	Members          types.Map    `tfsdk:"members"`
	SpendLimit       types.String `tfsdk:"spend_limit"`
	LogQuota         types.String `tfsdk:"log_quota"`
	AllowHostNetwork types.Bool   `tfsdk:"allow_host_network"`
	MaxPriority      types.Int64  `tfsdk:"max_priority"`
}

func newProject() resource.Resource { return &projectResource{} }

func (r *projectResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_billing_project"
}

func (r *projectResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A billing project: who may submit to it and see its batches, and what it may spend.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, Validators: nameValidators("billing project name"),
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"members": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{roleRule{}},
				Description: "User name to role: member, manager or viewer."},
			"spend_limit": schema.StringAttribute{Optional: true, Validators: []validator.String{moneyRule{}},
				Description: "Dollars, exact: \"250\" or \"99.95\" (absent or \"0\": none)."},
			"log_quota": schema.StringAttribute{Optional: true, Validators: []validator.String{sizeRule{}},
				Description: "The job logs each server keeps of its batches: a size such as \"10GiB\" (absent: none)."},
			"allow_host_network": schema.BoolAttribute{Optional: true, Description: "May its jobs run on the host's network."},
			"max_priority": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{maxPriorityRule{}},
				Description: "The highest priority its batches may ask, 0 (the default) to 1000000; its queue's max_priority holds too, and admins' batches are held to neither."},
		},
	}
}

func (r *projectResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

func (r *projectResource) find(ctx context.Context, name string) (*api.BillingProject, error) {
	ps, err := r.c.ListBillingProjects(ctx)
	if err != nil {
		return nil, err
	}
	for i := range ps {
		if ps[i].Name == name {
			return &ps[i], nil
		}
	}
	return nil, nil
}

// roles is a project's members by role, as the API lists them.
func roles(p *api.BillingProject) map[string]string {
	out := map[string]string{}
	for _, m := range p.Members {
		out[m] = "member"
	}
	for _, m := range p.Managers {
		out[m] = "manager"
	}
	for _, m := range p.Viewers {
		out[m] = "viewer"
	}
	return out
}

// apply makes the project's members and settings what m says, from what
// it has (have).
func (r *projectResource) apply(ctx context.Context, m *projectModel, have *api.BillingProject, diags *diag.Diagnostics) {
	name := m.Name.ValueString()
	want := map[string]string{}
	if !m.Members.IsNull() {
		diags.Append(m.Members.ElementsAs(ctx, &want, false)...)
	}
	current := roles(have)
	users := make([]string, 0, len(want))
	for u := range want {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, u := range users {
		if current[u] != want[u] {
			if err := r.c.SetRole(ctx, name, u, want[u]); err != nil {
				diags.AddAttributeError(path.Root("members").AtMapKey(u), "Cannot set a member", err.Error())
				return
			}
		}
	}
	for u := range current {
		if _, ok := want[u]; !ok {
			if err := r.c.RemoveMember(ctx, name, u); err != nil {
				diags.AddAttributeError(path.Root("members"), "Cannot remove member "+u, err.Error())
				return
			}
		}
	}
	limit, _ := money.ParseAmount(or0(m.SpendLimit.ValueString()))
	if limit != have.SpendLimit {
		if _, err := r.c.SetSpendLimit(ctx, name, limit); err != nil {
			diags.AddAttributeError(path.Root("spend_limit"), "Cannot set the spend limit", err.Error())
			return
		}
	}
	quota, _ := units.ParseBytes(or0(m.LogQuota.ValueString()))
	if quota != have.LogQuota {
		if _, err := r.c.SetLogQuota(ctx, name, quota); err != nil {
			diags.AddAttributeError(path.Root("log_quota"), "Cannot set the log quota", err.Error())
			return
		}
	}
	if host := m.AllowHostNetwork.ValueBool(); host != have.AllowHostNetwork {
		if _, err := r.c.SetBillingProjectSettings(ctx, name, &api.BillingProjectSettings{AllowHostNetwork: &host}); err != nil {
			diags.AddAttributeError(path.Root("allow_host_network"), "Cannot set allow_host_network", err.Error())
			return
		}
	}
	if prio := m.MaxPriority.ValueInt64(); prio != have.MaxPriority {
		if _, err := r.c.SetMaxPriority(ctx, name, prio); err != nil {
			diags.AddAttributeError(path.Root("max_priority"), "Cannot set max_priority", err.Error())
		}
	}
}

func or0(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// fromAPI sets the model from the project, keeping the configuration's
// spelling of amounts and sizes the project holds the same.
func (m *projectModel) fromAPI(ctx context.Context, p *api.BillingProject, diags *diag.Diagnostics) {
	m.Name = types.StringValue(p.Name)
	rs := roles(p)
	if len(rs) == 0 && m.Members.IsNull() {
		m.Members = types.MapNull(types.StringType)
	} else {
		v, d := types.MapValueFrom(ctx, types.StringType, rs)
		diags.Append(d...)
		m.Members = v
	}
	switch old, err := money.ParseAmount(or0(m.SpendLimit.ValueString())); {
	case p.SpendLimit == 0 && (m.SpendLimit.IsNull() || (err == nil && old == 0)):
	case err == nil && old == p.SpendLimit && !m.SpendLimit.IsNull():
	default:
		m.SpendLimit = types.StringValue(p.SpendLimit.String())
	}
	switch old, err := units.ParseBytes(or0(m.LogQuota.ValueString())); {
	case p.LogQuota == 0 && (m.LogQuota.IsNull() || (err == nil && old == 0)):
	case err == nil && old == p.LogQuota && !m.LogQuota.IsNull():
	default:
		m.LogQuota = types.StringValue(units.FormatBytes(p.LogQuota))
	}
	m.AllowHostNetwork = optBool(m.AllowHostNetwork, p.AllowHostNetwork)
	m.MaxPriority = optInt(m.MaxPriority, p.MaxPriority)
}

func (r *projectResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	if have, err := r.find(ctx, name); err == nil && have != nil {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Billing project exists",
			fmt.Sprintf("billing project %s exists already: import it (terraform import ADDRESS %s) to manage it here", name, name))
		return
	}
	have, err := r.c.CreateBillingProject(ctx, &api.CreateBillingProjectRequest{Name: name})
	if err != nil {
		resp.Diagnostics.AddError("Cannot create billing project "+name, err.Error())
		return
	}
	r.apply(ctx, &m, have, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	r.read(ctx, &m, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *projectResource) read(ctx context.Context, m *projectModel, diags *diag.Diagnostics) bool {
	p, err := r.find(ctx, m.Name.ValueString())
	if err != nil {
		diags.AddError("Cannot read billing project "+m.Name.ValueString(), err.Error())
		return false
	}
	if p == nil {
		return false
	}
	m.fromAPI(ctx, p, diags)
	return true
}

func (r *projectResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !r.read(ctx, &m, &resp.Diagnostics) {
		if !resp.Diagnostics.HasError() {
			resp.State.RemoveResource(ctx)
		}
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *projectResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	have, err := r.find(ctx, m.Name.ValueString())
	if err != nil || have == nil {
		resp.Diagnostics.AddError("Cannot read billing project "+m.Name.ValueString(), fmt.Sprint(err))
		return
	}
	r.apply(ctx, &m, have, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	r.read(ctx, &m, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *projectResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteBillingProject(ctx, m.Name.ValueString()); err != nil && !api.IsStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("Cannot delete billing project "+m.Name.ValueString(), err.Error())
	}
}

func (r *projectResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	p, err := r.find(ctx, req.ID)
	if err != nil || p == nil {
		resp.Diagnostics.AddError("Cannot import billing project "+req.ID, fmt.Sprintf("no such billing project (%v)", err))
		return
	}
	m := projectModel{Members: types.MapNull(types.StringType), SpendLimit: types.StringNull(), LogQuota: types.StringNull(), AllowHostNetwork: types.BoolNull(), MaxPriority: types.Int64Null()}
	m.fromAPI(ctx, p, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// roleRule: each member's role is member, manager or viewer, and each
// user name is one drover takes.
type roleRule struct{}

func (roleRule) Description(context.Context) string { return "user name to member, manager or viewer" }

func (v roleRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (roleRule) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for user, v := range req.ConfigValue.Elements() {
		s, ok := v.(types.String)
		if !ok || s.IsUnknown() {
			continue
		}
		if !slices.Contains([]string{"member", "manager", "viewer"}, s.ValueString()) {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(user), "Invalid role",
				fmt.Sprintf("members.%s: role %q must be member, manager or viewer", user, s.ValueString()))
		}
	}
}

// moneyRule: an exact amount of dollars drover takes as a spend limit.
type moneyRule struct{}

func (moneyRule) Description(context.Context) string { return "dollars, such as \"250\" or \"99.95\"" }

func (v moneyRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (moneyRule) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	a, err := money.ParseAmount(req.ConfigValue.ValueString())
	if err == nil && (a < 0 || a > 1_000_000_000*money.Dollar) {
		err = fmt.Errorf("must be between 0 (none) and 1,000,000,000 dollars")
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid spend limit", fmt.Sprintf("spend_limit %q: %v", req.ConfigValue.ValueString(), err))
	}
}

// maxPriorityRule: a project's max_priority, by the servers' rule.
type maxPriorityRule struct{}

func (maxPriorityRule) Description(context.Context) string { return "0 (the default) to 1000000" }

func (v maxPriorityRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (maxPriorityRule) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := api.ValidateMaxPriority("billing project", req.ConfigValue.ValueInt64()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid max_priority", err.Error())
	}
}

// sizeRule: a size such as "10GiB".
type sizeRule struct{}

func (sizeRule) Description(context.Context) string { return "a size such as 512MiB or 10GiB" }

func (v sizeRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (sizeRule) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if n, err := units.ParseBytes(req.ConfigValue.ValueString()); err != nil || n < 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid size", fmt.Sprintf("%q is not a size such as 512MiB or 10GiB (%v)", req.ConfigValue.ValueString(), err))
	}
}
