package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
)

// Data sources: the clusters, regions and queues a deployment has, as
// the API lists them.

type clustersData struct{ c *api.Client }

type clusterItem struct {
	Name    types.String  `tfsdk:"name"`
	Region  types.String  `tfsdk:"region"`
	Group   types.String  `tfsdk:"group"`
	Enabled types.Bool    `tfsdk:"enabled"`
	Reason  types.String  `tfsdk:"reason"`
	Workers types.Int64   `tfsdk:"workers"`
	CPU     types.Float64 `tfsdk:"cpu"`
	FreeCPU types.Float64 `tfsdk:"free_cpu"`
}

type clustersModel struct {
	Clusters []clusterItem `tfsdk:"clusters"`
}

func newClustersData() datasource.DataSource { return &clustersData{} }

func (d *clustersData) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_clusters"
}

func (d *clustersData) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{Description: "Every cluster: region, group, enabled (or why not), workers and cores.",
		Attributes: map[string]schema.Attribute{
			"clusters": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"name": schema.StringAttribute{Computed: true}, "region": schema.StringAttribute{Computed: true},
				"group": schema.StringAttribute{Computed: true}, "enabled": schema.BoolAttribute{Computed: true},
				"reason": schema.StringAttribute{Computed: true}, "workers": schema.Int64Attribute{Computed: true},
				"cpu": schema.Float64Attribute{Computed: true}, "free_cpu": schema.Float64Attribute{Computed: true},
			}}},
		}}
}

func (d *clustersData) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	d.c = clientOf(req.ProviderData)
}

func (d *clustersData) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	cs, err := d.c.ListClusters(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot list clusters", err.Error())
		return
	}
	m := clustersModel{Clusters: []clusterItem{}}
	for _, c := range cs {
		m.Clusters = append(m.Clusters, clusterItem{Name: types.StringValue(c.Name), Region: types.StringValue(c.Region), Group: types.StringValue(c.Group),
			Enabled: types.BoolValue(c.Enabled), Reason: types.StringValue(c.Reason), Workers: types.Int64Value(int64(c.Workers)),
			CPU: types.Float64Value(c.CPU), FreeCPU: types.Float64Value(c.FreeCPU)})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type regionsData struct{ c *api.Client }

type regionItem struct {
	Name     types.String  `tfsdk:"name"`
	Clusters []string      `tfsdk:"clusters"`
	Enabled  types.Int64   `tfsdk:"enabled_clusters"`
	Workers  types.Int64   `tfsdk:"workers"`
	CPU      types.Float64 `tfsdk:"cpu"`
}

type regionsModel struct {
	Regions []regionItem `tfsdk:"regions"`
}

func newRegionsData() datasource.DataSource { return &regionsData{} }

func (d *regionsData) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_regions"
}

func (d *regionsData) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{Description: "Every region with its clusters.",
		Attributes: map[string]schema.Attribute{
			"regions": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"name": schema.StringAttribute{Computed: true}, "clusters": schema.ListAttribute{Computed: true, ElementType: types.StringType},
				"enabled_clusters": schema.Int64Attribute{Computed: true}, "workers": schema.Int64Attribute{Computed: true},
				"cpu": schema.Float64Attribute{Computed: true},
			}}},
		}}
}

func (d *regionsData) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	d.c = clientOf(req.ProviderData)
}

func (d *regionsData) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	rs, err := d.c.ListRegions(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot list regions", err.Error())
		return
	}
	m := regionsModel{Regions: []regionItem{}}
	for _, r := range rs {
		m.Regions = append(m.Regions, regionItem{Name: types.StringValue(r.Name), Clusters: append([]string{}, r.Clusters...),
			Enabled: types.Int64Value(int64(r.Enabled)), Workers: types.Int64Value(int64(r.Workers)), CPU: types.Float64Value(r.CPU)})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

type queuesData struct{ c *api.Client }

type queueItem struct {
	Path         types.String  `tfsdk:"path"`
	Leaf         types.Bool    `tfsdk:"leaf"`
	Weight       types.Int64   `tfsdk:"weight"`
	GuaranteeCPU types.Float64 `tfsdk:"guarantee_cpu"`
	UsedCPU      types.Float64 `tfsdk:"used_cpu"`
	UsedJobs     types.Int64   `tfsdk:"used_jobs"`
}

type queuesModel struct {
	Queues []queueItem `tfsdk:"queues"`
}

func newQueuesData() datasource.DataSource { return &queuesData{} }

func (d *queuesData) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_queues"
}

func (d *queuesData) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{Description: "Every queue of the tree, parents first, with what it holds now.",
		Attributes: map[string]schema.Attribute{
			"queues": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"path": schema.StringAttribute{Computed: true}, "leaf": schema.BoolAttribute{Computed: true},
				"weight": schema.Int64Attribute{Computed: true}, "guarantee_cpu": schema.Float64Attribute{Computed: true},
				"used_cpu": schema.Float64Attribute{Computed: true}, "used_jobs": schema.Int64Attribute{Computed: true},
			}}},
		}}
}

func (d *queuesData) Configure(_ context.Context, req datasource.ConfigureRequest, _ *datasource.ConfigureResponse) {
	d.c = clientOf(req.ProviderData)
}

func (d *queuesData) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	qs, err := d.c.ListQueues(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Cannot list queues", err.Error())
		return
	}
	m := queuesModel{Queues: []queueItem{}}
	for _, q := range qs {
		m.Queues = append(m.Queues, queueItem{Path: types.StringValue(q.Path), Leaf: types.BoolValue(q.Leaf), Weight: types.Int64Value(q.Weight),
			GuaranteeCPU: types.Float64Value(q.Guarantee.CPU), UsedCPU: types.Float64Value(q.Used.CPU), UsedJobs: types.Int64Value(q.UsedJobs)})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
