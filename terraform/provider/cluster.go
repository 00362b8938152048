package provider

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/server/apiview"
)

// drover_cluster: a cluster of a region with its pools, its group, the
// provider that makes the autoscaler's machines there, and whether it is
// in service. Its attributes are the placement config's cluster block,
// checked at plan time with apiview.PlacementFromAPI (the servers'
// check); `provider`, a Terraform meta-argument, is `machine_provider`
// here. Declaring a cluster that workers already named adopts it;
// destroying one is refused by drover while it has active workers,
// machines, launch configs or queues routed to it.

type clusterResource struct{ c *api.Client }

type poolModel struct {
	Name         types.String  `tfsdk:"name"`
	CPU          types.Float64 `tfsdk:"cpu"`
	Memory       types.String  `tfsdk:"memory"`
	Preemptible  types.Bool    `tfsdk:"preemptible"`
	PricePerHour types.String  `tfsdk:"price_per_hour"`
	GPUType      types.String  `tfsdk:"gpu_type"`
	GPUs         types.Int64   `tfsdk:"gpus"`
}

type clusterModel struct {
	Name             types.String `tfsdk:"name"`
	Region           types.String `tfsdk:"region"`
	Group            types.String `tfsdk:"group"`
	MachineProvider  types.String `tfsdk:"machine_provider"`
	ProviderSettings types.Map    `tfsdk:"provider_settings"`
	Enabled          types.Bool   `tfsdk:"enabled"`
	DisabledReason   types.String `tfsdk:"disabled_reason"`
	Pools            []poolModel  `tfsdk:"pool"`
}

func newCluster() resource.Resource { return &clusterResource{} }

func (r *clusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster"
}

func (r *clusterResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A drover cluster: a set of workers in one region, with its pools, taken in and out of service as a whole.",
		Attributes: map[string]schema.Attribute{
			"name":   schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "The cluster's name, as its workers report it."},
			"region": schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "Its region (a cluster never moves)."},
			"group":  schema.StringAttribute{Optional: true, Description: "The cluster group it is in (none: the queues' strategy chooses it directly)."},
			"machine_provider": schema.StringAttribute{Optional: true,
				Description: "What makes the autoscaler's machines here: local, gce or nomad (absent: the servers' default). The placement config's provider."},
			"provider_settings": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "The provider's settings (nomad: address, region, namespace, datacenters, driver, binary; gce: project, image, network, instance_template, binary). No credentials: those are the servers'."},
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "In service (default). false takes it out: no new attempt goes there."},
			"disabled_reason": schema.StringAttribute{Optional: true,
				Description: "Why it is out of service, shown to users whose jobs wait (required with enabled = false)."},
		},
		Blocks: map[string]schema.Block{
			"pool": schema.SetNestedBlock{Description: "A machine class of the cluster.",
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"name":           schema.StringAttribute{Required: true},
					"cpu":            schema.Float64Attribute{Optional: true, Description: "Cores of one machine."},
					"memory":         schema.StringAttribute{Optional: true, Validators: []validator.String{sizeRule{}}, Description: "Memory of one machine: \"32GiB\"."},
					"preemptible":    schema.BoolAttribute{Optional: true},
					"price_per_hour": schema.StringAttribute{Optional: true, Validators: []validator.String{priceRule{}}, Description: "Of one machine, dollars, exact."},
					"gpu_type":       schema.StringAttribute{Optional: true},
					"gpus":           schema.Int64Attribute{Optional: true},
				}}},
		},
	}
}

