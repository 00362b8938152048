batch "x" {
  job "a" {
    command = ["true"
  }
}
