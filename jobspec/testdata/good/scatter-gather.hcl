batch "scatter-gather" {
  billing_project = "default"
  attributes      = { sample_set = "1kg" }

  job "split" {
    command = ["sh", "-c", "echo splitting"]
    cpu     = 0.25
    memory  = "256MiB"
  }

  job "align" {
    count      = 4
    depends_on = ["split"]
    command    = ["sh", "-c", "echo aligning shard $DROVER_INDEX"]
    cpu        = 1
    memory     = "2GiB"
    retries    = 2
    timeout    = "30m"
  }

  job "merge" {
    depends_on = ["align"]
    always_run = true
    command    = ["sh", "-c", "echo merging"]
    env        = { OUTPUT = "merged.txt", LEVEL = 3 }
  }
}
