batch "assemble" {
  job "assemble" {
    command      = ["true"]
    machine_type = "m1 ultramem"
  }
}
