cluster_group "gpu" {
  strategy = "pack"
  spread = true
}
