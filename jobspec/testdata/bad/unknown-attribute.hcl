batch "x" {
  job "a" {
    command = ["true"]
    cpus    = 2
  }
}
