package api

import (
	"math"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// NomadNode is what a worker tells a Nomad job of its machine: the node
// attributes a Nomad client interpolates (${node.unique.name},
// ${node.datacenter}, ${node.class}, ...), in drover's terms.
type NomadNode struct {
	Name, Region, Cluster, Pool string
	// Labels are the worker's (-label KEY=VALUE), a Nomad node's meta.
	Labels map[string]string
}

// NomadVars is what a Nomad client gives a task to interpolate, for an
// attempt of a job translated from a Nomad job (JobSpec.Nomad), dir being
// the job's directory as the job sees it: the runtime variables
// (NOMAD_ALLOC_INDEX, NOMAD_TASK_DIR under dir, NOMAD_CPU_LIMIT in MHz at
// 1,000 MHz a core, NOMAD_MEMORY_LIMIT in MB, NOMAD_DC) and the node's
// attributes. A Nomad datacenter is a drover cluster, a node class a
// pool, and the worker's labels its meta (${meta.KEY}), as the
// translation reads a job's constraints.
func (a *Assignment) NomadVars(dir string, node NomadNode) map[string]string {
	vars := map[string]string{
		"NOMAD_ALLOC_INDEX":  strconv.FormatInt(a.ArrayIndex, 10),
		"NOMAD_ALLOC_DIR":    dir + "/alloc",
		"NOMAD_TASK_DIR":     dir + "/local",
		"NOMAD_SECRETS_DIR":  dir + "/secrets",
		"NOMAD_CPU_LIMIT":    strconv.FormatInt(int64(math.Round(a.CPU*1000)), 10),
		"NOMAD_MEMORY_LIMIT": strconv.FormatInt(a.Memory>>20, 10),
		"NOMAD_DC":           node.Cluster,
		"node.unique.name":   node.Name,
		"node.datacenter":    node.Cluster,
		"node.region":        node.Region,
		"node.class":         node.Pool,
		"node.pool":          node.Pool,
		"attr.kernel.name":   runtime.GOOS,
		"attr.cpu.arch":      runtime.GOARCH,
	}
	for k, v := range node.Labels {
		vars["meta."+k] = v
	}
	return vars
}

// A dispatched Nomad job's payload travels in its env, base64, with the
// file (under NOMAD_TASK_DIR) its task's dispatch_payload names; the
// worker writes it there before the task starts.
const (
	NomadPayloadEnv     = "DROVER_NOMAD_PAYLOAD"
	NomadPayloadFileEnv = "DROVER_NOMAD_PAYLOAD_FILE"
)

// NomadDirs are the directories under a Nomad job's directory that a
// Nomad client makes for every task (NOMAD_ALLOC_DIR, NOMAD_TASK_DIR,
// NOMAD_SECRETS_DIR).
var NomadDirs = []string{"alloc", "local", "secrets"}

// NomadEnv is the environment and command of an attempt of a Nomad job,
// as a Nomad client makes them: drover's variables (JobEnv), then the
// runtime variables of NomadVars, then the job's own env with ${name}
// interpolated in each value; then ${name} interpolated in every argument
// of the command, the job's env included.
func (a *Assignment) NomadEnv(vars map[string]string) (env, command []string) {
	all := make(map[string]string, len(vars)+len(a.Env))
	for k, v := range vars {
		all[k] = v
	}
	base := a.droverEnv(len(vars) + len(a.Env))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		all[k] = v
	}
	env = base
	for k, v := range vars {
		if isEnvName(k) {
			if _, own := a.Env[k]; !own {
				env = append(env, k+"="+v)
			}
		}
	}
	// A job's own value of a runtime variable (the index of one job of a
	// group with lifecycle tasks) is what the rest interpolates.
	for k, v := range a.Env {
		if _, runtime := vars[k]; runtime {
			all[k] = InterpolateNomad(v, all)
		}
	}
	own := make(map[string]string, len(a.Env))
	for k, v := range a.Env {
		own[k] = InterpolateNomad(v, all)
	}
	for k, v := range own {
		env = append(env, k+"="+v)
		all[k] = v
	}
	command = make([]string, len(a.Command))
	for i, arg := range a.Command {
		command[i] = InterpolateNomad(arg, all)
	}
	return env, command
}

// nomadRef is a Nomad client's interpolation: ${name}, name of letters,
// digits, _, - and dots.
var nomadRef = regexp.MustCompile(`\$\{([a-zA-Z0-9_\-.]+)\}`)

// InterpolateNomad replaces each ${name} in s whose name vars holds, as a
// Nomad client does; any other is left as written.
func InterpolateNomad(s string, vars map[string]string) string {
	return nomadRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

func isEnvName(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return k != ""
}
