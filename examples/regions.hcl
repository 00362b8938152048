# Placement across regions: run on `drover agent -dev -clusters
# us-east1/a:1x4,us-west1/b:1x4` (make demo does), then try
#   drover cluster disable b -reason "maintenance" -evacuate
#   drover job why BATCH 16
batch "regions" {
  job "east" {
    count   = 8
    regions = ["us-east1"]
    command = ["sh", "-c", "sleep 1; echo east $DROVER_INDEX"]
    cpu     = 1
    memory  = "64MiB"
  }
  job "west" {
    count   = 8
    regions = ["us-west1"]
    command = ["sh", "-c", "sleep 1; echo west $DROVER_INDEX"]
    cpu     = 1
    memory  = "64MiB"
  }
  job "anywhere" {
    count   = 16
    command = ["sh", "-c", "sleep 1; echo anywhere $DROVER_INDEX"]
    cpu     = 1
    memory  = "64MiB"
  }
}
