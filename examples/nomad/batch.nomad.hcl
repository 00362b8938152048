# A Nomad batch job written for Nomad, which drover runs unchanged:
#
#   drover run -wait examples/nomad/batch.nomad.hcl
#
# Each of the group's 4 allocations is three drover jobs: "prepare" (a
# prestart task) before "count", and "report" (a poststop task) after it,
# whatever count's outcome. docs/nomad.md says what maps to what.
job "word-count" {
  type        = "batch"
  datacenters = ["*"]

  meta {
    dataset = "shakespeare"
  }

  group "count" {
    count = 4

    restart {
      attempts = 1
      mode     = "fail"
    }

    task "prepare" {
      driver = "raw_exec"

      lifecycle {
        hook = "prestart"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo preparing shard $NOMAD_ALLOC_INDEX > $NOMAD_TASK_DIR/ready && cat $NOMAD_TASK_DIR/ready"]
      }

      resources {
        cpu    = 100
        memory = 32
      }
    }

    task "count" {
      driver = "exec"

      config {
        command = "/bin/echo"
        args    = ["counting shard", "${NOMAD_ALLOC_INDEX}", "of", "${NOMAD_META_dataset}", "as", "${NOMAD_ALLOC_NAME}"]
      }

      resources {
        cpu    = 250
        memory = 64
      }
    }

    task "report" {
      driver = "raw_exec"

      lifecycle {
        hook = "poststop"
      }

      config {
        command = "/bin/echo"
        args    = ["shard", "${NOMAD_ALLOC_INDEX}", "done"]
      }
    }
  }
}
