# Long jobs: each prints a line a second for var.seconds, so a job's page
# has a live log to follow and its batch runs for a while.
variable "n" { default = 12 }
variable "seconds" { default = 600 }

batch "long" {
  job "tick" {
    count   = var.n
    command = ["sh", "-c", "i=0; while [ $i -lt ${var.seconds} ]; do i=$((i+1)); echo tick $i; sleep 1; done"]
    cpu     = 0.5
    memory  = "32MiB"
  }
}
