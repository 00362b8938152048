batch "x" {
  job "a" {
    command = ["true"]
    memory  = "2GiGs"
  }
  job "b" {
    command = ["true"]
    memory  = "512"
  }
  job "c" {
    command = ["true"]
    timeout = "30 minutes"
  }
}
