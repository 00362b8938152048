package nomadspec

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-sched/drover/api"
)

func parseFile(t *testing.T, path string, vars map[string]string) (*nomad.Job, Blocks) {
	t.Helper()
	job, blocks, diags := ParseFile(path, vars)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return job, blocks
}

// A batch job as a Nomad user writes it: variables, locals, meta, a
// constraint on the node class, a group of 4 with a prestart, a main and a
// poststop task.
func TestParseAndTranslateABatchJob(t *testing.T) {
	job, blocks := parseFile(t, "testdata/batch.nomad.hcl", map[string]string{"shards": "3"})
	if *job.ID != "align" || *job.Name != "align" || *job.Type != "batch" || *job.TaskGroups[0].Count != 3 {
		t.Fatalf("job %s %s %s count %d", *job.ID, *job.Name, *job.Type, *job.TaskGroups[0].Count)
	}
	if job.Meta["label"] != "run-3" {
		t.Fatalf("local.label: %q", job.Meta["label"])
	}
	align := job.TaskGroups[0].Tasks[1]
	if got := align.Config["args"].([]any)[1]; got != "echo shard ${NOMAD_ALLOC_INDEX} on ${node.datacenter}" {
		t.Fatalf("runtime interpolations are kept as written: %q", got)
	}
	if job.Constraints[0].LTarget != "${node.class}" {
		t.Fatalf("constraint %+v", job.Constraints[0])
	}
	tr, err := Translate(job, blocks)
	if err != nil {
		t.Fatal(err)
	}
	b := tr.Batch
	if b.Name != "align" || b.BillingProject != "genomics" || b.Priority != 20 || b.Attributes["sample_set"] != "1kg" || b.Attributes[AttrJob] != "align" {
		t.Fatalf("batch %+v", b)
	}
	// Three allocations, each a fetch, an align after its own fetch and a
	// report after its own align.
	if len(b.Jobs) != 9 || len(tr.Tasks) != 9 {
		t.Fatalf("%d jobs, %d refs", len(b.Jobs), len(tr.Tasks))
	}
	for i := range 3 {
		fetch, main, report := b.Jobs[3*i], b.Jobs[3*i+1], b.Jobs[3*i+2]
		if fetch.JobID != int64(3*i+1) || len(fetch.ParentIDs) != 0 {
			t.Fatalf("fetch %d: %+v", i, fetch)
		}
		if !slices.Equal(main.ParentIDs, []int64{fetch.JobID}) || !slices.Equal(report.ParentIDs, []int64{main.JobID}) || !report.AlwaysRun {
			t.Fatalf("index %d: align parents %v, report parents %v always_run %v", i, main.ParentIDs, report.ParentIDs, report.AlwaysRun)
		}
		if main.Env["NOMAD_ALLOC_INDEX"] != string(rune('0'+i)) || tr.Tasks[3*i+1] != (TaskRef{Group: "shard", Task: "align", Index: i}) {
			t.Fatalf("index %d: env %v ref %+v", i, main.Env, tr.Tasks[3*i+1])
		}
	}
	main := b.Jobs[1]
	if main.Image != "docker.io/library/busybox:1.36" || strings.Join(main.Command, " ") != "sh -c echo shard ${NOMAD_ALLOC_INDEX} on ${node.datacenter}" {
		t.Fatalf("container job: %q %q", main.Image, main.Command)
	}
	if main.CPU != 0.5 || main.Memory != 256<<20 || main.GPUs != 1 || main.GPUType != "a100" || main.Pool != "highmem" || !slices.Equal(main.Clusters, []string{"us-east"}) || main.Regions != nil {
		t.Fatalf("resources and place: cpu %g memory %d gpus %d %s pool %q clusters %v regions %v", main.CPU, main.Memory, main.GPUs, main.GPUType, main.Pool, main.Clusters, main.Regions)
	}
	// restart { attempts = 2 } and Nomad's batch reschedule default of 1:
	// (2+1)×(1+1) attempts.
	if main.Retries != 5 {
		t.Fatalf("retries %d, want 5", main.Retries)
	}
	if main.Env["SHARD"] != "${NOMAD_ALLOC_INDEX}" || main.Env["NOMAD_META_sample_set"] != "1kg" || main.Env["NOMAD_GROUP_NAME"] != "shard" {
		t.Fatalf("env %v", main.Env)
	}
	if len(main.Inputs) != 1 || main.Inputs[0].Source != "s3://bucket/ref.fa" || main.Inputs[0].Path != "local/ref.fa" {
		t.Fatalf("inputs %+v", main.Inputs)
	}
	fetch := b.Jobs[0]
	if fetch.Image != "" || fetch.Command[0] != "/bin/sh" || fetch.CPU != 0.1 || fetch.Memory != 64<<20 {
		t.Fatalf("process job: %+v", fetch)
	}
	for _, j := range b.Jobs {
		if err := j.Validate(); err != nil {
			t.Fatalf("job %d: %v", j.JobID, err)
		}
	}
}

