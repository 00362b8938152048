# Split, align shards in parallel, merge: the classic scatter-gather.
#   drover run -wait examples/scatter-gather.hcl
#   drover run -wait -var shards=50 examples/scatter-gather.hcl
variable "shards" {
  default     = 8
  description = "number of align jobs"
}

batch "scatter-gather" {
  attributes = { example = "scatter-gather" }

  job "split" {
    command = ["sh", "-c", "echo splitting input into ${var.shards} shards"]
    cpu     = 0.25
    memory  = "64MiB"
  }

  job "align" {
    count      = var.shards
    depends_on = ["split"]
    command    = ["sh", "-c", "echo aligning shard $DROVER_INDEX of batch $DROVER_BATCH_ID; sleep 0.2"]
    cpu        = 1
    memory     = "256MiB"
    retries    = 1
    timeout    = "5m"
  }

  job "merge" {
    depends_on = ["align"]
    always_run = true
    command    = ["sh", "-c", "echo merging ${var.shards} shards"]
    cpu        = 0.5
    memory     = "128MiB"
  }
}
