batch "x" {
  job "a" {
    count   = -3
    command = ["true"]
  }
}
