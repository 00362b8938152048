batch "sweep" {
  cancel_after_n_failures = -1

  job "point" {
    command = ["true"]
  }
}
