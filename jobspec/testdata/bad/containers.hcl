batch "bad" {
  image = "Not A Reference"

  job "a" {
    command = ["true"]
    network = "nat"
    input "ref" {
      source = "ftp://host/ref.fa"
      path   = "../ref.fa"
    }
    input "ref" {
      source = "gs://b/x"
      path   = "x"
    }
    output "out" {
      path        = "/etc/passwd"
      destination = "gs://bucket"
    }
  }

  job "b" {
    image   = "busybox:1.36"
    command = ["true"]
    input "one" {
      source = "gs://b/1"
      path   = "/io/same"
    }
    input "two" {
      source = "gs://b/2"
      path   = "same"
    }
  }
}
