cluster "east" {
  region            = "us-east1"
  provider          = "nomad"
  provider_settings = { address = "https://nomad:4646", datacenters = "dc1,dc2" }
}

autoscaler {
  max_nodes    = 50
  max_per_hour = 20.5
  idle_timeout = "90s"
  window       = "10m"
  consolidate  = false
}

launch_config "n8" {
  cluster        = "east"
  machine_type   = "n2-standard-8"
  zone           = "us-east1-b"
  spot           = true
  cpu            = 8
  memory         = "32GiB"
  price_per_hour = 0.12
}
