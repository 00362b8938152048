batch "nightly" {
  callback = "https://user:secret@hooks.example.com/done"

  job "build" {
    command = ["make"]
  }
}
