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

# The cloud's price (GCE: the Cloud Billing Catalog), read hourly; none
# given, the config waits for the first.
launch_config "n8-catalog" {
  cluster          = "east"
  machine_type     = "n2-standard-8"
  zone             = "us-east1-c"
  cpu              = 8
  memory           = "32GiB"
  price_from_cloud = true
}

# The dev agent's local provider: at most 3 of these worker processes at
# once; past that a launch is refused for want of capacity, as a cloud
# refuses one, and the config is marked capacity-limited.
cluster "dev" {
  region = "local"
}

launch_config "local-4c" {
  cluster        = "dev"
  cpu            = 4
  memory         = "8GiB"
  price_per_hour = 0.16
  max_nodes      = 5
  capacity       = 3
}
