// Package nomadspec reads Nomad jobspecs and turns Nomad jobs into drover
// batches.
//
// Parse reads a job file in Nomad's HCL2 dialect into the nomad/api Job its
// `nomad job run` would send, decoding by the `hcl` tags Nomad's api types
// carry (Nomad's own parser, jobspec2, lives in a module that is not open
// source and cannot be had here, so this one follows Nomad's documented
// schema through those tags). Runtime interpolations a Nomad client
// resolves on the node (`${NOMAD_ALLOC_INDEX}`, `${node.datacenter}`,
// `${meta.rack}`, `${attr.kernel.name}`) are kept as written, as Nomad keeps
// them; `var.*` and `local.*` are evaluated.
//
// Translate turns a Job, however it came (parsed here, or JSON from a
// nomad/api client), into a drover batch, refusing what has no drover
// meaning with the block and, when the job came from a file, its line.
package nomadspec

import (
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	nomad "github.com/hashicorp/nomad/api"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/gocty"

	"github.com/drover-sched/drover/jobspec"
)

// MaxSource bounds a jobspec's size (the API's body limit is larger; a
// jobspec is text a person wrote).
const MaxSource = 4 << 20

// Blocks remembers where each block of a parsed job was written, by path
// (`group "g"`, `group "g" > task "t"`, `group "g" > task "t" > service`;
// of repeated unlabelled blocks, the first), so that a refusal can name
// its line.
type Blocks map[string]hcl.Range

// Path joins the parts of a block's path as Blocks keys it.
func Path(parts ...string) string { return strings.Join(parts, " > ") }

// Labelled is a labelled block's part of a path: `task "t"`.
func Labelled(typ, label string) string { return fmt.Sprintf("%s %q", typ, label) }

// ParseFile reads and parses a Nomad job file.
func ParseFile(path string, vars map[string]string) (*nomad.Job, Blocks, hcl.Diagnostics) {
	src, err := readFile(path)
	if err != nil {
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the job file", Detail: err.Error()}}
	}
	return Parse(path, src, vars)
}

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "job", LabelNames: []string{"id"}},
	},
}

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "default"}, {Name: "description"}, {Name: "type"}, {Name: "sensitive"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "validation"}},
}

// Parse parses a Nomad job file's text. vars are -var values, each as
// written on a command line (converted to the variable's type).
func Parse(filename string, src []byte, vars map[string]string) (*nomad.Job, Blocks, hcl.Diagnostics) {
	if len(src) > MaxSource {
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Job file too large",
			Detail: fmt.Sprintf("%s is %d bytes; a job file may have at most %d", filename, len(src), MaxSource)}}
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return nil, nil, diags
	}
	content, diags := file.Body.Content(rootSchema)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	ctx, ds := evalContext(content, vars)
	if diags = append(diags, ds...); diags.HasErrors() {
		return nil, nil, diags
	}
	var jobBlock *hcl.Block
	for _, b := range content.Blocks {
		if b.Type != "job" {
			continue
		}
		if jobBlock != nil {
			return nil, nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate job block",
				Detail: fmt.Sprintf("a job file holds one job; the first is at %s", rangeString(jobBlock.DefRange)), Subject: b.DefRange.Ptr()})
		}
		jobBlock = b
	}
	if jobBlock == nil {
		return nil, nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No job block",
			Detail: `a Nomad job file holds one job "<id>" { ... } block`, Subject: file.Body.MissingItemRange().Ptr()})
	}
	d := &decoder{ctx: ctx, src: src, blocks: Blocks{}}
	job := &nomad.Job{ID: &jobBlock.Labels[0]}
	body := jobBlock.Body.(*hclsyntax.Body)
	d.blocks[Labelled("job", jobBlock.Labels[0])] = jobBlock.DefRange
	diags = append(diags, d.decodeBody(body, reflect.ValueOf(job).Elem(), "")...)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	if job.Name == nil {
		job.Name = job.ID
	}
	return job, d.blocks, diags
}

