# Long simulations on cheap spot machines: once spot machines were lost
# under two of a job's attempts it runs on on-demand machines only (the
# batch's default); the checkpointing job tries spot five times.
batch "simulate" {
  max_spot_attempts = 2

  job "simulate" {
    command = ["simulate", "--hours", "6"]
    count   = 100
  }
  job "checkpointed" {
    command           = ["simulate", "--resume"]
    max_spot_attempts = 5
  }
}