func (r *clusterResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

func (m *clusterModel) known() bool {
	if anyUnknown(m.Name, m.Region, m.Group, m.MachineProvider, m.ProviderSettings, m.Enabled, m.DisabledReason) {
		return false
	}
	for _, p := range m.Pools {
		if anyUnknown(p.Name, p.CPU, p.Memory, p.Preemptible, p.PricePerHour, p.GPUType, p.GPUs) {
			return false
		}
	}
	return true
}

// toAPI is the cluster as a placement config declares it.
func (m *clusterModel) toAPI(ctx context.Context, diags *diag.Diagnostics) api.ClusterDecl {
	d := api.ClusterDecl{Name: m.Name.ValueString(), Region: m.Region.ValueString(), Group: m.Group.ValueString(), Provider: m.MachineProvider.ValueString()}
	if !m.ProviderSettings.IsNull() && !m.ProviderSettings.IsUnknown() {
		diags.Append(m.ProviderSettings.ElementsAs(ctx, &d.ProviderSettings, false)...)
	}
	for _, p := range m.Pools {
		d.Pools = append(d.Pools, api.Pool{Name: p.Name.ValueString(), CPU: p.CPU.ValueFloat64(), Memory: parseSize(p.Memory), Preemptible: p.Preemptible.ValueBool(),
			PricePerHour: parseRate(p.PricePerHour), GPUType: p.GPUType.ValueString(), GPUs: int(p.GPUs.ValueInt64())})
	}
	return d
}

// ValidateConfig checks the cluster as the servers will, naming the
// attribute a message is about.
func (r *clusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !m.known() {
		return
	}
	disabled := !m.Enabled.IsNull() && !m.Enabled.ValueBool()
	switch reason := m.DisabledReason.ValueString(); {
	case disabled && reason == "":
		resp.Diagnostics.AddAttributeError(path.Root("disabled_reason"), "Say why the cluster is disabled",
			"enabled = false needs a disabled_reason: users whose jobs wait for the cluster read it.")
	case !disabled && !m.DisabledReason.IsNull():
		resp.Diagnostics.AddAttributeError(path.Root("disabled_reason"), "disabled_reason without enabled = false",
			"disabled_reason is for a cluster out of service; set enabled = false or leave the reason out.")
	case len(reason) > api.MaxEventMessage:
		resp.Diagnostics.AddAttributeError(path.Root("disabled_reason"), "Reason too long",
			fmt.Sprintf("disabled_reason is %d bytes; the limit is %d", len(reason), api.MaxEventMessage))
	}
	d := m.toAPI(ctx, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if _, err := apiview.PlacementFromAPI(&api.PlacementConfig{Clusters: []api.ClusterDecl{d}}); err != nil {
		resp.Diagnostics.AddAttributeError(clusterAttr(err.Error()),
			"Invalid cluster", err.Error())
	}
}

// clusterAttr is the attribute a server's message about a cluster names
// (its provider is machine_provider here).
func clusterAttr(msg string) path.Path {
	switch {
	case strings.Contains(msg, "unknown provider"):
		return path.Root("machine_provider")
	case strings.Contains(msg, "provider setting"):
		return path.Root("provider_settings")
	}
	return attributeIn(msg, "name", "region", "group", "pool")
}

// fromAPI sets the model from the cluster the servers hold, keeping the
// configuration's spelling of what is the same.
func (m *clusterModel) fromAPI(ctx context.Context, c *api.Cluster, diags *diag.Diagnostics) {
	m.Name, m.Region = types.StringValue(c.Name), types.StringValue(c.Region)
	m.Group, m.MachineProvider = optString(m.Group, c.Group), optString(m.MachineProvider, c.Provider)
	if len(c.ProviderSettings) == 0 && (m.ProviderSettings.IsNull() || len(m.ProviderSettings.Elements()) == 0) {
		if m.ProviderSettings.IsUnknown() {
			m.ProviderSettings = types.MapNull(types.StringType)
		}
	} else {
		v, d := types.MapValueFrom(ctx, types.StringType, c.ProviderSettings)
		diags.Append(d...)
		m.ProviderSettings = v
	}
	m.Enabled = types.BoolValue(c.Enabled)
	if c.Enabled {
		if !m.DisabledReason.IsNull() {
			m.DisabledReason = types.StringNull()
		}
	} else {
		m.DisabledReason = types.StringValue(c.Reason)
	}
	old := map[string]poolModel{}
	for _, p := range m.Pools {
		old[p.Name.ValueString()] = p
	}
	null := poolModel{CPU: types.Float64Null(), Memory: types.StringNull(), Preemptible: types.BoolNull(), PricePerHour: types.StringNull(),
		GPUType: types.StringNull(), GPUs: types.Int64Null()}
	m.Pools = nil
	for _, p := range c.Pools {
		o, ok := old[p.Name]
		if !ok {
			o = null
		}
		m.Pools = append(m.Pools, poolModel{Name: types.StringValue(p.Name), CPU: optFloat(o.CPU, p.CPU), Memory: optSize(o.Memory, p.Memory),
			Preemptible: optBool(o.Preemptible, p.Preemptible), PricePerHour: samePrice(o.PricePerHour, p.PricePerHour),
			GPUType: optString(o.GPUType, p.GPUType), GPUs: optInt(o.GPUs, int64(p.GPUs))})
	}
	sort.Slice(m.Pools, func(i, j int) bool { return m.Pools[i].Name.ValueString() < m.Pools[j].Name.ValueString() })
}

// put declares the cluster and brings its service state to the
// configuration's, then reads it back.
func (r *clusterResource) put(ctx context.Context, m *clusterModel, diags *diag.Diagnostics) {
	d := m.toAPI(ctx, diags)
	if diags.HasError() {
		return
	}
	if err := r.c.ApplyPlacement(ctx, &api.PlacementConfig{Clusters: []api.ClusterDecl{d}}); err != nil {
		diags.AddAttributeError(clusterAttr(err.Error()), "Cannot declare cluster "+d.Name, err.Error())
		return
	}
	c, err := r.c.GetCluster(ctx, d.Name)
	if err != nil {
		diags.AddError("Cannot read cluster "+d.Name, err.Error())
		return
	}
	want, reason := m.Enabled.ValueBool(), m.DisabledReason.ValueString()
	switch {
	case want && !c.Enabled:
		if _, err := r.c.EnableCluster(ctx, d.Name, &api.ClusterStateRequest{}); err != nil {
			diags.AddAttributeError(path.Root("enabled"), "Cannot enable cluster "+d.Name, err.Error())
			return
		}
	case !want && (c.Enabled || c.Reason != reason):
		if _, err := r.c.DisableCluster(ctx, d.Name, &api.ClusterStateRequest{Reason: reason}); err != nil {
			diags.AddAttributeError(path.Root("enabled"), "Cannot disable cluster "+d.Name, err.Error())
			return
		}
	}
	if c, err = r.c.GetCluster(ctx, d.Name); err != nil {
		diags.AddError("Cannot read cluster "+d.Name, err.Error())
		return
	}
	m.fromAPI(ctx, c, diags)
}

func (r *clusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *clusterModel) {
		name := m.Name.ValueString()
		if c, err := r.c.GetCluster(ctx, name); err == nil && c.Declared {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Cluster exists",
				fmt.Sprintf("cluster %s is declared already: import it (terraform import ADDRESS %s) to manage it here", name, name))
			return
		}
		r.put(ctx, m, &resp.Diagnostics)
	})
}

