# A batch's jobs in nested job groups, as Hail's job groups: each group
# counts, costs, cancels and calls back on its own.
batch "genome" {
  job "prepare" {
    command = ["sh", "-c", "echo prepare"]
  }

  group "align" {
    attributes              = { stage = "align" }
    cancel_after_n_failures = 3
    callback                = "https://hooks.example.com/align"

    group "chr1" {
      job "chr1" {
        command    = ["sh", "-c", "echo chr1 $DROVER_INDEX"]
        count      = 4
        depends_on = ["prepare"]
      }
    }

    job "chrM" {
      command    = ["sh", "-c", "echo chrM"]
      depends_on = ["prepare"]
    }
  }

  group "merge" {
    job "merge" {
      command    = ["sh", "-c", "echo merge"]
      depends_on = ["chr1", "chrM"]
    }
  }
}