// Without lifecycle tasks a group is one array of its count.
func TestAGroupWithoutLifecycleIsAnArray(t *testing.T) {
	src := `job "sweep" {
  type = "batch"
  group "g" {
    count = 1000
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`
	job, blocks, diags := Parse("sweep.nomad.hcl", []byte(src), nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tr, err := Translate(job, blocks)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Batch.Jobs) != 1 || tr.Batch.Jobs[0].Count != 1000 || tr.Tasks[0].Index != -1 {
		t.Fatalf("jobs %+v", tr.Batch.Jobs)
	}
	// Nomad's defaults for a batch job: cpu 100 MHz, memory 300 MB,
	// restart attempts 3, reschedule attempts 1.
	j := tr.Batch.Jobs[0]
	if j.CPU != 0.1 || j.Memory != 300<<20 || j.Retries != 7 || tr.Batch.Priority != 0 || tr.Batch.BillingProject != "" {
		t.Fatalf("defaults: cpu %g memory %d retries %d priority %d project %q", j.CPU, j.Memory, j.Retries, tr.Batch.Priority, tr.Batch.BillingProject)
	}
}

// What has no drover meaning is refused, each naming its block and line,
// never dropped.
func TestRefusalsNameTheBlockAndLine(t *testing.T) {
	job, blocks := parseFile(t, "testdata/refused.nomad.hcl", nil)
	_, err := Translate(job, blocks)
	var errs Errors
	if err == nil {
		t.Fatal("a job with a service, ports, a CSI volume and vault was accepted")
	}
	errs = err.(Errors)
	want := map[string]string{
		`group "api" > network`:                  "testdata/refused.nomad.hcl:5:",
		`group "api" > volume "data"`:            "testdata/refused.nomad.hcl:9:",
		`group "api" > service`:                  "testdata/refused.nomad.hcl:14:",
		`group "api" > task "server" > config`:   "testdata/refused.nomad.hcl:21:",
		`group "api" > task "server" > vault`:    "testdata/refused.nomad.hcl:26:",
		`group "api" > task "server" > template`: "testdata/refused.nomad.hcl:29:",
	}
	for _, e := range errs {
		prefix, ok := want[e.Path]
		if !ok {
			t.Errorf("unexpected refusal %v", e)
			continue
		}
		if !strings.HasPrefix(e.Error(), prefix) {
			t.Errorf("%v: want it at %s", e, prefix)
		}
		delete(want, e.Path)
	}
	for p := range want {
		t.Errorf("no refusal of %s in %v", p, err)
	}
	if !strings.Contains(err.Error(), "privileged of the docker driver") {
		t.Errorf("the config key is not named: %v", err)
	}
}

func TestJobTypes(t *testing.T) {
	for typ, want := range map[string]string{
		"":         `service job (type = "service", Nomad's default`,
		"service":  "service job",
		"sysbatch": "sysbatch job, which runs on every node",
		"system":   "system job",
	} {
		src := `job "j" {
  ` + map[bool]string{true: "", false: `type = "` + typ + `"`}[typ == ""] + `
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}`
		job, blocks, diags := Parse("j.nomad.hcl", []byte(src), nil)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if _, err := Translate(job, blocks); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("type %q: %v, want %q", typ, err, want)
		}
	}
}

