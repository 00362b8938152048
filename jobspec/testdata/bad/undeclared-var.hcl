batch "x" {
  job "a" {
    count   = var.missing
    command = ["true"]
  }
}
