cluster "us east" {
  region = "us/east"
  group  = "g*"
  pool "a b" {
    cpu = 1
  }
}

cluster "ok" {
  region = ""
}
