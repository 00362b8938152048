package provider

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/apiview"
)

// drover_autoscaler: the autoscaler's settings, one per deployment (the
// placement config's autoscaler block). Destroying it puts back the
// defaults, disabled: no machine is launched, and the live ones go as
// their idle timer ends.

type autoscalerResource struct{ c *api.Client }

type autoscalerModel struct {
	ID                  types.String `tfsdk:"id"`
	Enabled             types.Bool   `tfsdk:"enabled"`
	Strategy            types.String `tfsdk:"strategy"`
	MaxNodes            types.Int64  `tfsdk:"max_nodes"`
	MaxPerHour          types.String `tfsdk:"max_per_hour"`
	MaxAddsPerMinute    types.Int64  `tfsdk:"max_adds_per_minute"`
	MaxRemovesPerMinute types.Int64  `tfsdk:"max_removes_per_minute"`
	BootTimeout         types.String `tfsdk:"boot_timeout"`
	IdleTimeout         types.String `tfsdk:"idle_timeout"`
	LameTimeout         types.String `tfsdk:"lame_timeout"`
	Backoff             types.String `tfsdk:"backoff"`
	MaxBackoff          types.String `tfsdk:"max_backoff"`
	Window              types.String `tfsdk:"window"`
	SpotPreemptions     types.Int64  `tfsdk:"spot_preemptions"`
	NamePrefix          types.String `tfsdk:"name_prefix"`
	Consolidate         types.Bool   `tfsdk:"consolidate"`
}

// autoscalerID is the one autoscaler's import ID.
const autoscalerID = "autoscaler"

func newAutoscaler() resource.Resource { return &autoscalerResource{} }

func (r *autoscalerResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_autoscaler"
}

func (r *autoscalerResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	dur := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Validators: []validator.String{durationRule{}}, Description: desc + " (a duration; absent: the default)."}
	}
	resp.Schema = schema.Schema{
		Description: "The autoscaler's settings: caps over every launch config together, timeouts and strategy. One per deployment (import ID \"autoscaler\").",
		Attributes: map[string]schema.Attribute{
			"id":      schema.StringAttribute{Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"enabled": schema.BoolAttribute{Required: true, Description: "Whether the leader launches and deletes machines."},
			"strategy": schema.StringAttribute{Optional: true,
				Description: "cheapest (default), prefer-large or prefer-reserved: which launch config serves waiting jobs first."},
			"max_nodes":              schema.Int64Attribute{Optional: true, Description: "Machines at most, over every config (absent: no cap)."},
			"max_per_hour":           schema.StringAttribute{Optional: true, Validators: []validator.String{priceRule{}}, Description: "Dollars an hour the fleet may cost, exact (absent: no cap)."},
			"max_adds_per_minute":    schema.Int64Attribute{Optional: true},
			"max_removes_per_minute": schema.Int64Attribute{Optional: true},
			"boot_timeout":           dur("How long a machine may take to start its worker"),
			"idle_timeout":           dur("How long a machine with nothing to run is kept"),
			"lame_timeout":           dur("How long a machine whose worker went silent is kept"),
			"backoff":                dur("The first wait after a launch failed"),
			"max_backoff":            dur("The longest wait after failed launches"),
			"window":                 dur("The demand window"),
			"spot_preemptions":       schema.Int64Attribute{Optional: true, Description: "Spot reclaims in a row after which a spot config is skipped for a while."},
			"name_prefix":            schema.StringAttribute{Optional: true, Description: "Starts every machine's name (default \"drover\")."},
			"consolidate": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "Drain the least busy machine when the fleet has a machine's worth of room to spare (default true)."},
		},
	}
}

