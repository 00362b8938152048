package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-sched/drover/jobspec"
)

// configFlag adds -config to a flag set. A config file is HCL whose
// attributes are the command's flags with '_' for '-':
//
//	data_dir         = "/var/lib/drover"
//	http_addr        = "10.0.0.1:4650"
//	bootstrap_expect = 3
//	join             = ["10.0.0.2:4652", "10.0.0.3:4652"]
//
// Flags given on the command line win over the file.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "HCL file with flag values (names with _ for -); command-line flags win")
}

// applyConfigFile sets every flag named in the file that was not set on the
// command line.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	if path == "" {
		return nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	file, diags := hclsyntax.ParseConfig(src, path, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return fmt.Errorf("config file:\n%s", jobspec.FormatDiagnostics(diags))
	}
	attrs, diags := file.Body.JustAttributes()
	if diags.HasErrors() {
		return fmt.Errorf("config file:\n%s", jobspec.FormatDiagnostics(diags))
	}
	onCLI := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCLI[f.Name] = true })
	var problems hcl.Diagnostics
	for _, attr := range attrs {
		name := strings.ReplaceAll(attr.Name, "_", "-")
		f := fs.Lookup(name)
		if f == nil || name == "config" {
			problems = append(problems, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown setting",
				Detail: fmt.Sprintf("%q is not a flag of this command.", attr.Name), Subject: attr.NameRange.Ptr()})
			continue
		}
		if onCLI[name] {
			continue
		}
		v, d := attr.Expr.Value(nil)
		if d.HasErrors() {
			problems = append(problems, d...)
			continue
		}
		text, err := flagText(v)
		if err == nil {
			err = fs.Set(name, text)
		}
		if err != nil {
			problems = append(problems, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid value",
				Detail: fmt.Sprintf("%s: %v", attr.Name, err), Subject: attr.Expr.Range().Ptr()})
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("config file:\n%s", strings.TrimRight(jobspec.FormatDiagnostics(problems), "\n"))
	}
	return nil
}

// flagText renders an HCL value the way it would be typed as a flag; lists
// become comma-separated.
func flagText(v cty.Value) (string, error) {
	switch {
	case v.IsNull():
		return "", fmt.Errorf("null value")
	case v.Type() == cty.String:
		return v.AsString(), nil
	case v.Type() == cty.Bool:
		return strconv.FormatBool(v.True()), nil
	case v.Type() == cty.Number:
		return v.AsBigFloat().Text('f', -1), nil
	case v.Type().IsTupleType() || v.Type().IsListType():
		var parts []string
		for _, e := range v.AsValueSlice() {
			s, err := flagText(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("unsupported value of type %s", v.Type().FriendlyName())
}