func (r *clusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c, err := r.c.GetCluster(ctx, m.Name.ValueString())
	if api.IsStatus(err, http.StatusNotFound) || (err == nil && !c.Declared) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read cluster "+m.Name.ValueString(), err.Error())
		return
	}
	m.fromAPI(ctx, c, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *clusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *clusterModel) { r.put(ctx, m, &resp.Diagnostics) })
}

func (r *clusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	// The autoscaler's machines of a launch config destroyed just before
	// go within its next rounds, their workers with them: wait for that,
	// not for workers an operator runs.
	deadline := time.Now().Add(clusterDrainWait)
	for {
		err := r.c.DeleteCluster(ctx, name)
		if err == nil || api.IsStatus(err, http.StatusNotFound) {
			return
		}
		if !api.IsStatus(err, http.StatusConflict) || time.Now().After(deadline) || !r.autoscaled(ctx, name) {
			resp.Diagnostics.AddError("Cannot remove cluster "+name, err.Error())
			return
		}
		select {
		case <-ctx.Done():
			resp.Diagnostics.AddError("Cannot remove cluster "+name, ctx.Err().Error())
			return
		case <-time.After(time.Second):
		}
	}
}

// clusterDrainWait bounds how long destroying a cluster waits for the
// autoscaler's machines there to go.
const clusterDrainWait = 5 * time.Minute

// autoscaled reports whether the autoscaler has machines in the cluster
// that are live or gone in the last minutes (whose workers are going).
func (r *clusterResource) autoscaled(ctx context.Context, name string) bool {
	st, err := r.c.AutoscalerStatus(ctx)
	if err != nil {
		return false
	}
	for _, mc := range st.Machines {
		if mc.Cluster == name && (mc.State != "deleted" && mc.State != "failed" || time.Since(mc.Since) < clusterDrainWait) {
			return true
		}
	}
	return false
}

