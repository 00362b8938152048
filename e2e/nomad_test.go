package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-sched/drover/api"
)

// TestNomadJobFiles runs the Nomad job files of examples/nomad, written
// for Nomad, with `drover run` on a dev agent: a group's lifecycle tasks
// run in order for each allocation, an exec task's arguments get Nomad's
// runtime interpolation from the worker (no shell), and what has no drover
// meaning is refused with its block and line.
func TestNomadJobFiles(t *testing.T) {
	a := startAgent(t, "", "", "-workers", "2", "-worker-cores", "4", "-worker-memory", "4GiB")

	r := a.drover(a.token, "run", "-wait", "examples/nomad/batch.nomad.hcl").must(t, 0)
	id := nomadBatchID(t, r.stdout)
	jobs := decodeJSON[api.JobList](t, a.drover(a.token, "job", "list", id, "-json").must(t, 0).stdout)
	if len(jobs.Jobs) != 12 {
		t.Fatalf("%d jobs: %+v", len(jobs.Jobs), jobs.Jobs)
	}
	for i := range 4 {
		prepare, count, report := jobs.Jobs[3*i], jobs.Jobs[3*i+1], jobs.Jobs[3*i+2]
		if prepare.Name != "count.prepare" || count.Name != "count.count" || report.Name != "count.report" {
			t.Fatalf("allocation %d: %s %s %s", i, prepare.Name, count.Name, report.Name)
		}
		// Each ran after the one before it ended.
		if !count.Attempts[0].StartTime.After(*prepare.Attempts[0].EndTime) || !report.Attempts[0].StartTime.After(*count.Attempts[0].EndTime) {
			t.Errorf("allocation %d ran out of order: %+v %+v %+v", i, prepare.Attempts, count.Attempts, report.Attempts)
		}
		logs := func(j api.Job) string {
			return a.drover(a.token, "job", "logs", id, fmt.Sprint(j.JobID)).must(t, 0).stdout
		}
		if got, want := logs(prepare), fmt.Sprintf("preparing shard %d\n", i); got != want {
			t.Errorf("prepare %d: %q, want %q", i, got, want)
		}
		if got, want := logs(count), fmt.Sprintf("counting shard %d of shakespeare as word-count.count[%d]\n", i, i); got != want {
			t.Errorf("count %d: %q, want %q", i, got, want)
		}
		if got, want := logs(report), fmt.Sprintf("shard %d done\n", i); got != want {
			t.Errorf("report %d: %q, want %q", i, got, want)
		}
	}
	st := decodeJSON[api.Batch](t, a.drover(a.token, "batch", "status", id, "-json").must(t, 0).stdout)
	if st.Name != "word-count" || st.Attributes["nomad.job"] != "word-count" || st.Attributes["dataset"] != "shakespeare" {
		t.Errorf("batch %+v", st)
	}

	// An array: the worker gives each member its index.
	r = a.drover(a.token, "run", "-wait", "examples/nomad/sweep.nomad.hcl").must(t, 0)
	id = nomadBatchID(t, r.stdout)
	if got := a.drover(a.token, "job", "logs", id, "731").must(t, 0).stdout; got != "point 730: 532900\n" {
		t.Errorf("sweep point 730: %q", got)
	}

	// Templates, rendered by the worker with the task's environment: into
	// a file, and into the environment.
	tmpl := writeSpec(t, `job "tmpl" {
  type = "batch"
  group "g" {
    count = 2
    task "t" {
      driver = "exec"
      template {
        data        = "index={{ env \"NOMAD_ALLOC_INDEX\" }}\n"
        destination = "local/conf.txt"
      }
      template {
        data        = "GREETING=hello-{{ env \"NOMAD_ALLOC_INDEX\" }}\n"
        destination = "secrets/app.env"
        env         = true
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "cat local/conf.txt; echo $GREETING"]
      }
    }
  }
}
`)
	r = a.drover(a.token, "run", "-wait", tmpl).must(t, 0)
	id = nomadBatchID(t, r.stdout)
	if got := a.drover(a.token, "job", "logs", id, "2").must(t, 0).stdout; got != "index=1\nhello-1\n" {
		t.Errorf("a templated task's log: %q", got)
	}

	// ${meta.KEY} constraints: a job runs only on the workers labelled
	// so, and reads the worker's labels as its node's meta.
	a.startWorker(t, "rack1", 2, "-label", "rack=r1", "-label", "disk=ssd")
	racked := writeSpec(t, `job "racked" {
  type = "batch"
  constraint {
    attribute = "${meta.rack}"
    value     = "r1"
  }
  group "g" {
    count = 3
    task "t" {
      driver = "raw_exec"
      constraint {
        attribute = "${meta.disk}"
        value     = "ssd"
      }
      config {
        command = "/bin/echo"
        args    = ["rack ${meta.rack} disk ${meta.disk}"]
      }
    }
  }
}
`)
	r = a.drover(a.token, "run", "-wait", racked).must(t, 0)
	id = nomadBatchID(t, r.stdout)
	jobs = decodeJSON[api.JobList](t, a.drover(a.token, "job", "list", id, "-json").must(t, 0).stdout)
	for _, j := range jobs.Jobs {
		if len(j.Attempts) != 1 || j.Attempts[0].Instance != "rack1" || j.WorkerLabels["rack"] != "r1" {
			t.Errorf("job %d of a job constrained to rack r1: %+v", j.JobID, j)
		}
		if got := a.drover(a.token, "job", "logs", id, fmt.Sprint(j.JobID)).must(t, 0).stdout; got != "rack r1 disk ssd\n" {
			t.Errorf("job %d's log: %q", j.JobID, got)
		}
	}
	// No worker carries rack r9: the job waits, and says why.
	src, err := os.ReadFile(racked)
	if err != nil {
		t.Fatal(err)
	}
	nowhere := writeSpec(t, strings.Replace(strings.Replace(string(src), `"r1"`, `"r9"`, 1), `"racked"`, `"nowhere"`, 1))
	r = a.drover(a.token, "run", nowhere).must(t, 0)
	id = nomadBatchID(t, r.stdout)
	waitFor(t, "job why to name the labels", 20*time.Second, func() bool {
		w := decodeJSON[api.JobWhy](t, a.drover(a.token, "job", "why", id, "1", "-json").must(t, 0).stdout)
		return len(w.Reasons) > 0 && w.Reasons[0].Reason == "labels_mismatch" && strings.Contains(w.Reasons[0].Message, "labelled disk=ssd, rack=r9")
	})
	a.drover(a.token, "batch", "cancel", id).must(t, 0)

	refused := writeSpec(t, `job "web" {
  type = "batch"
  group "api" {
    service {
      name = "api"
    }
    task "server" {
      driver = "docker"
      config {
        image   = "docker.io/library/nginx:1.27"
        command = "nginx"
      }
    }
  }
}
`)
	r = a.drover(a.token, "run", refused).must(t, 1)
	if !strings.Contains(r.stderr, refused+`:4:5: group "api" > service: service blocks register with Consul`) {
		t.Fatalf("refusal: %s", r.stderr)
	}
	if list := a.drover(a.token, "batch", "list").must(t, 0).stdout; strings.Contains(list, "web") {
		t.Fatalf("a refused job made a batch: %s", list)
	}
}

// nomadBatchID reads the batch a Nomad job was registered as from `drover
// run`'s output.
func nomadBatchID(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`Registered Nomad job "[^"]*" as batch (\d+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no batch ID in %q", out)
	}
	return m[1]
}
