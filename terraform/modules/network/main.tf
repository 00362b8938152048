# A VPC for drover: one subnetwork per region, and firewall rules that
# let servers reach each other (API, Raft, gossip), workers reach the
# servers' API, operators reach the API from the ranges they name, and
# nothing else in.

terraform {
  required_providers {
    google = { source = "hashicorp/google" }
  }
}

variable "project" {
  description = "The GCP project."
  type        = string
}

variable "name" {
  description = "A prefix for everything this module makes."
  type        = string
  default     = "drover"
}

variable "subnetworks" {
  description = "Region to the subnetwork's CIDR range, e.g. { us-east1 = \"10.10.0.0/20\" }."
  type        = map(string)
}

variable "api_source_ranges" {
  description = "Where operators and users reach the servers' API from (HTTPS, port 4650)."
  type        = list(string)
  default     = []
}

variable "ports" {
  description = "The servers' ports: api (HTTPS), raft (mutual TLS) and gossip (TCP and UDP)."
  type        = object({ api = number, raft = number, gossip = number })
  default     = { api = 4650, raft = 4651, gossip = 4652 }
}

resource "google_compute_network" "this" {
  project                 = var.project
  name                    = var.name
  auto_create_subnetworks = false
}

resource "google_compute_subnetwork" "region" {
  for_each                 = var.subnetworks
  project                  = var.project
  name                     = "${var.name}-${each.key}"
  region                   = each.key
  network                  = google_compute_network.this.id
  ip_cidr_range            = each.value
  private_ip_google_access = true
}

resource "google_compute_firewall" "servers" {
  project     = var.project
  name        = "${var.name}-servers"
  network     = google_compute_network.this.name
  source_tags = ["${var.name}-server"]
  target_tags = ["${var.name}-server"]
  allow {
    protocol = "tcp"
    ports    = [var.ports.api, var.ports.raft, var.ports.gossip]
  }
  allow {
    protocol = "udp"
    ports    = [var.ports.gossip]
  }
}

resource "google_compute_firewall" "workers_to_api" {
  project     = var.project
  name        = "${var.name}-workers-to-api"
  network     = google_compute_network.this.name
  source_tags = ["${var.name}-worker"]
  target_tags = ["${var.name}-server"]
  allow {
    protocol = "tcp"
    ports    = [var.ports.api]
  }
}

resource "google_compute_firewall" "api" {
  count         = length(var.api_source_ranges) > 0 ? 1 : 0
  project       = var.project
  name          = "${var.name}-api"
  network       = google_compute_network.this.name
  source_ranges = var.api_source_ranges
  target_tags   = ["${var.name}-server"]
  allow {
    protocol = "tcp"
    ports    = [var.ports.api]
  }
}

output "network" {
  description = "The network's self link."
  value       = google_compute_network.this.self_link
}

output "subnetworks" {
  description = "Region to its subnetwork's self link."
  value       = { for r, s in google_compute_subnetwork.region : r => s.self_link }
}

output "server_tag" {
  description = "The network tag the servers carry (the firewall rules name it)."
  value       = "${var.name}-server"
}

output "worker_tag" {
  description = "The network tag workers carry."
  value       = "${var.name}-worker"
}