func (r *clusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	c, err := r.c.GetCluster(ctx, req.ID)
	if err == nil && !c.Declared {
		err = fmt.Errorf("cluster %s was named by its workers, not declared: declare it in a drover_cluster resource and apply, which adopts it", req.ID)
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot import cluster "+req.ID, err.Error())
		return
	}
	m := clusterModel{Group: types.StringNull(), MachineProvider: types.StringNull(), ProviderSettings: types.MapNull(types.StringType),
		DisabledReason: types.StringNull()}
	m.fromAPI(ctx, c, &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// drover_cluster_group: a set of clusters with a placement strategy of
// its own (clusters name their group).

type groupResource struct{ c *api.Client }

type groupModel struct {
	Name     types.String `tfsdk:"name"`
	Strategy types.String `tfsdk:"strategy"`
}

func newClusterGroup() resource.Resource { return &groupResource{} }

func (r *groupResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster_group"
}

func (r *groupResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A cluster group: clusters chosen between as one by the queues' strategy, then between each other by the group's.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"strategy": schema.StringAttribute{Optional: true,
				Description: "spread, least-loaded, pack or cheapest, between its clusters (absent: the queue's)."},
		},
	}
}

func (r *groupResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

func (m *groupModel) toAPI() api.ClusterGroup {
	return api.ClusterGroup{Name: m.Name.ValueString(), Strategy: m.Strategy.ValueString()}
}

func (r *groupResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m groupModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || anyUnknown(m.Name, m.Strategy) {
		return
	}
	if _, err := apiview.PlacementFromAPI(&api.PlacementConfig{Groups: []api.ClusterGroup{m.toAPI()}}); err != nil {
		resp.Diagnostics.AddAttributeError(attributeIn(err.Error(), "name", "strategy"), "Invalid cluster group", err.Error())
	}
}

func (r *groupResource) get(ctx context.Context, name string) (*api.ClusterGroup, error) {
	gs, err := r.c.ListClusterGroups(ctx)
	if err != nil {
		return nil, err
	}
	for i := range gs {
		if gs[i].Name == name {
			return &gs[i], nil
		}
	}
	return nil, nil
}

func (r *groupResource) put(ctx context.Context, m *groupModel, diags *diag.Diagnostics) {
	g := m.toAPI()
	if err := r.c.ApplyPlacement(ctx, &api.PlacementConfig{Groups: []api.ClusterGroup{g}}); err != nil {
		diags.AddAttributeError(attributeIn(err.Error(), "name", "strategy"), "Cannot declare cluster group "+g.Name, err.Error())
	}
}

func (r *groupResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *groupModel) {
		name := m.Name.ValueString()
		if g, err := r.get(ctx, name); err == nil && g != nil {
			resp.Diagnostics.AddAttributeError(path.Root("name"), "Cluster group exists",
				fmt.Sprintf("cluster group %s exists already: import it (terraform import ADDRESS %s) to manage it here", name, name))
			return
		}
		r.put(ctx, m, &resp.Diagnostics)
	})
}

func (r *groupResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m groupModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	g, err := r.get(ctx, m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read cluster group "+m.Name.ValueString(), err.Error())
		return
	}
	if g == nil {
		resp.State.RemoveResource(ctx)
		return
	}
	m.Strategy = optString(m.Strategy, g.Strategy)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *groupResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *groupModel) { r.put(ctx, m, &resp.Diagnostics) })
}

func (r *groupResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m groupModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteClusterGroup(ctx, m.Name.ValueString()); err != nil && !api.IsStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("Cannot remove cluster group "+m.Name.ValueString(), err.Error())
	}
}

func (r *groupResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	g, err := r.get(ctx, req.ID)
	if err == nil && g == nil {
		err = fmt.Errorf("cluster group %q does not exist; drover cluster groups lists them", req.ID)
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot import cluster group "+req.ID, err.Error())
		return
	}
	m := groupModel{Name: types.StringValue(g.Name), Strategy: optString(types.StringNull(), g.Strategy)}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
