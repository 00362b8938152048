batch "bad-groups" {
  group "align" {
    cancel_after_n_failures = -1
    job "a" {
      command = ["true"]
    }
  }

  group "align" {
    job "b" {
      command = ["true"]
    }
  }

  group "has space" {
    job "c" {
      command = ["true"]
    }
  }

  group "empty" {
  }

  group "dup" {
    job "a" {
      command = ["true"]
    }
  }
}
