package api

import (
	"strings"
	"testing"
)

func TestNomadTemplates(t *testing.T) {
	env := map[string]string{"NOMAD_ALLOC_INDEX": "3", "NAME": "x"}
	for data, want := range map[string]string{
		`shard={{ env "NOMAD_ALLOC_INDEX" }}`:                             "shard=3",
		`{{ if eq (env "NAME") "x" }}yes{{ else }}no{{ end }}`:            "yes",
		`{{ with env "MISSING" }}set{{ else }}unset{{ end }}`:             "unset",
		`{{ env "NAME" | urlquery }}-{{ len (env "NOMAD_ALLOC_INDEX") }}`: "x-1",
	} {
		out, err := RenderNomadTemplate(&NomadTemplate{Data: data, Dest: "local/x"}, env)
		if err != nil || string(out) != want {
			t.Errorf("%s: %q %v, want %q", data, out, err, want)
		}
	}
	out, err := RenderNomadTemplate(&NomadTemplate{Data: `[[ env "NAME" ]] {{ x }}`, Left: "[[", Right: "]]"}, env)
	if err != nil || string(out) != "x {{ x }}" {
		t.Errorf("delimiters: %q %v", out, err)
	}
	// What a template may not do: reach Consul, Vault or Nomad, loop, or
	// allocate without bound.
	for data, want := range map[string]string{
		`{{ key "service/x" }}`:                                         "key is not rendered",
		`{{ with secret "kv/x" }}{{ .Data }}{{ end }}`:                  "secret is not rendered",
		`{{ range service "db" }}{{ .Address }}{{ end }}`:               "range is not rendered",
		`{{ range 1000000000 }}{{ end }}`:                               "range is not rendered",
		`{{ define "a" }}{{ template "a" }}{{ end }}{{ template "a" }}`: "not rendered",
		`{{ printf "%0999999999d" 1 }}`:                                 "printf is not rendered",
		`{{ env "A" `:                                                   "template:",
	} {
		if _, err := RenderNomadTemplate(&NomadTemplate{Data: data}, env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", data, err, want)
		}
	}
	big := strings.Repeat(`{{ env "BIG" }}`, 20)
	if _, err := RenderNomadTemplate(&NomadTemplate{Data: big}, map[string]string{"BIG": strings.Repeat("x", 64<<10)}); err == nil {
		t.Error("a template rendering past the limit was written")
	}
	kv, err := ParseEnvFile([]byte("# comment\nA=1\nexport B = \"two\"\n\n"))
	if err != nil || kv["A"] != "1" || kv["B"] != "two" {
		t.Errorf("env file: %v %v", kv, err)
	}
	if _, err := ParseEnvFile([]byte("not a pair\n")); err == nil {
		t.Error("a line that is no pair was read")
	}
}
