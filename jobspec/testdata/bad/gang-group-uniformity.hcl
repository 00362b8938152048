batch "bad-gang-group" {
  group "odd" {
    gang_uniformity = "rack"

    job "x" {
      command = ["true"]
    }
  }

  group "lonely" {
    gang = true

    job "y" {
      command = ["true"]
    }
  }
}
