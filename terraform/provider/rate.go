package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
	"github.com/drover-sched/drover/billing"
	"github.com/drover-sched/drover/money"
)

// drover_rate: the price of one unit-hour of a resource (compute,
// memory/preemptible, service-fee, ...). drover keeps rates as versions
// that never change once billed, so a change here adds a version in
// force from now, and destroying the resource leaves the last price in
// force (a warning says so): nothing billed is ever re-priced.

type rateResource struct{ c *api.Client }

type rateModel struct {
	Resource     types.String `tfsdk:"resource"`
	PricePerHour types.String `tfsdk:"price_per_hour"`
	Version      types.Int64  `tfsdk:"version"`
}

func newRate() resource.Resource { return &rateResource{} }

func (r *rateResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_rate"
}

func (r *rateResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The price of one unit-hour of a resource. A change adds a rate version in force from the apply on; destroying leaves the last price in force.",
		Attributes: map[string]schema.Attribute{
			"resource": schema.StringAttribute{Required: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description: "A kind (compute, memory, gpu, service-fee, ...) and up to three /-separated qualifiers: compute/preemptible."},
			"price_per_hour": schema.StringAttribute{Required: true, Description: "Dollars per unit-hour (a core, a GiB, a GPU), exact: \"0.035\"."},
			"version":        schema.Int64Attribute{Computed: true, Description: "The rate version the price is (drover numbers them)."},
		},
	}
}

func (r *rateResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

// ValidateConfig checks the rate with billing.CheckRate, the servers'
// rule.
func (r *rateResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m rateModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || anyUnknown(m.Resource, m.PricePerHour) {
		return
	}
	price, err := money.ParseRate(m.PricePerHour.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("price_per_hour"), "Invalid price", fmt.Sprintf("price_per_hour %q: %v", m.PricePerHour.ValueString(), err))
		return
	}
	if !billing.ValidResource(m.Resource.ValueString()) {
		resp.Diagnostics.AddAttributeError(path.Root("resource"), "Invalid resource", billing.CheckRate(m.Resource.ValueString(), 0).Error())
		return
	}
	if err := billing.CheckRate(m.Resource.ValueString(), price); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("price_per_hour"), "Invalid price", err.Error())
	}
}

// latest is the newest version of the resource's rate (the one in force,
// or one set to start later), nil when it has none.
func (r *rateResource) latest(ctx context.Context, res string) (*api.Rate, error) {
	rates, err := r.c.Rates(ctx, false)
	if err != nil {
		return nil, err
	}
	var out *api.Rate
	for i := range rates {
		if rates[i].Resource == res && (out == nil || rates[i].Version > out.Version) {
			out = &rates[i]
		}
	}
	return out, nil
}

func (r *rateResource) put(ctx context.Context, m *rateModel, diags *diag.Diagnostics) {
	res := m.Resource.ValueString()
	if cur, err := r.latest(ctx, res); err == nil && cur != nil && cur.PricePerHour == parseRate(m.PricePerHour) {
		m.fromAPI(cur) // the price already: no new version
		return
	}
	if _, err := r.c.SetRates(ctx, []api.NewRate{{Resource: res, PricePerHour: parseRate(m.PricePerHour)}}); err != nil {
		diags.AddAttributeError(path.Root("price_per_hour"), "Cannot set the rate of "+res, err.Error())
		return
	}
	got, err := r.latest(ctx, res)
	if err != nil || got == nil {
		diags.AddError("Cannot read the rate of "+res, fmt.Sprint(err))
		return
	}
	m.fromAPI(got)
}

func (m *rateModel) fromAPI(rt *api.Rate) {
	m.Resource = types.StringValue(rt.Resource)
	m.PricePerHour = samePrice(m.PricePerHour, rt.PricePerHour)
	if m.PricePerHour.IsNull() {
		m.PricePerHour = types.StringValue(rt.PricePerHour.String())
	}
	m.Version = types.Int64Value(int64(rt.Version))
}

func (r *rateResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *rateModel) {
		// A rate that exists is taken over: its next version is this price
		// (a rate is never removed, so there is nothing to import first).
		r.put(ctx, m, &resp.Diagnostics)
	})
}

func (r *rateResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m rateModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	rt, err := r.latest(ctx, m.Resource.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the rate of "+m.Resource.ValueString(), err.Error())
		return
	}
	if rt == nil {
		resp.State.RemoveResource(ctx)
		return
	}
	m.fromAPI(rt)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *rateResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *rateModel) { r.put(ctx, m, &resp.Diagnostics) })
}

func (r *rateResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m rateModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.AddWarning("The rate of "+m.Resource.ValueString()+" stays in force",
		"drover never removes a rate: attempts were billed with it. Its last price applies until a new version (drover rates set, or a drover_rate) replaces it.")
}

func (r *rateResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	rt, err := r.latest(ctx, req.ID)
	if err == nil && rt == nil {
		err = fmt.Errorf("%q has no rate; drover rates lists them", req.ID)
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot import the rate of "+req.ID, err.Error())
		return
	}
	m := rateModel{PricePerHour: types.StringNull()}
	m.fromAPI(rt)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
