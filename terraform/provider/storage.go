package provider

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/api"
)

// drover_storage_prefix: a storage prefix of a billing project (gs://,
// s3:// or file://) its jobs' files may be read from and written to,
// with the credentials they are reached with (none: the worker's own
// identity). drover never shows credentials again, so a plan sees only
// their kind change (a key replaced by the worker's identity, or the
// other way); a key rotated with the CLI is not seen.

type storageResource struct{ c *api.Client }

type s3Model struct {
	Endpoint  types.String `tfsdk:"endpoint"`
	Region    types.String `tfsdk:"region"`
	PathStyle types.Bool   `tfsdk:"path_style"`
}

type storageModel struct {
	Project              types.String `tfsdk:"project"`
	Prefix               types.String `tfsdk:"prefix"`
	GCSServiceAccountKey types.String `tfsdk:"gcs_service_account_key"`
	S3AccessKeyID        types.String `tfsdk:"s3_access_key_id"`
	S3SecretAccessKey    types.String `tfsdk:"s3_secret_access_key"`
	S3SessionToken       types.String `tfsdk:"s3_session_token"`
	S3                   *s3Model     `tfsdk:"s3"`
	Credentials          types.String `tfsdk:"credentials"`
}

func newStoragePrefix() resource.Resource { return &storageResource{} }

func (r *storageResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_storage_prefix"
}

func (r *storageResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A billing project's storage prefix, with the credentials its jobs' files are reached with. Import ID: PROJECT:PREFIX.",
		Attributes: map[string]schema.Attribute{
			"project": schema.StringAttribute{Required: true, PlanModifiers: replace, Validators: nameValidators("billing project name")},
			"prefix": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "gs://BUCKET[/PATH], s3://BUCKET[/PATH] or file:///DIR."},
			"gcs_service_account_key": schema.StringAttribute{Optional: true, Sensitive: true,
				Description: "A service account key file's JSON, for a gs:// prefix (absent: the worker's identity)."},
			"s3_access_key_id":     schema.StringAttribute{Optional: true, Description: "For an s3:// prefix (absent: the worker's identity)."},
			"s3_secret_access_key": schema.StringAttribute{Optional: true, Sensitive: true},
			"s3_session_token":     schema.StringAttribute{Optional: true, Sensitive: true, Description: "For temporary keys."},
			"s3": schema.SingleNestedAttribute{Optional: true, Description: "Where an s3:// prefix's store is.",
				Attributes: map[string]schema.Attribute{
					"endpoint":   schema.StringAttribute{Optional: true, Description: "The store's URL (absent: AWS)."},
					"region":     schema.StringAttribute{Optional: true},
					"path_style": schema.BoolAttribute{Optional: true, Description: "ENDPOINT/BUCKET/KEY addressing, as most S3-compatible stores want."},
				}},
			"credentials": schema.StringAttribute{Computed: true,
				Description: "The credentials' kind as drover shows it: worker, gcs-service-account or s3-keys."},
		},
	}
}

func (r *storageResource) Configure(_ context.Context, req resource.ConfigureRequest, _ *resource.ConfigureResponse) {
	r.c = clientOf(req.ProviderData)
}

func (m *storageModel) toAPI() *api.AddStoragePrefixRequest {
	req := &api.AddStoragePrefixRequest{Prefix: m.Prefix.ValueString()}
	creds := api.StorageCredentials{GCSServiceAccountKey: m.GCSServiceAccountKey.ValueString(), S3AccessKeyID: m.S3AccessKeyID.ValueString(),
		S3SecretAccessKey: m.S3SecretAccessKey.ValueString(), S3SessionToken: m.S3SessionToken.ValueString()}
	if creds != (api.StorageCredentials{}) {
		req.Credentials = &creds
	}
	if m.S3 != nil {
		req.S3 = &api.S3Settings{Endpoint: m.S3.Endpoint.ValueString(), Region: m.S3.Region.ValueString(), PathStyle: m.S3.PathStyle.ValueBool()}
	}
	return req
}

// ValidateConfig checks the prefix with the API's own check
// (AddStoragePrefixRequest.Validate).
func (r *storageResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m storageModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || anyUnknown(m.Project, m.Prefix, m.GCSServiceAccountKey, m.S3AccessKeyID, m.S3SecretAccessKey, m.S3SessionToken) ||
		(m.S3 != nil && anyUnknown(m.S3.Endpoint, m.S3.Region, m.S3.PathStyle)) {
		return
	}
	if err := m.toAPI().Validate(); err != nil {
		msg := err.Error()
		at := attributeIn(msg, "prefix", "s3", "gcs_service_account_key", "s3_access_key_id", "s3_secret_access_key", "s3_session_token", "endpoint")
		if strings.Contains(msg, "endpoint") {
			at = path.Root("s3").AtName("endpoint")
		}
		resp.Diagnostics.AddAttributeError(at, "Invalid storage prefix", msg)
	}
}