// evalContext evaluates the file's variables (defaults, then vars) and
// locals.
func evalContext(content *hcl.BodyContent, overrides map[string]string) (*hcl.EvalContext, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	values := map[string]cty.Value{}
	declared := map[string]bool{}
	for _, b := range content.Blocks {
		if b.Type != "variable" {
			continue
		}
		name := b.Labels[0]
		if declared[name] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate variable", Detail: fmt.Sprintf("variable %q is declared twice", name), Subject: b.DefRange.Ptr()})
			continue
		}
		declared[name] = true
		vc, d := b.Body.Content(variableSchema)
		if diags = append(diags, d...); d.HasErrors() {
			continue
		}
		ty := cty.DynamicPseudoType
		if a, ok := vc.Attributes["type"]; ok {
			t, d := typeexpr.TypeConstraint(a.Expr)
			if diags = append(diags, d...); d.HasErrors() {
				continue
			}
			ty = t
		}
		val := cty.NullVal(ty)
		hasDefault := false
		if a, ok := vc.Attributes["default"]; ok {
			v, d := a.Expr.Value(&hcl.EvalContext{Functions: jobspec.Functions})
			if diags = append(diags, d...); d.HasErrors() {
				continue
			}
			val, hasDefault = v, true
		}
		if raw, ok := overrides[name]; ok {
			v, err := overrideValue(raw, ty, val)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid variable value", Detail: fmt.Sprintf("-var %s=%q: %v", name, raw, err), Subject: b.DefRange.Ptr()})
				continue
			}
			val, hasDefault = v, true
		}
		if !hasDefault {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Variable without a value",
				Detail: fmt.Sprintf("variable %q has no default; give it one with -var %s=...", name, name), Subject: b.DefRange.Ptr()})
			continue
		}
		if ty != cty.DynamicPseudoType {
			v, err := convert.Convert(val, ty)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid variable value", Detail: fmt.Sprintf("variable %q: %v", name, err), Subject: b.DefRange.Ptr()})
				continue
			}
			val = v
		}
		values[name] = val
	}
	for name := range overrides {
		if !declared[name] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Undeclared variable",
				Detail: fmt.Sprintf("-var %s=... names a variable the job file does not declare", name)})
		}
	}
	ctx := &hcl.EvalContext{Functions: jobspec.Functions, Variables: map[string]cty.Value{"var": cty.ObjectVal(values)}}
	// Locals may name each other: evaluate what can be until nothing more
	// can, then report what is left.
	pending := map[string]*hcl.Attribute{}
	for _, b := range content.Blocks {
		if b.Type != "locals" {
			continue
		}
		attrs, d := b.Body.JustAttributes()
		if diags = append(diags, d...); d.HasErrors() {
			continue
		}
		for name, a := range attrs {
			if _, dup := pending[name]; dup {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate local", Detail: fmt.Sprintf("local %q is defined twice", name), Subject: a.NameRange.Ptr()})
				continue
			}
			pending[name] = a
		}
	}
	locals := map[string]cty.Value{}
	for len(pending) > 0 {
		progress := false
		for _, name := range sortedKeys(pending) {
			a := pending[name]
			ready := true
			for _, tr := range a.Expr.Variables() {
				if tr.RootName() == "local" && len(tr) > 1 {
					if at, ok := tr[1].(hcl.TraverseAttr); ok {
						if _, done := locals[at.Name]; !done {
							ready = false
						}
					}
				}
			}
			if !ready {
				continue
			}
			ctx.Variables["local"] = cty.ObjectVal(locals)
			v, d := a.Expr.Value(ctx)
			diags = append(diags, d...)
			locals[name] = v
			delete(pending, name)
			progress = true
		}
		if !progress {
			for _, name := range sortedKeys(pending) {
				a := pending[name]
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unresolvable local",
					Detail: fmt.Sprintf("local %q names a local that is not defined, or the locals name each other in a cycle", name), Subject: a.Expr.Range().Ptr()})
			}
			break
		}
	}
	ctx.Variables["local"] = cty.ObjectVal(locals)
	return ctx, diags
}

