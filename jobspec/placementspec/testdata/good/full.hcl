# Two regions, a group, teams with quotas, and the autoscaler on by default.
cluster "us-east1-a" {
  region = "us-east1"
  group  = "cpu"
  pool "standard" {
    cpu            = 8
    memory         = "32GiB"
    price_per_hour = 0.38
  }
  pool "spot" {
    cpu            = 8
    memory         = "32GiB"
    preemptible    = true
    price_per_hour = 0.08
  }
}

cluster "eu-west1-b" {
  region = "eu-west1"
}

cluster_group "cpu" {
  strategy = "least-loaded"
}

autoscaler {
  strategy = "prefer-reserved"
}

team "genomics" {
  billing_projects = ["gen-prod", "gen-dev"]
  strategy         = "spread"
  quota {
    cpu    = 1000
    memory = "4TiB"
    gpus   = { a100 = 8 }
  }
}

team "imaging" {
  billing_projects = ["img"]
}
