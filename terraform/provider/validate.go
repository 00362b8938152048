package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/drover-sched/drover/server/state"
)

type (
	planmodifierString = planmodifier.String
	planmodifierBool   = planmodifier.Bool
)

// nameRule checks a name with api's rule for it, at plan time.
type nameRule struct{ what string }

func nameValidators(what string) []validator.String { return []validator.String{nameRule{what}} }

func (v nameRule) Description(context.Context) string {
	return fmt.Sprintf("a %s: 1-63 letters, digits, '_', '.' or '-'", v.what)
}

func (v nameRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v nameRule) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	// The servers' own rule for names of users, projects and tokens.
	if s := req.ConfigValue.ValueString(); !state.ValidName(s) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+v.what,
			fmt.Sprintf("%s %q: use 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit", v.what, s))
	}
}

type validatorString = validator.String

// durationRule checks a Go duration ("10m", "720h"), at most max (0: no
// bound here; the servers bound it).
type durationRule struct{ max time.Duration }

func (v durationRule) Description(context.Context) string {
	return "a Go duration such as 90s, 10m or 720h"
}

func (v durationRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v durationRule) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	d, err := time.ParseDuration(req.ConfigValue.ValueString())
	if err != nil || d < 0 || (v.max > 0 && d > v.max) {
		bound := ""
		if v.max > 0 {
			bound = " of at most " + v.max.String()
		}
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration",
			fmt.Sprintf("%q is not a duration%s such as 90s, 10m or 720h", req.ConfigValue.ValueString(), bound))
	}
}
