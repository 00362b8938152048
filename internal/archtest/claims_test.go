package archtest

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// claim is one line of docs/architecture.md's list of what a package
// imports: "- `pkg` imports only `a`, `b`." or "- `pkg` imports none of
// `a`, `b/`."
var claim = regexp.MustCompile("^- `([^`]+)` imports (only|none of) (.*)\\.$")

// TestProseClaims: every claim of docs/architecture.md's list holds: a
// package that "imports only" some of drover's imports no other of
// drover's directly; one that "imports none of" some does not depend on
// them at all, through any other package.
func TestProseClaims(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(root, "docs", "architecture.md")
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath    string
		Imports, Deps []string
	}
	pkgs := map[string]pkg{}
	for dec := json.NewDecoder(strings.NewReader(string(out))); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p
	}
	own := func(list []string) []string {
		var out []string
		for _, imp := range list {
			if o, ok := strings.CutPrefix(imp, module+"/"); ok {
				out = append(out, o)
			}
		}
		return out
	}
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, claims := 0, 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		n++
		m := claim.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		claims++
		p, ok := pkgs[m[1]]
		if !ok {
			t.Errorf("docs/architecture.md:%d: %s is no package of the module", n, m[1])
			continue
		}
		var named []string
		for _, b := range backticked.FindAllStringSubmatch(m[3], -1) {
			named = append(named, b[1])
			if _, ok := pkgs[b[1]]; !ok && !strings.HasSuffix(b[1], "/") {
				t.Errorf("docs/architecture.md:%d: %s is no package of the module", n, b[1])
			}
		}
		covered := func(imp string) bool {
			return slices.ContainsFunc(named, func(a string) bool { ok, _ := matches(a, imp); return ok })
		}
		switch m[2] {
		case "only":
			for _, imp := range own(p.Imports) {
				if !covered(imp) {
					t.Errorf("docs/architecture.md:%d says %s imports only %s, but it imports %s", n, m[1], strings.Join(named, ", "), imp)
				}
			}
		case "none of":
			for _, dep := range own(p.Deps) {
				if covered(dep) {
					t.Errorf("docs/architecture.md:%d says %s imports none of %s, but it depends on %s", n, m[1], strings.Join(named, ", "), dep)
				}
			}
		}
	}
	if claims < 5 {
		t.Fatalf("docs/architecture.md has %d claims of what a package imports: the list is gone or reworded", claims)
	}
}
