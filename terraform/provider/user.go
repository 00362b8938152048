package provider

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
)

// drover_user: a user, and the first token drover gives it (sensitive;
// unknown for a user imported).

type userResource struct{ c *api.Client }

type userModel struct {
	Name  types.String `tfsdk:"name"`
	Admin types.Bool   `tfsdk:"admin"`
	Token types.String `tfsdk:"token"`
}

func newUser() resource.Resource { return &userResource{} }

func (r *userResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_user"
}

func (r *userResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A drover user. Changing its name or admin flag makes a new user.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, Validators: nameValidators("user name"),
				PlanModifiers: []planmodifierString{stringplanmodifier.RequiresReplace()}},
			"admin": schema.BoolAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifierBool{boolplanmodifier.RequiresReplace(), boolplanmodifier.UseStateForUnknown()}},
			"token": schema.StringAttribute{Computed: true, Sensitive: true,
				Description:   "The user's first token (empty for a user imported: drover shows a token only when it makes it).",
				PlanModifiers: []planmodifierString{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (r *userResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

func (r *userResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m userModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	u, err := r.c.CreateUser(ctx, &api.CreateUserRequest{Name: m.Name.ValueString(), Admin: m.Admin.ValueBool()})
	if err != nil {
		resp.Diagnostics.AddError("Cannot create user "+m.Name.ValueString(), err.Error())
		return
	}
	m.Admin, m.Token = types.BoolValue(u.Admin), types.StringValue(u.Token)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// find reads a user (nil: there is none).
func (r *userResource) find(ctx context.Context, name string) (*api.User, error) {
	users, err := r.c.ListUsers(ctx)
	if err != nil {
		return nil, err
	}
	for i := range users {
		if users[i].Name == name {
			return &users[i], nil
		}
	}
	return nil, nil
}

func (r *userResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m userModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	u, err := r.find(ctx, m.Name.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read user "+m.Name.ValueString(), err.Error())
		return
	}
	if u == nil { // deleted outside Terraform: plan makes it again
		resp.State.RemoveResource(ctx)
		return
	}
	m.Admin = types.BoolValue(u.Admin)
	if m.Token.IsNull() || m.Token.IsUnknown() {
		m.Token = types.StringValue("")
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *userResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	// Every attribute but the computed token replaces the user.
	var m userModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *userResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m userModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.c.DeleteUser(ctx, m.Name.ValueString()); err != nil && !api.IsStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("Cannot delete user "+m.Name.ValueString(), err.Error())
	}
}

func (r *userResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	u, err := r.find(ctx, req.ID)
	if err != nil || u == nil {
		resp.Diagnostics.AddError("Cannot import user "+req.ID, fmt.Sprintf("no such user (%v)", err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), u.Name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("admin"), u.Admin)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("token"), "")...)
}
