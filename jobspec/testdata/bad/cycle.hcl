batch "x" {
  job "a" {
    depends_on = ["c"]
    command    = ["true"]
  }
  job "b" {
    depends_on = ["a"]
    command    = ["true"]
  }
  job "c" {
    depends_on = ["b"]
    command    = ["true"]
  }
  job "d" {
    command = ["true"]
  }
}
