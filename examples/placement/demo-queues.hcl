# The queue tree DROVER_DEMO_KEEP=1 make demo applies to the agent it
# keeps, so the web UI's Queues page has something to show: an
# organization with two projects, a tier that preempts and one that may
# be preempted, over the dev agent's clusters a (us-east1) and b
# (us-west1).
queue "research" {
  guarantee {
    cpu = 8
  }

  queue "genomics" {
    weight = 2
    guarantee {
      cpu = 6
    }
    queue "tier1" {
      weight         = 4
      allow_projects = ["gen-prod"]
      guarantee {
        cpu = 4
      }
      reclaim_grace = "30s"
    }
    queue "tier3" {
      billing_projects = ["gen-prod"]
      preemptible      = true
      guarantee {
        cpu = 1
      }
    }
  }

  queue "physics" {
    billing_projects = ["physics"]
    guarantee {
      cpu = 2
    }
  }
}
