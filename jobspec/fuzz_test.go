package jobspec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-sched/drover/api"
)

// FuzzParse: no jobspec makes the parser panic, and whatever it accepts
// passes the API's limits (what the server would check again).
func FuzzParse(f *testing.F) {
	examples, _ := filepath.Glob("../examples/*.hcl")
	for _, p := range examples {
		if src, err := os.ReadFile(p); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte(`batch "b" { job "a" { command = ["true"] } }`))
	f.Add([]byte(`batch "b" { job "a" {
  count = 2147483647
  command = ["echo", "x"]
  memory = "1TiB"
  cpu = 0.001
} }`))
	f.Add([]byte(`variable "n" { default = 3 }
batch "b" {
  attributes = { team = "x" }
  job "a" { count = var.n
    command = ["true"] }
  job "b" { depends_on = ["a"]
    command = ["true"]
    retries = 2
    timeout = "1h" }
}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		b, diags := Parse("fuzz.hcl", src, nil)
		if diags.HasErrors() || b == nil {
			return
		}
		if err := api.ValidateJobs(b.JobSpecs()); err != nil {
			t.Fatalf("the parser accepted a batch the API refuses: %v\n%s", err, src)
		}
	})
}
