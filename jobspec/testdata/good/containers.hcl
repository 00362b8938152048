# Container jobs with input and output files; the batch's image is the
# default of its jobs.
batch "align" {
  billing_project = "genomics"
  image           = "registry.example.com/tools/bwa:0.7.17"

  job "index" {
    command = ["bwa", "index", "/io/ref.fa"]
    input "ref" {
      source = "gs://refs/hg38.fa"
      path   = "/io/ref.fa"
    }
  }

  job "align" {
    count      = 3
    depends_on = ["index"]
    image      = "registry.example.com/tools/bwa@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    network    = "host"
    command    = ["sh", "-c", "bwa mem ref.fa reads.fq > out.sam"]
    input "reads" {
      source = "s3://reads/sample-$DROVER_INDEX.fq"
      path   = "reads.fq"
    }
    output "sam" {
      path        = "out.sam"
      destination = "file:///data/out/$DROVER_INDEX.sam"
    }
  }
}
