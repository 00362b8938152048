batch "x" {
  job "align" {
    command = ["true"]
  }
  job "merge" {
    depends_on = ["aligns", "split"]
    command    = ["true"]
  }
}
