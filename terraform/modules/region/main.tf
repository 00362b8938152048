# One region of a drover deployment, on the drover side: the region's
# queue in the tree, its jobs routed to the region's clusters. (The
# clusters themselves, their pools and launch configs are declared in
# the placement config until the provider has resources for them.)

terraform {
  required_providers {
    drover = { source = "drover-sched/drover" }
  }
}

variable "region" {
  description = "The region's name, as drover's workers report it (us-east1)."
  type        = string
}

variable "clusters" {
  description = "The region's drover clusters, where its queue's jobs run."
  type        = list(string)
}

variable "parent_queue" {
  description = "The queue the region's queue hangs under (the organization's)."
  type        = string
}

variable "guarantee_cpu" {
  description = "The cores the region's queue is guaranteed."
  type        = number
}

variable "billing_projects" {
  description = "Billing projects whose batches run in the region unless they name another queue."
  type        = list(string)
  default     = []
}

resource "drover_queue" "region" {
  path             = "${var.parent_queue}/${var.region}"
  guarantee        = { cpu = var.guarantee_cpu }
  home_clusters    = var.clusters
  strategy         = "least-loaded"
  billing_projects = var.billing_projects
}

output "queue" {
  description = "The region's queue path."
  value       = drover_queue.region.path
}
