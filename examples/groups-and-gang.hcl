# Job groups and a gang. Run with: drover run examples/groups-and-gang.hcl -wait
# then: drover batch status ID (the groups as a tree), drover batch cancel ID -group qc
batch "groups-and-gang" {
  job "prepare" {
    command = ["sh", "-c", "echo preparing"]
    cpu     = 0.25
    memory  = "64MiB"
  }

  group "qc" {
    cancel_after_n_failures = 2      # cancel qc (not the batch) once 2 of its jobs failed
    attributes              = { stage = "qc" }

    job "fastqc" {
      command    = ["sh", "-c", "echo qc $DROVER_INDEX"]
      count      = 4
      cpu        = 0.25
      memory     = "64MiB"
      depends_on = ["prepare"]
    }
  }

  group "train" {
    job "ranks" {
      command    = ["sh", "-c", "echo rank $DROVER_INDEX of 2; sleep 1"]
      count      = 2
      gang       = true              # both ranks start together in one cluster, or neither does
      cpu        = 0.25
      memory     = "64MiB"
      depends_on = ["fastqc"]
    }
  }
}
