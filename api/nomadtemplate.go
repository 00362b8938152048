package api

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// NomadTemplate is a Nomad task's template block as a job carries it (in
// the NomadTemplatesEnv variable, JSON): data rendered by the worker before
// the task starts into Dest under the job's directory, or, with Env, into
// the task's environment.
type NomadTemplate struct {
	Data  string `json:"data"`
	Dest  string `json:"dest"`
	Env   bool   `json:"env,omitempty"`
	Perms uint32 `json:"perms,omitempty"`
	Left  string `json:"left,omitempty"`
	Right string `json:"right,omitempty"`
}

// NomadTemplatesEnv carries a Nomad job's templates to its worker.
const NomadTemplatesEnv = "DROVER_NOMAD_TEMPLATES"

// MaxTemplateOutput bounds what one template renders to.
const MaxTemplateOutput = 1 << 20

// templateFuncs are the functions a template may call: env, the task's
// environment as a Nomad client gives it (consul-template's env), and
// text/template's own. Nothing reaches Consul, Vault or Nomad's variables.
var templateFuncs = template.FuncMap{"env": func(string) string { return "" }}

// builtins are text/template's predefined functions a template may call.
// (Not print, printf and println: a width of a billion would make the
// worker allocate a gigabyte.)
var builtins = map[string]bool{"and": true, "or": true, "not": true, "len": true, "index": true, "slice": true,
	"eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true, "html": true, "js": true, "urlquery": true, "env": true}

// CheckNomadTemplate parses a template and refuses what a worker will not
// render: a function other than env and text/template's own (key, secret,
// service and nomadVar read Consul, Vault and Nomad), range (a template
// could loop without end), template and define. What is left renders in
// time bounded by its own size.
func CheckNomadTemplate(t *NomadTemplate) (*template.Template, error) {
	tmpl := template.New("template").Funcs(templateFuncs)
	if t.Left != "" || t.Right != "" {
		tmpl = tmpl.Delims(t.Left, t.Right)
	}
	// Parse with every identifier known, to name an unknown one below.
	probe, err := template.New("probe").Delims(t.Left, t.Right).Funcs(anyFunc(t.Data)).Parse(t.Data)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	if len(probe.Templates()) > 1 {
		return nil, errors.New("template: define and template are not rendered")
	}
	if err := checkNodes(probe.Tree.Root); err != nil {
		return nil, err
	}
	return tmpl.Parse(t.Data)
}

// anyFunc declares every word of data as a function, so that parsing
// succeeds and the check can name the one that is not allowed.
func anyFunc(data string) template.FuncMap {
	m := template.FuncMap{}
	for _, w := range strings.FieldsFunc(data, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		if w != "" && !(w[0] >= '0' && w[0] <= '9') {
			m[w] = func(...any) string { return "" }
		}
	}
	return m
}

func checkNodes(n parse.Node) error {
	switch n := n.(type) {
	case nil:
		return nil
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNodes(c); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkNodes(n.Pipe)
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			if err := checkNodes(c); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := checkNodes(a); err != nil {
				return err
			}
		}
	case *parse.IdentifierNode:
		if !builtins[n.Ident] {
			return fmt.Errorf("template: %s is not rendered: drover gives a template the task's environment (env) and text/template's own functions, nothing from Consul, Vault or Nomad's variables", n.Ident)
		}
	case *parse.IfNode:
		return errors.Join(checkNodes(n.Pipe), checkNodes(n.List), checkNodes(n.ElseList))
	case *parse.WithNode:
		return errors.Join(checkNodes(n.Pipe), checkNodes(n.List), checkNodes(n.ElseList))
	case *parse.RangeNode:
		return errors.New("template: range is not rendered (a template renders in time bounded by its size)")
	case *parse.TemplateNode:
		return errors.New("template: template is not rendered")
	case *parse.ChainNode:
		return checkNodes(n.Node)
	case *parse.TextNode, *parse.StringNode, *parse.NumberNode, *parse.BoolNode, *parse.DotNode, *parse.NilNode,
		*parse.VariableNode, *parse.FieldNode, *parse.CommentNode:
	default:
		return fmt.Errorf("template: %s is not rendered", n)
	}
	return nil
}

// RenderNomadTemplate renders a checked template with env (the task's
// environment), at most MaxTemplateOutput bytes.
func RenderNomadTemplate(t *NomadTemplate, env map[string]string) ([]byte, error) {
	tmpl, err := CheckNomadTemplate(t)
	if err != nil {
		return nil, err
	}
	tmpl = tmpl.Funcs(template.FuncMap{"env": func(k string) string { return env[k] }}).Option("missingkey=zero")
	var out limitedBuffer
	if err := tmpl.Execute(&out, nil); err != nil {
		return nil, fmt.Errorf("render template for %s: %w", t.Dest, err)
	}
	return out.Bytes(), nil
}

// ParseEnvFile reads KEY=VALUE lines (a template rendered with env = true),
// skipping blank lines and comments.
func ParseEnvFile(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(strings.TrimPrefix(k, "export "))
		if !ok || k == "" || strings.ContainsAny(k, " \t\x00") {
			return nil, fmt.Errorf("line %d of the env template is not KEY=VALUE", n)
		}
		out[k] = strings.Trim(strings.TrimSpace(v), `"`)
	}
	return out, sc.Err()
}

type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxTemplateOutput {
		return 0, fmt.Errorf("the template renders more than %d bytes", MaxTemplateOutput)
	}
	return b.Buffer.Write(p)
}
