# A periodic Nomad job: the leader launches a child job on schedule (kept
# in Raft, so a new leader goes on where the old one stopped, and no
# launch is made twice); prohibit_overlap skips a launch while the last
# child still runs.
#
#   nomad job run examples/nomad/periodic.nomad.hcl   (NOMAD_ADDR at drover)
job "nightly-cleanup" {
  type = "batch"

  periodic {
    crons            = ["0 3 * * *"]
    time_zone        = "Europe/Amsterdam"
    prohibit_overlap = true
  }

  group "cleanup" {
    task "cleanup" {
      driver = "exec"

      config {
        command = "/bin/echo"
        args    = ["cleaning up after", "${NOMAD_JOB_ID}"]
      }
    }
  }
}
