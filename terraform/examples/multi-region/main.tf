# drover in three regions on GCE: one network, a control plane of five
# servers over the three regions, Cloud SQL for history, a bucket for
# logs, and on the drover side the autoscaler, per region its clusters
# with their launch configs, and a queue per region routed to its
# clusters. Apply the GCP part first, then the drover part once the
# servers answer:
#
#   terraform apply -target=module.control_plane
#   terraform apply

terraform {
  required_providers {
    google = { source = "hashicorp/google" }
    drover = { source = "drover-sched/drover" }
  }
}

variable "project" {
  description = "The GCP project."
  type        = string
}

variable "image" {
  description = "The boot image with the drover binary (servers and workers)."
  type        = string
}

variable "api_source_ranges" {
  description = "Where people reach the API from."
  type        = list(string)
  default     = []
}

variable "drover_token" {
  description = "An admin's drover token (the first server writes root.token; keep it in Secret Manager)."
  type        = string
  sensitive   = true
}

variable "ca_file" {
  description = "The cluster CA's certificate file, to verify the servers."
  type        = string
}

variable "secrets" {
  description = "Secret Manager secret ids of the gossip key, the CA and server certificates, and the MySQL password."
  type        = object({ gossip_key = string, ca_cert = string, server_cert = string, server_key = string, mysql_password = string })
}

locals {
  regions = {
    us-east1     = { cidr = "10.10.0.0/20", clusters = { us-east1-b = { zone = "us-east1-b" }, us-east1-c = { zone = "us-east1-c" } }, cpu = 512 }
    us-central1  = { cidr = "10.20.0.0/20", clusters = { us-central1-a = { zone = "us-central1-a" } }, cpu = 256 }
    europe-west4 = { cidr = "10.30.0.0/20", clusters = { europe-west4-a = { zone = "europe-west4-a" } }, cpu = 256 }
  }
  # The machines the autoscaler may start in every cluster (on-demand
  # prices of us-east1; set each region's own in production).
  machine_types = {
    n2-8      = { machine_type = "n2-standard-8", cpu = 8, memory = "32GiB", price_per_hour = "0.3885" }
    n2-8-spot = { machine_type = "n2-standard-8", cpu = 8, memory = "32GiB", price_per_hour = "0.0945", spot = true }
    n2-32     = { machine_type = "n2-standard-32", cpu = 32, memory = "128GiB", price_per_hour = "1.554", max_nodes = 20 }
  }
  # Five servers: two in each US region, one in Europe (a quorum of three
  # survives the loss of any one region).
  servers = [
    { zone = "us-east1-b", region = "us-east1" },
    { zone = "us-east1-c", region = "us-east1" },
    { zone = "us-central1-a", region = "us-central1" },
    { zone = "us-central1-f", region = "us-central1" },
    { zone = "europe-west4-a", region = "europe-west4" },
  ]
}

provider "google" {
  project = var.project
}

provider "drover" {
  address = module.control_plane.api_addresses
  ca_file = var.ca_file
  token   = var.drover_token
}

module "network" {
  source            = "../../modules/network"
  project           = var.project
  subnetworks       = { for r, v in local.regions : r => v.cidr }
  api_source_ranges = var.api_source_ranges
}

module "logs" {
  source                 = "../../modules/log-bucket"
  project                = var.project
  name                   = "${var.project}-drover-logs"
  server_service_account = module.control_plane.server_service_account
}

module "history" {
  source                 = "../../modules/history-sql"
  project                = var.project
  region                 = "us-east1"
  network                = module.network.network
  password_secret        = var.secrets.mysql_password
  server_service_account = module.control_plane.server_service_account
}

module "control_plane" {
  source     = "../../modules/control-plane"
  project    = var.project
  image      = var.image
  server_tag = module.network.server_tag
  log_store  = module.logs.url
  servers    = [for s in local.servers : { zone = s.zone, subnetwork = module.network.subnetworks[s.region] }]
  secrets = {
    gossip_key  = var.secrets.gossip_key
    ca_cert     = var.secrets.ca_cert
    server_cert = var.secrets.server_cert
    server_key  = var.secrets.server_key
    history_dsn = module.history.dsn_secret
  }
}

resource "drover_queue" "org" {
  path      = "org"
  guarantee = { cpu = sum([for r in local.regions : r.cpu]) }
}

resource "drover_autoscaler" "this" {
  enabled      = true
  max_nodes    = 400
  max_per_hour = "250"
  idle_timeout = "5m"
}

module "region" {
  source        = "../../modules/region"
  for_each      = local.regions
  region        = each.key
  clusters      = each.value.clusters
  machine_types = local.machine_types
  provider_settings = {
    project = var.project
    image   = var.image
    network = module.network.network
  }
  parent_queue  = drover_queue.org.path
  guarantee_cpu = each.value.cpu
}

output "api_addresses" {
  description = "DROVER_ADDR for the deployment."
  value       = module.control_plane.api_addresses
}

output "region_queues" {
  description = "Each region's queue."
  value       = { for r, m in module.region : r => m.queue }
}

output "launch_configs" {
  description = "Each region's launch configs."
  value       = { for r, m in module.region : r => m.launch_configs }
}
