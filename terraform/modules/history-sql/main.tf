# Cloud SQL for MySQL for drover's history store (finished batches, the
# billing ledger, queue usage): private IP on drover's network, the
# password in Secret Manager, the DSN there too for the servers.

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
  description = "The instance's name."
  type        = string
  default     = "drover-history"
}

variable "region" {
  description = "The region of the instance (the control plane's main region)."
  type        = string
}

variable "network" {
  description = "The network's self link (private IP only)."
  type        = string
}

variable "tier" {
  description = "The machine tier."
  type        = string
  default     = "db-custom-2-7680"
}

variable "password_secret" {
  description = "The Secret Manager secret (id) holding the database user's password."
  type        = string
}

variable "server_service_account" {
  description = "The servers' service account email: it reads the DSN secret."
  type        = string
}

data "google_secret_manager_secret_version" "password" {
  project = var.project
  secret  = var.password_secret
}

resource "google_sql_database_instance" "history" {
  project             = var.project
  name                = var.name
  region              = var.region
  database_version    = "MYSQL_8_0"
  deletion_protection = true
  settings {
    tier              = var.tier
    availability_type = "REGIONAL"
    backup_configuration {
      enabled            = true
      binary_log_enabled = true
    }
    ip_configuration {
      ipv4_enabled    = false
      private_network = var.network
    }
  }
}

resource "google_sql_database" "drover" {
  project  = var.project
  instance = google_sql_database_instance.history.name
  name     = "drover"
}

resource "google_sql_user" "drover" {
  project  = var.project
  instance = google_sql_database_instance.history.name
  name     = "drover"
  password = data.google_secret_manager_secret_version.password.secret_data
}

resource "google_secret_manager_secret" "dsn" {
  project   = var.project
  secret_id = "${var.name}-dsn"
  replication {
    auto {}
  }
}

resource "google_secret_manager_secret_version" "dsn" {
  secret      = google_secret_manager_secret.dsn.id
  secret_data = "drover:${data.google_secret_manager_secret_version.password.secret_data}@tcp(${google_sql_database_instance.history.private_ip_address}:3306)/drover?parseTime=true&tls=preferred"
}

resource "google_secret_manager_secret_iam_member" "servers" {
  project   = var.project
  secret_id = google_secret_manager_secret.dsn.secret_id
  role      = "roles/secretmanager.secretAccessor"
  member    = "serviceAccount:${var.server_service_account}"
}

output "dsn_secret" {
  description = "The Secret Manager secret holding the servers' -history-dsn."
  value       = google_secret_manager_secret.dsn.secret_id
}

output "connection_name" {
  description = "The instance's connection name."
  value       = google_sql_database_instance.history.connection_name
}
