# A job group's gang: an MPI launcher and its 4 ranks, two commands of two
# sizes, start together on workers of one pool, or none does. The batch's
# oom_retry is not theirs (a member given more memory would start apart).
batch "mpi-group" {
  oom_retry {
    factor     = 2
    max_memory = "8GiB"
  }

  job "prepare" {
    command = ["prepare"]
  }

  group "mpi" {
    gang            = true
    gang_uniformity = "pool"

    job "launcher" {
      command    = ["mpirun", "-np", "4"]
      cpu        = 1
      memory     = "4GiB"
      depends_on = ["prepare"]
    }

    group "ranks" {
      job "rank" {
        command = ["rank"]
        count   = 4
        cpu     = 2
      }
    }
  }
}
