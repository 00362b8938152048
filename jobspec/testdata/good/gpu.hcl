batch "train" {
  job "train" {
    command = ["python3", "train.py"]
    gpu     = { type = "a100", count = 2 }
  }
  job "eval" {
    command = ["python3", "eval.py"]
    gpu     = { type = "t4" }
  }
}
