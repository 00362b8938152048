# An assembly whose memory no one can predict: each attempt the
# out-of-memory killer ends runs again with twice the memory, up to
# 64GiB; the batch's other jobs grow by half, up to 8GiB.
batch "assembly" {
  oom_retry {
    factor     = 1.5
    max_memory = "8GiB"
  }

  job "assemble" {
    command = ["spades.py", "--meta"]
    memory  = "4GiB"
    oom_retry {
      factor     = 2
      max_memory = "64GiB"
    }
  }
  job "polish" {
    command = ["pilon"]
    memory  = "2GiB"
  }
}