func (r *autoscalerResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

func (m *autoscalerModel) toAPI() *api.AutoscalerSettings {
	consolidate := m.Consolidate.IsNull() || m.Consolidate.IsUnknown() || m.Consolidate.ValueBool()
	return &api.AutoscalerSettings{Enabled: m.Enabled.ValueBool(), Strategy: m.Strategy.ValueString(), MaxNodes: m.MaxNodes.ValueInt64(),
		MaxPerHour: parseRate(m.MaxPerHour), MaxAddsPerMinute: m.MaxAddsPerMinute.ValueInt64(), MaxRemovesPerMinute: m.MaxRemovesPerMinute.ValueInt64(),
		BootTimeout: m.BootTimeout.ValueString(), IdleTimeout: m.IdleTimeout.ValueString(), LameTimeout: m.LameTimeout.ValueString(),
		Backoff: m.Backoff.ValueString(), MaxBackoff: m.MaxBackoff.ValueString(), Window: m.Window.ValueString(),
		SpotPreemptions: m.SpotPreemptions.ValueInt64(), NamePrefix: m.NamePrefix.ValueString(), Consolidate: &consolidate}
}

var autoscalerAttrs = []string{"strategy", "max_nodes", "max_per_hour", "max_adds_per_minute", "max_removes_per_minute", "boot_timeout", "idle_timeout",
	"lame_timeout", "backoff", "max_backoff", "window", "spot_preemptions", "name_prefix"}

func (r *autoscalerResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m autoscalerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || anyUnknown(m.Enabled, m.Strategy, m.MaxNodes, m.MaxPerHour, m.MaxAddsPerMinute, m.MaxRemovesPerMinute,
		m.BootTimeout, m.IdleTimeout, m.LameTimeout, m.Backoff, m.MaxBackoff, m.Window, m.SpotPreemptions, m.NamePrefix, m.Consolidate) {
		return
	}
	if _, err := apiview.AutoscalerFromAPI(m.toAPI()); err != nil {
		resp.Diagnostics.AddAttributeError(attributeIn(err.Error(), "enabled", autoscalerAttrs...), "Invalid autoscaler settings", err.Error())
	}
}

func (m *autoscalerModel) fromAPI(a *api.AutoscalerSettings) {
	m.ID = types.StringValue(autoscalerID)
	m.Enabled = types.BoolValue(a.Enabled)
	m.Strategy, m.NamePrefix = optString(m.Strategy, a.Strategy), optString(m.NamePrefix, a.NamePrefix)
	m.MaxNodes, m.MaxAddsPerMinute, m.MaxRemovesPerMinute = optInt(m.MaxNodes, a.MaxNodes), optInt(m.MaxAddsPerMinute, a.MaxAddsPerMinute), optInt(m.MaxRemovesPerMinute, a.MaxRemovesPerMinute)
	m.SpotPreemptions = optInt(m.SpotPreemptions, a.SpotPreemptions)
	m.MaxPerHour = samePrice(m.MaxPerHour, a.MaxPerHour)
	m.BootTimeout, m.IdleTimeout, m.LameTimeout = sameDuration(m.BootTimeout, a.BootTimeout), sameDuration(m.IdleTimeout, a.IdleTimeout), sameDuration(m.LameTimeout, a.LameTimeout)
	m.Backoff, m.MaxBackoff, m.Window = sameDuration(m.Backoff, a.Backoff), sameDuration(m.MaxBackoff, a.MaxBackoff), sameDuration(m.Window, a.Window)
	m.Consolidate = types.BoolValue(a.Consolidate == nil || *a.Consolidate)
}

func (r *autoscalerResource) put(ctx context.Context, m *autoscalerModel, diags *diag.Diagnostics) {
	if err := r.c.ApplyPlacement(ctx, &api.PlacementConfig{Autoscaler: m.toAPI()}); err != nil {
		diags.AddAttributeError(attributeIn(err.Error(), "enabled", autoscalerAttrs...), "Cannot set the autoscaler", err.Error())
		return
	}
	st, err := r.c.AutoscalerStatus(ctx)
	if err != nil {
		diags.AddError("Cannot read the autoscaler", err.Error())
		return
	}
	m.fromAPI(&st.Settings)
}

func (r *autoscalerResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *autoscalerModel) {
		r.put(ctx, m, &resp.Diagnostics)
	})
}

