batch "bad-gang-group" {
  group "mixed" {
    gang = true

    job "launcher" {
      command = ["mpirun"]
      cpu     = 1
      gpu     = { type = "a100" }
    }

    job "rank" {
      command = ["rank"]
      count   = 4
      cpu     = 2
      gpu     = { type = "h100" }
    }
  }
}
