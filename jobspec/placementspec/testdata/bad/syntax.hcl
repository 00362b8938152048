cluster "c" {
  region = "r"
