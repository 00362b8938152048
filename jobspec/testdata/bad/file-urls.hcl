# URLs that would steer the worker's storage driver: refused before submit.
batch "ssrf" {
  job "a" {
    command = ["true"]
    input "creds" {
      source = "s3://latest/meta-data/iam/security-credentials/role?endpoint=http://127.0.0.1:18080&region=us-east-1&use_path_style=true&anonymous=true"
      path   = "creds"
    }
    input "profile" {
      source = "gs://b/k?private_key_path=/etc/shadow"
      path   = "k"
    }
    input "user" {
      source = "gs://admin:pw@b/k"
      path   = "u"
    }
    input "dots" {
      source = "gs://b/projA/../projB/secret"
      path   = "d"
    }
    output "out" {
      path        = "out"
      destination = "s3://v1/jobs?endpoint=http://127.0.0.1:18080"
    }
  }
}