// A job sent as JSON (the nomad/api client's form) has no lines: its
// refusals name the block alone.
func TestAJobFromJSONIsTranslatedAlike(t *testing.T) {
	job, blocks := parseFile(t, "testdata/batch.nomad.hcl", nil)
	fromFile, err := Translate(job, blocks)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(job)
	var sent nomad.Job
	if err := json.Unmarshal(b, &sent); err != nil {
		t.Fatal(err)
	}
	fromJSON, err := Translate(&sent, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := json.Marshal(fromFile)
	y, _ := json.Marshal(fromJSON)
	if string(x) != string(y) {
		t.Fatalf("the file and its JSON translate differently:\n%s\n%s", x, y)
	}
	sent.TaskGroups[0].Services = []*nomad.Service{{Name: "x"}}
	if _, err := Translate(&sent, nil); err == nil || err.Error() != `group "shard" > service: service blocks register with Consul or Nomad's service catalog; a drover batch job serves nothing` {
		t.Fatalf("refusal of a JSON job: %v", err)
	}
}

func TestParseDiagnostics(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"job \"j\" {\n  typ = \"batch\"\n}", `x.hcl:2,3-6: Unsupported argument; an argument named "typ" is not expected here; did you mean "type"?`},
		{"job \"j\" {\n  group \"g\" {\n    tsk \"t\" {}\n  }\n}", `x.hcl:3,5-8: Unsupported block type; blocks of type "tsk" are not expected here; did you mean "task"?`},
		{"job \"j\" {\n  group \"g\" {\n    count = \"many\"\n  }\n}", `x.hcl:3,13-19: Invalid value; count: number required`},
		{"job \"j\" {\n  group \"g\" {\n    task \"t\" {\n      kill_timeout = \"soon\"\n    }\n  }\n}", `x.hcl:4,22-28: Invalid duration`},
		{"job \"j\" {\n  priority = var.p\n}", `Unsupported attribute`},
		{"job \"a\" {}\njob \"b\" {}", `x.hcl:2,1-8: Duplicate job block`},
		{"variable \"n\" {}\njob \"j\" {}", `Variable without a value`},
		{``, `No job block`},
		{"job \"j\" {\n  group \"g\" {\n    task \"t\" {\n      lifecycle {}\n    }\n  }\n}", `Missing required argument; the argument "hook" is required here`},
		{"job \"j\" {\n  meta {\n    a = \"1\"\n  }\n  meta {\n    b = \"2\"\n  }\n}", `x.hcl:5,3-7: Duplicate meta block`},
	} {
		_, _, diags := Parse("x.hcl", []byte(c.src), nil)
		if !diags.HasErrors() || !strings.Contains(diags.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, diags, c.want)
		}
	}
}