// overrideValue reads a -var value: as HCL when the variable is not a
// string (a number, a list), else the text as it is.
func overrideValue(raw string, ty cty.Type, def cty.Value) (cty.Value, error) {
	isString := ty == cty.String || (ty == cty.DynamicPseudoType && (def.IsNull() || def.Type() == cty.String))
	if isString {
		return cty.StringVal(raw), nil
	}
	expr, diags := hclsyntax.ParseExpression([]byte(raw), "-var", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("%s", diags.Error())
	}
	v, diags := expr.Value(&hcl.EvalContext{Functions: jobspec.Functions})
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("%s", diags.Error())
	}
	return v, nil
}

// decoder fills nomad/api structs from HCL bodies by their hcl tags.
type decoder struct {
	ctx    *hcl.EvalContext
	src    []byte
	blocks Blocks
}

type fieldKind int

const (
	attrField fieldKind = iota
	blockField
	labelField
)

type field struct {
	name     string
	kind     fieldKind
	required bool
	index    int
}

// fieldsOf reads a struct type's hcl tags.
func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("hcl")
		if !ok || tag == "-" {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		f := field{name: name, index: i}
		switch opt {
		case "block":
			f.kind = blockField
		case "label":
			f.kind = labelField
		case "optional":
		case "":
			f.required = true
			if isBlockType(t.Field(i).Type) {
				f.kind, f.required = blockField, false
			}
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}

// isBlockType reports whether a field of type t holds blocks (a struct,
// or a slice or map of them).
func isBlockType(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

// decodeBody decodes body into the struct rv; path is the block's path
// (empty for the job's own body).
func (d *decoder) decodeBody(body *hclsyntax.Body, rv reflect.Value, path string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	fields := fieldsOf(rv.Type())
	byName := map[string]field{}
	for _, f := range fields {
		if f.kind != labelField {
			byName[f.name] = f
		}
	}
	for _, name := range sortedKeys(body.Attributes) {
		a := body.Attributes[name]
		f, ok := byName[name]
		if !ok || f.kind != attrField {
			// A map-of-strings block (meta, env) may be written as an
			// attribute too.
			if ok && rv.Field(f.index).Type() == reflect.TypeFor[map[string]string]() {
				diags = append(diags, d.decodeAttr(a, rv.Field(f.index))...)
				continue
			}
			diags = append(diags, unsupported("argument", name, a.NameRange, fields, attrField))
			continue
		}
		diags = append(diags, d.decodeAttr(a, rv.Field(f.index))...)
	}
	for _, f := range fields {
		if f.required && f.kind == attrField {
			if _, ok := body.Attributes[f.name]; !ok {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing required argument",
					Detail: fmt.Sprintf("the argument %q is required here", f.name), Subject: body.MissingItemRange().Ptr()})
			}
		}
	}
	seen := map[string]hcl.Range{}
	for _, b := range body.Blocks {
		f, ok := byName[b.Type]
		if !ok || f.kind != blockField {
			diags = append(diags, unsupported("block type", b.Type, b.TypeRange, fields, blockField))
			continue
		}
		key := b.Type
		if len(b.Labels) > 0 {
			key = Labelled(b.Type, b.Labels[0])
		}
		bpath := key
		if path != "" {
			bpath = Path(path, key)
		}
		if _, dup := d.blocks[bpath]; !dup {
			d.blocks[bpath] = b.DefRange()
		}
		fv := rv.Field(f.index)
		if single := fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Map && fv.Type().Elem().Kind() != reflect.Pointer; single {
			if first, dup := seen[b.Type]; dup {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate " + b.Type + " block",
					Detail: fmt.Sprintf("only one %s block is allowed here; the first is at %s", b.Type, rangeString(first)), Subject: b.DefRange().Ptr()})
				continue
			}
			seen[b.Type] = b.DefRange()
		}
		diags = append(diags, d.decodeBlock(b, fv, bpath)...)
	}
	return diags
}

