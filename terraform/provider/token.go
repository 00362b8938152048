package provider

import (
	"context"
	"net/http"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
)

// drover_token: a named token of a user (the provider's own user when
// none is named), with a lifetime; the token itself is sensitive and
// shown only at creation, so a token cannot be imported. One that
// expired or was revoked outside Terraform is made again.

type tokenResource struct{ c *api.Client }

type tokenModel struct {
	User      types.String `tfsdk:"user"`
	Name      types.String `tfsdk:"name"`
	TTL       types.String `tfsdk:"ttl"`
	Token     types.String `tfsdk:"token"`
	Accessor  types.String `tfsdk:"accessor"`
	ExpiresAt types.String `tfsdk:"expires_at"`
}

func newToken() resource.Resource { return &tokenResource{} }

func (r *tokenResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_token"
}

func (r *tokenResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifierString{stringplanmodifier.RequiresReplace()}
	keep := []planmodifierString{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A token of a drover user. Any change makes a new token (the old one is revoked).",
		Attributes: map[string]schema.Attribute{
			"user": schema.StringAttribute{Optional: true, Computed: true, Validators: nameValidators("user name"),
				PlanModifiers: []planmodifierString{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()}},
			"name":       schema.StringAttribute{Required: true, Validators: nameValidators("token name"), PlanModifiers: replace},
			"ttl":        schema.StringAttribute{Optional: true, Validators: []validatorString{durationRule{max: 0}}, PlanModifiers: replace, Description: "A Go duration such as 720h (default: the servers' -token-ttl; \"0\": never, admins only)."},
			"token":      schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep},
			"accessor":   schema.StringAttribute{Computed: true, PlanModifiers: keep},
			"expires_at": schema.StringAttribute{Computed: true, PlanModifiers: keep},
		},
	}
}

func (r *tokenResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

func (r *tokenResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	t, err := r.c.CreateToken(ctx, &api.CreateTokenRequest{User: m.User.ValueString(), Name: m.Name.ValueString(), TTL: m.TTL.ValueString()})
	if err != nil {
		resp.Diagnostics.AddError("Cannot make token "+m.Name.ValueString(), err.Error())
		return
	}
	m.User, m.Token, m.Accessor = types.StringValue(t.User), types.StringValue(t.Token), types.StringValue(t.Accessor)
	m.ExpiresAt = expiry(t.ExpiresAt)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func expiry(t *time.Time) types.String {
	if t == nil {
		return types.StringValue("")
	}
	return types.StringValue(t.UTC().Format(time.RFC3339))
}

func (r *tokenResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	toks, err := r.c.ListTokens(ctx, m.User.ValueString(), false)
	if err != nil {
		if api.IsStatus(err, http.StatusNotFound) {
			resp.State.RemoveResource(ctx)
			return
		}
		resp.Diagnostics.AddError("Cannot read the tokens of "+m.User.ValueString(), err.Error())
		return
	}
	for _, t := range toks {
		if t.Accessor == m.Accessor.ValueString() && !t.Expired {
			m.ExpiresAt = expiry(t.ExpiresAt)
			resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
			return
		}
	}
	resp.State.RemoveResource(ctx) // revoked or expired: made again
}

func (r *tokenResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *tokenResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m tokenModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.RevokeToken(ctx, m.Accessor.ValueString()); err != nil && !api.IsStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("Cannot revoke token "+m.Name.ValueString(), err.Error())
	}
}
