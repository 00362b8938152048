batch "train" {
  job "no-type" {
    command = ["true"]
    gpu     = { count = 2 }
  }
  job "too-many" {
    command = ["true"]
    gpu     = { type = "a100", count = 100 }
  }
  job "typo" {
    command = ["true"]
    gpu     = { type = "a100", cnt = 1 }
  }
  job "not-an-object" {
    command = ["true"]
    gpu     = "a100"
  }
}
