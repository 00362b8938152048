batch "placed" {
  regions = ["us-east1", "europe-west4"]
  pool    = "standard"

  job "default" {
    command = ["true"]
  }
  job "west" {
    command = ["true"]
    regions = ["us-west1"]
  }
  job "highmem" {
    command = ["true"]
    pool    = "highmem"
  }
  job "one-cluster" {
    command  = ["true"]
    clusters = ["gpu-east"]
  }
  job "on-rack" {
    command       = ["true"]
    worker_labels = { rack = "r1", ssd = "true" }
  }
}
