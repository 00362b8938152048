# Input and output files through object storage: each member of the array
# copies its own input from a bucket into its directory, and its result
# goes back to the bucket once it succeeds. The URLs must lie under a
# storage prefix of the batch's billing project (the dev agent gives
# "default" one for each of its -file-url-roots, which make demo sets);
# file:// buckets also need the worker's -file-url-roots. gs:// and s3://
# buckets work the same, with the prefix's credentials (or the worker's).
# Add image = "..." to run the same jobs in containers, where the
# directory is /io.
#   drover run -wait -var bucket=/data/bucket examples/files.hcl
variable "bucket" {
  default     = "/tmp/drover-bucket"
  description = "a directory under the workers' -file-url-roots, holding in/words-0.txt .. in/words-2.txt"
}

batch "files" {
  attributes = { example = "files" }

  job "count" {
    count   = 3
    command = ["sh", "-c", "wc -w < words.txt > count.txt; echo counted $(cat count.txt) words of shard $DROVER_INDEX"]
    cpu     = 0.5
    memory  = "64MiB"

    input "words" {
      source = "file://${var.bucket}/in/words-$DROVER_INDEX.txt"
      path   = "words.txt"
    }

    output "count" {
      path        = "count.txt"
      destination = "file://${var.bucket}/out/count-$DROVER_INDEX.txt"
    }
  }
}