func unsupported(what, name string, rng hcl.Range, fields []field, kind fieldKind) *hcl.Diagnostic {
	var names []string
	for _, f := range fields {
		if f.kind == kind {
			names = append(names, f.name)
		}
	}
	detail := fmt.Sprintf("an %s named %q is not expected here", what, name)
	if what == "block type" {
		detail = fmt.Sprintf("blocks of type %q are not expected here", name)
	}
	if s := closest(name, names); s != "" {
		detail += fmt.Sprintf("; did you mean %q?", s)
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported " + what, Detail: detail, Subject: rng.Ptr()}
}

// decodeBlock decodes one block into the field fv (a pointer to a struct,
// a slice of them, or a map).
func (d *decoder) decodeBlock(b *hclsyntax.Block, fv reflect.Value, path string) hcl.Diagnostics {
	t := fv.Type()
	switch {
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.String:
		if len(b.Labels) != 0 {
			return labelCount(b, 0)
		}
		m := map[string]string{}
		var diags hcl.Diagnostics
		for _, name := range sortedKeys(b.Body.Attributes) {
			a := b.Body.Attributes[name]
			v, ds := d.value(a.Expr)
			if diags = append(diags, ds...); ds.HasErrors() {
				continue
			}
			s, err := toString(v)
			if err != nil {
				diags = append(diags, exprError(a.Expr, "Invalid value", fmt.Sprintf("%s: %v", name, err)))
				continue
			}
			m[name] = s
		}
		for _, nb := range b.Body.Blocks {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unexpected block",
				Detail: fmt.Sprintf("a %s block holds only key = \"value\" pairs", b.Type), Subject: nb.DefRange().Ptr()})
		}
		if fv.IsNil() {
			fv.Set(reflect.ValueOf(m))
		} else {
			for k, v := range m {
				fv.SetMapIndex(reflect.ValueOf(k), reflect.ValueOf(v))
			}
		}
		return diags
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Interface:
		if len(b.Labels) != 0 {
			return labelCount(b, 0)
		}
		m, diags := d.anyBody(b.Body)
		fv.Set(reflect.ValueOf(m))
		return diags
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Pointer:
		if len(b.Labels) != 1 {
			return labelCount(b, 1)
		}
		if fv.IsNil() {
			fv.Set(reflect.MakeMap(t))
		}
		if fv.MapIndex(reflect.ValueOf(b.Labels[0])).IsValid() {
			return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Duplicate " + b.Type + " block",
				Detail: fmt.Sprintf("%s %q is defined twice", b.Type, b.Labels[0]), Subject: b.DefRange().Ptr()}}
		}
		elem := reflect.New(t.Elem().Elem())
		diags := d.decodeStruct(b, elem.Elem(), path, false)
		fv.SetMapIndex(reflect.ValueOf(b.Labels[0]), elem)
		return diags
	case t.Kind() == reflect.Slice:
		et := t.Elem()
		ptr := et.Kind() == reflect.Pointer
		if ptr {
			et = et.Elem()
		}
		elem := reflect.New(et)
		diags := d.decodeStruct(b, elem.Elem(), path, true)
		if !ptr {
			elem = elem.Elem()
		}
		fv.Set(reflect.Append(fv, elem))
		return diags
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		elem := reflect.New(t.Elem())
		diags := d.decodeStruct(b, elem.Elem(), path, true)
		fv.Set(elem)
		return diags
	case t.Kind() == reflect.Struct:
		return d.decodeStruct(b, fv, path, true)
	}
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported block", Detail: fmt.Sprintf("blocks of type %q cannot be read here", b.Type), Subject: b.DefRange().Ptr()}}
}

func labelCount(b *hclsyntax.Block, want int) hcl.Diagnostics {
	detail := fmt.Sprintf("a %s block takes no label", b.Type)
	if want == 1 {
		detail = fmt.Sprintf("a %s block takes one label, its name", b.Type)
	}
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Wrong number of labels", Detail: detail, Subject: b.DefRange().Ptr()}}
}

// decodeStruct fills a struct from a block: its labels (when labels is
// set: the map's key is the label otherwise), then its body.
func (d *decoder) decodeStruct(b *hclsyntax.Block, rv reflect.Value, path string, labels bool) hcl.Diagnostics {
	if labels {
		var lf []field
		for _, f := range fieldsOf(rv.Type()) {
			if f.kind == labelField {
				lf = append(lf, f)
			}
		}
		if len(b.Labels) != len(lf) {
			return labelCount(b, len(lf))
		}
		for i, f := range lf {
			fv := rv.Field(f.index)
			switch {
			case fv.Kind() == reflect.String:
				fv.SetString(b.Labels[i])
			case fv.Kind() == reflect.Pointer && fv.Type().Elem().Kind() == reflect.String:
				s := b.Labels[i]
				fv.Set(reflect.ValueOf(&s))
			}
		}
	}
	return d.decodeBody(b.Body, rv, path)
}

