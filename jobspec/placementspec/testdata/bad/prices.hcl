cluster "c" {
  region = "r"
  pool "p" {
    price_per_hour = -0.5
  }
}

autoscaler {
  max_per_hour = 0.0000000001
}

launch_config "l" {
  cluster        = "c"
  cpu            = 8
  memory         = "32GiB"
  price_per_hour = "cheap"
  max_per_hour   = 1e400
}
