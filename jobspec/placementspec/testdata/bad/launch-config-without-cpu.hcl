launch_config "x" {
  cluster = "e"
}
