# A parameterized Nomad job: registering it runs nothing; each dispatch
# makes a child job that runs with the dispatch's meta and payload.
#
#   nomad job run examples/nomad/parameterized.nomad.hcl   (NOMAD_ADDR at drover)
#   nomad job dispatch -meta sample=NA12878 render-report input.txt
#
# or with drover's CLI in front of the same API: see docs/nomad.md.
job "render-report" {
  type = "batch"

  parameterized {
    payload       = "optional"
    meta_required = ["sample"]
    meta_optional = ["format"]
  }

  group "render" {
    task "render" {
      driver = "raw_exec"

      dispatch_payload {
        file = "input.txt"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo report for ${NOMAD_META_sample}: $(cat ${NOMAD_TASK_DIR}/input.txt 2>/dev/null || echo no payload)"]
      }

      resources {
        cpu    = 200
        memory = 64
      }
    }
  }
}
