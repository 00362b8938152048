batch "b" {
  job "p" {
    command       = ["true"]
    network       = "hostnet"
    max_processes = 1
  }
  job "q" {
    command       = ["true"]
    max_processes = 1000000
  }
}
