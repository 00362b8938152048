package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/drover-sched/drover/internal/units"
	"github.com/drover-sched/drover/money"
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

// attributeIn is the attribute a server's message names: the longest of
// names found in it, else def.
func attributeIn(msg, def string, names ...string) path.Path {
	best := def
	for _, n := range names {
		if strings.Contains(msg, n) && len(n) > len(best) {
			best = n
		}
	}
	return path.Root(best)
}

// priceRule: dollars an hour, exact, as drover bounds a price
// (state.ValidatePrice, the servers' own check).
type priceRule struct{}

func (priceRule) Description(context.Context) string {
	return "dollars an hour, exact, such as \"0.35\""
}

func (v priceRule) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (priceRule) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	what := req.Path.String()
	r, err := money.ParseRate(req.ConfigValue.ValueString())
	if err == nil {
		err = state.ValidatePrice(what, r)
	}
	if err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid price", fmt.Sprintf("%s %q: %v", what, req.ConfigValue.ValueString(), err))
	}
}

// parseRate reads a price the validators accepted (null: 0).
func parseRate(v types.String) money.Rate {
	if v.IsNull() || v.IsUnknown() {
		return 0
	}
	r, _ := money.ParseRate(v.ValueString())
	return r
}

// samePrice keeps the configuration's spelling of a price the servers
// hold ("0.10" for their 0.1); a 0 the configuration left out stays null.
func samePrice(old types.String, v money.Rate) types.String {
	if !old.IsNull() && !old.IsUnknown() {
		if r, err := money.ParseRate(old.ValueString()); err == nil && r == v {
			return old
		}
	}
	if v == 0 && (old.IsNull() || old.IsUnknown()) {
		return types.StringNull()
	}
	return types.StringValue(v.String())
}

// optSize is sameSize for an optional size: a 0 left out stays null.
func optSize(old types.String, v int64) types.String {
	if v == 0 && (old.IsNull() || old.IsUnknown()) {
		return types.StringNull()
	}
	return sameSize(old, v)
}

// parseSize reads a size the validators accepted (null: 0).
func parseSize(v types.String) int64 {
	if v.IsNull() || v.IsUnknown() {
		return 0
	}
	n, _ := units.ParseBytes(v.ValueString())
	return n
}

// anyUnknown reports whether a value of the configuration is not known
// yet (one from another resource, until it is made).
// A list, set or map is not known until each of its elements is.
func anyUnknown(vals ...attr.Value) bool {
	for _, v := range vals {
		if v.IsUnknown() {
			return true
		}
		var elems []attr.Value
		switch c := v.(type) {
		case types.List:
			elems = c.Elements()
		case types.Set:
			elems = c.Elements()
		case types.Map:
			for _, e := range c.Elements() {
				elems = append(elems, e)
			}
		}
		if anyUnknown(elems...) {
			return true
		}
	}
	return false
}
