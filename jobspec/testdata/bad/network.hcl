batch "b" {
  job "p" {
    command       = ["true"]
    network       = "hostnet"
    max_processes = 0
  }
  job "q" {
    command       = ["true"]
    max_processes = 1000000
  }
}
