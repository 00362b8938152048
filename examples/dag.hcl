# A diamond with a failing branch: "report" still runs (always_run), "publish"
# is cancelled because one of its parents failed. `drover run -wait` exits 2.
batch "diamond" {
  job "fetch" {
    command = ["sh", "-c", "echo fetched > /dev/null; echo fetch done"]
    cpu     = 0.5
    memory  = "64MiB"
  }

  job "left" {
    depends_on = ["fetch"]
    command    = ["sh", "-c", "echo left ok"]
    cpu        = 0.5
    memory     = "64MiB"
  }

  job "right" {
    depends_on = ["fetch"]
    command    = ["sh", "-c", "echo right is about to fail >&2; exit 3"]
    cpu        = 0.5
    memory     = "64MiB"
  }

  job "publish" {
    depends_on = ["left", "right"]
    command    = ["sh", "-c", "echo publishing"]
    cpu        = 0.5
    memory     = "64MiB"
  }

  job "report" {
    depends_on = ["left", "right"]
    always_run = true
    command    = ["sh", "-c", "echo report runs whatever happened"]
    cpu        = 0.5
    memory     = "64MiB"
  }
}
