# The pipeline's orchestrator hears when the batch is done.
batch "nightly" {
  callback = "https://hooks.example.com/drover/nightly"

  job "build" {
    command = ["make"]
  }
}