func (r *autoscalerResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m autoscalerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	st, err := r.c.AutoscalerStatus(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the autoscaler", err.Error())
		return
	}
	m.fromAPI(&st.Settings)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *autoscalerResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *autoscalerModel) { r.put(ctx, m, &resp.Diagnostics) })
}

func (r *autoscalerResource) Delete(ctx context.Context, _ resource.DeleteRequest, resp *resource.DeleteResponse) {
	if err := r.c.ApplyPlacement(ctx, &api.PlacementConfig{Autoscaler: &api.AutoscalerSettings{}}); err != nil {
		resp.Diagnostics.AddError("Cannot reset the autoscaler", err.Error())
	}
}

func (r *autoscalerResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID != autoscalerID {
		resp.Diagnostics.AddError("Cannot import the autoscaler", fmt.Sprintf("import the autoscaler with the ID %q (there is one)", autoscalerID))
		return
	}
	st, err := r.c.AutoscalerStatus(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot import the autoscaler", err.Error())
		return
	}
	m := autoscalerModel{Strategy: types.StringNull(), MaxNodes: types.Int64Null(), MaxPerHour: types.StringNull(), MaxAddsPerMinute: types.Int64Null(),
		MaxRemovesPerMinute: types.Int64Null(), BootTimeout: types.StringNull(), IdleTimeout: types.StringNull(), LameTimeout: types.StringNull(),
		Backoff: types.StringNull(), MaxBackoff: types.StringNull(), Window: types.StringNull(), SpotPreemptions: types.Int64Null(), NamePrefix: types.StringNull()}
	m.fromAPI(&st.Settings)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// drover_launch_config: a machine type in a zone, spot or on-demand,
// that serves one pool of one cluster, with its price and caps (the
// placement config's launch_config block). Destroying one deletes its
// live machines.

type launchConfigResource struct{ c *api.Client }

type launchConfigModel struct {
	Name                types.String  `tfsdk:"name"`
	Cluster             types.String  `tfsdk:"cluster"`
	Pool                types.String  `tfsdk:"pool"`
	MachineType         types.String  `tfsdk:"machine_type"`
	Zone                types.String  `tfsdk:"zone"`
	Spot                types.Bool    `tfsdk:"spot"`
	Reserved            types.Bool    `tfsdk:"reserved"`
	CPU                 types.Float64 `tfsdk:"cpu"`
	Memory              types.String  `tfsdk:"memory"`
	GPUType             types.String  `tfsdk:"gpu_type"`
	GPUs                types.Int64   `tfsdk:"gpus"`
	PricePerHour        types.String  `tfsdk:"price_per_hour"`
	MaxNodes            types.Int64   `tfsdk:"max_nodes"`
	MaxPerHour          types.String  `tfsdk:"max_per_hour"`
	MaxAddsPerMinute    types.Int64   `tfsdk:"max_adds_per_minute"`
	MaxRemovesPerMinute types.Int64   `tfsdk:"max_removes_per_minute"`
	PriceFromCloud      types.Bool    `tfsdk:"price_from_cloud"`
}

func newLaunchConfig() resource.Resource { return &launchConfigResource{} }

func (r *launchConfigResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_launch_config"
}

func (r *launchConfigResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A launch config: a machine type in a zone the autoscaler starts for one pool of one cluster, with its price and caps.",
		Attributes: map[string]schema.Attribute{
			"name":    schema.StringAttribute{Required: true, PlanModifiers: replace},
			"cluster": schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "The cluster its machines join."},
			"pool": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("default"),
				Description: "The pool they serve (default: default)."},
			"machine_type": schema.StringAttribute{Optional: true, Description: "The provider's machine type (n2-standard-8)."},
			"zone":         schema.StringAttribute{Optional: true},
			"spot":         schema.BoolAttribute{Optional: true},
			"reserved":     schema.BoolAttribute{Optional: true},
			"cpu":          schema.Float64Attribute{Required: true, Description: "Cores of one machine."},
			"memory":       schema.StringAttribute{Required: true, Validators: []validator.String{sizeRule{}}, Description: "Memory of one machine: \"32GiB\"."},
			"gpu_type":     schema.StringAttribute{Optional: true},
			"gpus":         schema.Int64Attribute{Optional: true},
			"price_per_hour": schema.StringAttribute{Optional: true, Validators: []validator.String{priceRule{}},
				Description: "Of one machine, dollars, exact. Required unless price_from_cloud; with it, used until the cloud's price is first read."},
			"price_from_cloud": schema.BoolAttribute{Optional: true,
				Description: "Take the price the cluster's provider reads from the cloud (GCE: the Cloud Billing Catalog), refreshed hourly; the price read is not drift."},
			"max_nodes":              schema.Int64Attribute{Optional: true, Description: "Its machines at most (absent: no cap of its own)."},
			"max_per_hour":           schema.StringAttribute{Optional: true, Validators: []validator.String{priceRule{}}, Description: "Dollars an hour its machines may cost."},
			"max_adds_per_minute":    schema.Int64Attribute{Optional: true},
			"max_removes_per_minute": schema.Int64Attribute{Optional: true},
		},
	}
}

