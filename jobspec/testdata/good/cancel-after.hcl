# A sweep that is not worth finishing once three of its points fail.
batch "sweep" {
  cancel_after_n_failures = 3

  job "point" {
    count   = 100
    command = ["sh", "-c", "./fit --point $DROVER_INDEX"]
  }
}
