// Package archtest checks the code against docs/architecture.md: the
// table of what each package may import is data, and drift fails the
// tests.
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

const module = "github.com/drover-sched/drover"

// rule is one row of the table: the packages it covers (a path ending in
// "/" covers the package and those under it, unless a row names them) and
// what they may import of drover's.
type rule struct {
	line     int
	covers   []string
	anything bool
	allowed  []string // a path ending in "/": the package and those under it
}

var backticked = regexp.MustCompile("`([^`]+)`")

// packageLike says whether a backticked token names a package (lower case
// path elements), not a type or a flag.
var packageLike = regexp.MustCompile(`^[a-z0-9]+(/[a-z0-9-]+)*/?$`)

func readRules(t *testing.T, path string) []rule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []rule
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	in, n := false, 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| package | owns | may import"):
			in = true
			continue
		case in && !strings.HasPrefix(line, "|"):
			in = false
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		cols := strings.Split(line, " | ")
		if len(cols) < 3 {
			t.Fatalf("%s:%d: a row of the import table has %d columns", path, n, len(cols))
		}
		r := rule{line: n}
		for _, m := range backticked.FindAllStringSubmatch(cols[0], -1) {
			if packageLike.MatchString(m[1]) {
				r.covers = append(r.covers, m[1])
			}
		}
		last := cols[len(cols)-1]
		r.anything = strings.Contains(last, "anything")
		for _, m := range backticked.FindAllStringSubmatch(last, -1) {
			if packageLike.MatchString(m[1]) {
				r.allowed = append(r.allowed, m[1])
			}
		}
		if len(r.covers) == 0 {
			t.Fatalf("%s:%d: a row of the import table names no package", path, n)
		}
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no import table", path)
	}
	return rules
}

// matches says whether pattern (a path, or a path ending in "/" for the
// package and those under it) covers pkg, and how specifically.
func matches(pattern, pkg string) (bool, int) {
	if dir, ok := strings.CutSuffix(pattern, "/"); ok {
		return pkg == dir || strings.HasPrefix(pkg, pattern), len(dir)
	}
	return pkg == pattern, len(pattern) + 1
}

// ruleFor is the most specific row covering pkg.
func ruleFor(rules []rule, pkg string) *rule {
	var best *rule
	bestLen := -1
	for i := range rules {
		for _, c := range rules[i].covers {
			if ok, l := matches(c, pkg); ok && l > bestLen {
				best, bestLen = &rules[i], l
			}
		}
	}
	return best
}

type listed struct {
	ImportPath string
	Imports    []string
}

// TestImportsFollowTheArchitecture: every package of the module has a row
// in docs/architecture.md's table, every package a row names exists, and
// no package imports (outside its tests) a package of drover's its row
// does not allow.
func TestImportsFollowTheArchitecture(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(root, "docs", "architecture.md")
	rules := readRules(t, doc)
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	for dec := json.NewDecoder(strings.NewReader(string(out))); dec.More(); {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		pkgs = append(pkgs, p)
	}
	known := map[string]bool{}
	for _, p := range pkgs {
		known[p.ImportPath] = true
	}
	exists := func(pattern string) bool {
		for pkg := range known {
			if ok, _ := matches(pattern, pkg); ok {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		for _, p := range append(slices.Clone(r.covers), r.allowed...) {
			if !exists(p) {
				t.Errorf("docs/architecture.md:%d names %s, which is no package of the module", r.line, p)
			}
		}
	}
	for _, p := range pkgs {
		r := ruleFor(rules, p.ImportPath)
		if r == nil {
			t.Errorf("package %s has no row in docs/architecture.md's import table", p.ImportPath)
			continue
		}
		if r.anything {
			continue
		}
		for _, imp := range p.Imports {
			own, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if slices.ContainsFunc(r.allowed, func(a string) bool { ok, _ := matches(a, own); return ok }) {
				continue
			}
			// A package may import those its own row covers below it.
			if slices.ContainsFunc(r.covers, func(c string) bool {
				ok, _ := matches(c, own)
				return ok && own != p.ImportPath && r == ruleFor(rules, own)
			}) {
				continue
			}
			t.Errorf("%s imports %s, which docs/architecture.md:%d does not allow", p.ImportPath, own, r.line)
		}
	}
}