func TestVariablesAndLocals(t *testing.T) {
	src := `
variable "image" { default = "docker.io/library/busybox:1" }
variable "count" {
  type    = number
  default = 2
}
locals {
  b = "${local.a}-b"
  a = "x${var.count}"
}
job "j" {
  type = "batch"
  meta { tag = local.b }
  group "g" {
    count = var.count * 2
    task "t" {
      driver = "docker"
      config {
        image = var.image
        args  = ["${NOMAD_TASK_DIR}/in", "${env["HOME"]}", "${meta.rack}"]
        command = "cat"
      }
    }
  }
}`
	job, blocks, diags := Parse("v.hcl", []byte(src), map[string]string{"count": "5"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if job.Meta["tag"] != "x5-b" || *job.TaskGroups[0].Count != 10 {
		t.Fatalf("meta %v count %d", job.Meta, *job.TaskGroups[0].Count)
	}
	args := job.TaskGroups[0].Tasks[0].Config["args"].([]any)
	if args[0] != "${NOMAD_TASK_DIR}/in" || args[1] != `${env["HOME"]}` || args[2] != "${meta.rack}" {
		t.Fatalf("args %q", args)
	}
	if _, err := Translate(job, blocks); err != nil {
		t.Fatal(err)
	}
	if _, _, diags := Parse("v.hcl", []byte(src), map[string]string{"count": "many"}); !diags.HasErrors() {
		t.Fatal("a -var that is not a number was accepted")
	}
	if _, _, diags := Parse("v.hcl", []byte(src), map[string]string{"nope": "1"}); !diags.HasErrors() || !strings.Contains(diags.Error(), "Undeclared variable") {
		t.Fatalf("an undeclared -var: %v", diags)
	}
}

func TestPlacementAndConstraints(t *testing.T) {
	base := func(extra string) string {
		return `job "j" {
  type = "batch"
  datacenters = ["eu", "us"]
  ` + extra + `
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}`
	}
	for _, c := range []struct {
		extra    string
		clusters []string
		pool     string
		err      string
		labels   map[string]string
	}{
		{``, []string{"eu", "us"}, "", "", nil},
		{`node_pool = "gpu"`, []string{"eu", "us"}, "gpu", "", nil},
		{`region = "europe"`, []string{"eu", "us"}, "", "", nil},
		{`constraint {
    attribute = "${node.datacenter}"
    value     = "eu"
  }`, []string{"eu"}, "", "", nil},
		{`constraint {
    attribute = "${node.datacenter}"
    value     = "asia"
  }`, nil, "", "leave none of", nil},
		{`constraint {
    attribute = "${meta.rack}"
    value     = "r1"
  }
  constraint {
    attribute = "${meta.disk.kind}"
    operator  = "=="
    value     = "ssd"
  }`, []string{"eu", "us"}, "", "", map[string]string{"rack": "r1", "disk.kind": "ssd"}},
		{`constraint {
    attribute = "${meta.rack}"
    value     = "r1"
  }
  constraint {
    attribute = "${meta.rack}"
    value     = "r2"
  }`, nil, "", "the job could run nowhere", nil},
		{`constraint {
    attribute = "${meta.rack}"
    operator  = "!="
    value     = "r1"
  }`, nil, "", "use =", nil},
		{`constraint {
    attribute = "${attr.unique.hostname}"
    value     = "h1"
  }`, nil, "", "a constraint on ${attr.unique.hostname} has no drover meaning", nil},
		{`constraint {
    operator = "distinct_hosts"
    value    = "true"
  }`, []string{"eu", "us"}, "", "", nil},
	} {
		job, blocks, diags := Parse("p.hcl", []byte(base(c.extra)), nil)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		tr, err := Translate(job, blocks)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.extra, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.extra, err)
			continue
		}
		j := tr.Batch.Jobs[0]
		// A Nomad region is a drover region, a datacenter a cluster.
		var regions []string
		if strings.Contains(c.extra, "region =") {
			regions = []string{"europe"}
		}
		if !slices.Equal(j.Clusters, c.clusters) || !slices.Equal(j.Regions, regions) || j.Pool != c.pool || !maps.Equal(j.WorkerLabels, c.labels) {
			t.Errorf("%s: clusters %v regions %v pool %q labels %v", c.extra, j.Clusters, j.Regions, j.Pool, j.WorkerLabels)
		}
	}
}

func TestNextLaunch(t *testing.T) {
	p := &nomad.PeriodicConfig{Spec: new("0 9 * * *"), TimeZone: new("America/New_York")}
	after := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC) // 07:00 in New York
	next, err := NextLaunch(p, after)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 11, 28, 14, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Fatalf("next %v, want %v", next.UTC(), want)
	}
	p.Specs = []string{"30 7 * * *"}
	if next, _ = NextLaunch(p, after); !next.Equal(time.Date(2026, 11, 28, 12, 30, 0, 0, time.UTC)) {
		t.Fatalf("the earliest of two crons: %v", next.UTC())
	}
	if _, err := NextLaunch(&nomad.PeriodicConfig{Spec: new("61 * * * *")}, after); err == nil {
		t.Fatal("a minute of 61 was accepted")
	}
	if _, err := NextLaunch(&nomad.PeriodicConfig{Spec: new("@daily"), TimeZone: new("Mars/Olympus")}, after); err == nil {
		t.Fatal("an unknown time zone was accepted")
	}
}

