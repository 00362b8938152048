# A parameter sweep: one group of 1,000 allocations of one task, which
# drover runs as a job array (NOMAD_ALLOC_INDEX is the array index).
#
#   drover run -wait examples/nomad/sweep.nomad.hcl
job "sweep" {
  type     = "batch"
  priority = 60

  group "point" {
    count = 1000

    task "eval" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo point ${NOMAD_ALLOC_INDEX}: $(( ${NOMAD_ALLOC_INDEX} * ${NOMAD_ALLOC_INDEX} ))"]
      }

      resources {
        cpu    = 100
        memory = 16
      }
    }
  }
}
