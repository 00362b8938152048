job "web" {
  type = "batch"

  group "api" {
    network {
      port "http" { to = 8080 }
    }

    volume "data" {
      type   = "csi"
      source = "data"
    }

    service {
      name = "api"
      port = "http"
    }

    task "server" {
      driver = "docker"
      config {
        image      = "docker.io/library/nginx:1.27"
        command    = "nginx"
        privileged = true
      }
      vault {
        policies = ["api"]
      }
      template {
        data        = "{{ key \"db/password\" }}"
        destination = "local/secret"
      }
    }
  }
}
