cluster_group "gpu" {
  strategy = "pack"
}

cluster "g1" {
  region = "east"
  group  = "gpu"
  pool "a100" {
    cpu      = 32
    memory   = "256GiB"
    gpu_type = "a100"
    gpus     = 8
  }
}

cluster "c1" {
  region = "east"
}
