batch "x" {
  job "a" {
    depends_on = ["a"]
    command    = ["true"]
  }
}
