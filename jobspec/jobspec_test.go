package jobspec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-sched/drover/testkit/golden"
)

func readVars(t *testing.T, path string) map[string]string {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	return vars
}

func TestGoodSpecs(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.hcl")
	jsonFiles, _ := filepath.Glob("testdata/good/*.json")
	files = append(files, jsonFiles...)
	if len(files) == 0 {
		t.Fatal("no good specs")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			vars := readVars(t, strings.TrimSuffix(path, filepath.Ext(path))+".vars")
			b, diags := ParseFile(path, vars)
			if diags.HasErrors() {
				t.Fatalf("unexpected errors:\n%s", FormatDiagnostics(diags))
			}
			out := map[string]any{
				"name": b.Name, "billing_project": b.BillingProject, "attributes": b.Attributes,
				"n_jobs": b.NumJobs(), "jobs": b.JobSpecs(),
			}
			if b.CancelAfterNFailures != 0 {
				out["cancel_after_n_failures"] = b.CancelAfterNFailures
			}
			if b.Callback != "" {
				out["callback"] = b.Callback
			}
			if len(b.Groups) > 0 {
				out["job_groups"] = b.Groups
			}
			data, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, path+".golden", append(data, '\n'))
		})
	}
}

func TestBadSpecs(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.hcl")
	if len(files) == 0 {
		t.Fatal("no bad specs")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, diags := ParseFile(path, nil)
			if !diags.HasErrors() {
				t.Fatal("accepted")
			}
			text := FormatDiagnostics(diags)
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("diagnostic without a position: %s", d.Summary)
				}
			}
			golden.Check(t, path+".golden", []byte(text))
		})
	}
}

func TestVarOverrides(t *testing.T) {
	src := []byte(`
variable "n" { default = 2 }
variable "flag" { default = false }
batch "b" {
  job "a" {
    count = var.n
    command = ["true"]
    always_run = var.flag
  }
}`)
	b, diags := Parse("v.hcl", src, map[string]string{"n": "7", "flag": "true"})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if b.Jobs[0].Count != 7 || !b.Jobs[0].AlwaysRun {
		t.Fatalf("overrides not applied: %+v", b.Jobs[0])
	}
	_, diags = Parse("v.hcl", src, map[string]string{"n": "seven"})
	if !strings.Contains(FormatDiagnostics(diags), "the variable is a number") {
		t.Fatalf("bad number override: %s", FormatDiagnostics(diags))
	}
	_, diags = Parse("v.hcl", src, map[string]string{"nn": "1"})
	if !strings.Contains(FormatDiagnostics(diags), `declares no variable "nn"`) {
		t.Fatalf("undeclared override: %s", FormatDiagnostics(diags))
	}
}

func TestExamplesValidate(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.hcl")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, path := range files {
		if _, diags := ParseFile(path, nil); diags.HasErrors() {
			t.Errorf("%s:\n%s", path, FormatDiagnostics(diags))
		}
	}
}

// BenchmarkParse100k parses a jobspec with 100,000 job blocks.
func BenchmarkParse100k(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("batch \"big\" {\n")
	for i := 0; i < 100_000; i++ {
		fmt.Fprintf(&sb, "  job \"j%d\" {\n    command = [\"sh\", \"-c\", \"echo %d\"]\n    cpu = 0.5\n    memory = \"512MiB\"\n", i, i)
		if i > 0 {
			fmt.Fprintf(&sb, "    depends_on = [\"j%d\"]\n", i-1)
		}
		sb.WriteString("  }\n")
	}
	sb.WriteString("}\n")
	src := []byte(sb.String())
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		spec, diags := Parse("big.hcl", src, nil)
		if diags.HasErrors() {
			b.Fatal(FormatDiagnostics(diags))
		}
		if n := len(spec.JobSpecs()); n != 100_000 {
			b.Fatalf("%d jobs", n)
		}
	}
}