var durationType = reflect.TypeFor[time.Duration]()

// decodeAttr evaluates an attribute into the field fv.
func (d *decoder) decodeAttr(a *hclsyntax.Attribute, fv reflect.Value) hcl.Diagnostics {
	v, diags := d.value(a.Expr)
	if diags.HasErrors() {
		return diags
	}
	if v.IsNull() {
		return diags
	}
	if !v.IsWhollyKnown() {
		return append(diags, exprError(a.Expr, "Unknown value", fmt.Sprintf("the value of %q is not known when the job is read", a.Name)))
	}
	t := fv.Type()
	base := t
	if base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	target := reflect.New(base)
	switch {
	case base == durationType:
		s, err := toString(v)
		if err == nil {
			var dur time.Duration
			if dur, err = time.ParseDuration(s); err == nil {
				target.Elem().SetInt(int64(dur))
			}
		}
		if err != nil {
			return append(diags, exprError(a.Expr, "Invalid duration", fmt.Sprintf("%s: a duration is written as \"30s\", \"5m\" or \"1h30m\" (%v)", a.Name, err)))
		}
	case base.Kind() == reflect.Map && base.Elem().Kind() == reflect.Interface:
		m, err := ctyToAny(v)
		mm, ok := m.(map[string]any)
		if err != nil || !ok {
			return append(diags, exprError(a.Expr, "Invalid value", fmt.Sprintf("%s must be an object", a.Name)))
		}
		target.Elem().Set(reflect.ValueOf(mm))
	case base.Kind() == reflect.Interface:
		x, err := ctyToAny(v)
		if err != nil {
			return append(diags, exprError(a.Expr, "Invalid value", fmt.Sprintf("%s: %v", a.Name, err)))
		}
		if x != nil {
			target.Elem().Set(reflect.ValueOf(x))
		}
	default:
		ty, err := gocty.ImpliedType(target.Interface())
		if err != nil {
			return append(diags, exprError(a.Expr, "Unsupported argument", fmt.Sprintf("%s cannot be set in a job file", a.Name)))
		}
		cv, err := convert.Convert(v, ty)
		if err == nil {
			err = gocty.FromCtyValue(cv, target.Interface())
		}
		if err != nil {
			return append(diags, exprError(a.Expr, "Invalid value", fmt.Sprintf("%s: %v", a.Name, describe(err, ty))))
		}
	}
	if t.Kind() == reflect.Pointer {
		fv.Set(target)
	} else {
		fv.Set(target.Elem())
	}
	return diags
}

func describe(err error, ty cty.Type) string {
	return fmt.Sprintf("%s required (%v)", ty.FriendlyName(), err)
}

// value evaluates an expression, keeping runtime interpolations (roots
// other than var and local) as the text that was written.
func (d *decoder) value(expr hclsyntax.Expression) (cty.Value, hcl.Diagnostics) {
	ctx := d.ctx
	runtime := map[string]cty.Value{}
	var diags hcl.Diagnostics
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		if _, ok := d.ctx.Variables[root]; ok {
			continue
		}
		text := "${" + string(tr.SourceRange().SliceBytes(d.src)) + "}"
		v, ok := standIn(runtime[root], tr[1:], text)
		if !ok {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported interpolation",
				Detail: fmt.Sprintf("%s cannot be kept for the node to resolve", text), Subject: tr.SourceRange().Ptr()})
			continue
		}
		runtime[root] = v
	}
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	if len(runtime) > 0 {
		ctx = d.ctx.NewChild()
		ctx.Variables = runtime
	}
	v, ds := expr.Value(ctx)
	return v, append(diags, ds...)
}

