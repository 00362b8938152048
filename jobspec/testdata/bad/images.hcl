batch "images" {
  job "path" {
    command = ["true"]
    image   = "/etc/passwd"
  }
  job "file" {
    command = ["true"]
    image   = "file:///etc/shadow"
  }
  job "archive" {
    command = ["true"]
    image   = "oci-archive:/tmp/x.tar"
  }
  job "scheme" {
    command = ["true"]
    image   = "docker://x"
  }
  job "climb" {
    command = ["true"]
    image   = "localhost:5999/../../x:1"
  }
  job "upper" {
    command = ["true"]
    image   = "registry.example.com/Tools/bwa:1"
  }
}
