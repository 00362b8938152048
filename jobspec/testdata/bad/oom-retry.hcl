batch "b" {
  job "small-bound" {
    command = ["true"]
    memory  = "4GiB"
    oom_retry {
      factor     = 1.01
      max_memory = "2GiB"
    }
  }
  job "twice" {
    command = ["true"]
    oom_retry {
      factor     = 2
      max_memory = "2GiB"
    }
    oom_retry {
      factor     = 2
      max_memory = "4GiB"
    }
  }
  job "no-bound" {
    command = ["true"]
    oom_retry {
      factor = 2
    }
  }
}