func (r *launchConfigResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

func (m *launchConfigModel) toAPI() api.LaunchConfig {
	return api.LaunchConfig{Name: m.Name.ValueString(), Cluster: m.Cluster.ValueString(), Pool: m.Pool.ValueString(), MachineType: m.MachineType.ValueString(),
		Zone: m.Zone.ValueString(), Spot: m.Spot.ValueBool(), Reserved: m.Reserved.ValueBool(), CPU: m.CPU.ValueFloat64(), Memory: parseSize(m.Memory),
		GPUType: m.GPUType.ValueString(), GPUs: int(m.GPUs.ValueInt64()), PricePerHour: parseRate(m.PricePerHour), MaxNodes: m.MaxNodes.ValueInt64(),
		MaxPerHour: parseRate(m.MaxPerHour), MaxAddsPerMinute: m.MaxAddsPerMinute.ValueInt64(), MaxRemovesPerMinute: m.MaxRemovesPerMinute.ValueInt64(),
		PriceFromCloud: m.PriceFromCloud.ValueBool()}
}

var launchConfigAttrs = []string{"cluster", "pool", "machine_type", "zone", "cpu", "memory", "gpu_type", "gpus", "price_per_hour", "max_nodes",
	"max_per_hour", "max_adds_per_minute", "max_removes_per_minute"}

func (r *launchConfigResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m launchConfigModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || anyUnknown(m.Name, m.Cluster, m.Pool, m.MachineType, m.Zone, m.Spot, m.Reserved, m.CPU, m.Memory, m.GPUType, m.GPUs,
		m.PricePerHour, m.MaxNodes, m.MaxPerHour, m.MaxAddsPerMinute, m.MaxRemovesPerMinute, m.PriceFromCloud) {
		return
	}
	if m.PricePerHour.IsNull() && !m.PriceFromCloud.ValueBool() {
		resp.Diagnostics.AddAttributeError(path.Root("price_per_hour"), "Missing price",
			"price_per_hour is required unless price_from_cloud = true (the price the cluster's provider reads from the cloud).")
		return
	}
	if _, err := apiview.PlacementFromAPI(&api.PlacementConfig{LaunchConfigs: []api.LaunchConfig{m.toAPI()}}); err != nil {
		resp.Diagnostics.AddAttributeError(attributeIn(err.Error(), "name", launchConfigAttrs...), "Invalid launch config", err.Error())
	}
}

func (m *launchConfigModel) fromAPI(lc *api.LaunchConfig) {
	m.Name, m.Cluster = types.StringValue(lc.Name), types.StringValue(lc.Cluster)
	m.Pool, m.MachineType, m.Zone, m.GPUType = optString(m.Pool, lc.Pool), optString(m.MachineType, lc.MachineType), optString(m.Zone, lc.Zone), optString(m.GPUType, lc.GPUType)
	m.Spot, m.Reserved = optBool(m.Spot, lc.Spot), optBool(m.Reserved, lc.Reserved)
	m.CPU, m.Memory = types.Float64Value(lc.CPU), sameSize(m.Memory, lc.Memory)
	m.GPUs, m.MaxNodes = optInt(m.GPUs, int64(lc.GPUs)), optInt(m.MaxNodes, lc.MaxNodes)
	m.MaxAddsPerMinute, m.MaxRemovesPerMinute = optInt(m.MaxAddsPerMinute, lc.MaxAddsPerMinute), optInt(m.MaxRemovesPerMinute, lc.MaxRemovesPerMinute)
	m.PriceFromCloud = optBool(m.PriceFromCloud, lc.PriceFromCloud)
	// The cloud's price, read by the leader, is not drift: the
	// configuration's price_per_hour (or none) stays what it says.
	if !lc.PriceFromCloud {
		m.PricePerHour = samePrice(m.PricePerHour, lc.PricePerHour)
		if lc.PricePerHour == 0 && m.PricePerHour.IsNull() {
			m.PricePerHour = types.StringValue("0")
		}
	}
	m.MaxPerHour = samePrice(m.MaxPerHour, lc.MaxPerHour)
}

func (r *launchConfigResource) get(ctx context.Context, name string) (*api.LaunchConfig, error) {
	st, err := r.c.AutoscalerStatus(ctx)
	if err != nil {
		return nil, err
	}
	for i := range st.LaunchConfigs {
		if st.LaunchConfigs[i].Name == name {
			return &st.LaunchConfigs[i].LaunchConfig, nil
		}
	}
	return nil, nil
}

func (r *launchConfigResource) put(ctx context.Context, m *launchConfigModel, diags *diag.Diagnostics) {
	lc := m.toAPI()
	if err := r.c.ApplyPlacement(ctx, &api.PlacementConfig{LaunchConfigs: []api.LaunchConfig{lc}}); err != nil {
		diags.AddAttributeError(attributeIn(err.Error(), "name", launchConfigAttrs...), "Cannot declare launch config "+lc.Name, err.Error())
		return
	}
	got, err := r.get(ctx, lc.Name)
	if err != nil || got == nil {
		diags.AddError("Cannot read launch config "+lc.Name, fmt.Sprint(err))
		return
	}
	m.fromAPI(got)
}

func (r *launchConfigResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *launchConfigModel) {
		name := m.Name.ValueString()
		if lc, err := r.get(ctx, name); err == nil && lc != nil {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Launch config exists",
				fmt.Sprintf("launch config %s exists already: import it (terraform import ADDRESS %s) to manage it here", name, name))
			return
		}
		r.put(ctx, m, &resp.Diagnostics)
	})
}

