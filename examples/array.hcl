# A job array: count = N jobs share one spec; each sees its DROVER_INDEX.
variable "n" { default = 100 }

batch "array" {
  job "square" {
    count   = var.n
    command = ["sh", "-c", "echo $((DROVER_INDEX * DROVER_INDEX))"]
    cpu     = 0.25
    memory  = "32MiB"
  }
}
