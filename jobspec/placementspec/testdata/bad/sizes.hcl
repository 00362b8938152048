cluster "c" {
  region = "r"
  pool "p" {
    memory = "32 gigs"
  }
}

launch_config "l" {
  cluster        = "c"
  cpu            = 8
  memory         = "lots"
  price_per_hour = 1
}

team "t" {
  quota {
    memory = 12
  }
}
