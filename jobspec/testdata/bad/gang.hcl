batch "bad-gang" {
  job "single" {
    command = ["true"]
    gang    = true
  }

  job "grown" {
    command = ["true"]
    count   = 4
    gang    = true
    oom_retry {
      factor     = 2
      max_memory = "4GiB"
    }
  }

  job "odd" {
    command         = ["true"]
    count           = 2
    gang            = true
    gang_uniformity = "rack"
  }
}
