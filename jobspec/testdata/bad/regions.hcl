batch "placed" {
  job "empty" {
    command = ["true"]
    regions = []
  }
  job "bad-name" {
    command = ["true"]
    regions = ["us east"]
  }
  job "not-a-list" {
    command = ["true"]
    regions = "us-east1"
  }
  job "bad-pool" {
    command = ["true"]
    pool    = "high/mem"
  }
  job "bad-labels" {
    command       = ["true"]
    worker_labels = { "a=b" = "c" }
  }
  job "bad-cluster" {
    command  = ["true"]
    clusters = ["a b"]
  }
}
