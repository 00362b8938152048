variable "shards" {
  default     = 3
  description = "how many shards to align"
}

variable "greeting" {
  default = "hello"
}

variable "project" {}

batch "vars" {
  billing_project = var.project

  job "scatter" {
    count   = var.shards
    command = "echo ${upper(var.greeting)} from $DROVER_INDEX"
    attributes = { stage = format("scatter-%d", var.shards) }
  }

  # forward reference: IDs still follow file order
  job "report" {
    depends_on = ["gather"]
    command    = ["true"]
  }

  job "gather" {
    depends_on = ["scatter"]
    command    = ["true"]
    memory     = "1.5GB"
  }

  job "empty" {
    count   = 0
    command = ["true"]
  }

  job "after-empty" {
    depends_on = ["empty"]
    command    = ["true"]
  }
}