func TestParseFileBounds(t *testing.T) {
	big := make([]byte, MaxSource+1)
	path := t.TempDir() + "/big.hcl"
	if err := os.WriteFile(path, big, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, diags := ParseFile(path, nil); !diags.HasErrors() || !strings.Contains(diags.Error(), "too large") {
		t.Fatalf("a job file past the limit: %v", diags)
	}
	_ = api.MaxJobsPerBatch
}

// Cron expressions a tenant writes to make the leader spend its time, or
// panic: refused, or computed.
func TestHostileCrons(t *testing.T) {
	after := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, spec := range []string{"59-0 * * * *", "* * * 12-1 *", "* * * * FRI-MON", "0 0 31-1 * *", strings.Repeat("1,", 100) + "1 * * * *"} {
		if _, err := NextLaunch(&nomad.PeriodicConfig{Spec: new(spec)}, after); err == nil {
			t.Errorf("%q was accepted", spec)
		}
	}
	many := make([]string, MaxCrons+1)
	for i := range many {
		many[i] = "* * * * *"
	}
	if _, err := NextLaunch(&nomad.PeriodicConfig{Specs: many}, after); err == nil {
		t.Error("more cron expressions than a job may have were accepted")
	}
	// Odd but valid: computed (a date that never comes is never).
	for _, spec := range []string{"0 0 30 2 *", "0 0 29 2 *", "@yearly", "0 0 * * 1-5", "*/7 * * * * * *"} {
		if _, err := NextLaunch(&nomad.PeriodicConfig{Spec: new(spec)}, after); err != nil {
			t.Errorf("%q: %v", spec, err)
		}
	}
}

// A docker task without a command runs its image's entrypoint and cmd;
// args alone are refused (what they would follow is the image's).
func TestDockerTaskWithoutCommand(t *testing.T) {
	job := func(config string) (*Translation, error) {
		src := `job "d" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image = "docker.io/library/busybox:1.36"
        ` + config + `
      }
    }
  }
}`
		j, blocks, diags := Parse("d.hcl", []byte(src), nil)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		return Translate(j, blocks)
	}
	tr, err := job("")
	if err != nil || len(tr.Batch.Jobs[0].Command) != 0 || tr.Batch.Jobs[0].Image == "" {
		t.Fatalf("no command: %+v %v", tr, err)
	}
	if _, err := job(`args = ["-x"]`); err == nil || !strings.Contains(err.Error(), "args without command") {
		t.Fatalf("args alone: %v", err)
	}
}

// TestMetaConstraintsOfJobGroupAndTask: the worker labels a task's job
// asks for are those its job, its group and itself ask for, together.
func TestMetaConstraintsOfJobGroupAndTask(t *testing.T) {
	src := `job "j" {
  type = "batch"
  constraint {
    attribute = "${meta.rack}"
    value     = "r1"
  }
  group "g" {
    constraint {
      attribute = "${meta.ssd}"
      value     = "true"
    }
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
      constraint {
        attribute = "${meta.gen}"
        value     = "3"
      }
    }
  }
}`
	job, blocks, diags := Parse("m.hcl", []byte(src), nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tr, err := Translate(job, blocks)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Batch.Jobs[0].WorkerLabels, map[string]string{"rack": "r1", "ssd": "true", "gen": "3"}; !maps.Equal(got, want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	// The group asks for another rack than the job: nowhere to run.
	bad := strings.Replace(src, `"${meta.ssd}"`, `"${meta.rack}"`, 1)
	job, blocks, diags = Parse("m.hcl", []byte(bad), nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := Translate(job, blocks); err == nil || !strings.Contains(err.Error(), "m.hcl:") || !strings.Contains(err.Error(), "could run nowhere") {
		t.Fatalf("conflicting racks: %v", err)
	}
}
