// Package provider is terraform-provider-drover: what an operator
// declares in drover (clusters and their groups, queues, the autoscaler
// and its launch configs, rates, users, tokens, billing projects) as
// Terraform resources, written with hashicorp/terraform-plugin-framework.
// It talks to drover only through drover's Go client (api.Client), and
// checks what it can before a plan with the same rules the servers apply
// (the placement config's objects with apiview.PlacementFromAPI and
// QueueFromAPI, rates with billing.CheckRate, names with api's rules), so
// a bad value is a plan-time error naming its attribute.
package provider

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
)

// Address is the provider's address in Terraform configurations
// (required_providers { drover = { source = "drover-sched/drover" } }).
const Address = "registry.terraform.io/drover-sched/drover"

// New returns the provider (version: the binary's).
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &droverProvider{version: version} }
}

type droverProvider struct{ version string }

type providerModel struct {
	Address types.String `tfsdk:"address"`
	Token   types.String `tfsdk:"token"`
	CAFile  types.String `tfsdk:"ca_file"`
}

func (p *droverProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "drover"
	resp.Version = p.version
}

func (p *droverProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "drover, the multi-tenant batch scheduler: its clusters, queues, autoscaler, rates, users, tokens and billing projects.",
		Attributes: map[string]schema.Attribute{
			"address": schema.StringAttribute{Optional: true,
				Description: "The servers' API addresses, comma-separated (default: DROVER_ADDR, else " + api.DefaultAddr + ")."},
			"token": schema.StringAttribute{Optional: true, Sensitive: true,
				Description: "An admin's token (default: DROVER_TOKEN)."},
			"ca_file": schema.StringAttribute{Optional: true,
				Description: "The cluster CA's certificate, to reach servers over HTTPS (default: DROVER_CACERT)."},
		},
	}
}

func (p *droverProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	or := func(v types.String, env string) string {
		if !v.IsNull() && !v.IsUnknown() {
			return v.ValueString()
		}
		return os.Getenv(env)
	}
	addr, tok, ca := or(m.Address, "DROVER_ADDR"), or(m.Token, "DROVER_TOKEN"), or(m.CAFile, "DROVER_CACERT")
	if tok == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "No drover token",
			"Set the provider's token (an admin's) or DROVER_TOKEN.")
		return
	}
	var c *api.Client
	if ca != "" {
		conf, err := api.TLSConfig(ca, "", "")
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("ca_file"), "Cannot read the CA file", err.Error())
			return
		}
		c = api.NewTLSClient(addr, tok, conf)
	} else {
		c = api.NewClient(addr, tok)
	}
	resp.ResourceData = c
	resp.DataSourceData = c
}

func (p *droverProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newQueue, newUser, newToken, newProject, newCluster, newClusterGroup, newAutoscaler, newLaunchConfig, newRate, newStoragePrefix}
}

func (p *droverProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newClustersData, newRegionsData, newQueuesData}
}

// clientOf is the client a resource was configured with.
func clientOf(data any) *api.Client {
	c, _ := data.(*api.Client)
	return c
}

// applyPlan is every resource's Create and Update: it reads the plan into
// a model, has put make it so (put may refuse first, with an error in
// diags) and read back what the servers hold into it, and keeps that as
// the state.
func applyPlan[M any](ctx context.Context, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics, put func(*M)) {
	var m M
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return
	}
	put(&m)
	if !diags.HasError() {
		diags.Append(state.Set(ctx, &m)...)
	}
}