func (r *storageResource) find(ctx context.Context, project, prefix string) (*api.StoragePrefix, error) {
	clean, err := api.CleanStoragePrefix(prefix)
	if err != nil {
		return nil, err
	}
	list, err := r.c.ListStoragePrefixes(ctx, project)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if list[i].Prefix == clean {
			return &list[i], nil
		}
	}
	return nil, nil
}

// kindOf is the kind of credentials the model's secrets make.
func (m *storageModel) kindOf() string { return m.toAPI().Credentials.Kind() }

// fromAPI sets what drover shows: the credentials' kind (secrets it
// holds of another kind than the state's are dropped from the state, so
// the plan puts them back) and the S3 settings.
func (m *storageModel) fromAPI(p *api.StoragePrefix) {
	if clean, err := api.CleanStoragePrefix(m.Prefix.ValueString()); err != nil || clean != p.Prefix {
		m.Prefix = types.StringValue(p.Prefix)
	}
	if m.kindOf() != p.Credentials {
		m.GCSServiceAccountKey, m.S3AccessKeyID, m.S3SecretAccessKey, m.S3SessionToken = types.StringNull(), types.StringNull(), types.StringNull(), types.StringNull()
	}
	m.Credentials = types.StringValue(p.Credentials)
	if p.S3 == nil || *p.S3 == (api.S3Settings{}) {
		if m.S3 != nil && (!m.S3.Endpoint.IsNull() || !m.S3.Region.IsNull() || m.S3.PathStyle.ValueBool()) {
			m.S3 = nil
		}
		return
	}
	old := s3Model{Endpoint: types.StringNull(), Region: types.StringNull(), PathStyle: types.BoolNull()}
	if m.S3 != nil {
		old = *m.S3
	}
	m.S3 = &s3Model{Endpoint: optString(old.Endpoint, p.S3.Endpoint), Region: optString(old.Region, p.S3.Region), PathStyle: optBool(old.PathStyle, p.S3.PathStyle)}
}

func (r *storageResource) put(ctx context.Context, m *storageModel, diags *diag.Diagnostics) {
	project := m.Project.ValueString()
	if _, err := r.c.AddStoragePrefix(ctx, project, m.toAPI()); err != nil {
		diags.AddAttributeError(path.Root("prefix"), "Cannot set storage prefix "+m.Prefix.ValueString(), err.Error())
		return
	}
	p, err := r.find(ctx, project, m.Prefix.ValueString())
	if err != nil || p == nil {
		diags.AddError("Cannot read storage prefix "+m.Prefix.ValueString(), fmt.Sprint(err))
		return
	}
	m.fromAPI(p)
}

func (r *storageResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *storageModel) {
		if p, err := r.find(ctx, m.Project.ValueString(), m.Prefix.ValueString()); err == nil && p != nil {
			id := m.Project.ValueString() + ":" + p.Prefix
			resp.Diagnostics.AddAttributeError(path.Root("prefix"), "Storage prefix exists",
				fmt.Sprintf("billing project %s has storage prefix %s already: import it (terraform import ADDRESS %s) to manage it here", m.Project.ValueString(), p.Prefix, id))
			return
		}
		r.put(ctx, m, &resp.Diagnostics)
	})
}

func (r *storageResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m storageModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, err := r.find(ctx, m.Project.ValueString(), m.Prefix.ValueString())
	if api.IsStatus(err, http.StatusNotFound) || (err == nil && p == nil) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read storage prefix "+m.Prefix.ValueString(), err.Error())
		return
	}
	m.fromAPI(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *storageResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	applyPlan(ctx, req.Plan, &resp.State, &resp.Diagnostics, func(m *storageModel) { r.put(ctx, m, &resp.Diagnostics) })
}

func (r *storageResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m storageModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if _, err := r.c.RemoveStoragePrefix(ctx, m.Project.ValueString(), m.Prefix.ValueString()); err != nil && !api.IsStatus(err, http.StatusNotFound) {
		resp.Diagnostics.AddError("Cannot remove storage prefix "+m.Prefix.ValueString(), err.Error())
	}
}

// ImportState takes PROJECT:PREFIX. The credentials cannot be read back:
// the next apply sends the configuration's.
func (r *storageResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	project, prefix, ok := strings.Cut(req.ID, ":")
	var p *api.StoragePrefix
	var err error
	if !ok {
		err = fmt.Errorf("import a storage prefix as PROJECT:PREFIX (ml:gs://bucket/data), not %q", req.ID)
	} else if p, err = r.find(ctx, project, prefix); err == nil && p == nil {
		err = fmt.Errorf("billing project %s has no storage prefix %s; drover billing-project storage list %s shows them", project, prefix, project)
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot import storage prefix "+req.ID, err.Error())
		return
	}
	m := storageModel{Project: types.StringValue(project), Prefix: types.StringValue(prefix), GCSServiceAccountKey: types.StringNull(),
		S3AccessKeyID: types.StringNull(), S3SecretAccessKey: types.StringNull(), S3SessionToken: types.StringNull()}
	m.fromAPI(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
