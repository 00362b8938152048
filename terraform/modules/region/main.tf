# One region of a drover deployment, on the drover side: the region's
# clusters with their pool, a launch config per cluster and machine type
# (the autoscaler's machines, started in the cluster's zone by the
# cluster's provider), and the region's queue in the tree with its jobs
# routed to the region's clusters.

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
  description = "The region's drover clusters by name, each with the zone its machines start in."
  type        = map(object({ zone = string }))
}

variable "machine_types" {
  description = "The machine types the autoscaler may start in every cluster of the region, by a short name: the provider's type, its size and price an hour, spot or not, and a cap of its own (0: none)."
  type = map(object({
    machine_type   = string
    cpu            = number
    memory         = string
    price_per_hour = string
    spot           = optional(bool, false)
    max_nodes      = optional(number, 0)
  }))
}

variable "machine_provider" {
  description = "What makes the region's machines: gce, nomad or local."
  type        = string
  default     = "gce"
}

variable "provider_settings" {
  description = "The provider's settings for the region's clusters (gce: project, image, network; no credentials)."
  type        = map(string)
  default     = {}
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

locals {
  # One launch config per cluster and machine type: <cluster>-<type name>.
  launch_configs = merge([
    for cluster, c in var.clusters : {
      for name, m in var.machine_types : "${cluster}-${name}" => merge(m, { cluster = cluster, zone = c.zone })
    }
  ]...)
}

resource "drover_cluster" "this" {
  for_each          = var.clusters
  name              = each.key
  region            = var.region
  machine_provider  = var.machine_provider
  provider_settings = var.provider_settings

  pool {
    name = "default"
  }
}

resource "drover_launch_config" "this" {
  for_each       = local.launch_configs
  name           = each.key
  cluster        = drover_cluster.this[each.value.cluster].name
  machine_type   = each.value.machine_type
  zone           = each.value.zone
  spot           = each.value.spot
  cpu            = each.value.cpu
  memory         = each.value.memory
  price_per_hour = each.value.price_per_hour
  max_nodes      = each.value.max_nodes
}

resource "drover_queue" "region" {
  path             = "${var.parent_queue}/${var.region}"
  guarantee        = { cpu = var.guarantee_cpu }
  home_clusters    = [for c in drover_cluster.this : c.name]
  strategy         = "least-loaded"
  billing_projects = var.billing_projects
}

output "queue" {
  description = "The region's queue path."
  value       = drover_queue.region.path
}

output "clusters" {
  description = "The region's cluster names."
  value       = [for c in drover_cluster.this : c.name]
}

output "launch_configs" {
  description = "The region's launch config names."
  value       = [for lc in drover_launch_config.this : lc.name]
}
