batch "b" {
  job "p" {
    command = ["true"]
    network = "host"
  }
}