// standIn extends cur (a root's stand-in so far) with the steps of one
// traversal, ending in its text: ${node.datacenter} evaluates to itself.
func standIn(cur cty.Value, steps hcl.Traversal, text string) (cty.Value, bool) {
	if len(steps) == 0 {
		if cur != cty.NilVal && !cur.Type().Equals(cty.String) {
			return cty.NilVal, false
		}
		return cty.StringVal(text), true
	}
	var key string
	switch s := steps[0].(type) {
	case hcl.TraverseAttr:
		key = s.Name
	case hcl.TraverseIndex:
		if s.Key.Type() != cty.String {
			return cty.NilVal, false
		}
		key = s.Key.AsString()
	default:
		return cty.NilVal, false
	}
	attrs := map[string]cty.Value{}
	if cur != cty.NilVal {
		if !cur.Type().IsObjectType() {
			return cty.NilVal, false
		}
		attrs = cur.AsValueMap()
	}
	var next cty.Value
	if v, ok := attrs[key]; ok {
		next = v
	} else {
		next = cty.NilVal
	}
	v, ok := standIn(next, steps[1:], text)
	if !ok {
		return cty.NilVal, false
	}
	attrs[key] = v
	return cty.ObjectVal(attrs), true
}

// anyBody reads a free-form body (a driver's config) as Nomad does: its
// attributes as values, its blocks as lists of objects under their type.
func (d *decoder) anyBody(body *hclsyntax.Body) (map[string]any, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	m := map[string]any{}
	for _, name := range sortedKeys(body.Attributes) {
		a := body.Attributes[name]
		v, ds := d.value(a.Expr)
		if diags = append(diags, ds...); ds.HasErrors() {
			continue
		}
		x, err := ctyToAny(v)
		if err != nil {
			diags = append(diags, exprError(a.Expr, "Invalid value", fmt.Sprintf("%s: %v", name, err)))
			continue
		}
		m[name] = x
	}
	for _, b := range body.Blocks {
		sub, ds := d.anyBody(b.Body)
		diags = append(diags, ds...)
		list, _ := m[b.Type].([]map[string]any)
		m[b.Type] = append(list, sub)
	}
	return m, diags
}

// ctyToAny turns a value into what encoding/json would decode it to.
func ctyToAny(v cty.Value) (any, error) {
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsWhollyKnown() {
		return nil, fmt.Errorf("value not known when the job is read")
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return v.AsString(), nil
	case t == cty.Bool:
		return v.True(), nil
	case t == cty.Number:
		bf := v.AsBigFloat()
		if i, acc := bf.Int64(); acc == 0 {
			return int(i), nil
		}
		f, _ := bf.Float64()
		return f, nil
	case t.IsListType() || t.IsTupleType() || t.IsSetType():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			x, err := ctyToAny(e)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case t.IsMapType() || t.IsObjectType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			x, err := ctyToAny(e)
			if err != nil {
				return nil, err
			}
			out[k.AsString()] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("a value of type %s cannot be sent", t.FriendlyName())
}

func toString(v cty.Value) (string, error) {
	if v.IsNull() {
		return "", fmt.Errorf("null where a string is required")
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil {
		return "", fmt.Errorf("a string is required")
	}
	return s.AsString(), nil
}

func exprError(expr hcl.Expression, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: expr.Range().Ptr()}
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", r.Filename, r.Start.Line, r.Start.Column)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// closest is the candidate nearest to name, if near enough to suggest.
func closest(name string, candidates []string) string {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		if d := levenshtein.Distance(name, c, nil); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= 2 || bestD <= len(name)/3 {
		return best
	}
	return ""
}

// readFile reads a job file of at most MaxSource bytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxSource+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return src, nil
}

// IsNomadJob reports whether a job file is a Nomad job (its name ends in
// .nomad or .nomad.hcl, or it holds a top-level job block) rather than a
// drover jobspec (a batch block).
func IsNomadJob(filename string, src []byte) bool {
	if strings.HasSuffix(filename, ".nomad") || strings.HasSuffix(filename, ".nomad.hcl") {
		return true
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return false
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return false
	}
	for _, b := range body.Blocks {
		switch b.Type {
		case "job":
			return true
		case "batch":
			return false
		}
	}
	return false
}
