# A queue tree, organization / project / tier, as Monarch shapes it.
queue "genomics" {
  weight = 3
  guarantee {
    cpu    = 2000
    memory = "8TiB"
    gpus   = { a100 = 16 }
  }
  lend_limit {
    cpu = 500
  }
  max_running {
    jobs = 100000
  }
  # Monarch's thresholds by tier: the recommendation covers 90% of the
  # time a queue is in use unless it says otherwise.
  recommend {
    percentile = 0.90
  }
  # The leader regenerates the tree's settings from 30 days of history
  # each day, each setting moving at most a quarter a step.
  auto_apply {
    every      = "24h"
    max_change = 0.25
    keep       = 20
    rebalance  = true
    high       = 0.85
  }

  queue "gwas" {
    guarantee {
      cpu = 1500
    }

    queue "tier1" {
      weight           = 4
      guarantee {
        cpu = 1000
      }
      preempt_after         = "2m"
      preempt_threshold     = 0.8
      allow_preemption_from = ["genomics/gwas/tier3", "imaging"]
      reclaim_grace         = "1m"
      allow_projects        = ["gwas"]
      recommend {
        percentile = 0.95
      }
    }

    queue "tier3" {
      preemptible      = true
      max_priority     = 100
      min_runtime      = "10m"
      billing_projects = ["gwas"]
      borrow_limit {
        cpu    = 4000
        memory = "16TiB"
      }
    }
  }
}

queue "imaging" {
  preemptible      = true
  strategy         = "cheapest"
  home_clusters    = ["us-central1-a"]
  billing_projects = ["img"]
  borrow_limit {
    cpu = 0
  }
  guarantee {
    cpu = 200
  }
  max_running {
    cpu = 400
  }
}
