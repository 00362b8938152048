# A gang: the 8 ranks of an MPI job start together, on workers of one
# pool of one cluster, or none does.
batch "mpi" {
  job "ranks" {
    command         = ["sh", "-c", "echo rank $DROVER_INDEX"]
    count           = 8
    cpu             = 4
    gang            = true
    gang_uniformity = "pool"
    retries         = 2
  }
}