func (r *launchConfigResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m launchConfigModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	lc, err := r.get(ctx, m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read launch config "+m.Name.ValueString(), err.Error())
		return
	}
	if lc == nil {
		resp.State.RemoveResource(ctx)
		return
	}
	m.fromAPI(lc)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *launchConfigResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *launchConfigModel) { r.put(ctx, m, &resp.Diagnostics) })
}

func (r *launchConfigResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m launchConfigModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteLaunchConfig(ctx, m.Name.ValueString()); err != nil && !api.IsStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("Cannot remove launch config "+m.Name.ValueString(), err.Error())
	}
}

func (r *launchConfigResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	lc, err := r.get(ctx, req.ID)
	if err == nil && lc == nil {
		err = fmt.Errorf("launch config %q does not exist; drover autoscaler status lists them", req.ID)
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot import launch config "+req.ID, err.Error())
		return
	}
	m := launchConfigModel{Pool: types.StringNull(), MachineType: types.StringNull(), Zone: types.StringNull(), Spot: types.BoolNull(), Reserved: types.BoolNull(),
		Memory: types.StringNull(), GPUType: types.StringNull(), GPUs: types.Int64Null(), PricePerHour: types.StringNull(), MaxNodes: types.Int64Null(),
		MaxPerHour: types.StringNull(), MaxAddsPerMinute: types.Int64Null(), MaxRemovesPerMinute: types.Int64Null(), PriceFromCloud: types.BoolNull()}
	m.fromAPI(lc)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
