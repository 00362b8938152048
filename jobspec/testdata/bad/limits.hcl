batch "too-much" {
  job "big" {
    command = ["true"]
    count   = 3000000000
    cpu     = 5000
    timeout = "9000h"
    retries = 101
    max_lost_attempts = -2
  }
  job "tiny" {
    command = ["true"]
    cpu     = 0.0001
  }
}
