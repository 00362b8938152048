cluster "c" {
  region = ["r"]
  pool "p" {
    cpu = "eight"
  }
}
