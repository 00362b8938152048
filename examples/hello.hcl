# The smallest jobspec: one job.
batch "hello" {
  job "hello" {
    command = ["echo", "hello from drover"]
    cpu     = 0.25
    memory  = "64MiB"
  }
}
