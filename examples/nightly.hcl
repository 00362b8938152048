# A workflow's run with a runtime SLO: drover queue slo counts the runs of
# the workflow "nightly" of its billing project and how many completed
# within slo.
variable "n" { default = 4 }
variable "seconds" { default = 5 }

batch "nightly-2026-11-29" {
  attributes = { workflow = "nightly" }
  slo        = "2m"
  job "step" {
    count   = var.n
    command = ["sh", "-c", "sleep ${var.seconds}; echo step $DROVER_INDEX done"]
    cpu     = 1
    memory  = "32MiB"
  }
}
