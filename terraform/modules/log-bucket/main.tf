# A GCS bucket for drover's job logs (the servers' -log-store gs://...),
# objects deleted after a retention, written and read only by the
# servers' service account.

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
  description = "The bucket's name (globally unique)."
  type        = string
}

variable "location" {
  description = "The bucket's location: a region, or a multi-region such as US."
  type        = string
  default     = "US"
}

variable "retention_days" {
  description = "Days a log chunk is kept."
  type        = number
  default     = 30
}

variable "server_service_account" {
  description = "The servers' service account email: the only writer and reader."
  type        = string
}

resource "google_storage_bucket" "logs" {
  project                     = var.project
  name                        = var.name
  location                    = var.location
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  lifecycle_rule {
    condition {
      age = var.retention_days
    }
    action {
      type = "Delete"
    }
  }
}

resource "google_storage_bucket_iam_member" "servers" {
  bucket = google_storage_bucket.logs.name
  role   = "roles/storage.objectAdmin"
  member = "serviceAccount:${var.server_service_account}"
}

output "url" {
  description = "The log store URL the servers take (-log-store)."
  value       = "gs://${google_storage_bucket.logs.name}/logs"
}
