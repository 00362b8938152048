batch "simulate" {
  max_spot_attempts = 101

  job "simulate" {
    command           = ["simulate"]
    max_spot_attempts = -1
  }
}
