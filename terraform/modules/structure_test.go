// Package modules holds the Terraform modules of a GCE deployment of
// drover. The google provider cannot be installed here, so what can be
// checked without applying is checked: formatting (terraform fmt, with
// the real binary), and the structure, parsed with hashicorp/hcl: every
// variable documented and used, every output defined and documented,
// module calls passing only declared variables and every required one,
// references to module outputs that exist, and the example wiring the
// modules together.
package modules

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// module is what a directory of .tf files declares and uses.
type module struct {
	dir       string
	variables map[string]*hclsyntax.Block
	outputs   map[string]*hclsyntax.Block
	calls     map[string]*hclsyntax.Block // module blocks
	varRefs   map[string]bool             // var.X read anywhere
	modRefs   map[[2]string]hcl.Range     // module.NAME.OUTPUT read
}

func load(t *testing.T, dir string) *module {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no .tf files (%v)", dir, err)
	}
	m := &module{dir: dir, variables: map[string]*hclsyntax.Block{}, outputs: map[string]*hclsyntax.Block{},
		calls: map[string]*hclsyntax.Block{}, varRefs: map[string]bool{}, modRefs: map[[2]string]hcl.Range{}}
	p := hclparse.NewParser()
	for _, f := range files {
		file, diags := p.ParseHCLFile(f)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", f, diags.Error())
		}
		body := file.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			switch b.Type {
			case "variable":
				m.variables[b.Labels[0]] = b
			case "output":
				m.outputs[b.Labels[0]] = b
			case "module":
				m.calls[b.Labels[0]] = b
			}
		}
		m.walk(body)
	}
	return m
}

// walk records the var. and module. references of every expression.
func (m *module) walk(body *hclsyntax.Body) {
	for _, a := range body.Attributes {
		for _, tr := range a.Expr.Variables() {
			switch tr.RootName() {
			case "var":
				if len(tr) > 1 {
					if at, ok := tr[1].(hcl.TraverseAttr); ok {
						m.varRefs[at.Name] = true
					}
				}
			case "module":
				if len(tr) > 2 {
					name, ok1 := tr[1].(hcl.TraverseAttr)
					out, ok2 := tr[2].(hcl.TraverseAttr)
					if !ok2 && len(tr) > 3 { // module.NAME[key].OUTPUT
						out, ok2 = tr[3].(hcl.TraverseAttr)
					}
					if ok1 && ok2 {
						m.modRefs[[2]string{name.Name, out.Name}] = tr.SourceRange()
					}
				}
			}
		}
	}
	for _, b := range body.Blocks {
		m.walk(b.Body)
	}
}

func attr(b *hclsyntax.Block, name string) *hclsyntax.Attribute { return b.Body.Attributes[name] }

func stringOf(t *testing.T, a *hclsyntax.Attribute) string {
	t.Helper()
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || v.IsNull() || !v.Type().Equals(cty.String) {
		t.Fatalf("%s: not a constant string", a.SrcRange)
	}
	return v.AsString()
}

func dirs(t *testing.T, pattern string) []string {
	t.Helper()
	ds, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// TestModulesAreWellFormed checks each module and example on its own.
func TestModulesAreWellFormed(t *testing.T) {
	all := append(dirs(t, "*"), dirs(t, "../examples/*")...)
	if len(all) < 6 {
		t.Fatalf("expected the modules and an example, found %v", all)
	}
	for _, dir := range all {
		m := load(t, dir)
		for name, v := range m.variables {
			if d := attr(v, "description"); d == nil || strings.TrimSpace(stringOf(t, d)) == "" {
				t.Errorf("%s: variable %q has no description", dir, name)
			}
			if attr(v, "type") == nil {
				t.Errorf("%s: variable %q has no type", dir, name)
			}
			if !m.varRefs[name] {
				t.Errorf("%s: variable %q is declared but never used", dir, name)
			}
		}
		for name := range m.varRefs {
			if m.variables[name] == nil {
				t.Errorf("%s: var.%s is used but not declared", dir, name)
			}
		}
		for name, o := range m.outputs {
			if attr(o, "value") == nil {
				t.Errorf("%s: output %q has no value", dir, name)
			}
			if d := attr(o, "description"); d == nil || strings.TrimSpace(stringOf(t, d)) == "" {
				t.Errorf("%s: output %q has no description", dir, name)
			}
		}
	}
}

// TestModuleCallsMatch: every module call passes only variables the
// called module declares and every one without a default, and reads
// only outputs it defines; the example calls every module.
func TestModuleCallsMatch(t *testing.T) {
	meta := []string{"source", "count", "for_each", "depends_on", "providers"}
	called := map[string]bool{}
	for _, dir := range append(dirs(t, "*"), dirs(t, "../examples/*")...) {
		m := load(t, dir)
		for name, call := range m.calls {
			src := stringOf(t, attr(call, "source"))
			if !strings.HasPrefix(src, "../") {
				t.Errorf("%s: module %q comes from %q, not from this repository", dir, name, src)
				continue
			}
			target := load(t, filepath.Join(dir, src))
			called[filepath.Base(src)] = true
			for arg := range call.Body.Attributes {
				if !slices.Contains(meta, arg) && target.variables[arg] == nil {
					t.Errorf("%s: module %q passes %q, which %s does not declare", dir, name, arg, src)
				}
			}
			for v, decl := range target.variables {
				if attr(decl, "default") == nil && call.Body.Attributes[v] == nil {
					t.Errorf("%s: module %q does not pass %q, which %s requires", dir, name, v, src)
				}
			}
			for ref, at := range m.modRefs {
				if ref[0] == name && target.outputs[ref[1]] == nil {
					t.Errorf("%s: module.%s.%s: %s has no output %q", at, name, ref[1], src, ref[1])
				}
			}
		}
		for ref, at := range m.modRefs {
			if m.calls[ref[0]] == nil {
				t.Errorf("%s: module.%s is not called here", at, ref[0])
			}
		}
	}
	for _, d := range dirs(t, "*") {
		if !called[filepath.Base(d)] {
			t.Errorf("no example calls module %s", filepath.Base(d))
		}
	}
}

// TestTerraformFmt: every file is as terraform fmt writes it (the real
// binary: .tools/terraform, which make test installs, or $TERRAFORM).
func TestTerraformFmt(t *testing.T) {
	bin := os.Getenv("TERRAFORM")
	if bin == "" {
		bin = filepath.Join("..", "..", ".tools", "terraform")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no terraform at %s: make test installs Terraform 1.5.7 there, or set TERRAFORM", bin)
	}
	cmd := exec.Command(bin, "fmt", "-check", "-recursive", "-diff", "..")
	cmd.Env = append(os.Environ(), "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE="+filepath.Join(t.TempDir(), "none"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("terraform fmt -check: %v\n%s", err, out)
	}
}
