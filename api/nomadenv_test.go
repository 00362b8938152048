package api

import (
	"slices"
	"strings"
	"testing"
)

func TestInterpolateNomad(t *testing.T) {
	vars := map[string]string{"NOMAD_ALLOC_INDEX": "7", "node.class": "highmem", "X": "$HOME"}
	for in, want := range map[string]string{
		"shard ${NOMAD_ALLOC_INDEX}":         "shard 7",
		"${node.class}/${NOMAD_ALLOC_INDEX}": "highmem/7",
		"${meta.rack} $HOME ${HOME}":         "${meta.rack} $HOME ${HOME}", // unknown names and $NAME stay
		`${env["HOME"]}`:                     `${env["HOME"]}`,
		"${X}${X}":                           "$HOME$HOME", // values are not interpolated again
		"${NOMAD_ALLOC_INDEX":                "${NOMAD_ALLOC_INDEX",
	} {
		if got := InterpolateNomad(in, vars); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestNomadEnv(t *testing.T) {
	a := &Assignment{AttemptRef: AttemptRef{BatchID: 3, JobID: 9, Attempt: 1}, ArrayIndex: 4, CPU: 0.5, Memory: 256 << 20,
		Command: []string{"/bin/echo", "${NOMAD_ALLOC_INDEX}", "${SHARD}", "${node.datacenter}", "${node.region}", "${meta.rack}", "${NOMAD_TASK_DIR}/x", "${nope}"},
		Env:     map[string]string{"SHARD": "s${NOMAD_ALLOC_INDEX}", "NOMAD_ALLOC_NAME": "j.g[${NOMAD_ALLOC_INDEX}]"}}
	env, cmd := a.NomadEnv(a.NomadVars("/io", NomadNode{Name: "w1", Region: "eu", Cluster: "eu-batch", Pool: "highmem", Labels: map[string]string{"rack": "r1"}}))
	// A datacenter is a drover cluster, a node's meta the worker's labels.
	if got := strings.Join(cmd, " "); got != "/bin/echo 4 s4 eu-batch eu r1 /io/local/x ${nope}" {
		t.Fatalf("command %q", got)
	}
	for _, kv := range []string{"DROVER_INDEX=4", "NOMAD_ALLOC_INDEX=4", "NOMAD_TASK_DIR=/io/local", "NOMAD_CPU_LIMIT=500", "NOMAD_MEMORY_LIMIT=256",
		"SHARD=s4", "NOMAD_ALLOC_NAME=j.g[4]", "NOMAD_DC=eu-batch"} {
		if !slices.Contains(env, kv) {
			t.Errorf("no %s in %v", kv, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "node.") || strings.HasPrefix(kv, "attr.") || strings.HasPrefix(kv, "meta.") {
			t.Errorf("%s is a node attribute, not a variable", kv)
		}
	}
	// A job's own NOMAD_ALLOC_INDEX (one job of a group with lifecycle
	// tasks) wins over the array index.
	a.Env["NOMAD_ALLOC_INDEX"] = "2"
	env, cmd = a.NomadEnv(a.NomadVars("/io", NomadNode{}))
	if cmd[1] != "2" || cmd[2] != "s2" || !slices.Contains(env, "NOMAD_ALLOC_INDEX=2") || !slices.Contains(env, "SHARD=s2") || slices.Contains(env, "NOMAD_ALLOC_INDEX=4") {
		t.Fatalf("own index: %q %v", cmd, env)
	}
}
