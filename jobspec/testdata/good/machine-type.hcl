batch "assemble" {
  job "assemble" {
    command      = ["spades.py", "--meta"]
    cpu          = 64
    memory       = "1TiB"
    machine_type = "m1-ultramem-80"
  }
}
