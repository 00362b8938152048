# drover's control plane on GCE: 3 or 5 servers spread over zones (and
# regions), their gossip key and TLS material read from Secret Manager at
# boot, and two service accounts: the servers' (exactly what the
# autoscaler's GCE calls need, and the secrets it reads) and the
# workers' (nothing: a job on a worker reaches no cloud API as drover).

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

variable "servers" {
  description = "The servers' zones and subnetworks, one entry a server (3 or 5): [{ zone = \"us-east1-b\", subnetwork = \"...\" }, ...]."
  type        = list(object({ zone = string, subnetwork = string }))
  validation {
    condition     = contains([3, 5], length(var.servers))
    error_message = "A drover control plane has 3 or 5 servers (a quorum that survives one or two losses)."
  }
}

variable "machine_type" {
  description = "The servers' machine type."
  type        = string
  default     = "e2-standard-4"
}

variable "image" {
  description = "The boot image holding the drover binary (the worker image reference, built by the release)."
  type        = string
}

variable "server_tag" {
  description = "The network tag of servers (the network module's server_tag)."
  type        = string
}

variable "secrets" {
  description = "Secret Manager secret ids: gossip_key, ca_cert, server_cert, server_key (a certificate valid for every server), history_dsn."
  type        = object({ gossip_key = string, ca_cert = string, server_cert = string, server_key = string, history_dsn = string })
}

variable "log_store" {
  description = "The job logs' bucket URL (the log-bucket module's url)."
  type        = string
}

resource "google_service_account" "servers" {
  project      = var.project
  account_id   = "${var.name}-servers"
  display_name = "drover servers"
}

resource "google_service_account" "workers" {
  project      = var.project
  account_id   = "${var.name}-workers"
  display_name = "drover workers (no roles: jobs reach no cloud API as drover)"
}

# Exactly the calls of the autoscaler's GCE provider: insert (from a
# template or an image), delete, list (aggregated) and wait on zone
# operations, list zones.
resource "google_project_iam_custom_role" "autoscaler" {
  project = var.project
  role_id = replace("${var.name}_autoscaler", "-", "_")
  title   = "drover autoscaler"
  permissions = [
    "compute.instances.create",
    "compute.instances.delete",
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.setLabels",
    "compute.instances.setMetadata",
    "compute.instances.setServiceAccount",
    "compute.disks.create",
    "compute.images.useReadOnly",
    "compute.instanceTemplates.useReadOnly",
    "compute.subnetworks.use",
    "compute.zoneOperations.get",
    "compute.zones.list",
  ]
}

resource "google_project_iam_member" "autoscaler" {
  project = var.project
  role    = google_project_iam_custom_role.autoscaler.id
  member  = "serviceAccount:${google_service_account.servers.email}"
}

# The servers launch workers as the workers' account, and no other.
resource "google_service_account_iam_member" "act_as_workers" {
  service_account_id = google_service_account.workers.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.servers.email}"
}

resource "google_secret_manager_secret_iam_member" "servers" {
  for_each  = toset([var.secrets.gossip_key, var.secrets.ca_cert, var.secrets.server_cert, var.secrets.server_key, var.secrets.history_dsn])
  project   = var.project
  secret_id = each.value
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${google_service_account.servers.email}"
}

resource "google_compute_address" "server" {
  count        = length(var.servers)
  project      = var.project
  name         = "${var.name}-server-${count.index}"
  region       = join("-", slice(split("-", var.servers[count.index].zone), 0, 2))
  subnetwork   = var.servers[count.index].subnetwork
  address_type = "INTERNAL"
}

locals {
  join = join(",", [for a in google_compute_address.server : "${a.address}:4652"])
}

resource "google_compute_instance" "server" {
  count        = length(var.servers)
  project      = var.project
  name         = "${var.name}-server-${count.index}"
  zone         = var.servers[count.index].zone
  machine_type = var.machine_type
  tags         = [var.server_tag]
  boot_disk {
    initialize_params {
      image = var.image
      size  = 100
      type  = "pd-ssd"
    }
  }
  network_interface {
    subnetwork = var.servers[count.index].subnetwork
    network_ip = google_compute_address.server[count.index].address
  }
  service_account {
    email  = google_service_account.servers.email
    scopes = ["cloud-platform"]
  }
  shielded_instance_config {
    enable_secure_boot = true
  }
  metadata = {
    block-project-ssh-keys = "true"
    startup-script = templatefile("${path.module}/server.sh.tftpl", {
      id        = "s${count.index}"
      address   = google_compute_address.server[count.index].address
      servers   = length(var.servers)
      join      = local.join
      secrets   = var.secrets
      log_store = var.log_store
      project   = var.project
    })
  }
}

output "api_addresses" {
  description = "The servers' API addresses (HTTPS), for DROVER_ADDR and the drover provider."
  value       = join(",", [for a in google_compute_address.server : "https://${a.address}:4650"])
}

output "server_service_account" {
  description = "The servers' service account email."
  value       = google_service_account.servers.email
}

output "worker_service_account" {
  description = "The workers' service account email (launch configs name it)."
  value       = google_service_account.workers.email
}
