variable "n" {}

batch "x" {
  partition = "research"

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
