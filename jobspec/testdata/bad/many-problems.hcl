variable "n" {}

batch "x" {
  queue = "research/tier2"

  job "a" {
    cpu = 0
  }
  job "a" {
    command = []
  }
  job "b" {
    command = ["true"]
    retries = 1.5
    env     = ["A=1"]
  }
}
