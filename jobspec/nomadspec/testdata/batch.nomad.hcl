variable "shards" {
  type    = number
  default = 4
}

locals {
  image = "docker.io/library/busybox:1.36"
  label = "run-${var.shards}"
}

job "align" {
  type        = "batch"
  datacenters = ["us-east"]
  namespace   = "genomics"
  priority    = 70

  meta {
    sample_set = "1kg"
    label      = local.label
  }

  constraint {
    attribute = "${node.class}"
    value     = "highmem"
  }

  group "shard" {
    count = var.shards

    restart {
      attempts = 2
      mode     = "fail"
    }

    task "fetch" {
      driver = "raw_exec"
      lifecycle {
        hook = "prestart"
      }
      resources {
        cpu    = 100
        memory = 64
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo fetch ${NOMAD_ALLOC_INDEX}"]
      }
    }

    task "align" {
      driver = "docker"
      config {
        image   = local.image
        command = "sh"
        args    = ["-c", "echo shard ${NOMAD_ALLOC_INDEX} on ${node.datacenter}"]
      }
      env {
        SHARD = "${NOMAD_ALLOC_INDEX}"
      }
      resources {
        cpu    = 500
        memory = 256
        device "nvidia/gpu/A100" {
          count = 1
        }
      }
      artifact {
        source      = "s3://bucket/ref.fa"
        destination = "local/ref.fa"
      }
    }

    task "report" {
      driver = "exec"
      lifecycle {
        hook = "poststop"
      }
      config {
        command = "/bin/echo"
        args    = ["done", "${NOMAD_ALLOC_INDEX}"]
      }
    }
  }
}
