batch "bad-gang-group" {
  group "mixed" {
    gang = true

    job "launcher" {
      command = ["mpirun"]
      cpu     = 1
    }

    job "rank" {
      command = ["rank"]
      count   = 4
      cpu     = 2
    }
  }
}
