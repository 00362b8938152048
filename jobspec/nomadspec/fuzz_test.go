package nomadspec

import (
	"encoding/json"
	"os"
	"testing"

	nomad "github.com/hashicorp/nomad/api"
)

// FuzzParse feeds arbitrary text to the parser and what it reads to the
// translator: neither may panic, whatever a tenant writes.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/batch.nomad.hcl", "testdata/refused.nomad.hcl"} {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		job, blocks, diags := Parse("fuzz.hcl", src, nil)
		if diags.HasErrors() {
			return
		}
		_, _ = Translate(job, blocks)
	})
}

// FuzzTranslateJSON feeds arbitrary JSON jobs (a nomad/api client's form)
// to the translator.
func FuzzTranslateJSON(f *testing.F) {
	job, _, _ := ParseFile("testdata/batch.nomad.hcl", nil)
	b, _ := json.Marshal(job)
	f.Add(b)
	f.Add([]byte(`{"ID":"j","Type":"batch","TaskGroups":[null]}`))
	f.Add([]byte(`{"ID":"j","Type":"batch","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"exec","Config":{"command":1}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var j nomad.Job
		if json.Unmarshal(data, &j) != nil {
			return
		}
		_, _ = Translate(&j, nil)
	})
}
