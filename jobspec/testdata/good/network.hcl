# Process jobs in each network mode, with a process limit: a job on its
# own bridge (the default), one with loopback only, one on the machine's
# network.
batch "net" {
  job "fetch" {
    command       = ["curl", "-fsS", "https://example.com/"]
    max_processes = 64
  }
  job "offline" {
    depends_on = ["fetch"]
    command    = ["sh", "-c", "echo offline"]
    network    = "none"
  }
  job "probe" {
    command = ["sh", "-c", "echo host"]
    network = "host"
  }
  job "bridged" {
    command = ["true"]
    network = "bridge"
  }
}
