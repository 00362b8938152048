autoscaler {
  boot_timeout = "5 minutes"
  idle_timeout = "-1s"
  backoff      = "30s"
}
